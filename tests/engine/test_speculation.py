"""The reply drafted beside round 1 (`engine.stages.speculation`, `TurnLLM.draft`): used only for
the very same reply prompt, outside the turn's budget, never at the cost of a decision; and the
calls of speculative tools run ahead (`engine.stages.tools_ahead`), reused only for the very same
call, never a write.
tests/hostile/test_speculation.py runs whole conversations against hostile predictors."""

from __future__ import annotations

import asyncio
import re
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from engine.agent_config import AgentConfig, Speculation, TurnBudget
from engine.authoring import load_agent
from engine.compose import ComposedReply
from engine.errors import InvalidAgentDefinition, LLMTransientError
from engine.matching.guidelines import GuidelineMatchBatch
from engine.model import Guideline
from engine.ports import Generation, ToolContext
from engine.sessions.session import EventKind
from engine.testing import ScriptedLLM
from engine.toolkit import InProcessDispatcher, ToolRegistry, ToolResult, spec_of, tool
from engine.tools.calls import ToolCallPlan
from engine.tools.spec import ToolKind, ToolParameter, ToolSpec
from engine.validation.agent import problems
from tests.engine.pipeline_kit import Harness, compose_echo, make_agent, match_when

T = TypeVar("T", bound=BaseModel)

GREET = Guideline(id="greet", condition="The customer greets", action="Greet them back")
PRICES = Guideline(id="prices", condition="The customer asks about prices", action="Quote prices")


def _agent(**config: object) -> object:
    settings = AgentConfig(speculation=Speculation(mode="on"), **config)  # type: ignore[arg-type]
    return make_agent(guidelines=[GREET, PRICES], config=settings)


def _model(**rules: object) -> ScriptedLLM:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when(rules or {"greets": lambda m: "hi" in m}))  # type: ignore[arg-type]
    llm.on(ComposedReply, compose_echo)
    return llm


async def _say(text: str, predictor: ScriptedLLM | None, model: ScriptedLLM, **config: object):  # type: ignore[no-untyped-def]
    h = Harness(_agent(**config), model, predictor=predictor)  # type: ignore[arg-type]
    await h.start()
    return await h.say(text)


async def test_a_right_prediction_replies_in_one_round_with_the_same_reply() -> None:
    off = await _say("hi there", None, _model())
    model = _model()
    on = await _say("hi there", _model(), model)
    assert on.reply.text == off.reply.text == "Greet them back"
    assert on.trace.speculation == "used" and on.trace.llm_rounds == 1
    assert off.trace.llm_rounds == 2
    assert len(model.calls_for(ComposedReply)) == 1  # the draft was the reply: no second call
    (compose,) = [c for c in on.trace.llm_calls if c.purpose == "compose"]
    assert compose.draft == "used" and compose.round == 1


async def test_a_wrong_prediction_is_discarded_and_the_reply_composed_as_without_it() -> None:
    off = await _say("hi there", None, _model())
    wrong = _model(greets=False, prices=True)  # predicts the other guideline
    model = _model()
    on = await _say("hi there", wrong, model)
    assert on.reply.text == off.reply.text == "Greet them back"
    assert on.trace.speculation == "discarded" and on.trace.llm_rounds == 2
    drafts = [c for c in on.trace.llm_calls if c.draft]
    assert [c.draft for c in drafts] == ["discarded"]
    assert "Quote prices" in drafts[0].prompt and "Greet them back" not in drafts[0].prompt
    assert len(model.calls_for(ComposedReply)) == 2  # the draft, then the reply


async def test_a_failed_draft_is_not_used_and_the_reply_is_asked_for_again() -> None:
    model = ScriptedLLM().on(GuidelineMatchBatch, match_when({"greets": True}))
    model.on(ComposedReply, LLMTransientError("down for a moment"), compose_echo)
    on = await _say("hi there", _model(), model)
    assert on.reply.text == "Greet them back"
    failed = [c for c in on.trace.llm_calls if c.draft]
    assert len(failed) == 1 and failed[0].error and "down for a moment" in failed[0].error
    assert on.trace.speculation == "discarded"


async def test_a_draft_takes_no_call_the_budget_keeps_for_the_turn() -> None:
    """Two calls a turn: matching and the reply. The draft is a third, outside the budget: the
    verified turn still gets both of its calls (with speculation off it would be the same)."""
    budget = TurnBudget(max_llm_calls=2)
    wrong = _model(greets=False, prices=True)
    off = await _say("hi there", None, _model(), budget=budget)
    on = await _say("hi there", wrong, _model(), budget=budget)
    assert on.reply.text == off.reply.text == "Greet them back"
    assert not [n for n in on.trace.notes if n.startswith("budget")]


