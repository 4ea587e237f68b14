"""One identity per sender: in a Telegram group each person has their own session, so one
person logging in never lets another person's message act on that login. Real webhook and worker
on moto, the offline model, the banking tools (which check ownership against the principal the
login established)."""

from __future__ import annotations

import itertools
from typing import Any

from engine.sessions.session import EventKind, EventSource
from examples.banking import bank
from infra.runtime import Runtime
from infra.turn_queue import session_id_for
from tests.channels.payloads import tg_text_update
from tests.functions import signed_events as signed
from tests.functions.conftest import drain, invoke_webhook, load_session

GROUP = -100777
ALICE, MALLORY = 4242, 6666


def session_of(user: int) -> str:
    return session_id_for("bank", "telegram", f"tg:700100200:{GROUP}:user:{user}")


def in_group(user: int, text: str, update_id: int) -> None:
    update = tg_text_update(text, update_id=update_id, chat_id=GROUP, user_id=user)
    update["message"]["chat"]["type"] = "supergroup"
    response = invoke_webhook(signed.telegram(update))
    assert response["statusCode"] == 200, response


UPDATE_IDS = itertools.count(500)


def conversation(runtime: Runtime, stack: Any, script: list[tuple[int, str]]) -> list[str]:
    """Each message through the webhook and the worker; the agent's reply to each."""
    replies = []
    for user, text in script:
        in_group(user, text, next(UPDATE_IDS))
        drain(stack)
        state = load_session(runtime, session_of(user))
        messages = [e for e in state.events if e.kind is EventKind.MESSAGE]
        # (the password is a declared secret: stored masked)
        assert messages[-2].text in (text, "•••") and messages[-2].data["sender"] == str(user)
        assert messages[-1].source is EventSource.AGENT
        replies.append(messages[-1].text or "")
    return replies


def test_a_login_in_a_group_belongs_to_its_sender_only(runtime: Runtime, stack: Any) -> None:
    bank.reset_bank()
    conversation(
        runtime,
        stack,
        [(ALICE, "I want to log in"), (ALICE, "seldo"), (ALICE, "monkey")],
    )
    alice = load_session(runtime, session_of(ALICE))
    assert alice.principals == {str(ALICE): {"username": "seldo"}}

    # Mallory, in the same group, asks for a balance and a transfer: she is asked to log in.
    replies = conversation(
        runtime,
        stack,
        [(MALLORY, "What is the balance of my account?"), (MALLORY, "Checking")],
    )

    mallory = load_session(runtime, session_of(MALLORY))
    assert "username" in replies[0]
    assert mallory.principals == {}
    assert not [e for e in mallory.events if e.kind is EventKind.TOOL]
    assert not any("1000.00" in r or "25000.00" in r for r in replies)
    assert bank.BANK.transfers == []
    assert load_session(runtime, session_of(ALICE)).version == alice.version  # untouched
