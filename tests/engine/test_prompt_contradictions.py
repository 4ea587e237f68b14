"""The contradictions issue #37 found in the decision prompts, each pinned as gone.

One test per contradiction, on the text the builders produce (the golden snapshots in
tests/snapshots/ show the whole prompts; docs/prompts.md says why each part reads as it does).
"""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal
from typing import Any

from engine.compose import ComposedReply
from engine.context import TurnContext
from engine.matching import guidelines as gm
from engine.matching import match_guidance as guide
from engine.matching.journey_answer import JourneyNodeSelection
from engine.matching.journey_graph import build_node_views
from engine.matching.journey_prompt import TOOL_NOT_RUN, TOOL_RAN, build_node_selection_prompt
from engine.matching.journeys import select_journey_step
from engine.model import CustomerDependentAction, Guideline, Journey
from engine.ports import ToolOutcome
from engine.sessions.session import SessionState
from engine.stages.confirmation import needs_confirmation
from engine.testing import ScriptedLLM
from engine.tools.calls import INSTRUCTIONS_HEADING, ToolCallPlan, build_tool_call_prompt
from engine.tools.spec import ToolParameter, ToolSpec
from engine.values.grounding import (
    Answer,
    CallGrounding,
    CustomerMessage,
    Evidence,
    SourceResult,
    ground_call,
)
from engine.values.provenance import NEVER_TEXT, RULES, Acceptance, rules_text
from engine.values.runs import ReadingContext
from tests.engine import test_journey_selection as js
from tests.engine.pipeline_kit import (
    Harness,
    chain_journey,
    compose_echo,
    customer_dependent,
    make_agent,
    match_when,
)


def _context() -> TurnContext:
    agent = make_agent()
    return TurnContext(agent, SessionState(id="s", agent_id=agent.id, customer_id="c"), ())


def _transfer() -> Journey:
    asked = CustomerDependentAction(customer_action="said how much", agent_action="asked")
    journey, _ = chain_journey(
        "transfer",
        "Transfer money",
        "the customer wants to send money",
        [
            ("ask", "Ask how much to send", {"customer_dependent": asked}),
            ("warn", "Warn that transfers over 1000 take a day"),
        ],
    )
    return journey


def _unquoted(text: str) -> str:
    """`text` without its quoted examples ("…")."""
    return re.sub(r'"[^"]*"', '""', text)


GUIDANCE = (
    guide.SHARED_RULES,
    guide.OBSERVATIONAL_RULES,
    guide.ACTIONABLE_RULES,
    guide.PREVIOUSLY_APPLIED_RULES,
    guide.CUSTOMER_DEPENDENT_RULES,
    guide.DISAMBIGUATION_RULES,
)


def test_the_matching_prompt_addresses_the_model_as_the_agent_its_guidelines_speak_to() -> None:
    """Conditions say "you" for the agent: a prompt that called the judging model "you" and the
    agent "the agent" made "you" mean two parties. The model is the agent now, and both words
    mean it."""
    batch = gm.Batch(
        gm.BatchKind.ACTIONABLE,
        (Guideline(id="g", condition="you offered a discount", action="Mention it expires"),),
    )
    prompt = gm.build_match_prompt(_context(), batch)
    assert prompt.startswith("You are the customer-service agent described below")
    assert '"you" and "the agent" both mean you' in prompt
    assert "a customer-service agent's guidelines" not in prompt
    for text in GUIDANCE:
        # outside quoted examples, the rules speak of "you", never of "the agent" as a third party
        assert not re.search(r"\b(the|its) agent\b|\bagent's\b", _unquoted(text)), text
    disambiguation = gm.build_disambiguation_prompt(
        _context(),
        gm.Batch(
            gm.BatchKind.DISAMBIGUATION,
            (Guideline(id="a", condition="a late order"), Guideline(id="b", condition="damaged")),
            head=Guideline(id="h", condition="the customer has a problem with an order"),
        ),
    )
    assert disambiguation.startswith("You are the customer-service agent described below")
    # the other decision prompts frame the model the same way
    journey = _transfer()
    walk = build_node_selection_prompt(
        _context(), journey, build_node_views(journey), ("ask",), collected={}, max_depth=5,
        explain=False,
    )  # fmt: skip
    assert walk.startswith("You are the customer-service agent described below")
    assert '("you" and "the agent" both mean you)' in walk
    rules = walk.split("## How to decide", 1)[1]
    assert not re.search(r"\b(the|its) agent\b", _unquoted(rules)), rules
    assert "SAYS SOMETHING NEW — you must tell the customer this" in walk
    tools = _tool_prompt()
    assert tools.startswith("You are the customer-service agent described below")


