"""The decision evaluation set (`python -m bench eval`): it loads, every case runs through the
engine's real prompt builders with the offline model and yields a report, the OpenAI path speaks
to an OpenAI-compatible server, and a broken case file is refused with a message naming the fix.
Accuracy is reported, never asserted: the set measures models, it does not gate them."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from bench.blocks import read_block
from bench.document import EVAL_BLOCK, write_document
from bench.eval import cli
from bench.eval.cases import KINDS, CaseFileError, load_cases
from bench.eval.report import markdown_table
from bench.eval.runner import EvalRun, run_eval
from infra.offline import OfflineLLM
from tests.fakes.openai_server import Fail, FakeOpenAIServer, Reply

pytestmark = pytest.mark.timeout(120)


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
    assert all(r.calls >= 1 for r in run.results if r.kind != "journey_node")
    rows = {row.name: row for row in run.rows()}
    for kind in KINDS:
        assert rows[kind].cases == len(cases[kind])
        assert 0 <= rows[kind].correct <= rows[kind].cases
        assert rows[kind].prompt_tokens > 0
    assert {"journey_node: advance", "journey_node: stay", "journey_node: backtrack"} <= set(rows)
    assert rows["all"].cases == len(run.results)
    table = markdown_table(run)
    assert all(f"| {kind} |" in table for kind in KINDS)


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
    assert "disambiguation  2" in capsys.readouterr().out


def test_write_doc_replaces_the_accuracy_block_and_bench_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text("# Benchmarks\n\nold text\n", encoding="utf-8")
    monkeypatch.setattr(cli, "DOC", doc)
    assert cli.main(["--kind", "canned", "--limit", "3", "--write-doc"]) == 0
    block = read_block(doc.read_text(), EVAL_BLOCK)
    assert block is not None and "| canned | 3 |" in block
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
# The OpenAI path, against the local fake OpenAI-compatible server


@pytest.fixture
def server() -> FakeOpenAIServer:
    with FakeOpenAIServer() as running:
        yield running


def _verdicts(*handles: str) -> Reply:
    return Reply(
        {"verdicts": [{"id": h, "applies": True, "score": 9, "rationale": ""} for h in handles]},
        prompt_tokens=321,
        completion_tokens=17,
    )


def test_openai_run_sends_the_engine_prompt_to_the_chosen_model_and_counts_failures(
    server: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    # obs-upset-plain: right; obs-upset-polite-no: wrong (upset said true); the third call fails
    server.queue_chat(_verdicts("g1"), _verdicts("g1"), Fail(400, "model refused"))
    out = tmp_path / "openai.json"
    argv = ["--llm", "openai", "--model", "eval-model", "--kind", "observational", "--limit", "3"]
    assert cli.main([*argv, "--concurrency", "1", "--json", str(out)]) == 0
    requests = server.chat_requests
    assert len(requests) == 3
    assert {r.model for r in requests} == {"eval-model"}
    assert all("### Observations (g1" in r.prompt for r in requests)
    assert "This is ridiculous" in requests[0].prompt
    data = json.loads(out.read_text())
    assert data["provider"] == "openai" and data["model"] == "eval-model"
    first, second, third = data["results"]
    assert first["correct"] and first["prompt_tokens"] == 321 and first["completion_tokens"] == 17
    assert not second["correct"] and second["error"] is None
    assert not third["correct"] and "model refused" in third["error"]
    printed = capsys.readouterr().out
    assert "openai / eval-model" in printed and "1/3" in printed


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
    """A call with the labelled arguments that the gate would not run — it asks for a value the
    label says was given — is what a real turn does with it, so it is not counted right; the
    report counts what the gate made of each case's calls."""
    from bench.eval.cases import EvalCase, agent, context
    from bench.eval.decisions import gate_evidence, gate_verdict

    case = EvalCase(
        id="gate", agent="bank", conv=["C: can I send 900 from savings?"],
        offered={"check_funds": "x"}, expect={"calls": {"check_funds": {}}},
    )  # fmt: skip
    evidence = gate_evidence(case, context(case))
    spec = agent("bank").tool("check_funds")
    assert gate_verdict(spec, {"account": "savings", "amount": 900}, evidence) == "runs"
    transfer = agent("bank").tool("transfer_money")
    invented = {"account": "savings", "to_account_id": "1234567", "amount": 900}
    assert gate_verdict(transfer, invented, evidence) == "asked"

    cases = {k: v for k, v in load_cases().items() if k == "tool_arguments"}
    run = await run_eval(OfflineLLM(), cases, provider="offline", model="offline-heuristic")
    rows = {row.name for row in run.rows()}
    assert {"tool_arguments: gate: runs", "tool_arguments: gate: asked"} <= rows
