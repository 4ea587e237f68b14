"""The decision evaluation set (`python -m bench eval`): it loads, every case is asked exactly as
a real turn asks it (the same prompts, the packed matching batch and the action gate included)
and yields a report on its development and held-back test parts, the OpenAI path speaks to an
OpenAI-compatible server and writes a model's dated section, and a broken case file is refused
with a message naming the fix. Accuracy is reported, never asserted: the set measures models, it
does not gate them."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import TypeVar

import pytest
from pydantic import BaseModel

from bench.blocks import read_block
from bench.document import EVAL_BLOCK, write_document
from bench.eval import cli
from bench.eval.cases import (
    KINDS,
    T0,
    CaseFileError,
    EvalCase,
    agent,
    load_cases,
    part_of,
    session_before,
)
from bench.eval.model_runs import BLOCK as MODELS_BLOCK
from bench.eval.model_runs import HEADING as MODELS_HEADING
from bench.eval.report import markdown_table
from bench.eval.runner import EvalRun, eval_config, run_eval
from engine.clock import FixedClock, SequentialIds
from engine.compose import CannedChoice
from engine.llm import TurnLLM
from engine.matching import guidelines as gm
from engine.matching.journey_answer import JourneyNodeSelection
from engine.ports import Generation
from engine.sessions.session import InboundMessage
from engine.testing import ScriptedLLM
from engine.tools.calls import ToolCallPlan
from engine.trace import TurnTrace
from engine.turn import EngineDeps, TurnPipeline
from infra.offline import OfflineLLM
from tests.fakes.openai_server import Fail, FakeOpenAIServer, RecordedRequest, Reply

T = TypeVar("T", bound=BaseModel)

pytestmark = pytest.mark.timeout(600)  # headroom for a loaded 2-core machine


def test_the_set_holds_at_least_300_cases_over_every_decision_kind_weighted_to_hard_ones() -> None:
    cases = load_cases()
    assert set(cases) == set(KINDS)
    total = sum(len(v) for v in cases.values())
    hard = sum(c.hard for v in cases.values() for c in v)
    assert total >= 300
    assert hard > total / 2
    assert all(len(v) >= 20 for v in cases.values()), {k: len(v) for k, v in cases.items()}


async def test_offline_run_answers_every_case_and_reports_every_kind() -> None:
    cases = load_cases()
    run = await run_eval(OfflineLLM(), cases, provider="offline", model="offline-heuristic")
    assert len(run.results) == sum(len(v) for v in cases.values())
    assert [r for r in run.results if r.error] == []  # the offline model answers every schema
    # every matching decision asks the model; journeys and tools may be decided by the graph or
    # by known values alone, as in a turn
    assert all(
        r.calls >= 1 for r in run.results if r.kind not in ("journey_node", "tool_arguments")
    )
    rows = {row.name: row for row in run.rows()}
    for kind in KINDS:
        assert rows[kind].cases == len(cases[kind])
        assert 0 <= rows[kind].correct <= rows[kind].cases
        assert rows[kind].prompt_tokens > 0
    assert {"journey_node: advance", "journey_node: stay", "journey_node: backtrack"} <= set(rows)
    assert rows["all"].cases == len(run.results)
    assert rows["all"].parts["dev"][0] + rows["all"].parts["test"][0] == len(run.results)
    assert rows["all"].parts["test"][0] > 0 and rows["all"].parts["dev"][0] > 0
    table = markdown_table(run)
    assert all(f"| {kind} |" in table for kind in KINDS)
    assert "| test (held back) |" in table and "judged on the test part only" in table


async def test_offline_run_is_deterministic() -> None:
    cases = {k: v[:8] for k, v in load_cases().items()}
    first = await run_eval(OfflineLLM(), cases, provider="offline", model="m", concurrency=1)
    second = await run_eval(OfflineLLM(), cases, provider="offline", model="m", concurrency=4)
    assert [(r.case_id, r.correct, r.got) for r in first.results] == [
        (r.case_id, r.correct, r.got) for r in second.results
    ]


def test_command_prints_the_table_and_writes_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "eval.json"
    assert cli.main(["--kind", "canned", "--kind", "values", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Evaluation set: offline / offline-heuristic" in printed
    assert "canned" in printed and "values" in printed and "observational" not in printed
    data = json.loads(out.read_text())
    assert Counter(r["kind"] for r in data["results"]) == {
        "canned": len(load_cases()["canned"]),
        "values": len(load_cases()["values"]),
    }


def test_python_m_bench_eval_dispatches_to_the_evaluation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench.__main__ import main

    assert main(["eval", "--kind", "disambiguation", "--limit", "2"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    dev = sum(part_of(c) == "dev" for c in load_cases()["disambiguation"][:2])
    row = next(r for r in rows if r[:1] == ["disambiguation"])
    assert row[:2] == ["disambiguation", f"{dev}+{2 - dev}"]


def test_write_doc_replaces_the_accuracy_block_and_bench_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text("# Benchmarks\n\nold text\n", encoding="utf-8")
    monkeypatch.setattr(cli, "DOC", doc)
    assert cli.main(["--kind", "canned", "--limit", "3", "--write-doc"]) == 0
    block = read_block(doc.read_text(), EVAL_BLOCK)
    dev = sum(part_of(c) == "dev" for c in load_cases()["canned"][:3])
    assert block is not None and f"| canned | {dev}+{3 - dev} |" in block
    assert "old text" in doc.read_text()  # only the block is replaced
    assert "wrote" in capsys.readouterr().out


def test_write_document_keeps_the_eval_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench import document

    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text(
        "# old\n\n<!-- eval:begin -->\n| canned | 3 |\n<!-- eval:end -->\n", encoding="utf-8"
    )
    monkeypatch.setattr(document, "markdown", lambda _result: "# Benchmarks\n\nnew numbers\n")
    write_document(None, doc)  # type: ignore[arg-type]
    text = doc.read_text()
    assert "new numbers" in text and "| canned | 3 |" in text


# --------------------------------------------------------------------------------------------------
# The OpenAI path, against the local fake OpenAI-compatible server answering every schema


SCHEMAS: dict[str, type[BaseModel]] = {
    schema.__name__: schema
    for schema in (
        gm.GuidelineMatchBatch,
        gm.CustomerDependentBatch,
        gm.DisambiguationVerdict,
        JourneyNodeSelection,
        ToolCallPlan,
        CannedChoice,
    )
}


async def answer_like_the_offline_model(request: RecordedRequest) -> Reply:
    """The fake server's answer to any schema the evaluation asks: what the offline model says."""
    schema = SCHEMAS[request.response_format["json_schema"]["name"]]
    generation = await OfflineLLM().generate(request.prompt, schema, model="offline")
    return Reply(generation.value.model_dump(mode="json"), prompt_tokens=321, completion_tokens=17)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", running.base_url)
        yield running


