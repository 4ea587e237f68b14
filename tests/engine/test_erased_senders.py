"""A message still queued when its sender was erased is dropped by the turn, never answered or
written back; a message they write after the erasure is new and answered (`engine.privacy.erasure`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.compose import ComposedReply
from engine.matching.guidelines import GuidelineMatchBatch
from engine.model import Guideline
from engine.privacy.erasure import ERASURE_TOMBSTONE_DAYS, person_digest, without_person
from engine.sessions.session import InboundMessage, SessionState
from engine.testing import ScriptedLLM
from tests.engine.pipeline_kit import Harness, compose_echo, make_agent, match_when

ERASED_AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
BEFORE = ERASED_AT - timedelta(minutes=1)
AFTER = ERASED_AT + timedelta(minutes=1)
IBAN = "DE89370400440532013000"


def written(sender: str | None, event_id: str, text: str, at: datetime | None) -> InboundMessage:
    metadata = {"customer_id": sender} if sender else {}
    return InboundMessage(event_id=event_id, text=text, received_at=at, metadata=metadata)


async def group_with_alice_erased() -> tuple[Harness, ScriptedLLM]:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({}))
    llm.on(ComposedReply, compose_echo)
    h = Harness(
        make_agent(guidelines=[Guideline(id="g", condition="x", action="y")]), llm, index=False
    )
    await h.agents.publish(h.agent)
    await h.sessions.create(
        SessionState(
            id="grp",
            agent_id=h.agent.id,
            customer_id="bob",
            erased_senders={person_digest("generic", "alice"): ERASED_AT},
        )
    )
    return h, llm


async def test_a_message_received_before_its_sender_was_erased_is_dropped_unanswered() -> None:
    h, llm = await group_with_alice_erased()

    out = await h.engine.handle("grp", [written("alice", "m1", f"my IBAN is {IBAN}", BEFORE)])

    assert out.dropped == 1 and out.reply is None and out.new_events == []
    assert llm.calls == []  # nothing computed
    stored = await h.sessions.load("grp")
    assert stored is not None and stored.version == 0 and stored.events == ()
    assert "alice" not in " ".join(out.trace.notes)  # the skip is traced without their id


async def test_a_message_they_write_after_the_erasure_is_answered() -> None:
    h, _llm = await group_with_alice_erased()

    out = await h.engine.handle("grp", [written("alice", "m1", "hello again", AFTER)])

    assert out.dropped == 0 and out.reply is not None
    stored = await h.sessions.load("grp")
    assert stored is not None and stored.events[0].text == "hello again"


async def test_in_a_burst_only_the_erased_senders_old_message_is_dropped() -> None:
    h, _llm = await group_with_alice_erased()

    out = await h.engine.handle(
        "grp",
        [
            written("alice", "m1", f"my IBAN is {IBAN}", BEFORE),
            written("bob", "m2", "what are your opening hours?", BEFORE),  # not erased
        ],
    )

    assert out.dropped == 1 and out.reply is not None
    stored = await h.sessions.load("grp")
    assert stored is not None and IBAN not in stored.model_dump_json()
    assert "what are your opening hours?" in [e.text for e in stored.events]


async def test_a_message_without_a_sender_is_the_session_customers() -> None:
    h, _llm = await group_with_alice_erased()
    await h.sessions.create(
        SessionState(
            id="own",
            agent_id=h.agent.id,
            customer_id="alice",  # recreated after her erasure, her tombstone carried over
            erased_senders={person_digest("generic", "alice"): ERASED_AT},
        )
    )

    out = await h.engine.handle("own", [written(None, "m1", IBAN, BEFORE)])

    assert out.dropped == 1 and out.reply is None


def test_the_erasure_is_recorded_by_digest_and_forgotten_after_the_tombstone_days() -> None:
    long_ago = ERASED_AT - timedelta(days=ERASURE_TOMBSTONE_DAYS + 1)
    state = SessionState(
        id="grp",
        agent_id="bank",
        customer_id="bob",
        channel="slack",
        erased_senders={person_digest("slack", "carol"): long_ago},
    )

    cleaned = without_person(state, "alice", opener=False, erased_at=ERASED_AT)

    assert cleaned.erased_senders == {person_digest("slack", "alice"): ERASED_AT}
    assert "alice" not in cleaned.model_dump_json()
    assert person_digest("slack", "alice") != person_digest("telegram", "alice")