@pytest.mark.parametrize(("limit", "expected"), [(5, "skipped"), (50_000, "used")])
async def test_only_replies_under_the_token_limit_are_drafted(limit: int, expected: str) -> None:
    h = Harness(
        make_agent(
            guidelines=[GREET, PRICES],
            config=AgentConfig(speculation=Speculation(mode="on", max_prompt_tokens=limit)),
        ),
        _model(),
        predictor=_model(),
    )
    await h.start()
    out = await h.say("hi there")
    assert out.trace.speculation.startswith(expected)
    assert out.reply.text == "Greet them back"


async def test_speculation_is_off_unless_the_agent_turns_it_on() -> None:
    h = Harness(make_agent(guidelines=[GREET]), _model(), predictor=_model())
    await h.start()
    out = await h.say("hi there")
    assert out.trace.speculation == "" and not [c for c in out.trace.llm_calls if c.draft]


def test_the_agent_setting_reads_on_off_and_a_limit() -> None:
    assert AgentConfig.model_validate({"speculation": True}).speculation.enabled  # YAML `on`
    assert not AgentConfig.model_validate({"speculation": False}).speculation.enabled
    assert AgentConfig.model_validate({"speculation": "on"}).speculation.enabled
    limited = AgentConfig.model_validate({"speculation": {"mode": "on", "max_prompt_tokens": 900}})
    assert limited.speculation.max_prompt_tokens == 900
    with pytest.raises(ValueError, match="speculation"):
        AgentConfig.model_validate({"speculation": "sometimes"})


# -- Lookups run ahead (`engine.stages.tools_ahead`) ---------------------------------------------

ORDERS = Guideline(
    id="orders",
    condition="The customer asks about an order",
    action="Tell them where their order is",
    tools=("lookup_order", "cancel_order"),
)
SAID = "Where is ORD-1? (ORD-2 arrived, ORD-3 too)"


class Shop:
    """The tools' backend: every call it really ran, per tool; the lookup may be slow, and its
    first calls may fail."""

    def __init__(self, *, failing: int = 0, delay: float = 0.0, stuck: str = "") -> None:
        self.ran: list[tuple[str, str]] = []
        self.failing = failing
        self.delay = delay
        self.stuck = stuck  # an order whose lookup never answers

    def tools(self) -> list[Any]:
        @tool(description="Look up where an order is", speculative=True)
        async def lookup_order(order_number: str) -> ToolResult:
            self.ran.append(("lookup_order", order_number))
            await asyncio.sleep(self.delay)
            if order_number == self.stuck:
                await asyncio.Event().wait()
            if self.failing:
                self.failing -= 1
                return ToolResult(error="the order service did not answer")
            return ToolResult(data={"order": order_number, "status": f"{order_number} is in Lyon"})

        @tool(description="Cancel an order")  # a write: never speculative
        async def cancel_order(order_number: str) -> ToolResult:
            self.ran.append(("cancel_order", order_number))
            return ToolResult(data={"cancelled": order_number})

        return [lookup_order, cancel_order]

    def count(self, name: str, order: str | None = None) -> int:
        return sum(t == name and order in (None, o) for t, o in self.ran)


def _plan(*calls: tuple[str, str]) -> dict[str, Any]:
    return {
        "calls": [
            {"tool": name, "arguments": [{"name": "order_number", "value": order}]}
            for name, order in calls
        ]
    }


def _compose_with_results(prompt: str) -> dict[str, Any]:
    """A reply that says what the tool results in its prompt say (a reused outcome of another
    call would show in it)."""
    found = sorted(set(re.findall(r"ORD-\d is in \w+", prompt)))
    return {"message": "; ".join(found) or "Nothing looked up", "applied": []}


class _Model(ScriptedLLM):
    """The real model: its round-1 answers (matching) come only after the event loop ran
    `ticks` times, as a real model's take ~400 ms while the predictor answers at once — so the
    copy gets ahead of the verified turn as it does in production (no clock involved)."""

    ticks = 300

    async def generate(self, prompt: str, schema: type[T], *, model: str) -> Generation[T]:
        if schema is GuidelineMatchBatch:
            for _ in range(self.ticks):
                await asyncio.sleep(0)
        return await super().generate(prompt, schema, model=model)


