"""A secret typed before anything asks for it — "my password is monkey" as a first message — is
read in the match round like a value said ahead of its step (the model reports it for a declared
secret name, the engine keeps it only where the customer's words hold it) and masked in
everything the turn stores, whether or not a step ever collects it (issue #33)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from engine.agent_config import AgentConfig, TurnBudget
from engine.context import TurnContext
from engine.errors import LLMError
from engine.matching.collected_values import CollectedItem
from engine.matching.secret_reading import (
    SecretsSaid,
    build_secret_reading_prompt,
    secret_fields,
    typed_secrets,
)
from engine.privacy.secrets import MASK
from engine.sessions.session import Event, EventKind, EventSource, SessionState
from engine.stages.secret_masking import PROMPT_WITHHELD
from engine.toolkit import InProcessDispatcher, ToolRegistry, spec_of
from examples.banking import load as load_bank
from tests.engine.pipeline_kit import Harness, advance, make_agent, step_number, tool_harness
from tests.engine.test_journey_selection import T0
from tests.engine.test_secret_echoes import all_stored, later_compose
from tests.engine.test_secrets import LOGINS, PASSWORD, auth_journey, auth_llm, login
from tests.golden import assert_snapshot


def reader(prompt: str) -> dict[str, Any]:
    """A model reading the secret fields: "password is …" in the customer's latest words."""
    latest = prompt.split("Conversation (most recent last):\n", 1)[1].split("\n\nTask: ")[0]
    customer = [line for line in latest.splitlines() if line.startswith("Customer: ")]
    values = [
        {"name": "password", "value": m}
        for line in customer
        for m in re.findall(r"password is (\S+)", line)
    ]
    return {"values": values}


def stored_prompts(outs: list[Any]) -> list[str]:
    return [c.prompt for o in outs for c in o.trace.llm_calls]


async def test_a_password_typed_as_a_first_message_is_masked_though_no_step_asks_for_it() -> None:
    """The customer opens with their password and never logs in: the message is stored masked,
    its turn keeps no prompt, no later prompt the model is sent quotes it, and the session
    keeps its digest, so the customer typing it again later is masked there too."""
    llm = auth_llm().on(SecretsSaid, reader)
    h = tool_harness(llm, login, journeys=[auth_journey()], index=False)
    await h.start()

    first = await h.say(f"hello, my password is {PASSWORD}")
    calls_before = len(h.llm.calls)
    outs = [first, await h.say("what can you do?")]
    between = [c.prompt for c in h.llm.calls[calls_before:]]
    outs.append(await h.say(f"is {PASSWORD.lower()} ok?"))

    assert first.new_events[0].text == f"hello, my password is {MASK}"
    assert h.llm.calls[0].schema is SecretsSaid  # the first call of its round (the budget)
    assert set(stored_prompts([first])) == {PROMPT_WITHHELD}
    assert "a value typed for password is masked (a secret typed ahead)" in first.trace.notes
    assert first.state.secret_digests is not None
    assert outs[-1].new_events[0].text == f"is {MASK} ok?"  # recognised by its digest
    assert between and all(PASSWORD.casefold() not in p.casefold() for p in between)
    quoted = f"my password is {PASSWORD}".casefold()  # not even where it is typed again
    assert all(quoted not in c.prompt.casefold() for c in h.llm.calls[calls_before:])
    assert PASSWORD.casefold() not in (await all_stored(h)).casefold()


@pytest.mark.parametrize(
    ("reported", "why"),
    [
        ({"name": "password", "value": "welcome"}, "not in the customer's words"),
        ({"name": "password", "value": "monkey"}, "only inside a longer word"),
        ({"name": "password", "value": "monkeybusiness and"}, "completed by the model"),
        ({"name": "username", "value": "seldo"}, "no secret name"),
        ({"name": "password", "value": "ab"}, "too short to mask by value"),
    ],
)
def test_the_reading_keeps_only_a_secret_names_value_the_customer_typed(
    reported: dict[str, str], why: str
) -> None:
    said = ["hello! my password is monkeybusiness, I am seldo; ab"]
    answer = SecretsSaid(values=[CollectedItem(**reported)])

    assert typed_secrets(answer, {"password"}, said) == [], why


def test_a_secret_name_is_matched_in_any_case_and_the_value_as_typed() -> None:
    answer = SecretsSaid(values=[CollectedItem(name=" Password ", value=" Monkey42 ")])
    assert typed_secrets(answer, {"password"}, ["pw: Monkey42!"]) == [("password", "Monkey42")]


async def test_a_hostile_reading_masks_nothing_the_customer_did_not_type_as_it() -> None:
    """The reading claims the words the agent is about to say as passwords, and the customer's
    own words under a name that is no secret: nothing is masked, no digest is kept, the
    customer's message and the agent's "Welcome back" are stored and sent as written."""
    claims = [{"name": "password", "value": v} for v in ("welcome", "back", "seldo")]
    llm = auth_llm(compose=later_compose("Welcome back, seldo.")).on(
        SecretsSaid, {"values": [*claims, {"name": "username", "value": "hello"}]}
    )
    h = tool_harness(llm, login, journeys=[auth_journey()], index=False)
    await h.start()

    out = await h.say("hello, I am new here")

    assert out.new_events[0].text == "hello, I am new here"
    assert out.reply.text == "Welcome back, seldo."
    assert out.state.secret_digests is None
    assert PROMPT_WITHHELD not in stored_prompts([out])


