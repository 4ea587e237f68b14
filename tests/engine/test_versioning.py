"""Publishing mid-conversation: a session stays on its agent version while a journey is in flight,
moves at a safe point or by a declared migration, and a reference no version can resolve ends its
journey cleanly with plain words — through the real engine, the offline model (and a hostile one)
and the banking tools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.authoring import dump_agent, load_agent
from engine.errors import InvalidAgentDefinition
from engine.language.lines import SHIPPED_LINES
from engine.memory.stores import InMemoryAgentStore, InMemorySessionStore
from engine.model import AgentSnapshot
from engine.ports import SchematicLLM
from engine.sessions.session import InboundMessage, SessionState
from engine.toolkit import InProcessDispatcher
from engine.trace import summarize
from engine.turn import EngineDeps, TurnEngine, TurnOutput
from engine.versioning.pinning import choose_version, ended_notice, journeys_in_flight
from examples.banking import bank, load
from examples.banking.tools import registry
from infra.embeddings import HashingEmbedder
from infra.offline import OfflineLLM
from tests.engine.agent_versions import (
    bank_document,
    changed_bank,
    greeting_changed,
    migrate,
    rename_step,
    reorder_transfer_questions,
    without_journey,
)
from tests.hostile.adversary import HostileLLM

SEED = ["Hi", "Transfer money", "seldo", "monkey", "Checking", "To account ID 1234324", "500"]
DONE = "Done! I transferred 500.00 USD to account 1234324. Your new balance is $500.00."


class Conversation:
    """One banking session on an in-memory store; `publish` swaps the published version."""

    def __init__(self, llm: SchematicLLM | None = None) -> None:
        bank.reset_bank()
        self.v1 = load()
        self.agents = InMemoryAgentStore()
        self.sessions = InMemorySessionStore()
        self.engine = TurnEngine(
            self.agents,
            self.sessions,
            EngineDeps(
                llm=llm or OfflineLLM(),
                embedder=HashingEmbedder(),
                tools=InProcessDispatcher(registry),
            ),
        )
        self.n = 0
        self.replies: list[TurnOutput] = []

    async def start(self) -> Conversation:
        await self.agents.publish(self.v1)
        await self.sessions.create(SessionState(id="s", agent_id="bank", customer_id="c"))
        return self

    async def publish(self, agent: AgentSnapshot) -> str:
        return await self.agents.publish(agent)

    async def say(self, *texts: str) -> TurnOutput:
        for text in texts:
            self.n += 1
            out = await self.engine.handle("s", [InboundMessage(event_id=f"m{self.n}", text=text)])
            assert out.reply is not None and out.reply.text, f"no reply to {text!r}"
            self.replies.append(out)
        return self.replies[-1]


@pytest.fixture
async def chat() -> Conversation:
    return await Conversation().start()


async def test_a_session_in_a_journey_stays_on_its_version_until_a_safe_point(chat) -> None:
    await chat.say(*SEED[:2])  # transfer suspended, logging in
    v2 = await chat.publish(changed_bank(without_journey("transfer")))

    rest = [await chat.say(text) for text in SEED[2:]]

    assert [r.trace.agent_version for r in rest] == [chat.v1.version] * len(rest)
    assert {r.trace.version_choice for r in rest} == {"pinned"}
    assert {r.trace.published_version for r in rest} == {v2}
    assert rest[-1].reply.text == DONE  # the journey v2 removed finished on v1
    assert f"agent version: {chat.v1.version} (pinned; published: {v2})" in summarize(rest[0].trace)
    assert bank.BANK.transfers == [{"from": "1234567890", "to": "1234324", "amount": "500.00"}]

    after = await chat.say("Hi")  # nothing in flight: the safe point

    assert after.trace.agent_version == v2 and after.trace.version_choice == "published"
    assert after.state.agent_version == v2


@pytest.mark.parametrize("at", range(2, len(SEED)))
@pytest.mark.parametrize(
    "change",
    [
        without_journey("transfer"),
        without_journey("authenticate"),
        rename_step("transfer", "ask_amount", "ask_sum"),
        rename_step("authenticate", "ask_password", "ask_secret"),
        reorder_transfer_questions,
    ],
    ids=["transfer-removed", "login-removed", "step-renamed", "login-step-renamed", "reordered"],
)
async def test_publishing_at_any_point_of_the_flow_changes_nothing_for_the_session(
    chat, change, at
) -> None:
    await chat.say(*SEED[:at])
    await chat.publish(changed_bank(change))

    for text in SEED[at:]:
        await chat.say(text)

    texts = [r.reply.text for r in chat.replies]
    assert texts[-1] == DONE
    assert bank.BANK.transfers == [{"from": "1234567890", "to": "1234324", "amount": "500.00"}]
    assert len(set(texts)) == len(texts)  # nothing asked twice, no answer dropped
    assert all(r.trace.agent_version == chat.v1.version for r in chat.replies)


async def test_a_declared_migration_moves_the_session_at_its_next_turn(chat) -> None:
    await chat.say(*SEED[:6])  # at transfer's ask_amount
    v2 = await chat.publish(
        changed_bank(
            rename_step("transfer", "ask_amount", "ask_sum"),
            migrate("transfer", {"ask_amount": "ask_sum"}),
        )
    )

    done = await chat.say("500")

    assert done.trace.agent_version == v2 and done.trace.version_choice == "migrated"
    assert done.reply.text == DONE
    assert "ask_sum" in done.state.journey_paths["transfer"]
    assert "ask_amount" not in done.state.journey_paths["transfer"]
    assert bank.BANK.transfers == [{"from": "1234567890", "to": "1234324", "amount": "500.00"}]


async def test_a_migration_for_another_version_does_not_apply(chat) -> None:
    await chat.say(*SEED[:6])
    await chat.publish(
        changed_bank(
            rename_step("transfer", "ask_amount", "ask_sum"),
            migrate("transfer", {"ask_amount": "ask_sum"}, from_version="0000000000000000"),
        )
    )

    done = await chat.say("500")

    assert done.trace.version_choice == "pinned" and done.trace.agent_version == chat.v1.version
    assert done.reply.text == DONE


async def test_a_migration_must_cover_every_journey_in_flight(chat) -> None:
    await chat.say(*SEED[:3])  # transfer suspended, authenticate at ask_password
    await chat.publish(changed_bank(greeting_changed, migrate("transfer", {})))

    out = await chat.say(SEED[3])

    assert out.trace.version_choice == "pinned"  # authenticate has no migration: stays


async def _dangling(
    chat: Conversation, prefix: list[str], new_version: AgentSnapshot
) -> SessionState:
    """The session after `prefix`, as a session whose pinned version is no longer stored (or
    that predates pinning) meets `new_version`."""
    await chat.say(*prefix)
    await chat.publish(new_version)
    session = await chat.sessions.load("s")
    assert session is not None
    lost = session.model_copy(update={"agent_version": "lostversion00000"})
    await chat.sessions.replace_state(lost, expected_version=session.version)
    return lost


async def test_a_removed_suspended_journey_ends_cleanly_when_its_prerequisite_completes(
    chat,
) -> None:
    await _dangling(chat, SEED[:3], changed_bank(without_journey("transfer")))

    out = await chat.say("monkey")  # the login completes: the transfer was waiting for it

    assert "the transfer we were in the middle of is no longer available" in out.reply.text
    assert "You are now logged in" in out.reply.text  # and the turn itself went on
    assert "transfer" not in out.state.suspended_journeys
    assert out.state.version == (await chat.sessions.load("s")).version  # committed
    assert any("ended, no longer in this version" in n for n in out.trace.notes)
    assert bank.BANK.transfers == []
    following = await chat.say("What is the price of Apple stock?")
    assert "no longer available" not in following.reply.text


async def test_a_renamed_step_without_a_migration_ends_the_journey_and_says_so(chat) -> None:
    await _dangling(chat, SEED[:6], changed_bank(rename_step("transfer", "ask_amount", "ask_sum")))

    out = await chat.say("500")

    assert "no longer available" in out.reply.text
    assert out.state.journey_paths["transfer"][-1] is None
    assert "transfer" not in out.state.active_journey_ids
    assert bank.BANK.transfers == []  # the answer was not applied to another question


async def test_an_active_journey_removed_is_not_dropped_without_a_word(chat) -> None:
    await _dangling(chat, SEED[:6], changed_bank(without_journey("transfer")))

    out = await chat.say("500")

    assert out.reply.text.startswith("Sorry — our service was updated and the transfer we")
    assert bank.BANK.transfers == []


@pytest.mark.parametrize("behaviour", ["jump_to_end", "all_apply", "invent", "mixed"])
async def test_a_hostile_model_cannot_crash_a_session_with_dangling_references(behaviour) -> None:
    v1 = load()
    chat = await Conversation(HostileLLM(v1, behaviour, seed=7)).start()
    for text in SEED[:3]:
        await chat.say(text)
    state = await chat.sessions.load("s")
    in_flight = journeys_in_flight(state)
    await chat.publish(changed_bank(*(without_journey(j) for j in in_flight if j != "stock")))
    await chat.sessions.replace_state(
        state.model_copy(update={"agent_version": "lostversion00000"}),
        expected_version=state.version,
    )

    outs = [await chat.say(text) for text in [*SEED[3:], "hello?"]]

    assert outs[0].trace.version_choice == "published"
    assert any("no longer available" in o.reply.text for o in outs)
    assert (await chat.sessions.load("s")).version == outs[-1].state.version


def test_choose_version_without_a_journey_in_flight_follows_the_published_version() -> None:
    v1, v2 = load(), changed_bank(greeting_changed)
    session = SessionState(id="s", agent_id="bank", customer_id="c", agent_version=v1.version)

    choice = choose_version(session, v2, v1)

    assert choice.agent is v2 and choice.how == "published" and choice.ended == ()
    assert choice.notice(SHIPPED_LINES.speaker("en")) is None


def test_ended_notice_names_every_journey_in_plain_words() -> None:
    say = SHIPPED_LINES.speaker("en")
    assert ended_notice(say, ()) is None
    assert "money transfer and authentication we were in the middle of are no longer" in (
        ended_notice(say, ("Money transfer", "Authentication")) or ""
    )
    assert "the money transfer we were in the middle of is no longer available" in (
        ended_notice(say, ("Money transfer",)) or ""
    )


def test_migrations_round_trip_and_are_validated_naming_the_element() -> None:
    agent = changed_bank(
        rename_step("transfer", "ask_amount", "ask_sum"),
        migrate("transfer", {"ask_amount": "ask_sum"}, from_version="d4c12308273785bc"),
    )
    assert load_agent(dump_agent(agent)) == agent

    with pytest.raises(InvalidAgentDefinition) as bad:
        changed_bank(
            migrate("transfer", {"ask_amount": "ask_sum", "check": "root"}),
            migrate("transfers", {}),
        )
    text = str(bad.value)
    assert "migrations[0] (journey 'transfer'): step 'ask_amount' moves to 'ask_sum'" in text
    assert "step 'check' moves to 'root'" in text  # the entry node is no step to be at
    assert "migrations[1] (journey 'transfers'): this version has no journey" in text


def test_an_agent_without_migrations_keeps_its_content_version() -> None:
    """Fields added later (migrations, numeric priority) are hashed only when used: the banking
    agent as it was before them (max_tool_iterations 3) keeps the version it was published as."""
    data: dict[str, Any] = load().model_dump(exclude={"migrations"})
    data["config"]["max_tool_iterations"] = 3  # the example's changes since: this,
    data["terms"] = []  # its glossary,
    for tool in data["tools"]:  # and typed, sourced values (money, an account id's shape)
        for parameter in tool["parameters"]:
            parameter.update(source=None, pattern=None, currency=None)
            if parameter["type"] == "money":
                parameter["type"] = "number"
    for journey in data["journeys"]:
        for node in journey["nodes"]:
            for fld in node["collects"]:
                fld.update(pattern=None, currency=None)
                if fld["type"] == "money":
                    fld["type"] = "decimal"
    for canned in data["canned_responses"]:
        canned["template"] = canned["template"].replace("{{amount}}", "${{amount}}")
        canned["variants"] = {}  # and its languages: the confirmation's variants,
    data["config"]["languages"] = ["en"]  # and the languages it serves
    assert AgentSnapshot.model_validate(data).content_hash() == "d4c12308273785bc"


def test_the_documented_migration_example_loads_into_the_renamed_agent() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "publishing.md").read_text()
    example = yaml.safe_load(page.split("```yaml\n", 1)[1].split("```", 1)[0])
    doc = bank_document()
    rename_step("transfer", "ask_amount", "ask_sum")(doc)
    doc["migrations"] = example["migrations"]

    agent = load_agent(doc)

    assert agent.migration_for("transfer", "any") is not None
    assert agent.migration_for("balance", "d4c12308273785bc") is not None
    assert agent.migration_for("balance", "another") is None