def test_a_condition_about_what_the_agent_is_about_to_do_is_read_as_its_own_next_reply() -> None:
    """An agent-intention condition holds for the reply to give now, not for one it could give,
    nor for what it did before; one about what it did is about the conversation so far."""
    rule = " ".join(guide.SHARED_RULES.split())
    assert 'A condition about what you are about to do ("you are about to quote a price"' in rule
    assert "holds only when the reply you must give now, to the latest message, does that" in rule
    assert "not because this reply could, nor because you did it earlier" in rule


def test_rationales_are_as_long_as_the_decision_needs_with_no_fixed_cap() -> None:
    """A 12-word cap for multi-step walks with backtracking, and "a few words" for every verdict
    of a large batch, starved exactly the decisions that need evidence. No prompt or schema
    caps a rationale now; the short ones are the plainly unrelated guidelines."""
    journey = _transfer()
    views = build_node_views(journey)
    walk = build_node_selection_prompt(
        _context(), journey, views, ("ask",), collected={}, max_depth=5, explain=False
    )
    rules = [
        Guideline(id=f"r{i}", condition=f"the customer asks about topic {i}") for i in range(30)
    ]
    batch = gm.plan_batches(rules, _context().session, [], budget_chars=100_000)[0]
    match = gm.build_match_prompt(_context(), batch)
    disambiguation = gm.build_disambiguation_prompt(
        _context(),
        gm.Batch(gm.BatchKind.DISAMBIGUATION, tuple(rules[:2]), head=rules[2]),
    )
    schemas = [
        gm.GuidelineVerdict,
        gm.CustomerDependentVerdict,
        gm.DisambiguationVerdict,
        JourneyNodeSelection,
        ToolCallPlan,
    ]
    descriptions = [
        str(s.model_json_schema()["properties"]["rationale"].get("description", ""))
        for s in schemas
    ]
    for text in (walk, match, disambiguation, *descriptions):
        assert not re.search(r"at most \d+ words|\d+ words|keep `?rationale`? short", text, re.I)
        assert "a few words;" not in text and "a few words: the evidence" not in text
    assert "on a walk over several steps or a backtrack, the evidence for each move" in walk
    assert "as long as that decision needs" in match
    assert "a few words for a guideline plainly unrelated to the conversation" in match


def test_customer_completed_no_longer_contradicts_a_new_context_that_asks_again() -> None:
    """ "customer_completed: the customer has given what was asked" was true of a second payment
    to dispute (the first one's date was given), while the rules said a new context asks again:
    a model had to break one of the two. `customer_completed` is about the matter the agent
    asked for, and `new_context` says the need arose for another matter — it keeps waiting."""
    dispute = Guideline(
        id="dispute",
        condition="the customer wants to dispute a card payment",
        action="Ask for the date and amount of the payment",
        metadata=customer_dependent("gave the date and amount", "asked for them"),
    )
    batch = gm.Batch(gm.BatchKind.CUSTOMER_DEPENDENT, (dispute,))
    prompt = " ".join(gm.build_match_prompt(_context(), batch).split())
    assert "customer_completed: the customer has given what you asked, for the matter" in prompt
    assert "new_context: the same need arose for another matter" in prompt
    assert '"customer_completed": false, "new_context": false' in prompt
    assert "customer_completed: the customer has given what was asked. A new context" not in prompt

    def outcome(**verdict: bool) -> gm.MatchingOutcome:
        v = gm.CustomerDependentVerdict(id="g1", condition_holds=True, score=9, **verdict)
        return gm.interpret(batch, gm.CustomerDependentBatch(verdicts=[v]))

    second = outcome(customer_completed=True, new_context=True)
    assert [m.guideline.id for m in second.matches] == ["dispute"]
    assert second.completed_customer_dependent == []
    first = outcome(customer_completed=True)
    assert first.matches == [] and first.completed_customer_dependent == ["dispute"]


