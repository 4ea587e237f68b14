"""Secret fields: a declared secret reaches the tool that needs it and nothing else — not the
stored session (events, collected values, pending confirmation), not the trace, not a prompt of a
later turn. Masking follows declarations, never names."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from engine.authoring import dump_agent, field_shorthand, load_agent, parse_field_shorthand
from engine.authoring.fields import collected_fields
from engine.compose import ComposedReply
from engine.errors import InvalidAgentDefinition
from engine.matching.guidelines import GuidelineMatchBatch
from engine.matching.journeys import JourneyNodeSelection
from engine.model import CollectedField, Guideline
from engine.privacy.secrets import MASK, TurnSecrets
from engine.testing import ScriptedLLM
from engine.toolkit import ToolResult, spec_of, tool
from engine.tools.calls import ToolCallPlan
from engine.tools.spec import ToolKind
from engine.validation.agent import validate_snapshot
from examples.banking import load as load_bank
from examples.banking.tools import authenticate
from tests.engine.pipeline_kit import (
    Harness,
    advance,
    chain_journey,
    compose_echo,
    make_agent,
    match_when,
    per_journey,
    step_number,
    tool_harness,
)

PASSWORD = "monkey-Secret-42"
LOGINS: list[tuple[str, str]] = []
PAYMENTS: list[tuple[str, str]] = []


# The tool does not declare its parameter secret: the journey's field does, and a name declared
# secret anywhere is secret for the whole agent (values flow between fields and parameters by name).
@tool(description="log the customer in")
def login(username: str, password: str) -> ToolResult:
    LOGINS.append((username, password))
    return ToolResult(data={"authenticated": password == PASSWORD})


@tool(description="log the customer in, loudly")
def chatty_login(username: str, password: str) -> ToolResult:
    # A careless tool: it returns the secret by name and quotes it in its error.
    return ToolResult(data={"password": password}, error=f"wrong password {password!r}")


@tool(description="pay a bill", consequential=True, confirm="always", secret=("pin",))
def pay(amount: float, pin: str) -> ToolResult:
    PAYMENTS.append((str(amount), pin))
    return ToolResult(data={"paid": True})


@tool(description="order a pizza")
def order_pizza(toppings: str, pin_code: str) -> ToolResult:
    return ToolResult(data={"ordered": True})


def auth_journey(*, wait_step: bool = False, tool_name: str = "login") -> Any:
    steps: list[Any] = [
        ("user", "Ask for the username", {"collects": (CollectedField(name="username"),)}),
        ("pass", "Ask for the password", {"collects": parse_password()}),
    ]
    if wait_step:
        steps.append(("ready", "Ask whether the customer is ready to log in"))
    steps.append(("login", f"tool:{tool_name}"))
    return chain_journey("auth", "Authenticate", "The customer needs to log in", steps)


def parse_password() -> tuple[CollectedField, ...]:
    return collected_fields({"password": "secret"})


def dumped(value: Any) -> str:
    if hasattr(value, "model_dump_json"):
        return str(value.model_dump_json())
    return json.dumps(value, default=str)


async def everything_stored(h: Harness, turn_ids: list[str]) -> str:
    """The stored session (events, collected values, confirmation) and every stored trace."""
    state = await h.sessions.load("s1")
    traces = [await h.sessions.trace("s1", t) for t in turn_ids]
    return dumped(state) + dumped(traces)


def auth_llm(*selections: Any, compose: Any = compose_echo) -> ScriptedLLM:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"log in": lambda m: "log in" in m}))
    llm.on(JourneyNodeSelection, per_journey({"Authenticate": list(selections)}))
    llm.on(ComposedReply, compose)
    return llm


# -- declaring secrets ------------------------------------------------------------------------


def test_the_secret_shorthand_and_its_mapping_form() -> None:
    assert parse_field_shorthand("password", "secret") == CollectedField(
        name="password", type="str", secret=True
    )
    assert not parse_field_shorthand("pin", "secret?").required
    pin = collected_fields({"pin": {"type": "int", "secret": True}})[0]
    assert (pin.type, pin.secret) == ("int", True)
    assert field_shorthand(parse_field_shorthand("password", "secret?")) == "secret?"
    assert field_shorthand(pin) is None  # written back as a mapping, secrecy kept


def test_a_tool_declaring_a_secret_it_does_not_have_is_refused() -> None:
    with pytest.raises(InvalidAgentDefinition, match="passwrod"):

        @tool(secret=("passwrod",))
        def typo(password: str) -> ToolResult:
            return ToolResult()


def test_masking_follows_declarations_not_names() -> None:
    secrets = TurnSecrets({"password"})
    assert secrets.mask_arguments(spec_of(order_pizza), {"toppings": "ham", "pin_code": "1"}) == {
        "toppings": "ham",
        "pin_code": "1",
    }
    assert secrets.mask_arguments(spec_of(pay), {"amount": 40, "pin": "4321"}) == {
        "amount": "40",
        "pin": MASK,
    }
    secrets.remember(PASSWORD)
    assert secrets.scrub_text(f"pw: {PASSWORD}!") == f"pw: {MASK}!"
    assert secrets.scrub_text(f"x{PASSWORD}y") == f"x{PASSWORD}y"  # inside a longer word: not it


# -- through the turn ---------------------------------------------------------------------------


async def test_a_secret_reaches_the_tool_and_nothing_stored_or_prompted_later_holds_it() -> None:
    LOGINS.clear()
    auth = auth_journey()
    n = lambda node: step_number(auth[0], node)  # noqa: E731
    llm = auth_llm(
        advance(n("user"), n("pass"), collected={"username": "seldo"}),
        advance(n("pass"), n("login"), collected={"password": PASSWORD}),
    )
    h = tool_harness(llm, login, journeys=[auth])
    await h.start()

    first = await h.say("I need to log in as seldo")
    calls_before = len(llm.calls)
    second = await h.say(PASSWORD)
    compose_prompt = llm.calls_for(ComposedReply)[-1].prompt
    calls_during = len(llm.calls)
    third = await h.say("thanks, what now?")

    assert LOGINS == [("seldo", PASSWORD)]  # the tool got the clear value, in that turn
    stored = await everything_stored(h, [o.trace.turn_id for o in (first, second, third)])
    assert PASSWORD not in stored
    assert second.state.events[second.state.events.index(second.new_events[0])].text == MASK
    (password,) = [c for c in second.state.collected if c.name == "password"]
    assert (password.value, password.secret) == (MASK, True)
    assert second.trace.collected["auth.password"] == MASK
    assert PASSWORD not in dumped(second.trace) and PASSWORD not in dumped(second.new_events)
    # The turn that collected it needed it to read the message; its reply prompt did not.
    assert any(PASSWORD in c.prompt for c in llm.calls[calls_before:calls_during])
    assert PASSWORD not in compose_prompt
    assert all(PASSWORD not in c.prompt for c in llm.calls[calls_during:])


async def test_a_model_echoing_the_secret_has_it_masked_in_the_reply() -> None:
    LOGINS.clear()
    auth = auth_journey()
    n = lambda node: step_number(auth[0], node)  # noqa: E731
    echo = {"message": f"Logged in with password {PASSWORD}!", "applied": []}
    collected = {"username": "seldo", "password": PASSWORD}
    llm = auth_llm(advance(n("user"), n("pass"), n("login"), collected=collected), compose=echo)
    h = tool_harness(llm, login, journeys=[auth])
    await h.start()

    out = await h.say(f"I need to log in: seldo / {PASSWORD}")

    assert LOGINS == [("seldo", PASSWORD)]
    assert out.reply is not None and out.reply.text == f"Logged in with password {MASK}!"
    assert PASSWORD not in await everything_stored(h, [out.trace.turn_id])


async def test_a_tool_returning_or_quoting_the_secret_has_it_masked_in_the_prompt_and_store() -> (
    None
):
    auth = auth_journey(tool_name="chatty_login")
    n = lambda node: step_number(auth[0], node)  # noqa: E731
    collected = {"username": "seldo", "password": PASSWORD}
    llm = auth_llm(advance(n("user"), n("pass"), n("login"), collected=collected))
    h = tool_harness(llm, chatty_login, journeys=[auth])
    await h.start()

    out = await h.say(f"I need to log in: seldo / {PASSWORD}")

    assert out.trace.tool_calls[-1].status == "error"
    assert PASSWORD not in llm.calls_for(ComposedReply)[-1].prompt
    assert PASSWORD not in await everything_stored(h, [out.trace.turn_id])


async def test_a_secret_needed_in_a_later_turn_is_asked_again_never_reused_masked() -> None:
    LOGINS.clear()
    auth = auth_journey(wait_step=True)
    n = lambda node: step_number(auth[0], node)  # noqa: E731
    llm = auth_llm(
        advance(n("user"), n("pass"), collected={"username": "seldo"}),
        advance(n("pass"), n("ready"), collected={"password": PASSWORD}),
        advance(n("ready"), n("login")),
        advance(n("login")),
    )
    ask_again = {"calls": []}  # the password is not known any more: nothing to call yet
    given = {"calls": [{"tool": "login", "arguments": [{"name": "password", "value": PASSWORD}]}]}
    llm.on(ToolCallPlan, ask_again, given)
    h = tool_harness(llm, login, journeys=[auth])
    await h.start()
    outputs = [await h.say("I need to log in as seldo"), await h.say(PASSWORD)]

    waiting = await h.say("ready")

    assert LOGINS == []  # never called with the mask, nor with a value kept from an earlier turn
    assert [(c.tool, c.status) for c in waiting.trace.tool_calls] == [
        ("login", "missing_arguments")
    ]
    assert PASSWORD not in llm.calls_for(ToolCallPlan)[0].prompt

    again = await h.say(PASSWORD)  # the customer types it again: used in this turn, then masked

    assert LOGINS == [("seldo", PASSWORD)]
    turns = [o.trace.turn_id for o in (*outputs, waiting, again)]
    assert PASSWORD not in await everything_stored(h, turns)


async def password_typed_before_it_is_asked(tool_name: str) -> tuple[Harness, Any]:
    """The customer types their password with the request, before the journey asks for it
    (their next message, the username, lets the journey collect it and reach its last step, a
    `tool_name` step); the harness and that first turn."""
    auth = auth_journey(tool_name=tool_name)
    n = lambda node: step_number(auth[0], node)  # noqa: E731
    llm = auth_llm(
        advance(n("user")),
        advance(
            n("user"),
            n("pass"),
            n("login"),
            collected={"username": "seldo", "password": PASSWORD},
        ),
    )
    h = tool_harness(llm, login, journeys=[auth])
    await h.start()
    return h, await h.say(f"I need to log in, my password is {PASSWORD}")


async def test_a_secret_typed_before_the_turn_that_collects_it_is_masked_where_it_was_typed() -> (
    None
):
    LOGINS.clear()
    h, first = await password_typed_before_it_is_asked("login")
    assert PASSWORD in first.new_events[0].text  # not known to be a secret yet
    second = await h.say("my username is seldo")

    assert LOGINS == [("seldo", PASSWORD)]
    assert [e.offset for e in second.masked_events] == [0]
    stored = await everything_stored(h, [first.trace.turn_id, second.trace.turn_id])
    assert PASSWORD not in stored
    assert f"my password is {MASK}" in stored


async def test_a_confirmation_never_stores_the_secret_and_the_yes_waits_for_it_typed_again() -> (
    None
):
    PAYMENTS.clear()
    bill = Guideline(id="bill", condition="wants to pay a bill", action="Pay it", tools=("pay",))
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"pay a bill": True}))
    llm.on(
        ToolCallPlan,
        {
            "calls": [
                {
                    "tool": "pay",
                    "arguments": [
                        {"name": "amount", "value": "40"},
                        {"name": "pin", "value": "4321"},
                    ],
                }
            ]
        },
    )
    llm.on(ComposedReply, compose_echo)
    h = tool_harness(llm, pay, guidelines=[bill], index=False)
    await h.start()

    asked = await h.say("pay a bill of 40 with pin 4321")

    pending = asked.state.pending_confirmation
    assert pending is not None and pending.arguments == {"amount": 40.0, "pin": MASK}
    assert "4321" not in await everything_stored(h, [asked.trace.turn_id])
    assert asked.reply is not None and "4321" not in (asked.reply.text or "")

    yes = await h.say("yes")

    assert PAYMENTS == []  # never paid with the mask, nor with a value the store did not keep
    assert yes.state.pending_confirmation is not None and yes.state.pending_confirmation.agreed
    # the pin is asked for again: the masked message no longer grounds it
    assert {(c.tool, c.status) for c in yes.trace.tool_calls} == {("pay", "ungrounded")}

    elsewhere = await h.say("what was my balance again?")  # the agreement lasts one turn only
    assert elsewhere.state.pending_confirmation is None and PAYMENTS == []

    await h.say("pay a bill of 40 with pin 4321")
    await h.say("yes")
    typed = await h.say("4321")  # the agreed call runs with the pin typed again, not asked twice

    assert PAYMENTS == [("40.0", "4321")]
    assert typed.state.pending_confirmation is None
    turns = [o.trace.turn_id for o in (asked, yes, elsewhere, typed)]
    assert "4321" not in await everything_stored(h, turns)


async def test_undeclared_names_that_look_secret_are_not_masked() -> None:
    pizza = Guideline(
        id="pizza", condition="wants a pizza", action="Order it", tools=("order_pizza",)
    )
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"pizza": True}))
    llm.on(ComposedReply, compose_echo)
    llm.on(
        ToolCallPlan,
        {
            "calls": [
                {
                    "tool": "order_pizza",
                    "arguments": [
                        {"name": "toppings", "value": "ham"},
                        {"name": "pin_code", "value": "10115"},
                    ],
                }
            ]
        },
    )
    h = tool_harness(llm, order_pizza, guidelines=[pizza], index=False)
    await h.start()

    out = await h.say("a pizza with ham to pin code 10115")

    assert out.trace.tool_calls[0].arguments == {"toppings": "ham", "pin_code": "10115"}


def test_a_field_secret_in_one_step_and_plain_in_another_is_refused() -> None:
    journey = chain_journey(
        "auth",
        "Authenticate",
        "The customer needs to log in",
        [
            ("ask", "Ask for the password", {"collects": parse_password()}),
            ("again", "Ask again", {"collects": (CollectedField(name="password"),)}),
        ],
    )
    with pytest.raises(InvalidAgentDefinition, match="secrecy"):
        validate_snapshot(make_agent(journeys=[journey]))


def test_the_banking_yaml_declares_the_password_secret_and_it_round_trips() -> None:
    agent = load_bank()
    (field,) = {f for j in agent.journeys for n in j.nodes for f in n.collects if f.secret}
    assert field.name == "password"
    assert [p.name for p in agent.tool("authenticate").parameters if p.secret] == ["password"]
    assert [p.name for p in spec_of(authenticate).parameters if p.secret] == ["password"]
    document = yaml.safe_load(yaml.safe_dump(dump_agent(agent), allow_unicode=True))
    states = {s["id"]: s for j in document["journeys"] for s in j["states"]}
    assert states["ask_password"]["collects"] == {"password": "secret"}
    assert load_agent(document) == agent


async def test_a_model_misreading_the_answer_to_a_secret_question_cannot_leave_it_in_clear() -> (
    None
):
    # The step asked for the password; the model "collects" a value that is not in the answer
    # (or nothing at all). The engine cannot know where the secret is: it masks the answer whole.
    LOGINS.clear()
    auth = auth_journey()
    n = lambda node: step_number(auth[0], node)  # noqa: E731
    llm = auth_llm(
        advance(n("user"), n("pass"), collected={"username": "seldo"}),
        advance(n("pass"), n("login"), collected={"password": "hunter2"}),
    )
    # "hunter2" is dropped where it is reported; the tool step, short of a password, asks the
    # model once more, which proposes it again
    plan = [{"name": "username", "value": "seldo"}, {"name": "password", "value": "hunter2"}]
    llm.on(ToolCallPlan, {"calls": [{"tool": "login", "arguments": plan}]})
    h = tool_harness(llm, login, journeys=[auth])
    await h.start()
    first = await h.say("I need to log in as seldo")

    out = await h.say(f"it is {PASSWORD} I think")

    assert LOGINS == []  # "hunter2" is not what the customer said: never used
    assert out.new_events[0].text == MASK
    assert PASSWORD not in await everything_stored(h, [first.trace.turn_id, out.trace.turn_id])


@tool(description="sign the customer in", secret=("password",))
def sign_in(username: str, password: str) -> ToolResult:
    LOGINS.append((username, password))
    return ToolResult(data={"authenticated": True})


async def test_a_typed_secret_is_masked_where_a_refused_call_quotes_its_source() -> None:
    """Adversarial: the model invents the username but takes the password the customer typed.
    The call is refused as ungrounded, and its trace says where each argument came from — the
    password's source (the customer's message) must be masked like the password itself."""
    LOGINS.clear()
    rule = Guideline(id="in", condition="wants to log in", action="Log in", tools=("sign_in",))
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"log in": True}))
    plan = [{"name": "username", "value": "admin"}, {"name": "password", "value": PASSWORD}]
    llm.on(ToolCallPlan, {"calls": [{"tool": "sign_in", "arguments": plan}]})
    llm.on(ComposedReply, compose_echo)
    h = tool_harness(llm, sign_in, guidelines=[rule], index=False)
    await h.start()

    out = await h.say(f"please log me in, my password is {PASSWORD}")

    assert LOGINS == []
    (call,) = out.trace.tool_calls
    assert call.status == "ungrounded" and any(s.startswith("password") for s in call.sources)
    assert PASSWORD not in await everything_stored(h, [out.trace.turn_id])


async def test_a_secret_typed_early_is_masked_in_earlier_traces_when_the_turn_hands_off() -> None:
    """The turn that learns a typed text was a secret masks it where it was typed, in the
    earlier turn's stored trace too — also when that turn ends by handing off to a person
    (an ending that composes nothing) instead of answering."""
    LOGINS.clear()
    h, first = await password_typed_before_it_is_asked("hand_off_to_person")
    assert PASSWORD in first.new_events[0].text  # not known to be a secret yet
    assert PASSWORD in dumped(await h.sessions.trace("s1", first.trace.turn_id))
    second = await h.say("my username is seldo")

    assert second.state.mode.value == "human"  # the turn ended by handing off
    assert [e.offset for e in second.masked_events] == [0]
    stored = await everything_stored(h, [first.trace.turn_id, second.trace.turn_id])
    assert PASSWORD not in stored
    assert f"my password is {MASK}" in stored


# -- a secret that arrives as a form result ------------------------------------------------------

CARD_PIN = "8642"
PIN_SET: list[str] = []


@tool(description="open the secure PIN form", kind=ToolKind.INTERRUPTER)
def pin_form() -> ToolResult:
    return ToolResult(
        view={"type": "link", "url": "https://example.test/pin"},
        control={"prompt": "Ask the customer to choose their new PIN in the secure form"},
    )


@tool(description="set the card's new PIN", secret=("pin",))
def set_pin(pin: str) -> ToolResult:
    PIN_SET.append(pin)
    return ToolResult(data={"pin_set": True})


async def test_a_secret_delivered_as_a_form_result_reaches_the_tool_and_is_stored_masked() -> None:
    """A form (interrupter) result is not typed in a message, but a field of it declared secret
    is a secret all the same: the tool gets it, the stored session and trace never hold it."""
    PIN_SET.clear()
    journey, condition = chain_journey(
        "new_pin",
        "New PIN",
        "The customer wants a new card PIN",
        [("form", "tool:pin_form"), ("set", "tool:set_pin"), ("done", "Confirm the new PIN")],
    )
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"new card PIN": True}))
    form, done = step_number(journey, "form"), step_number(journey, "done")
    llm.on(JourneyNodeSelection, per_journey({"New PIN": [advance(form), advance(done)]}))
    llm.on(ComposedReply, compose_echo)
    h = tool_harness(llm, pin_form, set_pin, journeys=[(journey, condition)], index=False)
    await h.start()
    asked = await h.say("I want a new PIN for my card")
    call_id = asked.state.pending_interrupt.call_id

    out = await h.say("", metadata={"resume": {"pin": CARD_PIN}, "call_id": call_id})

    assert PIN_SET == [CARD_PIN]
    assert out.state.journey_paths["new_pin"][-1] == "done"
    stored = await everything_stored(h, [asked.trace.turn_id, out.trace.turn_id])
    assert CARD_PIN not in stored
    assert CARD_PIN not in dumped(out.state) + dumped(out.trace) + dumped(out.new_events)
    later = await h.say("thanks, what else can I do?")
    assert all(CARD_PIN not in call.prompt for call in llm.calls[-3:])
    assert CARD_PIN not in dumped(later.state)