def test_openai_run_sends_the_turns_packed_prompt_to_the_chosen_model_and_counts_failures(
    server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cases = load_cases()["observational"][:3]
    refused = cases[2].conv[-1][3:]  # the third case's message: the model refuses it

    async def answer(request: RecordedRequest) -> Reply | Fail:
        if refused in request.prompt:
            return Fail(400, "model refused")
        return await answer_like_the_offline_model(request)

    server.answer_chat_with(answer)
    out = tmp_path / "openai.json"
    argv = ["--llm", "openai", "--model", "eval-model", "--kind", "observational", "--limit", "3"]
    assert cli.main([*argv, "--concurrency", "1", "--json", str(out)]) == 0
    requests = server.chat_requests
    assert {r.model for r in requests} == {"eval-model"}
    packed = [
        r for r in requests if r.response_format["json_schema"]["name"] == "GuidelineMatchBatch"
    ]
    assert len(packed) == 3
    for request in packed:  # the batch a turn sends: observations and actions in one prompt
        assert "### Observations (" in request.prompt
        assert "### Actions not yet taken (" in request.prompt
    data = json.loads(out.read_text())
    assert data["provider"] == "openai" and data["model"] == "eval-model"
    first, second, third = data["results"]
    assert first["prompt_tokens"] >= 321 and first["completion_tokens"] >= 17
    assert first["error"] is None and second["error"] is None
    assert not third["correct"] and "model refused" in third["error"]
    printed = capsys.readouterr().out
    assert "openai / eval-model" in printed
    assert not (tmp_path / "BENCHMARKS.md").exists()  # a partial run writes no section


def _small_set() -> dict[str, list[EvalCase]]:
    """Two cases per kind, one of each part where the kind has both."""
    small = {}
    for kind, cases in load_cases().items():
        picked = [next(c for c in cases if part_of(c) == part) for part in ("dev", "test")]
        small[kind] = picked
    return small


def test_a_real_models_score_is_one_command_that_writes_its_dated_section(
    server: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`python -m bench eval --llm openai --model M` on the whole set (here made small) writes M's
    section of the day into docs/BENCHMARKS.md — the offline table stays, another model's or
    day's section stays, the same model's run of the same day is replaced. Answered like the
    offline model, the OpenAI path scores every case as the offline run does."""
    doc = tmp_path / "BENCHMARKS.md"
    offline_block = "<!-- eval:begin -->\n| canned | 3 |\n<!-- eval:end -->"
    doc.write_text(f"# Benchmarks\n\n{offline_block}\n", encoding="utf-8")
    monkeypatch.setattr(cli, "DOC", doc)
    monkeypatch.setattr(cli, "load_cases", _small_set)
    server.answer_chat_with(answer_like_the_offline_model)
    out = tmp_path / "openai.json"
    command = ["--llm", "openai", "--model", "model-a", "--date", "2026-02-03"]
    assert cli.main([*command, "--json", str(out)]) == 0
    assert "wrote model-a's section of 2026-02-03" in capsys.readouterr().out

    text = doc.read_text()
    assert offline_block in text
    block = read_block(text, MODELS_BLOCK)
    assert block is not None and MODELS_HEADING in text
    assert "### `model-a` (openai), 2026-02-03" in block
    assert "| test (held back) |" in block and "| all | 10+10 |" in block

    offline = asyncio.run(run_eval(OfflineLLM(), _small_set(), provider="offline", model="o"))
    results = json.loads(out.read_text())["results"]
    assert [(r["case_id"], r["correct"]) for r in results] == [
        (r.case_id, r.correct) for r in offline.results
    ]

    assert cli.main(["--llm", "openai", "--model", "model-b", "--date", "2026-02-04"]) == 0
    assert cli.main([*command]) == 0  # model-a again the same day: replaced, not added
    block = read_block(doc.read_text(), MODELS_BLOCK) or ""
    assert block.count("### `model-a` (openai), 2026-02-03") == 1
    assert block.index("model-a") < block.index("model-b")  # the latest run first
    assert offline_block in doc.read_text()


def test_a_partial_run_of_a_model_writes_its_section_only_when_asked(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    doc = tmp_path / "BENCHMARKS.md"
    monkeypatch.setattr(cli, "DOC", doc)
    server.answer_chat_with(answer_like_the_offline_model)
    partial = ["--llm", "openai", "--model", "m", "--kind", "canned", "--limit", "1"]
    assert cli.main(partial) == 0
    assert not doc.exists()
    assert cli.main([*partial, "--write-doc", "--date", "2026-02-03"]) == 0
    assert "kinds canned; at most 1 cases per kind" in doc.read_text()


# --------------------------------------------------------------------------------------------------
# Bad case files are refused with a message naming what to fix


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "bad.yaml").write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: guesses\ncases: []\n", "unknown kind 'guesses'"),
        (
            "kind: actionable\ncases:\n- {id: a, agent: nobody, conv: ['C: hi'], expect: {}}\n",
            "no eval agent 'nobody'",
        ),
        (
            "kind: actionable\ncases:\n- {id: a, agent: bank, conv: ['hi'], expect: {greet: true}}\n",
            "needs 'C: ', 'A: ' or 'T tool: '",
        ),
        (
            "kind: actionable\ncases:\n- {id: a, agent: bank, conv: ['C: hi'], expect: {nope: true}}\n",
            "expect maps guideline ids to true/false ('nope')",
        ),
        (
            "kind: journey_node\ncases:\n- {id: a, agent: bank, journey: transfer, path: [nowhere],"
            " conv: ['C: hi'], expect: {step: ask_source}}\n",
            "has no step 'nowhere'",
        ),
        (
            "kind: tool_arguments\ncases:\n- {id: a, agent: bank, offered: {launch: now},"
            " conv: ['C: hi'], expect: {calls: {}}}\n",
            "has no tool 'launch'",
        ),
    ],
)
def test_a_broken_case_file_names_what_to_fix(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(CaseFileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_cases(_write(tmp_path, text))


def test_duplicate_case_ids_are_refused(tmp_path: Path) -> None:
    case = "- {id: same, agent: bank, conv: ['C: hi'], expect: {greet: true}}\n"
    with pytest.raises(CaseFileError, match="'same' is used twice"):
        load_cases(_write(tmp_path, "kind: actionable\ncases:\n" + case + case))


def test_eval_run_rows_are_empty_without_results() -> None:
    assert EvalRun(provider="offline", model="m").rows() == []


# --------------------------------------------------------------------------------------------------
# The case-format extensions for issue #23's guidance points


def test_issue_23_guidance_points_each_have_cases() -> None:
    notes = Counter(
        kind for kind, cases in load_cases().items() for c in cases if c.note.startswith("#23 ")
    )
    for kind in (
        "observational",
        "actionable",
        "previously_applied",
        "customer_dependent",
        "journey_node",
        "tool_arguments",
    ):
        assert notes[kind] >= 3, kind


ISSUE_37_KINDS = {
    "agent intention": ("actionable",),
    "tool results": ("observational", "actionable", "previously_applied", "customer_dependent"),
    "context variables": ("actionable", "previously_applied", "canned"),
    "large batch": ("observational", "actionable", "customer_dependent", "disambiguation"),
    "implied, not stated": ("observational",),
    "prose forks": ("journey_node",),
    "re-run tool step": ("journey_node", "tool_arguments"),
    "values from results": ("tool_arguments",),
    "values from names": ("tool_arguments", "values"),
    "defers": ("journey_node", "tool_arguments"),
    "resume exited": ("journey_node",),
}


def test_the_kinds_issue_37_found_missing_have_cases_in_both_parts() -> None:
    """Each kind of case the set lacked (#37: a note "#37 <kind>: …") is in the set, in the
    decisions it concerns, in the development part and in the held-back test part."""
    parts: dict[str, Counter[str]] = {kind: Counter() for kind in ISSUE_37_KINDS}
    decisions: dict[str, set[str]] = {kind: set() for kind in ISSUE_37_KINDS}
    for decision, cases in load_cases().items():
        for case in cases:
            if case.note.startswith("#37 "):
                kind = case.note[4:].split(":")[0]
                parts[kind][part_of(case)] += 1
                decisions[kind].add(decision)
    for kind, wanted in ISSUE_37_KINDS.items():
        assert parts[kind]["dev"] >= 1 and parts[kind]["test"] >= 1, (kind, parts[kind])
        assert set(wanted) <= decisions[kind], (kind, decisions[kind])


def test_a_case_path_can_close_a_run_and_a_tool_line_can_name_its_arguments() -> None:
    from bench.eval.cases import history, journey_path

    cases = {c.id: c for cs in load_cases().values() for c in cs}
    exited = cases["jn-g23-resume-exited"]
    assert journey_path(exited) == ("ask_source", "ask_destination", None)
    shown = cases["tool-g23-result-by-arguments"]
    tools = [e.data for e in history(shown) if e.data]
    assert [(d["tool"], d["arguments"]) for d in tools] == [
        ("get_balance", {"account": "checking"}),
        ("get_balance", {"account": "savings"}),
    ]


def test_a_tool_expected_several_times_is_graded_on_every_call() -> None:
    from bench.eval.decisions import _same_calls

    want = [{"account": "checking"}, {"account": "savings"}]
    assert _same_calls([{"account": "savings"}, {"account": "checking"}], want)
    assert not _same_calls([{"account": "savings"}], want)
    assert not _same_calls([{"account": "savings"}, {"account": "savings"}], want)


async def test_tool_arguments_are_scored_through_the_engines_gate() -> None:
    """Every planned call goes through the engine's action gate (`clear_call`): a call whose
    value the customer never gave is held back — the gate records why — and a case whose right
    call the gate would not run is not counted right; the report counts what the gate made of
    each case's calls."""
    from bench.eval.decisions import gate_verdicts
    from bench.eval.turn_state import turn_state

    case = EvalCase(
        id="gate", agent="bank", conv=["C: can I send 900 from savings?"],
        offered={"check_funds": "x"}, expect={"calls": {"check_funds": {}}},
    )  # fmt: skip
    state = turn_state(case, _offline_turn_llm())
    bank = state.agent
    checked = (bank.tool("check_funds"), {"account": "savings", "amount": 900}, None)
    invented = {"account": "savings", "to_account_id": "1234567", "amount": 900}
    sent = (bank.tool("transfer_money"), invented, None)
    assert gate_verdicts(state, case, [checked, sent]) == ["runs", "asked"]
    assert [c.status for c in state.trace.tool_calls] == ["ungrounded"]

    # A model that proposes the transfer with a number the customer never gave: the label's
    # arguments, but the turn would ask for the number, so the case is wrong.
    llm = ScriptedLLM().on(
        ToolCallPlan,
        {"calls": [{"tool": "transfer_money", "arguments": [
            {"name": k, "value": str(v)} for k, v in invented.items()
        ]}]},
    )  # fmt: skip
    labelled = case.model_copy(
        update={
            "offered": {"transfer_money": "x"},
            "expect": {"calls": {"transfer_money": invented}},
        }
    )
    run = await run_eval(llm, {"tool_arguments": [labelled]}, provider="scripted", model="m")
    (result,) = run.results
    assert not result.correct and result.subkind == "gate: asked"
    assert result.got == {"transfer_money": {**invented, "amount": Decimal(900)}}

    cases = {k: v for k, v in load_cases().items() if k == "tool_arguments"}
    run = await run_eval(OfflineLLM(), cases, provider="offline", model="offline-heuristic")
    rows = {row.name for row in run.rows()}
    assert {"tool_arguments: gate: runs", "tool_arguments: gate: asked"} <= rows


# --------------------------------------------------------------------------------------------------
# Exactly what turns send: the same prompts as a real turn on the same conversation


class Recorder:
    """The offline model, recording every prompt by schema."""

    def __init__(self) -> None:
        self.inner = OfflineLLM()
        self.prompts: list[tuple[str, str]] = []

    async def generate(self, prompt: str, schema: type[T], *, model: str) -> Generation[T]:
        self.prompts.append((schema.__name__, prompt))
        return await self.inner.generate(prompt, schema, model=model)

    def of(self, schema: type[BaseModel]) -> list[str]:
        return [p for name, p in self.prompts if name == schema.__name__]


def _offline_turn_llm() -> TurnLLM:
    trace = TurnTrace(turn_id="t", session_id="s", agent_id="a", agent_version="v")
    return TurnLLM(OfflineLLM(), eval_config("offline-heuristic"), trace)


async def _real_turn(case: EvalCase, pending: tuple[str, ...] = ()) -> Recorder:
    """The case's conversation as a real turn: the session before it and its last messages."""
    recorder = Recorder()
    session = session_before(case, pending=pending)
    said = [line[3:] for line in case.conv[len(session.events) :]]
    messages = [InboundMessage(event_id=f"m{i}", text=text) for i, text in enumerate(said)]
    deps = EngineDeps(llm=recorder, clock=FixedClock(T0), ids=SequentialIds())
    await TurnPipeline(deps).run(agent(case.agent), session, messages, turn_id="turn-1")
    return recorder


async def _evaluated(kind: str, case: EvalCase) -> Recorder:
    recorder = Recorder()
    await run_eval(recorder, {kind: [case]}, provider="offline", model="offline-heuristic")
    return recorder


def _case(case_id: str) -> tuple[str, EvalCase]:
    return next((k, c) for k, cs in load_cases().items() for c in cs if c.id == case_id)


@pytest.mark.parametrize(
    "case_id",
    ["act-greet-after-request", "obs-shop-allergy", "cd-address-waiting", "act37-variable-gold"],
)
async def test_a_matching_case_sends_the_packed_prompts_of_a_real_turn(case_id: str) -> None:
    kind, case = _case(case_id)
    # a customer-dependent case's turn finds its guidelines waiting for the customer
    pending = tuple(case.expect) if kind == "customer_dependent" else ()
    turn, evaluated = await _real_turn(case, pending), await _evaluated(kind, case)
    for schema in (gm.GuidelineMatchBatch, gm.CustomerDependentBatch, gm.DisambiguationVerdict):
        asked = evaluated.of(schema)
        assert asked == turn.of(schema)[: len(asked)], schema.__name__
    (packed,) = evaluated.of(gm.GuidelineMatchBatch)  # every guideline recall keeps, in one call
    verdicts = re.search(r"with exactly (\d+) verdicts", packed)
    assert verdicts is not None and 15 <= int(verdicts.group(1)) <= 30


async def test_the_travel_agents_cases_are_asked_in_one_batch_of_30_guidelines() -> None:
    """The large agent: 28 agent-wide guidelines and 3 journeys' conditions, less the head of
    its disambiguation (asked apart), in one packed prompt; the context variable is in it."""
    kind, case = _case("act37-variable-gold")
    (packed,) = (await _evaluated(kind, case)).of(gm.GuidelineMatchBatch)
    assert "with exactly 30 verdicts" in packed
    assert "- loyalty_tier: gold" in packed


async def test_a_journey_case_sends_the_node_selection_prompt_of_a_real_turn() -> None:
    kind, case = _case("jn-dest-answered")
    turn, evaluated = await _real_turn(case), await _evaluated(kind, case)
    asked = evaluated.of(JourneyNodeSelection)
    assert len(asked) == 1 and asked == turn.of(JourneyNodeSelection)[:1]


async def test_a_tool_case_sends_the_tool_prompt_of_a_real_turn() -> None:
    case = EvalCase(
        id="stock", agent="bank", conv=["C: What is Apple's stock price?"],
        offered={"stock_price": agent("bank").guideline("stock").action or ""},
        expect={"calls": {"stock_price": {"symbol": "AAPL"}}},
    )  # fmt: skip
    turn, evaluated = await _real_turn(case), await _evaluated("tool_arguments", case)
    asked = evaluated.of(ToolCallPlan)
    assert len(asked) == 1 and asked == turn.of(ToolCallPlan)


# --------------------------------------------------------------------------------------------------
# The development part and the held-back test part


def test_the_parts_are_fixed_by_the_scenarios_name() -> None:
    cases = [c for cs in load_cases().values() for c in cs]
    for case in cases:
        digest = int(hashlib.sha256((case.scenario or case.id).encode()).hexdigest(), 16)
        assert part_of(case) == ("test" if digest % 3 == 0 else "dev")
    by_id = {c.id: c for c in cases}
    paraphrases = [c for c in cases if c.scenario]
    assert paraphrases and all(part_of(c) == part_of(by_id[c.scenario or ""]) for c in paraphrases)
    test = sum(part_of(c) == "test" for c in cases)
    assert 0.25 < test / len(cases) < 0.42


def test_every_kind_has_cases_in_both_parts() -> None:
    for kind, cases in load_cases().items():
        parts = Counter(part_of(c) for c in cases)
        assert parts["dev"] >= 5 and parts["test"] >= 5, (kind, parts)


def test_a_scenario_must_name_a_case(tmp_path: Path) -> None:
    case = "- {id: a, scenario: nobody, agent: bank, conv: ['C: hi'], expect: {greet: true}}\n"
    with pytest.raises(CaseFileError, match="scenario 'nobody' is no case's id"):
        load_cases(_write(tmp_path, "kind: actionable\ncases:\n" + case))


def test_failures_list_the_development_part_unless_the_test_part_is_asked_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["--kind", "disambiguation", "--failures", "100"]) == 0
    listed = capsys.readouterr().out
    ids = {c.id: part_of(c) for c in load_cases()["disambiguation"]}
    shown = set(re.findall(r"✗ disambiguation/(\S+):", listed))
    assert shown and {ids[i] for i in shown} == {"dev"}
    assert "wrong in the held-back test part, not listed" in listed
    assert cli.main(["--kind", "disambiguation", "--part", "test", "--failures", "100"]) == 0
    shown = set(re.findall(r"✗ disambiguation/(\S+):", capsys.readouterr().out))
    assert shown and {ids[i] for i in shown} == {"test"}