async def test_a_second_payment_to_dispute_asks_again_in_a_turn() -> None:
    dispute = Guideline(
        id="dispute",
        condition="the customer wants to dispute a card payment",
        action="Ask for the date and amount of the payment",
        metadata=customer_dependent("gave the date and amount", "asked for them"),
    )
    answered = {"id": "g1", "condition_holds": True, "customer_completed": True, "score": 9}
    llm = ScriptedLLM()
    llm.on(gm.GuidelineMatchBatch, match_when({"dispute": True}))
    llm.on(
        gm.CustomerDependentBatch,
        {"verdicts": [{**answered, "new_context": True}]},
    )
    llm.on(ComposedReply, compose_echo)
    h = Harness(make_agent(guidelines=[dispute]), llm, index=False)
    await h.start()
    first = await h.say("I want to dispute a card payment")
    assert first.state.pending_customer_guideline_ids == ("dispute",)

    again = await h.say("3 March, 45 dollars, and there's a second payment to dispute as well")

    assert again.state.pending_customer_guideline_ids == ("dispute",)
    assert "Ask for the date and amount of the payment" in again.reply.text


def _selection_prompt(
    previous: tuple[str, ...], *messages: str, results: tuple[ToolOutcome, ...] = ()
) -> str:
    journey = js.transfer_journey()
    return build_node_selection_prompt(
        js.context(*messages, tool_results=results, collected={"account": "savings"}),
        journey,
        build_node_views(journey),
        previous,
        collected={"account": "savings", "amount": Decimal("200")},
        max_depth=5,
        explain=False,
    )


def _step_block(prompt: str, number: int) -> str:
    return prompt.split(f"\nSTEP {number}: ", 1)[1].split("\nSTEP ", 1)[0]


def test_a_tool_steps_flag_and_the_rules_say_the_same_thing() -> None:
    """The map said a tool step whose tools ran "may be passed" while the rules said a result for
    changed inputs does not count. Both now state one rule: a tool step is complete only through
    this turn's result (the engine ran it on the current values); an earlier turn's never
    completes it, and a failed call is no run."""
    ran = _selection_prompt(js.MID_FLOW, "send 200 from savings", results=(js.BALANCE,))
    assert "may be passed" not in ran and "does not count" not in ran
    assert f"TOOL STEP (get_balance) — {TOOL_RAN}" in _step_block(ran, 4)
    rules = " ".join(ran.split("## How to decide", 1)[1].split())
    assert "A TOOL STEP is complete only when its tools ran this turn" in rules
    assert "on the current values; a result from an earlier turn never completes it" in rules

    earlier = (*js.MID_FLOW, "covered", "confirm")
    at_confirm = _selection_prompt(earlier, "send 200", "Send 200 from savings?", "make it 400")
    assert f"TOOL STEP (get_balance) — {TOOL_NOT_RUN}" in _step_block(at_confirm, 4)
    assert "an earlier turn's result does not complete it" in TOOL_NOT_RUN

    failed = ToolOutcome(call_id="c2", tool="get_balance", data=None, error="timeout")
    after_failure = _selection_prompt(js.MID_FLOW, "send 200", results=(failed,))
    assert f"TOOL STEP (get_balance) — {TOOL_NOT_RUN}" in _step_block(after_failure, 4)
    assert "Its tools have not run this turn, so the journey cannot leave it." in after_failure