async def test_a_username_the_reading_takes_for_a_password_is_not_masked() -> None:
    """At the username step the customer types their username; the reading (wrongly) calls it
    a password. The username step's answer wins: "seldo" is stored, shown and used as typed,
    and the login that follows runs with it — the customer is not locked out."""
    LOGINS.clear()
    auth = auth_journey()
    n = lambda node: step_number(auth[0], node)  # noqa: E731
    llm = auth_llm(
        advance(n("user")),
        advance(n("user"), n("pass"), collected={"username": "seldo"}),
        advance(n("pass"), n("login"), collected={"password": PASSWORD}),
    ).on(SecretsSaid, {"values": [{"name": "password", "value": "seldo"}]})
    h = tool_harness(llm, login, journeys=[auth])
    await h.start()
    await h.say("I need to log in")

    named = await h.say("seldo")
    await h.say(PASSWORD)

    assert named.new_events[0].text == "seldo"
    assert named.state.collected_values("auth") == {"username": "seldo"}
    assert "a value typed for password is a plain field's: not masked" in named.trace.notes
    assert named.state.secret_digests is None
    assert LOGINS == [("seldo", PASSWORD)]


async def test_a_password_a_model_also_reads_ahead_as_the_username_is_masked_there_too() -> None:
    """The customer asks to log in and gives their password with the request; node selection
    reads it, ahead, as the username. That is no answer to a step that asked for a username:
    the reading's secret wins, masked in the message and in the stored username alike."""
    auth = auth_journey()
    n = lambda node: step_number(auth[0], node)  # noqa: E731
    llm = auth_llm(advance(n("user"), collected={"username": PASSWORD})).on(SecretsSaid, reader)
    h = tool_harness(llm, login, journeys=[auth], index=False)
    await h.start()

    out = await h.say(f"I need to log in, my password is {PASSWORD}")

    assert out.new_events[0].text == f"I need to log in, my password is {MASK}"
    assert PASSWORD not in await all_stored(h)


async def test_a_message_long_enough_to_exhaust_the_budget_is_still_read_for_secrets() -> None:
    """The password comes inside a message far over the turn's prompt budget: matching is cut
    by the budget, the secret reading is not — it is the first call of its round and runs
    whatever its prompt costs."""
    config = AgentConfig(budget=TurnBudget(max_prompt_tokens=1_000))
    journey, condition = auth_journey()
    agent = make_agent(journeys=[(journey, condition)], tools=[spec_of(login)], config=config)
    llm = auth_llm().on(SecretsSaid, reader)
    h = Harness(agent, llm, tools=InProcessDispatcher(ToolRegistry([login])), index=False)
    await h.start()
    filler = "lorem ipsum " * 1_000

    out = await h.say(f"{filler} my password is {PASSWORD} {filler}")

    assert any(n.startswith("budget: skipped match_guidelines") for n in out.trace.notes)
    assert out.new_events[0].text == f"{filler} my password is {MASK} {filler}"
    assert PASSWORD not in await all_stored(h)


async def test_a_failed_secret_reading_keeps_no_prompt_of_the_turn() -> None:
    """The reading fails (its error quoting the model's answer): the turn goes on, says so in
    its trace without the error's text, and keeps none of its prompts — one may quote a secret
    nobody recognised."""
    llm = auth_llm().on(SecretsSaid, LLMError('the answer {"value": "s3cr3t"} was cut'))
    h = tool_harness(llm, login, journeys=[auth_journey()], index=False)
    await h.start()

    out = await h.say("my password is s3cr3t")

    assert out.reply is not None and out.reply.text
    assert "secrets typed ahead not read: LLMError" in out.trace.notes
    assert set(stored_prompts([out])) == {PROMPT_WITHHELD}
    assert "s3cr3t" not in out.trace.model_dump_json().replace(out.new_events[0].text or "", "")


async def test_an_agent_without_a_secret_makes_no_secret_reading() -> None:
    journey, condition = auth_journey()
    plain = journey.model_copy(
        update={
            "nodes": tuple(
                n.model_copy(
                    update={
                        "collects": tuple(
                            f.model_copy(update={"secret": False}) for f in n.collects
                        )
                    }
                )
                for n in journey.nodes
            )
        }
    )
    agent = make_agent(journeys=[(plain, condition)], tools=[spec_of(login)])
    h = Harness(agent, auth_llm(), tools=InProcessDispatcher(ToolRegistry([login])), index=False)
    await h.start()

    await h.say("my password is monkey")

    assert h.llm.calls_for(SecretsSaid) == []


def test_the_secret_reading_prompt() -> None:
    """The banking agent's secret (the password: a step asks for it, a tool takes it), the
    agent's last message and the customer's words of this turn — nothing earlier."""
    agent = load_bank()
    said = ["Hi", "Hi! What would you like to do?", "my password is monkey, what now?"]
    events = [
        Event(
            id=f"e{i}",
            offset=i,
            kind=EventKind.MESSAGE,
            source=EventSource.AGENT if i % 2 else EventSource.CUSTOMER,
            created_at=T0,
            text=text,
        )
        for i, text in enumerate(said)
    ]
    session = SessionState(id="s1", agent_id="bank", customer_id="c1", events=tuple(events[:2]))
    ctx = TurnContext(agent, session, events)

    prompt = build_secret_reading_prompt(ctx, secret_fields(agent, {"password"}))

    assert "Customer: Hi\n" not in prompt
    assert_snapshot("secret_reading_prompt", prompt)