def _shop_model(*calls: tuple[str, str], slow: bool = False) -> ScriptedLLM:
    """A model planning `calls`: the real model is `slow` (`_Model`), a predictor is not."""
    llm = _Model() if slow else ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"order": True}))
    llm.otherwise(ToolCallPlan, _plan(*calls))
    llm.otherwise(ComposedReply, _compose_with_results)
    return llm


async def _ask(  # type: ignore[no-untyped-def]
    shop: Shop, predictor: ScriptedLLM | None, *, speculative: bool = True, slow: bool = True
):
    functions = shop.tools()
    specs = [spec_of(f) for f in functions]
    if not speculative:
        specs = [s.model_copy(update={"speculative": False}) for s in specs]
    config = AgentConfig(speculation=Speculation(mode="on" if predictor else "off"))
    agent = make_agent(guidelines=[ORDERS], tools=specs, config=config)
    dispatcher = InProcessDispatcher(ToolRegistry(functions))
    h = Harness(
        agent,
        _shop_model(("lookup_order", "ORD-1"), slow=slow),
        tools=dispatcher,
        predictor=predictor,
    )
    await h.start()
    return await h.say(SAID)


def _same_turn(on: Any, off: Any) -> None:
    """Everything the turn decided, said and stored is what it was without speculation."""
    assert on.reply.model_dump() == off.reply.model_dump()
    assert [e.model_dump() for e in on.new_events] == [e.model_dump() for e in off.new_events]
    versions = {"version", "agent_version"}  # (speculation's setting is part of the agent's)
    assert on.state.model_dump(exclude=versions) == off.state.model_dump(exclude=versions)
    timed = {"duration_ms"}  # (the backend's own time)
    assert [c.model_dump(exclude=timed) for c in on.trace.tool_calls] == [
        c.model_dump(exclude=timed) for c in off.trace.tool_calls
    ]
    assert on.trace.matched_guideline_ids == off.trace.matched_guideline_ids


async def test_a_predicted_lookup_runs_ahead_once_and_the_verified_call_takes_its_outcome() -> None:
    off_shop, on_shop = Shop(), Shop()
    off = await _ask(off_shop, None)
    on = await _ask(on_shop, _shop_model(("lookup_order", "ORD-1")))
    _same_turn(on, off)
    assert on.reply.text == "ORD-1 is in Lyon" and on.trace.speculation == "used"
    assert on_shop.ran == off_shop.ran == [("lookup_order", "ORD-1")]  # the backend ran it once
    (ahead,) = on.trace.tools_ahead
    assert (ahead.tool, ahead.arguments, ahead.status) == (
        "lookup_order",
        {"order_number": "ORD-1"},
        "used",
    )
    # the turn's own ids in its events and trace: never the run ahead's
    (event,) = [e for e in on.new_events if e.kind is EventKind.TOOL]
    assert event.data["call_id"] == on.trace.tool_calls[0].call_id == f"{on.trace.turn_id}:0"
    assert ":ahead:" in ahead.call_id and ":ahead:" not in repr(on.state.model_dump())


async def test_a_lookup_predicted_with_other_arguments_is_discarded_and_the_call_runs() -> None:
    off_shop, on_shop = Shop(), Shop()
    off = await _ask(off_shop, None)
    on = await _ask(on_shop, _shop_model(("lookup_order", "ORD-2")))
    _same_turn(on, off)
    assert on.reply.text == "ORD-1 is in Lyon" and on.trace.speculation == "discarded"
    assert on_shop.ran == [("lookup_order", "ORD-2"), ("lookup_order", "ORD-1")]
    assert [(c.arguments, c.status) for c in on.trace.tools_ahead] == [
        ({"order_number": "ORD-2"}, "discarded")
    ]


async def test_extra_predicted_lookups_run_ahead_and_only_the_same_call_is_reused() -> None:
    off_shop, on_shop = Shop(), Shop()
    off = await _ask(off_shop, None)
    extra = _shop_model(
        ("lookup_order", "ORD-2"), ("lookup_order", "ORD-1"), ("lookup_order", "ORD-3")
    )
    on = await _ask(on_shop, extra)
    _same_turn(on, off)
    assert on_shop.count("lookup_order", "ORD-1") == 1  # reused, not run again
    assert sorted(o for _, o in on_shop.ran) == ["ORD-1", "ORD-2", "ORD-3"]
    assert sorted((c.arguments["order_number"], c.status) for c in on.trace.tools_ahead) == [
        ("ORD-1", "used"), ("ORD-2", "discarded"), ("ORD-3", "discarded")
    ]  # fmt: skip