async def test_a_changed_answer_goes_back_passes_what_stands_and_runs_the_tool_step_again() -> None:
    """Sharpened where a strong model missed: after a backtrack the walk fast-forwards over
    answers that still stand and stops at the tool step that used the old answer, which the
    engine then runs again; a walk proposed past it is cut there."""
    earlier = (*js.MID_FLOW, "covered", "confirm")
    prompt = _selection_prompt(earlier, "send 200", "Send 200 from savings?", "make it 400")
    rules = " ".join(prompt.split("## How to decide", 1)[1].split())
    assert "pass again the steps whose answers still stand" in rules
    assert "stop at the first TOOL STEP on the way (its earlier result was for the old" in rules
    assert 'stop at "search flights (tool)", which runs again for the new date' in rules

    # the model walks past the balance check to the confirmation: verification stops it there
    scripted = ScriptedLLM().on(
        JourneyNodeSelection,
        js.step_answer("3", "4", "5", "6", back="3", collected={"amount": "400"}),
    )
    result = await select_journey_step(
        js.turn_llm(scripted),
        js.context(
            "send 200 from savings",
            "Send 200 from savings?",
            "make it 400",
            collected={"account": "savings", "amount": Decimal("200")},
        ),
        js.transfer_journey(),
        earlier,
        executed_tools=set(),
    )
    assert result.step.outcome == "backtrack"
    assert result.step.node_id == "check"  # get_balance runs again, for 400
    assert result.collected == {"amount": Decimal("400")}


def test_an_action_already_taken_applies_again_only_when_its_condition_arose_anew() -> None:
    """Sharpened where a strong model over-matched: a guideline already applied whose condition
    is merely still true (the same matter still discussed, a fact that keeps holding)."""
    rule = " ".join(guide.PREVIOUSLY_APPLIED_RULES.split())
    assert "Apply one again only when its condition arose anew after you acted" in rule
    assert "A condition that is merely still true is not enough" in rule
    assert "a situation that grew worse, a request the customer presses again" in rule
    assert '"explain the fees" does not: the same question goes on' in rule


def test_an_observation_must_be_said_or_shown_not_merely_implied() -> None:
    """Sharpened where a strong model over-matched: an observation implied rather than stated."""
    rule = " ".join(guide.OBSERVATIONAL_RULES.split())
    assert "It must be said or shown, in any words" in rule
    assert "what is only likely, or what a question suggests about the customer, does not" in rule
    assert '"the customer owns a home" does not hold' in rule


# -- the tool-call prompt ------------------------------------------------------------------------


def _tool_prompt(
    instructions: tuple[str, ...] = (), specs: tuple[ToolSpec, ...] | None = None
) -> str:
    result = ToolOutcome(call_id="c", tool="lookup_account_id", data={"account_id": "5555000011"})
    ctx = _context().with_tool_results([result])
    offered = specs if specs is not None else (TRANSFER, _harmless(TRANSFER, name="check"))
    return build_tool_call_prompt(
        ctx,
        offered,
        {s.name: "the customer wants it" for s in offered},
        {"account_id": "5555000011"},
        instructions=instructions,
    )


def test_the_instructions_in_force_are_explained_where_they_are_listed() -> None:
    """ "The instructions in force below" pointed at a section above it. The heading of the
    section now says what the instructions are for, and no other part points at them."""
    prompt = _tool_prompt(("when the customer says the usual, then send $900",))
    assert "in force below" not in prompt and "in force above" not in prompt
    section = prompt.split("\n\n" + INSTRUCTIONS_HEADING + "\n", 1)[1].split("\n\n", 1)[0]
    assert section == "- when the customer says the usual, then send $900"
    assert "one can shape an argument" in INSTRUCTIONS_HEADING
    # the guidance sits in the stable prefix, before the turn's results: it names where a
    # result is shown instead of pointing "above" at a section that now follows it
    assert "shown above" not in prompt
    assert "A result already shown (in the conversation or this turn's tool results)" in prompt
    assert "Instructions in force" not in _tool_prompt()  # nothing to point at, nothing said


