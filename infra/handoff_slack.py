"""The human side of a handoff on Slack: one thread per handed-off session in a support channel.

Configured by `WAYPOINT_SUPPORT_SLACK_CHANNEL` (the channel id; the Slack app of the `slack`
channel posts there with its bot token, and its request signing and verification apply to what
people write back) and `WAYPOINT_SUPPORT_SLACK_TEAMS` / `_USERS`: only members of those teams (and
only those people, when listed) write to customers from it — a Slack Connect channel also holds
people of other organizations (`infra.channels.support_channel`). The turn worker:

- opens the thread when a turn hands off (or, for a handoff started from the management API,
  at the customer's next message): a summary (who, what they wanted, journey state,
  collected values minus secrets, the last messages) with a "Hand back to the agent" button;
- posts the customer's messages into the thread while the session is with a person;
- takes a person's reply in the thread (a Slack event on the `slack` webhook, in the support
  channel) as a person's message: recorded, delivered on the customer's own channel through the
  outbox, never a turn. The button, or `handback` typed in the thread, hands back.

The thread is the team's shared view of the conversation: a colleague replying in it (or
pressing the button) acts in front of everyone, so it is an explicit take-over — delivered, and
the session reassigned to them with a `handoff_taken` event naming whom it was taken from. (The
management API, where people do not see each other's intent, refuses that with 409 unless the
request says `take_over`.)

The bot's own posts never come back as a person's reply: the Slack channel ignores messages from
bots and from its own user. Each post goes through the outbox under its own record (the thread's
under `{turn}.support-thread`, a customer's messages under `{turn}.support`), so a redelivered
turn posts nothing twice; the thread's index item (`SUPPORT#{channel}#{thread_ts}` → session) is
written from the outbox record's message id, so a crash between the post and the index is
finished by the retry.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.handoff import HandoffStateError, hand_back, open_support_thread
from engine.handoff import person_message as person_message_change
from engine.sessions.session import Event, EventKind, EventSource, SessionMode, SessionState
from infra.aws.handoff_index import support_thread_key
from infra.channels.base import Channel, NormalizedMessage, OutboundReply, ReplyOption
from infra.channels.support_channel import (
    SUPPORT_CHANNEL_ENV,
    SUPPORT_TEAMS_ENV,
    SUPPORT_USERS_ENV,
)
from infra.handoff_changes import (
    OutsideTurnDelivery,
    apply_change,
    change_id_for,
    delivery_for,
)
from infra.outbox import LeaseOutcome

if TYPE_CHECKING:
    from engine.model import AgentSnapshot
    from infra.runtime import Runtime

log = logging.getLogger(__name__)
HAND_BACK_CHOICE = "waypoint:handback"
HAND_BACK_WORDS = {"handback", "!handback", "hand back", "/handback"}
LAST_MESSAGES = 6
_LEASE_SECONDS = 60


def summary_text(state: SessionState, agent: AgentSnapshot | None) -> str:
    """The thread's opening post. Secrets never appear: collected secrets are not values of a
    stored session, and stored events hold them masked (`engine.privacy.secrets`)."""
    handoff = state.handoff
    lines = [
        f"*Handoff* — {state.channel} customer `{state.customer_id}` (session `{state.id}`)",
        f"*Why:* {handoff.reason if handoff else 'handed off'}",
    ]
    wanted = next(
        (e.text for e in reversed(state.events) if e.source is EventSource.CUSTOMER and e.text),
        None,
    )
    if wanted:
        lines.append(f"*They wrote:* {wanted}")
    for journey_id in state.active_journey_ids:
        title = journey_id
        if agent is not None and agent.has_journey(journey_id):
            title = agent.journey(journey_id).title
        lines.append(f"*Journey:* {title} — at step `{state.journey_paths[journey_id][-1]}`")
    secret_names = _secret_names(agent)
    values = {k: v for k, v in state.collected_values().items() if k not in secret_names}
    if values:
        lines.append("*Collected:* " + ", ".join(f"{k}: {v}" for k, v in sorted(values.items())))
    recent = [e for e in state.events if e.kind is EventKind.MESSAGE and e.text][-LAST_MESSAGES:]
    if recent:
        lines.append("*Last messages:*")
        lines.extend(f"> {_speaker(e)}: {e.text}" for e in recent)
    lines.append("Reply in this thread to write to the customer; the button hands back.")
    return "\n".join(lines)


def _secret_names(agent: AgentSnapshot | None) -> set[str]:
    if agent is None:
        return set()
    names = {f.name for j in agent.journeys for n in j.nodes for f in n.collects if f.secret}
    names |= {p.name for t in agent.tools for p in t.parameters if p.secret}
    return names


def _speaker(event: Event) -> str:
    return {EventSource.CUSTOMER: "Customer", EventSource.HUMAN: "Team"}.get(event.source, "Agent")


# --------------------------------------------------------------------------------------------------
# Worker side: after a turn


async def after_turn(runtime: Runtime, state: SessionState, turn_id: str) -> None:
    """Open the session's thread when this turn handed off; post the customer's messages of
    this turn into it while a person has the session. Best effort for the customer: a Slack
    failure never fails their turn (the next turn or redelivery tries again)."""
    relay = runtime.settings.support_relay
    slack = runtime.channels.get("slack")
    if relay is None or slack is None or state.mode is not SessionMode.HUMAN:
        return
    events = [e for e in state.events if e.turn_id == turn_id]
    if state.handoff is not None and state.handoff.support_thread is None:
        # The turn that handed off — or, for a handoff started from the API, the customer's
        # next message — opens the thread (its summary holds this turn's messages).
        await _open_thread(runtime, slack, relay.channel, state, turn_id)
        return
    thread = state.handoff.support_thread if state.handoff else None
    said = [e.text for e in events if e.source is EventSource.CUSTOMER and e.text]
    if thread and said:
        text = "\n".join(f"Customer: {t}" for t in said)
        reply_to = {"channel": thread["channel"], "thread_ts": thread["thread_ts"]}
        await _post_once(runtime, slack, state.id, f"{turn_id}.support", text, reply_to)


async def mirror_to_thread(runtime: Runtime, delivery: OutsideTurnDelivery) -> None:
    """What reached the customer outside a turn — a person's message written in the inbox
    tool (not in the thread itself), a ticket's notice — also shown in the session's thread."""
    slack = runtime.channels.get("slack")
    if runtime.settings.support_relay is None or slack is None:
        return
    state = await runtime.sessions.load(delivery.session_id)
    thread = state.handoff.support_thread if state and state.handoff else None
    event = delivery.event
    person = str(event.data.get("person") or "")
    if thread is None or person.startswith("slack:") or not event.text:
        return
    who = f"Team ({person})" if event.source is EventSource.HUMAN else "Sent by the agent"
    reply_to = {"channel": thread["channel"], "thread_ts": thread["thread_ts"]}
    record = f"{delivery.record_id}.support"
    await _post_once(runtime, slack, delivery.session_id, record, f"{who}: {event.text}", reply_to)


async def _open_thread(
    runtime: Runtime, slack: Channel, channel_id: str, state: SessionState, turn_id: str
) -> None:
    try:
        agent = await runtime.agents.get(state.agent_id, state.agent_version)
    except Exception:
        agent = None
    button = [ReplyOption(id=HAND_BACK_CHOICE, label="Hand back to the agent")]
    ids = await _post_once(
        runtime,
        slack,
        state.id,
        f"{turn_id}.support-thread",
        summary_text(state, agent),
        {"channel": channel_id},
        options=button,
    )
    thread_ts = next((i for i in ids if i), None)
    if thread_ts is None:
        return
    # The state table's thread → session item: it expires like an idle session, and erasing
    # the customer deletes it (`infra.aws.erasure`, through the session's support_thread event).
    sessions = runtime.sessions
    sessions._table.ddb.put_item(
        TableName=sessions._table.name,
        Item={
            **support_thread_key(channel_id, thread_ts),
            "session_id": {"S": state.id},
            **sessions._items.expiry(sessions._retention.session_idle),
        },
    )
    thread = {"channel": channel_id, "thread_ts": thread_ts}
    change_id = f"{turn_id}.thread"
    # (handed back before the thread was recorded: nothing left to point at)
    with contextlib.suppress(HandoffStateError):
        await apply_change(
            runtime.sessions,
            state.id,
            change_id,
            lambda s: open_support_thread(s, change_id, runtime.clock.now(), thread=thread),
        )


async def _post_once(
    runtime: Runtime,
    slack: Channel,
    session_id: str,
    record_id: str,
    text: str,
    reply_to: dict[str, Any],
    options: Sequence[ReplyOption] = (),
) -> tuple[str, ...]:
    """Post under the outbox record `record_id`; the platform's message ids (the earlier post's,
    when it went out before)."""
    outbox = runtime.outbox
    owner = uuid.uuid4().hex
    lease = await outbox.take(
        session_id, record_id, slack.name, owner=owner, lease_seconds=_LEASE_SECONDS
    )
    if lease.outcome is not LeaseOutcome.TAKEN:
        return lease.entry.message_ids
    reply = OutboundReply(text=text, options=list(options), reply_to=reply_to, id=record_id)
    try:
        receipt = await slack.send(reply, runtime.http)
    except Exception as error:
        await outbox.release(session_id, record_id, owner, str(error)[:200])
        return ()
    await outbox.mark_sent(session_id, record_id, receipt.message_ids)
    return tuple(receipt.message_ids)


# --------------------------------------------------------------------------------------------------
# Worker side: a person wrote in a thread


async def person_wrote(runtime: Runtime, message: NormalizedMessage) -> OutsideTurnDelivery | None:
    """Apply a support-thread message to its session: hand back, or a person's message (then
    returned as what the worker delivers to the customer). None when the author is not allowed
    to write to customers (the webhook drops those already; this holds for anything queued
    before the allow-list changed), the thread is not a handoff's, the session is no longer with
    a person, or there is nothing to send."""
    relay = runtime.settings.support_relay
    if relay is None or not relay.admits(message):
        log.warning(
            "support channel message from outside the allow-list not relayed",
            extra={"sender_team": message.sender_team},
        )
        return None
    thread_ts = message.reply_to.get("thread_ts")
    channel_id = message.reply_to.get("channel")
    if not thread_ts or not channel_id:
        return None
    key = support_thread_key(channel_id, thread_ts)
    found = runtime.sessions._table.get(key["pk"]["S"], key["sk"]["S"])
    if found is None:
        return None
    session_id = found["session_id"]["S"]
    person = f"slack:{message.customer_id}"
    wants_back = message.choice == HAND_BACK_CHOICE or (
        message.text.strip().lower() in HAND_BACK_WORDS
    )
    kind = "release" if wants_back else "human"
    change_id = change_id_for(kind, session_id, message.dedup_key)
    now = runtime.clock.now()
    try:
        if wants_back:
            await apply_change(
                runtime.sessions,
                session_id,
                change_id,
                lambda s: hand_back(
                    s, change_id, now, by=person, why="from the support thread", take_over=True
                ),
            )
            return None
        applied = await apply_change(
            runtime.sessions,
            session_id,
            change_id,
            lambda s: person_message_change(
                s, change_id, now, person=person, text=message.text, take_over=True
            ),
        )
    except HandoffStateError:
        return None
    event = next((e for e in applied.events if e.text), None)
    return delivery_for(applied.state, event) if event is not None else None


__all__ = [
    "HAND_BACK_CHOICE",
    "SUPPORT_CHANNEL_ENV",
    "SUPPORT_TEAMS_ENV",
    "SUPPORT_USERS_ENV",
    "after_turn",
    "mirror_to_thread",
    "person_wrote",
    "summary_text",
]
