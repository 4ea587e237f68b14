"""A password typed to a step that a version change has just ended (or changed) is masked like
any declared secret: the step that asked for it decides, not the version that reads the answer.

The banking concierge's session stands at `ask_password` (`password: secret`); then the agent is
republished so that the next turn reads the answer on a version without that step (the pinned
version is gone, or the session predates pinning) or one whose migrated step no longer declares
the secret. The customer's next message is their password — through real engine turns, with the
offline model and a hostile one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.model import AgentSnapshot
from engine.ports import Generation, SchematicLLM
from engine.privacy.secrets import MASK
from engine.turn import TurnOutput
from examples.banking import load
from infra.offline import OfflineLLM
from tests.engine.agent_versions import (
    changed_bank,
    migrate,
    rename_step,
    secrets_undeclared,
    without_journey,
)
from tests.engine.test_versioning import Conversation
from tests.hostile.adversary import HostileLLM

PASSWORD = "monkey"  # the banking example's own (seldo / monkey)
TO_ASK_PASSWORD = ["Hi", "Transfer money", "seldo"]  # transfer suspended, login at ask_password


class PromptLog:
    """A model (the offline one, or any) whose prompts are kept: what a provider was shown."""

    def __init__(self, inner: SchematicLLM | None = None) -> None:
        self.inner = inner or OfflineLLM()
        self.prompts: list[str] = []

    async def generate(self, prompt: str, schema: Any, *, model: str) -> Generation[Any]:
        self.prompts.append(prompt)
        return await self.inner.generate(prompt, schema, model=model)


async def stored(chat: Conversation) -> str:
    """Everything the store holds for the session: its state, every event, every trace."""
    state = await chat.sessions.load("s")
    assert state is not None
    events = await chat.sessions.events("s", after=-1, limit=10_000)
    turns = sorted({e.turn_id for e in events if e.turn_id})
    traces = [await chat.sessions.trace("s", t) for t in turns]
    dumped = [e.model_dump(mode="json") for e in events]
    return state.model_dump_json() + json.dumps(dumped) + json.dumps(traces, default=str)


def shown(out: TurnOutput) -> str:
    """What the turn returned to its caller (the management API's turn view): events, reply,
    trace."""
    reply = out.reply.model_dump_json() if out.reply else ""
    events = json.dumps([e.model_dump(mode="json") for e in out.new_events])
    return reply + events + out.trace.model_dump_json()


async def at_ask_password_then(chat: Conversation, new_version: AgentSnapshot) -> None:
    """The session at `ask_password`, then `new_version` published and the session's pinned
    version lost (a store that lost it, or a session from before pinning)."""
    await chat.say(*TO_ASK_PASSWORD)
    state = await chat.sessions.load("s")
    assert state is not None and state.journey_paths["authenticate"][-1] == "ask_password"
    await chat.publish(new_version)
    lost = state.model_copy(update={"agent_version": "lostversion00000"})
    await chat.sessions.replace_state(lost, expected_version=state.version)


def assert_nowhere(text: str, where: str) -> None:
    assert PASSWORD not in text.casefold(), f"the password is in {where}"


@pytest.mark.parametrize(
    "change",
    [without_journey("authenticate"), rename_step("authenticate", "ask_password", "ask_secret")],
    ids=["login-removed", "password-step-renamed"],
)
async def test_a_password_typed_to_a_step_a_new_version_ended_is_masked(change) -> None:
    llm = PromptLog()
    chat = await Conversation(llm).start()
    await at_ask_password_then(chat, changed_bank(change))
    prompts_before = len(llm.prompts)

    answer = await chat.say(PASSWORD)
    turn_prompts = llm.prompts[prompts_before:]
    later = await chat.say("Hi")

    assert "no longer available" in answer.reply.text  # the step did end
    assert answer.new_events[0].text == MASK  # the answer, masked whole
    assert_nowhere(shown(answer), "what the turn returned")
    assert_nowhere(turn_prompts[-1], "the reply prompt")
    assert all(PASSWORD not in p for p in llm.prompts[prompts_before + len(turn_prompts) :])
    assert_nowhere(await stored(chat), "the store")
    assert later.reply is not None


async def test_a_password_typed_to_a_step_migrated_to_a_version_without_the_secret_is_masked() -> (
    None
):
    """The published version migrates the login (and the transfer waiting for it) but its
    `ask_password` no longer declares the secret: the step that asked for it did, so the answer
    is masked in the stored message, the collected value, the trace and the reply prompt."""
    llm = PromptLog()
    chat = await Conversation(llm).start()
    await chat.say(*TO_ASK_PASSWORD)
    v2 = changed_bank(secrets_undeclared, migrate("authenticate", {}), migrate("transfer", {}))
    await chat.publish(v2)
    prompts_before = len(llm.prompts)

    answer = await chat.say(PASSWORD)
    reply_prompt = llm.prompts[-1]
    after = await chat.say("Checking")

    assert answer.trace.version_choice == "migrated" and answer.trace.agent_version == v2.version
    assert "logged in" in answer.reply.text  # the login still ran on the value
    assert_nowhere(shown(answer), "what the turn returned")
    assert_nowhere(reply_prompt, "the reply prompt")
    assert all(PASSWORD not in p for p in llm.prompts[prompts_before + 1 :][-3:])
    assert_nowhere(await stored(chat), "the store")
    assert after.reply is not None


@pytest.mark.parametrize("behaviour", ["invent", "swap", "jump_to_end", "mixed"])
async def test_a_hostile_model_cannot_unmask_a_password_typed_across_a_version_change(
    behaviour,
) -> None:
    """The same, with a model that turns hostile when the password comes: it reports it under
    other names, jumps journeys and invents values; whatever it answers, the password is in no
    stored item and no later prompt."""
    llm = PromptLog()
    chat = await Conversation(llm).start()
    await at_ask_password_then(chat, changed_bank(without_journey("authenticate")))
    llm.inner = HostileLLM(load(), behaviour, seed=3)
    prompts_before = len(llm.prompts)

    answer = await chat.say(PASSWORD)
    answered_at = len(llm.prompts)
    await chat.say("What is the price of Apple stock?")

    assert_nowhere(shown(answer), "what the turn returned")
    assert_nowhere(llm.prompts[answered_at - 1], "the reply prompt")
    assert all(PASSWORD not in p.casefold() for p in llm.prompts[answered_at:])
    assert prompts_before < answered_at
    assert_nowhere(await stored(chat), "the store")
