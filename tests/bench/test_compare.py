"""`python -m bench compare` without the reference engine installed: the shared agent spec is the
reference scenario's agent, our side runs the conversation in a fresh process and records what it
decided on each turn, that script goes into the spec, the reference's fake answers its prompts
by the script (bench/reference_fake.py, tested here with prompts shaped like the reference's),
and the report puts both sides, their ratios, whether they decided alike and the
not-like-for-like list into the marked block."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import peak_memory, task_cpu
from bench import reference_fake as fake
from bench import reference_guideline_answers as guideline_answers
from bench import reference_journey_answers as journey_answers
from bench import reference_script as script
from bench import reference_tool_answers as tool_answers
from bench.blocks import read_block
from bench.compare import MESSAGES, Side, agent_spec, measure_ours, with_script
from bench.compare_report import NOT_LIKE_FOR_LIKE, agreement, render
from bench.worked_example import reference_agent

pytestmark = pytest.mark.long(25)  # about that many seconds: scheduled first (tests/conftest.py)


def test_the_spec_is_the_reference_scenarios_agent() -> None:
    spec = agent_spec()
    snapshot = reference_agent("tool_via_guideline")
    ids = {g["id"] for g in spec["guidelines"]}
    assert {f"act{i}" for i in range(25)} | {"obs0", "obs1", "applied0", "applied1"} == ids
    assert next(g for g in spec["guidelines"] if g["id"] == "act0")["tools"] == ["lookup_order"]
    assert all(g["action"] is None for g in spec["guidelines"] if g["id"].startswith("obs"))
    (journey,) = spec["journeys"]
    assert journey["conditions"] == list(snapshot.journey("returns").conditions)
    # The edges form the chain the driver rebuilds state by state, from the root down.
    reached = {journey["root"]}
    for edge in journey["edges"]:
        assert edge["source"] in reached
        if edge["target"] is not None:
            reached.add(edge["target"])
    assert {n["id"] for n in journey["nodes"]} == reached
    assert spec["messages"] == list(MESSAGES) and len(MESSAGES) == 5
    json.dumps(spec)  # plain data: the reference's driver reads it as JSON


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> Side:
    """Our side of the conversation, run once for the tests that read it."""
    spec_path = tmp_path_factory.mktemp("compare") / "spec.json"
    spec_path.write_text(json.dumps(agent_spec()), encoding="utf-8")
    return measure_ours(spec_path, latency_ms=0.0, runs=1)


def test_our_side_runs_the_conversation_in_a_fresh_process(ours: Side) -> None:
    turns = ours.run["turns"]
    assert [t["message"] for t in turns] == list(MESSAGES)
    assert all(t["calls"] >= 2 and 1 <= t["rounds"] <= 3 for t in turns)
    assert all(t["prompt_tokens"] > 0 and t["reply"] for t in turns)
    assert ours.imports["wall_ms"] > 0 and ours.imports["modules"] > 100
    assert {"functions.worker", "functions.webhook", "functions.management"} <= set(ours.handlers)
    assert all(ms > 0 for ms in ours.handlers.values())
    assert ours.run["peak_rss_mb"] > 0


def test_the_report_sets_both_sides_side_by_side_with_ratios(tmp_path: Path) -> None:
    turn = {
        "message": "hi",
        "calls": 4,
        "rounds": 2,
        "prompt_tokens": 3000,
        "wall_ms": 800.0,
        "engine_cpu_ms": 4.0,
    }
    ours = Side(
        "Waypoint",
        "commit x",
        imports={"wall_ms": 500.0},
        run={"turns": [turn]},
        handlers={"functions.worker": 500.0, "functions.management": 700.0},
    )
    theirs_turn = {
        **turn,
        "calls": 16,
        "prompt_tokens": 48000,
        "engine_cpu_ms": 60.0,
        "schemas": {"CannedResponsePreambleSchema": 1},
    }
    theirs = Side(
        "parlant (reference)",
        "3.3.1",
        imports={"wall_ms": 4000.0},
        run={"turns": [theirs_turn], "boot": {"calls": 102, "seconds": 5.0}},
    )
    context = {"date": "d", "machine": "m", "load": "1", "latency_ms": 400.0, "seconds": 1.0}
    body = render(ours, theirs, context)
    assert "| LLM calls | 4.0 | 16.0 | 4.0× (ours 0.25×) |" in body
    assert "| prompt tokens (chars/4) | 3,000 | 48,000 | 16.0× (ours 0.06×) |" in body
    assert "| import wall ms (median) | 500 | 4,000 | 8.0× (ours 0.12×) |" in body
    assert "102 LLM calls" in body and "3.3.1" in body
    # every handler's import as a share of the reference's, the heaviest first
    assert "| import functions.management (median wall ms) | 700 | – | 0.175× of theirs |" in body
    assert body.index("functions.management (median") < body.index("functions.worker (median")
    assert (
        "| 1 | hi | 4 / 2 / 3,000 / 800 / 4.0 | 16 / 2 / 48,000 / 800 / 60.0 (preamble) | – |"
        in body
    )
    assert all(item in body for item in NOT_LIKE_FOR_LIKE)
    failed = render(ours, Side("parlant (reference)", "?", "install failed: x"), context)
    assert "**Reference side incomplete:** install failed: x" in failed


def test_the_compare_block_survives_a_bench_rewrite(tmp_path: Path) -> None:
    from bench.blocks import update_block
    from bench.config import TINY
    from bench.document import COMPARE_BLOCK, COMPARE_HEADING, write_document
    from bench.machine import describe_machine
    from bench.results import BenchResult

    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text("# Benchmarks\n", encoding="utf-8")
    update_block(doc, COMPARE_BLOCK, "side by side, measured", heading=COMPARE_HEADING)
    empty_run = BenchResult(machine=describe_machine(), config=TINY.describe(), started_at="now")
    write_document(empty_run, doc)  # what `python -m bench` does: the whole file rewritten
    text = doc.read_text(encoding="utf-8")
    block = read_block(text, COMPARE_BLOCK)
    assert block is not None and "side by side, measured" in block and COMPARE_HEADING in text


# --------------------------------------------------------------------------------------------------
# Our decisions, recorded, and the script in the spec


def test_our_side_records_what_it_decided_on_each_turn(ours: Side) -> None:
    hello, wants_return, order_number, reason, thanks = (t["decisions"] for t in ours.run["turns"])
    assert hello["guidelines"] == [] and hello["journeys"] == [] and hello["tools"] == []
    # Turn 2 enters the return journey: its trigger matched (by id and condition) and the
    # journey is at its first step.
    assert {
        "id": "journey:returns:condition:0",
        "condition": "The customer wants to return a product",
    } in wants_return["guidelines"]
    (journey,) = wants_return["journeys"]
    assert (journey["title"], journey["node"]) == ("Product return", "ask_order")
    assert journey["steps"][-1]["action"] == "Ask for the order number of the product to return"
    # Turn 3 matches the shipment-status guideline, runs its tool, and moves the journey on.
    assert [g["id"] for g in order_number["guidelines"]] == ["act0"]
    assert order_number["guidelines"][0]["condition"].startswith(
        "The customer asks about the shipment status"
    )
    assert order_number["tools"] == [
        {"name": "lookup_order", "arguments": {"order_number": "ORD-5521"}}
    ]
    assert order_number["journeys"][0]["node"] == "ask_reason"
    # Turn 4 passes the tool step (which runs with the collected values) to the last step.
    assert reason["tools"] == [
        {"name": "submit_return", "arguments": {"order_number": "ORD-5521", "reason": "damaged"}}
    ]
    steps = reason["journeys"][0]["steps"]
    assert [(s["id"], s["tools"]) for s in steps] == [("submit", ["submit_return"]), ("label", [])]
    assert thanks["journeys"][0]["how"] == "completed" and thanks["journeys"][0]["node"] is None
    assert all(t["decisions"]["reply"].startswith(t["reply"]) for t in ours.run["turns"])


def test_the_script_of_our_decisions_is_written_into_the_spec(ours: Side) -> None:
    spec = agent_spec()
    scripted = with_script(spec, ours.run)
    assert "script" not in spec and scripted["guidelines"] == spec["guidelines"]
    assert [t["message"] for t in scripted["script"]] == list(MESSAGES)
    assert scripted["script"][2]["tools"][0]["name"] == "lookup_order"
    json.dumps(scripted)  # the reference's driver reads it as JSON
    turn = script.TurnScript.of(scripted["script"][3])
    assert turn.tools == (("submit_return", {"order_number": "ORD-5521", "reason": "damaged"}),)
    assert [s.tools for s in turn.journeys[0].steps] == [("submit_return",), ()]


# --------------------------------------------------------------------------------------------------
# The reference's fake follows the script (prompts below are short excerpts shaped like its own)


SHIPMENT = "The customer asks about the shipment status of an order or account"
RETURN = "The customer wants to return a product"


def _turn(**decisions: Any) -> script.TurnScript:
    return script.TurnScript.of(
        {"message": "What is the shipment status of ORD-5521?", **decisions}
    )


def _check_prompt(*conditions: str) -> str:
    checks = [
        {"guideline_id": str(i), "condition": c, "rationale": "<why>", "applies": "<BOOL>"}
        for i, c in enumerate(conditions, start=1)
    ]
    example = {"checks": [{"guideline_id": "1", "condition": "x", "applies": True}]}
    return (
        f"Examples:\n```json\n{json.dumps(example)}\n```\nOUTPUT FORMAT\n"
        f"```json\n{json.dumps({'checks': checks}, indent=2)}\n```\n"
    )


def test_the_reference_fakes_modules_are_the_standard_librarys_only() -> None:
    # and the measures the driver takes in the reference's process
    fakes = (fake, guideline_answers, journey_answers, script, tool_answers, peak_memory, task_cpu)
    names = {Path(module.__file__ or "").stem for module in fakes}
    for module in fakes:
        tree = ast.parse(Path(module.__file__ or "").read_text(encoding="utf-8"))
        imported = _run_time_imports(tree.body)
        allowed = set(sys.stdlib_module_names) | {"__future__"} | names
        assert imported and imported <= allowed, f"{module.__name__} imports {imported - allowed}"


# How the fake's modules import each other: by name where they run in the reference's venv
# (`__package__` is empty there), as `bench.…` in ours and for mypy.
_REFERENCE_VENV_TAKES_ELSE = {"TYPE_CHECKING", "TYPE_CHECKING or __package__"}


def _run_time_imports(body: list[ast.stmt]) -> set[str]:
    """Top-level names these statements import when they run in the reference's venv (`if
    TYPE_CHECKING:` aside)."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add((node.module or "").split(".")[0])
        elif isinstance(node, ast.If) and ast.unparse(node.test) in _REFERENCE_VENV_TAKES_ELSE:
            names |= _run_time_imports(node.orelse)
        else:
            names |= _run_time_imports(
                [n for n in ast.iter_child_nodes(node) if isinstance(n, ast.stmt)]
            )
    return names


def test_the_reference_driver_loads_its_own_modules_and_nothing_of_waypoint() -> None:
    folder = Path(fake.__file__).parent
    reference_packages = {"parlant", "httpx"}  # what the reference's venv installs with it
    loaded, pending = set(), ["reference_driver"]
    while pending:
        name = pending.pop()
        loaded.add(name)
        imported = _run_time_imports(ast.parse((folder / f"{name}.py").read_text("utf-8")).body)
        beside = {n for n in imported if (folder / f"{n}.py").exists()}
        outside = imported - beside - set(sys.stdlib_module_names) - {"__future__"}
        assert outside <= reference_packages, f"{name} imports {outside}"
        pending += sorted(beside - loaded)
    assert {
        "reference_fake",
        "reference_guideline_answers",
        "reference_journey_answers",
        "reference_nlp",
        "reference_agent",
        "reference_run",
        "reference_script",
        "reference_tool_answers",
        "peak_memory",
        "task_cpu",
    } <= loaded


def test_a_guideline_check_applies_iff_our_engine_matched_that_condition() -> None:
    turn = _turn(guidelines=[{"id": "act0", "condition": SHIPMENT}])
    known = frozenset(script.normalized(c) for c in (SHIPMENT, RETURN))
    stranger = "The customer mentions a shipment delay"  # not ours: decided by topic words
    (answer, _example) = guideline_answers.guideline_check_answers(
        _check_prompt(SHIPMENT.upper() + ".", RETURN, stranger), turn, known
    )
    assert [c["applies"] for c in answer["checks"]] == [True, False, True]
    assert guideline_answers.decided_conditions(answer) == [SHIPMENT.upper() + ".", stranger]


def test_response_analysis_says_applied_iff_our_engine_applied_that_action() -> None:
    action = "Explain the shipment status clearly"
    template = {
        "checks": [
            {"guideline_id": "1", "action": action, "guideline_applied": "<bool>"},
            {"guideline_id": "2", "action": "Offer a discount", "guideline_applied": "<bool>"},
        ]
    }
    prompt = f"OUTPUT FORMAT\n```json\n{json.dumps(template)}\n```"
    (answer,) = guideline_answers.guideline_check_answers(
        prompt, _turn(applied_actions=[action]), frozenset()
    )
    assert [c["guideline_applied"] for c in answer["checks"]] == [True, False]


ASK_ORDER = "Ask for the order number of the product to return"
ASK_REASON = "Ask why the customer is returning the product"

REACHABLE = f"""GENERAL INSTRUCTIONS ... Child id: 9 (an example's)
###
Example section is over. The following is the real data you need to use for your decision.

Current node action:
    {ASK_ORDER}
- REQUIRES AGENT ACTION: This step requires from the agent to say something for it to be completed.
    Child id: 3
        Action of child (3):
        {ASK_REASON}
        Condition of the transition to child (3):
        The customer gave the order number
            The conditions that describe the possible paths from child onward:
                - Condition (1) : the next step is not done yet: Use the tool submit_return

OUTPUT FORMAT
"""


def _next_step_prompt(current: str, conditions: list[str]) -> str:
    offered = "\n".join(f"Condition ({i}): {c}\n" for i, c in enumerate(conditions, start=1))
    return (
        "Example #1: Book Taxi Journey\nCURRENT STEP -\n\nWelcome the customer\n"
        "Condition (1): The customer gave a pick up location\n"
        "###\nExample section is over. The following is the real data you need to use.\n"
        f"\nJourney: Product return\n\nCURRENT STEP -\n\n{current}\nStep Flags:\n\n"
        f"POSSIBLE TRANSITIONS -\n{offered}\nOUTPUT FORMAT\n"
    )


def _journey(*steps: dict[str, Any], how: str = "llm") -> dict[str, Any]:
    return {"title": "Product return", "steps": list(steps), "how": how}


def test_the_journeys_conditions_written_at_indexing_name_the_step_they_lead_to() -> None:
    answer = journey_answers.reachable_answer(REACHABLE)
    assert answer["step_action"] == ASK_ORDER
    (child,) = answer["children_conditions"]
    assert (
        child["child_id"] == "3"
        and child["condition_to_child"] == "The customer gave the order number"
    )
    assert journey_answers.condition_target(child["condition_to_child_and_stop"]) == ASK_REASON
    (onward,) = child["conditions_to_child_and_forward"]
    assert (
        journey_answers.condition_target(onward["condition_to_child_then_to_path"])
        == "Use the tool submit_return"
    )
    assert journey_answers.step_ids(REACHABLE) == {"3": ASK_REASON}
    leaf = journey_answers.reachable_answer(
        f"Example section is over.\nCurrent node action:\n    {ASK_REASON}\n"
    )
    assert journey_answers.condition_target(leaf["step_action_completed"]) is None


def test_step_selection_moves_the_reference_to_our_step_of_the_turn() -> None:
    child = journey_answers.reachable_answer(REACHABLE)["children_conditions"][0]
    conditions = [
        child["condition_to_child_and_stop"],
        child["conditions_to_child_and_forward"][0]["condition_to_child_then_to_path"],
    ]
    prompt = _next_step_prompt(ASK_ORDER, conditions)
    moved = _turn(journeys=[_journey({"action": ASK_REASON, "tools": []})])
    assert journey_answers.next_step_answer(prompt, moved)["applied_condition_id"] == "1"
    assert (
        journey_answers.chosen_target(prompt, journey_answers.next_step_answer(prompt, moved))
        == ASK_REASON
    )
    # Our engine passed a tool step and stopped after it: the furthest step offered is chosen.
    passed = _turn(
        journeys=[
            _journey(
                {"action": None, "tools": ["submit_return"]},
                {"action": "Tell the customer the label was emailed"},
            )
        ]
    )
    assert journey_answers.next_step_answer(prompt, passed)["applied_condition_id"] == "2"
    stayed = _turn(journeys=[_journey({"action": ASK_ORDER, "tools": []})])
    assert journey_answers.next_step_answer(prompt, stayed)["applied_condition_id"] == "0"
    assert journey_answers.next_step_answer(prompt, _turn())["applied_condition_id"] == "None"


def test_step_selection_completes_the_journey_when_ours_completed() -> None:
    ending = f"done: {ASK_REASON}; the journey is complete"
    prompt = _next_step_prompt(ASK_REASON, ["the next step is not done yet: x", ending])
    completed = _turn(journeys=[_journey(how="completed")])
    answer = journey_answers.next_step_answer(prompt, completed)
    assert (
        answer["applied_condition_id"] == "2"
        and journey_answers.chosen_target(prompt, answer) is None
    )


TOOL_PROMPT = """OUTPUT FORMAT
-----------------
```json
{
    "last_customer_message": "<REPEAT THE LAST USER MESSAGE IN THE INTERACTION>",
    "name": "built-in:lookup_order",
    "tool_calls_for_candidate_tool": [
        {"applicability_rationale": "<A FEW WORDS>", "is_applicable": <BOOL>}
    ]
}
```"""


def test_a_tool_runs_with_our_arguments_iff_our_engine_ran_it() -> None:
    ran = _turn(tools=[{"name": "lookup_order", "arguments": {"order_number": "ORD-5521"}}])
    answer = tool_answers.single_tool_answer(TOOL_PROMPT, ran)
    (call,) = answer["tool_calls_for_candidate_tool"]
    assert answer["name"] == "built-in:lookup_order" and call["is_applicable"] is True
    (argument,) = call["argument_evaluations"]
    assert (
        argument["parameter_name"],
        argument["value_as_string"],
        argument["valid_invalid_or_missing"],
    ) == ("order_number", "ORD-5521", "valid")
    assert (
        tool_answers.single_tool_answer(TOOL_PROMPT, _turn())["tool_calls_for_candidate_tool"] == []
    )
    light = 'OUTPUT FORMAT:\n"reasoning_tldr": "<YOUR REASONING FOR RUNNING built-in:lookup_order>"'
    assert tool_answers.non_consequential_tool_answer(light, ran) == {
        "reasoning_tldr": "as our engine decided",
        "should_run": True,
        "calls": [{"args": {"order_number": "ORD-5521"}}],
    }
    assert tool_answers.non_consequential_tool_answer(light, _turn())["should_run"] is False


def test_the_draft_is_our_reply_and_unknown_schemas_get_no_scripted_answer() -> None:
    turn = _turn(reply="Your order ORD-5521 has shipped.")
    draft = fake.answer("CannedResponseDraftSchema", "draft it", turn, frozenset())
    assert draft["response_body"] == "Your order ORD-5521 has shipped."
    assert fake.answer("CustomerDependentActionSchema", "x", turn, frozenset()) is None
    assert fake.answer("JourneyNextStepSelectionSchema", "x", None, frozenset()) is None
    assert script.our_step_id(agent_spec()["journeys"], "Use the tool submit_return") == "submit"


# --------------------------------------------------------------------------------------------------
# The agreement table


def test_the_report_says_per_turn_whether_both_engines_decided_alike() -> None:
    decided = {
        "guidelines": [{"id": "act0", "condition": SHIPMENT}],
        "journeys": [{"title": "Product return", "node": "ask_reason", "how": "llm"}],
        "tools": [{"name": "lookup_order", "arguments": {"order_number": "ORD-5521"}}],
    }
    alike = {"guidelines": [SHIPMENT], "journeys": ["ask_reason"], "tools": decided["tools"]}
    unlike = {"guidelines": [SHIPMENT, RETURN], "journeys": ["ask_order"], "tools": []}
    assert agreement(decided, alike)["differs"] == []
    assert agreement(decided, unlike)["differs"] == ["guidelines", "journey step", "tools"]
    assert agreement(decided, unlike)["guidelines"] == (1, 2, 1)
    turn = {
        "message": "hi",
        "calls": 3,
        "rounds": 2,
        "prompt_tokens": 10,
        "wall_ms": 1.0,
        "engine_cpu_ms": 1.0,
    }
    ours = Side("Waypoint", "x", run={"turns": [{**turn, "decisions": decided}] * 2})
    theirs = Side(
        "parlant (reference)",
        "3.3.1",
        run={
            "turns": [{**turn, "did": alike}, {**turn, "did": unlike}],
            "minimal": {"CustomerDependentActionSchema (boot)": 35},
        },
    )
    body = render(
        ours,
        theirs,
        {"date": "d", "machine": "m", "load": "1", "latency_ms": 400.0, "seconds": 1.0},
    )
    assert (
        "| 1 | 1 / 1 / 1 | ask_reason / ask_reason | lookup_order(order_number=ORD-5521) / lookup_order(order_number=ORD-5521) | yes |"
        in body
    )
    assert (
        "| 2 | 1 / 2 / 1 | ask_reason / ask_order | lookup_order(order_number=ORD-5521) / – | no: guidelines, journey step, tools |"
        in body
    )
    assert "CustomerDependentActionSchema (boot) 35" in body