async def test_more_predicted_calls_than_the_limit_run_nothing_ahead() -> None:
    off_shop, on_shop = Shop(), Shop()
    off = await _ask(off_shop, None)
    many = [("lookup_order", f"ORD-{n}") for n in (1, 2, 3, 1, 2)]
    on = await _ask(on_shop, _shop_model(*many))
    _same_turn(on, off)
    assert on_shop.ran == off_shop.ran and not on.trace.tools_ahead
    assert on.trace.speculation.startswith("skipped: more than")


@pytest.mark.parametrize(
    "predicted",
    [
        [("cancel_order", "ORD-1")],  # a write
        [("lookup_order", "ORD-1"), ("cancel_order", "ORD-1")],  # a lookup beside a write
    ],
)
async def test_a_predicted_write_never_runs_ahead_and_nothing_beside_it_does(
    predicted: list[tuple[str, str]],
) -> None:
    off_shop, on_shop = Shop(), Shop()
    off = await _ask(off_shop, None)
    on = await _ask(on_shop, _shop_model(*predicted))
    _same_turn(on, off)
    assert on_shop.count("cancel_order") == 0
    assert on_shop.ran == off_shop.ran == [("lookup_order", "ORD-1")]
    assert on.trace.speculation == "skipped: a call to cancel_order (not speculative) is predicted"
    assert not on.trace.tools_ahead


async def test_a_tool_not_declared_speculative_never_runs_ahead() -> None:
    on_shop = Shop()
    on = await _ask(on_shop, _shop_model(("lookup_order", "ORD-1")), speculative=False)
    assert on_shop.ran == [("lookup_order", "ORD-1")] and not on.trace.tools_ahead
    assert on.trace.speculation == "skipped: a tool call is predicted"


async def test_a_failed_ahead_run_is_not_reused_the_verified_turn_runs_the_call() -> None:
    off_shop, on_shop = Shop(), Shop(failing=1)  # the run ahead fails, the next call answers
    off = await _ask(off_shop, None)
    on = await _ask(on_shop, _shop_model(("lookup_order", "ORD-1")))
    _same_turn(on, off)
    assert on.reply.text == "ORD-1 is in Lyon"
    assert on_shop.ran == [("lookup_order", "ORD-1")] * 2
    (ahead,) = on.trace.tools_ahead
    assert ahead.status == "failed" and "did not answer" in ahead.detail


async def test_a_lookup_still_running_ahead_is_awaited_not_run_twice() -> None:
    """The verified turn reaches the call while the run ahead is out (a slow backend, instant
    models): it waits for that run instead of starting another."""
    off_shop, on_shop = Shop(), Shop(delay=0.05)
    off = await _ask(off_shop, None)
    on = await _ask(on_shop, _shop_model(("lookup_order", "ORD-1")))
    _same_turn(on, off)
    assert on_shop.ran == [("lookup_order", "ORD-1")]
    assert [c.status for c in on.trace.tools_ahead] == ["used"]


async def test_a_lookup_run_ahead_that_the_turn_does_not_need_never_holds_the_reply() -> None:
    """The predicted lookup (another order) never answers: the turn, which needs ORD-1, replies
    without waiting for it, and the run ahead is stopped."""
    off_shop, on_shop = Shop(), Shop(stuck="ORD-2")
    off = await _ask(off_shop, None)
    on = await asyncio.wait_for(_ask(on_shop, _shop_model(("lookup_order", "ORD-2"))), 60)
    _same_turn(on, off)
    assert on.trace.speculation.startswith("skipped: its calls run ahead were still out")
    assert [(c.arguments, c.status, c.detail) for c in on.trace.tools_ahead] == [
        ({"order_number": "ORD-2"}, "discarded", "stopped: the turn ended first")
    ]


async def test_a_prediction_behind_the_turn_runs_nothing_the_turn_has_run() -> None:
    """A slow predictor: the verified turn dispatches first, and from then on nothing runs
    ahead (the copy would run the very call the turn just ran)."""
    on_shop = Shop()
    slow_predictor = _shop_model(("lookup_order", "ORD-1"), slow=True)
    on = await _ask(on_shop, slow_predictor, slow=False)
    assert on_shop.ran == [("lookup_order", "ORD-1")] and not on.trace.tools_ahead
    assert on.trace.speculation == "skipped: the turn reached its tools first"