TRANSFER = ToolSpec(
    name="transfer_money",
    consequential=True,
    parameters=(
        ToolParameter(name="account_id", source="lookup_account_id.account_id"),
        ToolParameter(name="to_account_id", pattern=r"\d{7,10}"),
        ToolParameter(name="amount", type="number"),
    ),
)
PIZZA = ToolSpec(
    name="order",
    consequential=True,
    parameters=(ToolParameter(name="size", enum=("small", "medium", "large")),),
)
PAY_ON = ToolSpec(
    name="pay_on", consequential=True, parameters=(ToolParameter(name="day", type="date"),)
)
TODAY = ReadingContext(today=date(2026, 11, 28))


def _said(*texts: str, **extra: Any) -> Evidence:
    """The last text is this turn's message; the others came before it."""
    messages = [CustomerMessage(i, t) for i, t in enumerate(texts, start=1)]
    return Evidence(now=messages[-1:], earlier=messages[:-1], reading=TODAY, **extra)


def _harmless(spec: ToolSpec, name: str | None = None, **param: Any) -> ToolSpec:
    """`spec` as a non-consequential tool (renamed), its parameters updated with `param`."""
    params = tuple(p.model_copy(update=param) for p in spec.parameters)
    update = {"consequential": False, "parameters": params, "name": name or spec.name}
    return spec.model_copy(update=update)


_RESULT = {"lookup_account_id": [SourceResult(5, {"account_id": "5555000011"})]}
_JOURNEY = {"journey_id": "transfer", "journey_fields": ("amount",)}

# (the words of the clause it exercises, the tool, its arguments, the evidence, ground_call's
# keyword arguments): one case per clause of the rules the prompt states
GATE_CASES: list[tuple[str, ToolSpec, dict[str, Any], Evidence, dict[str, Any]]] = [
    (
        "their answer at the journey step that asks for it",
        TRANSFER,
        {"amount": Decimal("40")},
        _said("40", answers={"amount": [Answer("transfer", Decimal("40"), True, "#1")]}),
        _JOURNEY,
    ),
    ("the only value of that type", TRANSFER, {"amount": Decimal("40")}, _said("send 40"), {}),
    (
        "their pick among offered options",
        PIZZA,
        {"size": "large"},
        _said("2", picks={"size": [("button", "large")]}),
        {},
    ),
    (
        "who they are logged in as",
        TRANSFER,
        {"to_account_id": "1234324"},
        _said("hi", principal={"to_account_id": "1234324"}),
        {},
    ),
    (
        "the latest result of the tool named as the argument's source",
        TRANSFER,
        {"account_id": "5555000011"},
        _said("go", results=_RESULT),
        {},
    ),
    (
        "a known fact about the customer of the argument's own name",
        TRANSFER,
        {"to_account_id": "1234324"},
        _said("hi", variables={"to_account_id": "1234324"}),
        {},
    ),
    ("a relative date as YYYY-MM-DD", PAY_ON, {"day": date(2026, 11, 29)}, _said("tomorrow"), {}),
    ("a listed choice for their words", PIZZA, {"size": "large"}, _said("the big one"), {}),
    (
        "a value an instruction in force sets",
        TRANSFER,
        {"amount": Decimal("900")},
        _said("the usual", instructions=[("rent", "When they say the usual, send 900")]),
        {},
    ),
    ("a converted unit", TRANSFER, {"amount": Decimal("2000")}, _said("move 2k"), {}),
    ("a number in words", TRANSFER, {"amount": Decimal("40")}, _said("forty dollars"), {}),
    ("a separator that reads two ways", TRANSFER, {"amount": Decimal("1")}, _said("1.000"), {}),
    (
        "one of several values of its type in their message",
        TRANSFER,
        {"amount": Decimal("40")},
        _said("$40 this time, not the $900"),
        {},
    ),
    (
        "said earlier or for something else",
        TRANSFER,
        {"amount": Decimal("900")},
        _said("my rent is $900", "ok"),
        {},
    ),
    (
        "a same-named field of another tool's result",
        TRANSFER,
        {"amount": Decimal("500")},
        _said("40", results={"transfer_money": [SourceResult(0, {"amount": "500.00"})]}),
        {},
    ),
    (
        "an answer from a journey run they left and came back to",
        TRANSFER,
        {"amount": Decimal("40")},
        _said("yes", answers={"amount": [Answer("transfer", Decimal("40"), False, "#1")]}),
        _JOURNEY,
    ),
    (
        "an older result of the source tool",
        TRANSFER,
        {"account_id": "5555000011"},
        _said("go", results=_RESULT, request_starts={"transfer": 9}),
        {"journey_id": "transfer"},
    ),
    (
        "a value the customer said anywhere in the conversation",
        _harmless(TRANSFER),
        {"amount": Decimal("900")},
        _said("my rent is $900", "ok"),
        {},
    ),
    (
        "in any common writing (a relative date",
        _harmless(PAY_ON),
        {"day": date(2026, 11, 29)},
        _said("tomorrow"),
        {},
    ),
    (
        "a field of a tool result",
        _harmless(TRANSFER),
        {"amount": Decimal("500")},
        _said("hi", results={"transfer_money": [SourceResult(0, {"amount": "500.00"})]}),
        {},
    ),
    (
        "a value an instruction in force sets",
        _harmless(TRANSFER),
        {"amount": Decimal("900")},
        _said("the usual", instructions=[("rent", "When they say the usual, send 900")]),
        {},
    ),
    (
        "only where the parameter says it may be worked out",
        _harmless(PIZZA, derived=True),
        {"size": "large"},
        _said("the big one"),
        {},
    ),
    (
        "your own wording only where the parameter says you may compose it",
        ToolSpec(name="search", parameters=(ToolParameter(name="query", composed=True),)),
        {"query": "wire fees"},
        _said("hi"),
        {},
    ),
]


