"""A journey is never walked past a step whose required fields were not collected in this run
(issue #31): a schema-valid model that walks on without the customer's answer — jumping from the
destination straight to the transfer, claiming a fork's condition holds, starting a second run
on the first run's values — is repaired to stop at the unanswered step, and the repair is
traced. Optional fields do not hold the walk; values given ahead of their step satisfy it
(docs/semantics.md, "Journey walks")."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.compose import ComposedReply
from engine.matching.collected_values import CollectedItem
from engine.matching.guidelines import GuidelineMatchBatch
from engine.matching.journey_answer import JourneyNodeSelection, verify_advancement
from engine.matching.journey_graph import build_node_views, current_run
from engine.matching.journeys import select_journey_step
from engine.memory.stores import InMemoryAgentStore, InMemorySessionStore
from engine.model import CollectedField, Journey, NodeKind
from engine.ports import Generation
from engine.recall.vectors import agent_index_texts, build_index
from engine.sessions.session import CollectedValue, InboundMessage, SessionState
from engine.testing import ScriptedLLM
from engine.toolkit import InProcessDispatcher
from engine.toolkit import tool as as_tool
from engine.tools.calls import ToolCallPlan
from engine.turn import EngineDeps, TurnEngine
from examples.banking import bank, load
from examples.banking.tools import registry
from infra.embeddings import HashingEmbedder
from infra.offline import OfflineLLM
from tests.engine.pipeline_kit import (
    advance,
    chain_journey,
    compose_echo,
    match_when,
    per_journey,
    step_number,
    tool_harness,
)
from tests.engine.test_journey_graph import (
    _anchors,
    _walk_problem,
    assert_obeys_graph,
    chat,
    entry,
    journeys_and_answers,
    make_journey,
    tool,
    walked_from,
)
from tests.engine.test_journey_selection import context, step_answer, transfer_journey, turn_llm

JOURNEY = transfer_journey()
N = {n.id: step_number(JOURNEY, n.id) for n in JOURNEY.nodes}


def _answer(*nodes: str, collected: dict[str, str] | None = None, **kw: Any) -> ScriptedLLM:
    steps = [N[n] for n in nodes]
    return ScriptedLLM().on(
        JourneyNodeSelection, step_answer(*steps, collected=collected or {}, **kw)
    )


async def _select(scripted: ScriptedLLM, ctx: Any, previous: list[str | None], **kw: Any) -> Any:
    return await select_journey_step(
        turn_llm(scripted), ctx, JOURNEY, previous, executed_tools=set(), **kw
    )


def _in_run(**values: Any) -> Any:
    """A context whose session holds `values` collected earlier in the live run."""
    return context("hmm", collected=values)


# -- the walk stops at the unanswered step ---------------------------------------------------------


async def test_a_walk_past_a_step_whose_required_value_was_not_given_stops_at_that_step() -> None:
    # The customer named the account; the model walks on past "how much" with no amount.
    scripted = _answer("from_account", "amount", "check", collected={"account": "savings"})

    result = await _select(scripted, context("from savings"), ["from_account"])

    assert result.step.node_id == "amount"
    assert result.step.path == ("from_account", "amount")
    assert any("amount" in r and "not collected" in r for r in result.step.repairs)


async def test_the_current_step_is_not_left_without_its_required_value() -> None:
    # "hello" answers nothing: the model claims the step is done and walks on.
    scripted = _answer("from_account", "amount")

    result = await _select(scripted, context("hello"), ["from_account"])

    assert result.step.node_id == "from_account"
    assert result.step.outcome == "stay"
    assert any("account" in r and "not collected" in r for r in result.step.repairs)


async def test_a_model_claiming_a_forks_condition_never_passes_the_unanswered_step() -> None:
    # After the balance check the model claims "the balance covers the amount" and walks through
    # the confirmation to the transfer itself, though the customer confirmed nothing.
    scripted = _answer("check", "covered", "confirm", "send")

    result = await select_journey_step(
        turn_llm(scripted),
        _in_run(account="savings", amount=Decimal("300")),
        JOURNEY,
        ["from_account", "amount", "check"],
        executed_tools={"get_balance"},
    )

    assert result.step.node_id == "confirm"
    assert result.step.path[-2:] == ("covered", "confirm")
    assert any("confirmed" in r and "not collected" in r for r in result.step.repairs)


async def test_the_journey_never_ends_after_a_step_whose_required_value_was_not_given() -> None:
    # "confirm → END: the customer declined" — but nobody declined: no yes/no was collected.
    scripted = _answer("confirm", next_step="NONE")

    result = await select_journey_step(
        turn_llm(scripted),
        _in_run(account="savings", amount=Decimal("300")),
        JOURNEY,
        ["from_account", "amount", "check", "covered", "confirm"],
        executed_tools=set(),
    )

    assert result.step.outcome == "stay" and result.step.node_id == "confirm"


async def test_a_second_run_never_passes_a_step_on_the_first_runs_value() -> None:
    # The first transfer ended; the session still holds its amount. A new run must ask again.
    scripted = _answer("from_account", "amount", "check", collected={"account": "savings"})
    previous: list[str | None] = ["from_account", "amount", "check", "covered", "confirm", None]

    result = await _select(scripted, context("from savings", collected={"amount": "300"}), previous)

    assert result.step.node_id == "amount"


# -- what does satisfy a step ------------------------------------------------------------------------


async def test_a_value_collected_earlier_in_the_run_lets_the_walk_pass_its_step() -> None:
    # Back to the account after the amount was given: the amount step has its value.
    scripted = _answer("from_account", "amount", "check", back=N["from_account"],
                       collected={"account": "checking"})  # fmt: skip

    result = await _select(scripted, _in_run(account="savings", amount=Decimal("300")),
                           ["from_account", "amount"])  # fmt: skip

    assert result.step.node_id == "check"
    assert not any("not collected" in r for r in result.step.repairs)


async def test_a_value_given_ahead_in_an_earlier_turn_satisfies_its_step() -> None:
    ahead = CollectedValue(journey_id="transfer", node_id="amount", name="amount",
                           value=Decimal("250"), turn_id="t0", ahead=True)  # fmt: skip
    ctx = context("from savings")
    ctx = ctx.__class__(
        ctx.agent, ctx.session.model_copy(update={"collected": (ahead,)}), list(ctx.history)
    )
    scripted = _answer("from_account", "amount", "check", collected={"account": "savings"})

    result = await _select(scripted, ctx, ["from_account"])

    assert result.step.node_id == "check"


async def test_an_optional_field_does_not_hold_the_walk() -> None:
    journey = make_journey(
        entry(),
        chat("name", "Ask for the name", collects=[CollectedField(name="name")]),
        chat("note", "Ask for a note", collects=[CollectedField(name="note", required=False)]),
        tool("save", "save"),
        edges=["root -> name", "name -> note", "note -> save", "save -> END"],
        jid="transfer",
    )
    number = {n: step_number(journey, n) for n in ("name", "note", "save")}
    scripted = ScriptedLLM().on(
        JourneyNodeSelection,
        step_answer(number["name"], number["note"], number["save"], collected={"name": "Ada"}),
    )

    result = await select_journey_step(
        turn_llm(scripted), context("I'm Ada"), journey, ["name"], executed_tools=set()
    )

    assert result.step.node_id == "save"


async def test_going_back_to_an_earlier_step_needs_no_answer_to_the_step_it_leaves() -> None:
    # "Wait, I want to change the amount" at the confirmation: its change branch goes back to a
    # step this run entered, without a yes or no.
    journey = make_journey(
        entry(),
        chat("amount", "Ask how much", collects=[CollectedField(name="amount", type="decimal")]),
        chat("confirm", "Ask to confirm", collects=[CollectedField(name="ok", type="bool")]),
        tool("send", "send"),
        edges=["root -> amount", "amount -> confirm", "confirm -> send: the customer confirmed",
               "confirm -> amount: the customer wants to change the amount", "send -> END"],
        jid="transfer",
    )  # fmt: skip
    number = {n: step_number(journey, n) for n in ("amount", "confirm", "send")}
    back = ScriptedLLM().on(JourneyNodeSelection, step_answer(number["confirm"], number["amount"]))
    on = ScriptedLLM().on(JourneyNodeSelection, step_answer(number["confirm"], number["send"]))
    ctx = context("wait, I want to change the amount", collected={"amount": Decimal("300")})

    went_back = await select_journey_step(
        turn_llm(back), ctx, journey, ["amount", "confirm"], executed_tools=set()
    )
    went_on = await select_journey_step(
        turn_llm(on), ctx, journey, ["amount", "confirm"], executed_tools=set()
    )

    assert went_back.step.node_id == "amount" and went_back.step.repairs == ()
    assert went_on.step.node_id == "confirm"  # but never on to the transfer without a yes


# -- through the engine: the banking concierge and a hostile jump ----------------------------------


class JumpingLLM:
    """The offline model, except that the transfer journey's node selection jumps to the
    transfer tool step when the customer gives the destination — with no amount collected."""

    def __init__(self) -> None:
        self.inner = OfflineLLM()
        self.journey = load().journey("transfer")
        self.views = build_node_views(self.journey)
        self.jumped = 0

    async def generate(self, prompt: str, schema: Any, *, model: str) -> Generation[Any]:
        honest = await self.inner.generate(prompt, schema, model=model)
        if (
            schema is JourneyNodeSelection
            and "Journey: Money transfer" in prompt
            and f"Current step: {self.views['ask_destination'].label} " in prompt
        ):
            views = self.views
            walk = ["ask_destination", "ask_amount", "check", "enough", "transfer"]
            self.jumped += 1
            answer = JourneyNodeSelection(
                rationale="the customer clearly wants the transfer done",
                step_advancement=[str(views[n].index) for n in walk],
                next_step=str(views["transfer"].index),
                collected=[CollectedItem(name="to_account_id", value="1234324")],
            )
            return Generation(answer, honest.usage, honest.model, honest.latency_ms)
        return honest


async def test_a_model_jumping_from_the_destination_to_the_transfer_stops_at_the_amount() -> None:
    bank.reset_bank()
    agent = load()
    agents, sessions = InMemoryAgentStore(), InMemorySessionStore()
    await agents.publish(agent)
    embedder = HashingEmbedder()
    index = await build_index(embedder, agent_index_texts(agent))

    async def index_for(_agent: Any) -> Any:
        return index

    llm = JumpingLLM()
    engine = TurnEngine(
        agents, sessions, EngineDeps(llm=llm, embedder=embedder,
                                     tools=InProcessDispatcher(registry)),
        index_for=index_for,
    )  # fmt: skip
    await sessions.create(SessionState(id="s", agent_id=agent.id, customer_id="c"))
    outputs = []
    for i, text in enumerate(
        ["Transfer money", "seldo", "monkey", "Checking", "To account ID 1234324", "500"]
    ):
        outputs.append(await engine.handle("s", [InboundMessage(event_id=f"m{i}", text=text)]))

    jumped = outputs[4]
    assert llm.jumped >= 1
    assert jumped.state.journey_paths["transfer"][-1] == "ask_amount"
    assert "how much" in jumped.reply.text.lower()
    transitions = [t for t in jumped.trace.journeys if t.journey_id == "transfer"]
    assert any("amount" in r and "not collected" in r for t in transitions for r in t.repairs)
    assert not [c for c in jumped.trace.tool_calls if c.tool in ("check_funds", "transfer_money")]
    # The amount, once given, transfers exactly once with the customer's values.
    assert bank.BANK.transfers == [{"from": "1234567890", "to": "1234324", "amount": "500.00"}]
    assert "transfer" in outputs[5].state.completed_journeys


# -- the same through scripted turns: a linear transfer ---------------------------------------------

SENT: list[dict[str, Any]] = []


@as_tool(consequential=True)
def send_money(to_account_id: str, amount: Decimal) -> dict[str, Any]:
    """Send money to an account."""
    SENT.append({"to": to_account_id, "amount": amount})
    return {"status": "sent"}


TRANSFER = chain_journey(
    "transfer", "Money transfer", "The customer wants to transfer money",
    [
        ("ask_destination", "Ask for the account ID to transfer to",
         {"collects": (CollectedField(name="to_account_id"),)}),
        ("ask_amount", "Ask how much to transfer",
         {"collects": (CollectedField(name="amount", type="decimal", gt=0),)}),
        ("send", "tool:send_money", {"action": "Say the transfer is done"}),
    ],
)  # fmt: skip


async def test_a_scripted_jump_to_the_transfer_never_reaches_the_tool_and_asks_the_amount() -> None:
    SENT.clear()
    journey = TRANSFER[0]
    walk = [step_number(journey, n) for n in ("ask_destination", "ask_amount", "send")]
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"transfer money": True}))
    llm.on(
        JourneyNodeSelection,
        per_journey({"Money transfer": [advance(*walk, collected={"to_account_id": "7770001"})]}),
    )
    llm.on(ToolCallPlan, {"calls": [], "rationale": "nothing due"})
    llm.on(ComposedReply, compose_echo)
    h = tool_harness(llm, send_money, journeys=[TRANSFER])
    await h.start()

    out = await h.say("I want to transfer money to 7770001")

    assert SENT == []
    assert out.state.journey_paths["transfer"][-1] == "ask_amount"
    assert "Ask how much to transfer" in out.reply.text
    assert not out.trace.tool_calls


# -- a property: whatever the answer, no chat step is left without its required values --------------


@st.composite
def _graphs_with_fields(draw: Any) -> tuple[Journey, list[str | None], Any, set[str], set[str]]:
    journey, previous, selection, executed = draw(journeys_and_answers())
    nodes = []
    for n in journey.nodes:
        if n.kind is NodeKind.CHAT and n.action is not None:
            required = draw(st.booleans()) or draw(st.booleans())
            n = n.model_copy(
                update={"collects": (CollectedField(name=f"f_{n.id}", required=required),)}
            )
        nodes.append(n)
    journey = journey.model_copy(update={"nodes": tuple(nodes)})
    names = [f"f_{n.id}" for n in journey.nodes]
    known = draw(st.sets(st.sampled_from(names)))
    reported = draw(st.sets(st.sampled_from(names)))
    selection = selection.model_copy(
        update={"collected": [CollectedItem(name=name, value="x") for name in sorted(reported)]}
    )
    return journey, previous, selection, executed, known


def _unanswered_step_left(
    views: dict[str, Any], chain: list[str], run: set[str], held: set[str], finished: bool
) -> str | None:
    """The first step the chain leaves, for a step not entered before or for the end, without
    a value for one of its required fields."""
    entered = set(run)
    ends = [*chain[1:], None] if finished else chain[1:]
    for here, onto in zip(chain, ends, strict=False):
        entered.add(here)
        goes_back = onto is not None and onto in entered
        missing = [f.name for f in views[here].collects if f.required and f.name not in held]
        if views[here].kind is NodeKind.CHAT and missing and not goes_back:
            return f"left {here} for {onto} without {missing}"
    return None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_graphs_with_fields())
def test_any_answer_leaves_only_steps_whose_required_values_were_collected(
    case: tuple[Journey, list[str | None], JourneyNodeSelection, set[str], set[str]],
) -> None:
    """Whatever the model answers, the walk obeys the graph and leaves a chat step for a step
    the run has not entered (or for the end) only with its required values: held before or
    reported valid now. Going back to an entered step needs none."""
    journey, previous, selection, executed, known = case
    views = build_node_views(journey)
    step = verify_advancement(journey, views, previous, selection, executed, collected=known)

    assert_obeys_graph(journey, views, previous, step, executed)
    if step.outcome in ("exit", "stay"):
        return
    held = known | {c.name for c in selection.collected}
    finished = step.outcome == "completed"
    previous = walked_from(views, previous, step)
    segment = [str(n) for n in step.path[len(previous) :] if n is not None]
    run = set(current_run(previous))
    legal = [
        chain
        for chain in _anchors(journey, views, previous, segment, step.outcome)
        if _walk_problem(views, chain, executed, finished) is None
    ]
    problems = [_unanswered_step_left(views, chain, run, held, finished) for chain in legal]
    assert None in problems, "; ".join(str(p) for p in problems)