async def test_an_outcome_run_ahead_in_another_context_is_not_reused() -> None:
    """The copy identified the customer (a speculative tool that sets the principal) before
    its lookup; the verified turn looks the same order up for nobody: the same tool and
    arguments in another context are another call, run by the turn itself."""
    ran: list[tuple[str, Any]] = []

    @tool(description="Identify the customer", speculative=True)
    async def identify(context: ToolContext) -> ToolResult:
        ran.append(("identify", None))
        return ToolResult(data={"ok": True}, control={"principal": {"id": "u1"}})

    @tool(description="Look up where an order is", speculative=True)
    async def lookup_order(context: ToolContext, order_number: str) -> ToolResult:
        who = (context.principal or {}).get("id")
        ran.append(("lookup_order", who))
        return ToolResult(data={"status": f"{order_number} is in {'Paris' if who else 'Lyon'}"})

    guideline = ORDERS.model_copy(update={"tools": ("identify", "lookup_order")})
    functions = [identify, lookup_order]
    agent = make_agent(
        guidelines=[guideline],
        tools=[spec_of(f) for f in functions],
        config=AgentConfig(speculation=Speculation(mode="on")),
    )
    predictor = _shop_model()
    predictor.on(ToolCallPlan, {"calls": [{"tool": "identify"}]}, _plan(("lookup_order", "ORD-1")))
    dispatcher = InProcessDispatcher(ToolRegistry(functions))
    model = _shop_model(("lookup_order", "ORD-1"), slow=True)
    h = Harness(agent, model, tools=dispatcher, predictor=predictor)
    await h.start()
    on = await h.say(SAID)
    assert on.reply.text == "ORD-1 is in Lyon"
    assert ran == [("identify", None), ("lookup_order", "u1"), ("lookup_order", None)]
    # (the copy's identify, planned twice, ran once; the turn's own identify took it)
    assert sorted((c.tool, c.status) for c in on.trace.tools_ahead) == [
        ("identify", "used"), ("lookup_order", "discarded")
    ]  # fmt: skip


def test_validation_refuses_a_speculative_write_selector_confirmation_or_secret() -> None:
    def lookup(**changes: Any) -> ToolSpec:
        spec = ToolSpec(name="t", parameters=(ToolParameter(name="p"),), speculative=True)
        return spec.model_copy(update=changes)

    cases = {
        "consequential": lookup(consequential=True),
        "selector": lookup(kind=ToolKind.SELECTOR),
        "confirm: always": lookup(confirm="always"),
        "parameter 'p' is secret": lookup(parameters=(ToolParameter(name="p", secret=True),)),
    }
    for expected, spec in cases.items():
        found = problems(make_agent(tools=[spec]))
        assert any("speculative" in p and expected in p for p in found), (expected, found)
    assert not [p for p in problems(make_agent(tools=[lookup()])) if "speculative" in p]


def test_an_agent_document_declares_a_speculative_tool_and_refuses_a_speculative_write() -> None:
    lookup = {"name": "lookup_order", "parameters": [{"name": "order_number"}]}
    doc: dict[str, Any] = {"agent": {"id": "shop", "name": "Shop"}, "tools": [lookup]}
    assert not load_agent(doc).tool("lookup_order").speculative  # the default
    lookup["speculative"] = True
    assert load_agent(doc).tool("lookup_order").speculative
    with pytest.raises(InvalidAgentDefinition) as raised:
        load_agent({**doc, "tools": [{**lookup, "consequential": True}]})
    assert any("speculative" in p and "consequential" in p for p in raised.value.problems)
    # against its @tool (declared speculative there): a declaration that says otherwise
    registry = [spec_of(f) for f in Shop().tools()]
    with pytest.raises(InvalidAgentDefinition) as raised:
        load_agent({**doc, "tools": [{**lookup, "speculative": False}]}, tools=registry)
    assert "speculative is False here but True in @tool" in raised.value.problems[0]


def test_declaring_a_tool_speculative_is_a_new_agent_version() -> None:
    """`speculative` is hashed when set: a republished agent that runs a tool ahead is another
    version (left at its default it is not hashed, so earlier versions keep theirs:
    tests/engine/test_versioning.py)."""
    plain = ToolSpec(name="lookup_order", parameters=(ToolParameter(name="order_number"),))
    lookup = make_agent(tools=[plain])
    ahead = make_agent(tools=[plain.model_copy(update={"speculative": True})])
    assert lookup.version != ahead.version
