"""A value a journey collects belongs to whoever said it — in a group session, the sender of the
message that holds it, not whoever wrote last in the turn — so erasing that person removes it
and erasing anyone else keeps it."""

from __future__ import annotations

from datetime import UTC, datetime

from engine.privacy.erasure import without_person
from engine.sessions.session import CollectedValue, InboundMessage, SessionState
from tests.engine.test_bounded_history import balance_harness

ACCOUNT = "12345678"
T_ERASED = datetime(2026, 2, 1, tzinfo=UTC)


def said_by(sender: str, event_id: str, text: str) -> InboundMessage:
    return InboundMessage(event_id=event_id, text=text, metadata={"customer_id": sender})


async def test_a_value_belongs_to_the_sender_whose_words_hold_it_not_the_last_writer() -> None:
    h, _script = balance_harness()
    await h.start()
    # One turn of a group: Alice gives her account number, Bob writes after her (the scripted
    # matcher reads the latest message: his asks for the balance too).
    out = await h.engine.handle(
        "s1",
        [
            said_by("alice", "m1", f"my balance please, account number {ACCOUNT}"),
            said_by("bob", "m2", "yes, the balance for us"),
        ],
    )
    [value] = [c for c in out.state.collected if c.name == "account"]
    assert value.value == ACCOUNT and value.sender == "alice"

    without_alice = without_person(out.state, "alice", opener=False, erased_at=T_ERASED)
    assert ACCOUNT not in repr(without_alice.collected)
    without_bob = without_person(out.state, "bob", opener=False, erased_at=T_ERASED)
    assert [c.value for c in without_bob.collected] == [ACCOUNT]


async def test_a_value_given_again_by_another_sender_replaces_it_and_changes_hands() -> None:
    """One entry per journey field, as before senders were recorded: the group's journey has
    one account; the last one given is it, and it is the last giver's."""
    h, script = balance_harness()
    await h.start()
    await h.engine.handle("s1", [said_by("alice", "m1", f"balance please, account {ACCOUNT}")])
    script["Balance"][:] = [
        {**script["Balance"][0], "collected": [{"name": "account", "value": "87654321"}]}
    ]
    out = await h.engine.handle("s1", [said_by("bob", "m2", "no, use account 87654321")])

    accounts = [c for c in out.state.collected if c.name == "account"]
    assert [(c.value, c.sender) for c in accounts] == [("87654321", "bob")]


def test_a_value_stored_before_senders_were_recorded_goes_with_the_group_opener() -> None:
    """Like their messages without a sender, a value without one is the opener's."""
    legacy = CollectedValue(
        journey_id="balance", node_id="acct", name="account", value=ACCOUNT, turn_id="t1"
    )
    state = SessionState(
        id="g", agent_id="bank", customer_id="alice", channel="slack", collected=(legacy,)
    )
    assert without_person(state, "alice", opener=True, erased_at=T_ERASED).collected == ()
    assert without_person(state, "bob", opener=False, erased_at=T_ERASED).collected == (legacy,)