def _acceptance(spec: ToolSpec, grounding: CallGrounding) -> Acceptance:
    """What the gate does with the call (`engine.stages.action_gate.clear_call`): asks for an
    ungrounded value, asks for a yes when the tool's confirmation policy wants one, else runs."""
    if grounding.ungrounded:
        return Acceptance.ASKED
    needed, _ = needs_confirmation(spec, grounding, retry=False)
    return Acceptance.CONFIRMED if needed else Acceptance.RUNS


def test_the_tool_prompt_states_exactly_what_the_action_gate_accepts() -> None:
    """The tool prompt and the gate share one set of rules (`engine.values.provenance`): each
    clause the prompt states — runs at once, runs after a yes, or (for a harmless tool) taken —
    is checked against what the gate does with a value of that clause."""
    prompt = " ".join(_tool_prompt().split())
    assert rules_text().split("\n")[0] in prompt
    for rule in RULES:
        assert " ".join(rule.text.split()) in prompt, rule.text
    exercised = set()
    for words, spec, arguments, evidence, where in GATE_CASES:
        # the clause with these words among those for this kind of tool
        [rule] = [r for r in RULES if words in r.text and r.consequential is spec.consequential]
        exercised.add(rule)
        grounding = ground_call(spec, arguments, evidence, **where)
        assert _acceptance(spec, grounding) is rule.acceptance, (words, grounding.describe())
        assert {g.provenance for g in grounding.groundings} <= set(rule.provenance), words
    assert exercised == set(RULES)  # every clause is exercised against the gate
    # a prompt states the rules for the kinds of tool it offers
    lookups = " ".join(_tool_prompt(specs=(_harmless(TRANSFER),)).split())
    assert "[consequential]" not in lookups and RULES[-1].text in lookups
    payments = " ".join(_tool_prompt(specs=(TRANSFER,)).split())
    assert RULES[0].text in payments and RULES[-1].text not in payments
    # and what no clause names is never used: the customer is asked
    never = ground_call(TRANSFER, {"amount": Decimal("900")}, _said("send 40"))
    assert _acceptance(TRANSFER, never) is Acceptance.ASKED
    assert NEVER_TEXT in prompt
