"""WhatsApp choices, round trip: options whose labels do not fit reply buttons go out (through the
real channel code) as a list whose rows carry the full labels, or as numbered text; the customer's
pick — a list row, or a number typed — comes back through the signed webhook, and the turn worker
resolves the pending choice with that option."""

from __future__ import annotations

from typing import Any

from engine.sessions.session import EventKind, EventSource, PendingInterrupt, SessionState
from infra.channels.base import OutboundReply, ReplyOption
from infra.runtime import Runtime
from infra.turn_queue import session_id_for
from tests.channels.payloads import (
    PHONE_NUMBER_ID,
    wa_change,
    wa_list_reply,
    wa_notification,
    wa_text,
)
from tests.functions import signed_events as signed
from tests.functions.conftest import drain, invoke_webhook, load_session
from tests.functions.platforms import FakePlatforms

WA_ID = "972544401243"  # the sender of the payloads' messages
SESSION = session_id_for("bank", "whatsapp", f"wa:{PHONE_NUMBER_ID}:{WA_ID}")
# Over a list row id's 200 characters: the row carries a compact id the worker maps back.
MOTHER = "payee:" + "m" * 250
TRANSFERS = (
    {"id": "payee:savings", "label": "Transfer money to my savings account", "value": "savings"},
    {"id": MOTHER, "label": "Transfer money to my mother", "value": "mother"},
    {"id": "card:lost", "label": "💳 Report my card as lost or stolen", "value": "card"},
)


def waiting_for_a_pick(runtime: Runtime, options: tuple[dict[str, Any], ...]) -> str:
    """The customer's session as a turn that showed `options` left it; the options as WhatsApp
    shows them (the payloads the channel posted to the Graph API)."""
    pending = PendingInterrupt(tool="pick_transfer", call_id="c1", kind="selector", options=options)
    state = SessionState(
        id=SESSION,
        agent_id="bank",
        customer_id=WA_ID,
        channel="whatsapp",
        pending_interrupt=pending,
    )
    runtime.run(runtime.sessions.create(state))
    reply = OutboundReply(
        text="What would you like to do?",
        options=[ReplyOption(id=o["id"], label=o["label"]) for o in options],
        reply_to={"phone_number_id": PHONE_NUMBER_ID, "wa_id": WA_ID},
    )
    runtime.run(runtime.channels["whatsapp"].send(reply, runtime.http))
    return SESSION


def resolved_pick(runtime: Runtime) -> str:
    """What the pending choice was resolved with, from the turn's trace."""
    state = load_session(runtime, SESSION)
    assert state.pending_interrupt is None
    answer = next(e for e in state.events if e.source is EventSource.AGENT and e.turn_id)
    trace = runtime.run(runtime.sessions.trace(SESSION, str(answer.turn_id)))
    assert trace is not None
    [note] = [n for n in trace["notes"] if n.startswith("interrupt of pick_transfer resumed")]
    return note


def customer_text(runtime: Runtime) -> str:
    state = load_session(runtime, SESSION)
    [said] = [
        e for e in state.events if e.kind is EventKind.MESSAGE and e.source is EventSource.CUSTOMER
    ]
    return str(said.text)


def test_a_row_picked_from_the_list_resolves_the_choice_with_its_option(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    waiting_for_a_pick(runtime, TRANSFERS)
    [shown] = platforms.replies("whatsapp")
    interactive = shown.json()["interactive"]
    assert interactive["type"] == "list"  # the labels are too long for 20-character buttons
    rows = interactive["action"]["sections"][0]["rows"]
    assert [row["description"] for row in rows] == [o["label"] for o in TRANSFERS]

    row = rows[1]  # "Transfer money to my mother", under a short title and a compact id
    assert row["id"] != MOTHER and len(row["id"]) <= 200
    pick = wa_list_reply(row["id"], row["title"], description=row["description"])
    response = invoke_webhook(signed.whatsapp(wa_notification(wa_change([pick]))))
    assert response["statusCode"] == 200
    assert drain(stack) == [{"batchItemFailures": []}]

    assert "'mother'" in resolved_pick(runtime)
    assert customer_text(runtime) == "Transfer money to my mother"  # not the short title


def test_a_number_typed_after_numbered_options_resolves_the_choice_with_that_option(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    monthly = (
        "Transfer money from my checking account to my savings account on the 1st of each month"
    )
    options = (*TRANSFERS[:2], {"id": "standing", "label": monthly, "value": "standing order"})
    waiting_for_a_pick(runtime, options)
    [shown] = platforms.replies("whatsapp")
    body = shown.json()["text"]["body"]  # too long for a list row's 72 characters: numbered text
    assert body.endswith(
        f"Reply with a number:\n1. {TRANSFERS[0]['label']}\n2. "
        f"{TRANSFERS[1]['label']}\n3. {monthly}"
    )

    response = invoke_webhook(signed.whatsapp(wa_notification(wa_change([wa_text("3")]))))
    assert response["statusCode"] == 200
    assert drain(stack) == [{"batchItemFailures": []}]

    assert "'standing order'" in resolved_pick(runtime)
