"""A message still queued when its sender was erased is dropped by the turn, never answered or
written back; a message they write after the erasure is new and answered (`engine.privacy.erasure`)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from engine.compose import ComposedReply
from engine.matching.guidelines import GuidelineMatchBatch
from engine.model import Guideline
from engine.privacy.erasure import (
    DEVELOPMENT_ERASURE_KEY,
    ERASURE_TOMBSTONE_DAYS,
    PersonDigest,
    legacy_person_digest,
    without_person,
)
from engine.sessions.session import InboundMessage, SessionState
from engine.testing import ScriptedLLM
from tests.engine.pipeline_kit import Harness, compose_echo, make_agent, match_when

ERASED_AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
BEFORE = ERASED_AT - timedelta(minutes=1)
AFTER = ERASED_AT + timedelta(minutes=1)
IBAN = "DE89370400440532013000"
person_digest = PersonDigest(DEVELOPMENT_ERASURE_KEY)  # the in-memory store's, by default


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

    cleaned = without_person(state, "alice", False, ERASED_AT, person_digest)

    assert cleaned.erased_senders == {person_digest("slack", "alice"): ERASED_AT}
    assert "alice" not in cleaned.model_dump_json()
    assert person_digest("slack", "alice") != person_digest("telegram", "alice")


def test_an_erased_phone_number_cannot_be_found_by_hashing_every_number() -> None:
    """The adversary holds the table (a leaked backup) and a block of phone numbers: an unkeyed
    hash of (channel, id) is reversed by hashing every candidate. The stored digest is keyed
    by the deployment's erasure key: without it, no candidate matches."""
    phone = "+15550001234"
    key = b"this deployment's erasure key, 64 random characters in production....."
    state = SessionState(id="grp", agent_id="bank", customer_id="bob", channel="twilio")
    cleaned = without_person(state, phone, False, ERASED_AT, PersonDigest(key))
    (stored,) = cleaned.erased_senders

    guesses = {f"+155500{n:05d}" for n in range(1000, 1500)}
    assert phone in guesses
    unkeyed = {hashlib.sha256(f"twilio\0{g}".encode()).hexdigest()[:32] for g in guesses}
    public = {PersonDigest(DEVELOPMENT_ERASURE_KEY)("twilio", g) for g in guesses}
    assert stored not in unkeyed | public
    assert stored == PersonDigest(key)("twilio", phone)  # the deployment still recognises them


async def test_an_erasure_recorded_before_digests_were_keyed_still_drops_their_old_message() -> (
    None
):
    """Group states written before issue #33 hold the unkeyed digest: honoured until it
    expires (`ERASURE_TOMBSTONE_DAYS`), and replaced by the keyed one when erased again."""
    h, llm = await group_with_alice_erased()
    await h.sessions.create(
        SessionState(
            id="old",
            agent_id=h.agent.id,
            customer_id="bob",
            erased_senders={legacy_person_digest("generic", "alice"): ERASED_AT},
        )
    )

    out = await h.engine.handle("old", [written("alice", "m1", f"my IBAN is {IBAN}", BEFORE)])

    assert out.dropped == 1 and llm.calls == []
    state = await h.sessions.load("old")
    assert state is not None
    again = without_person(state, "alice", False, AFTER, h.sessions.person_digest)
    assert again.erased_senders == {h.sessions.person_digest("generic", "alice"): AFTER}
