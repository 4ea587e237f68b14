"""The evaluation's tables: for the console and for docs/BENCHMARKS.md."""

from __future__ import annotations

import json

from bench.eval.runner import EvalRun, KindRow


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def _share(cases: int, correct: int) -> str:
    return f"{correct}/{cases} {_pct(correct / cases)}" if cases else "—"


def _cells(row: KindRow) -> list[str]:
    dev, test = row.parts.get("dev", (0, 0)), row.parts.get("test", (0, 0))
    return [
        row.name,
        f"{dev[0]}+{test[0]}",
        _share(*dev),
        _share(*test),
        _share(row.cases, row.correct),
        f"{_pct(row.hard_accuracy)} of {row.hard}",
        f"{row.prompt_tokens:.0f}",
        f"{row.completion_tokens:.0f}",
        f"{row.latency_ms_p50:.1f}",
        str(row.errors),
    ]


HEADERS = [
    "decision",
    "cases dev+test",
    "dev",
    "test (held back)",
    "all",
    "hard cases",
    "prompt tok",
    "compl. tok",
    "p50 ms",
    "errors",
]


def console_table(run: EvalRun, *, failures: int = 0, part: str | None = None) -> str:
    """A fixed-width table; `failures` > 0 lists that many wrong cases with what came back — of
    the development part, or of `part` when one is named (the test part's failures are not
    read while the offline model or the prompts are being changed)."""
    rows = [HEADERS, *(_cells(r) for r in run.rows())]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS))]
    lines = [f"Evaluation set: {run.provider} / {run.model} — {len(run.results)} cases"]
    for n, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    cpu = sum(r.cpu_ms for r in run.results) / max(1, len(run.results))
    lines.append(f"wall {run.seconds:.1f}s; CPU per case {cpu:.1f} ms (prompt, call, verification)")
    if failures > 0:
        listed = part or "dev"
        wrong = [r for r in run.failures if r.part == listed]
        hidden = sum(r.part != listed for r in run.failures)
        for result in wrong[:failures]:
            got = json.dumps(result.got, default=str, ensure_ascii=False)
            want = json.dumps(result.expect, default=str, ensure_ascii=False)
            why = f" ({result.error})" if result.error else ""
            lines.append(f"  ✗ {result.kind}/{result.case_id}: want {want}, got {got}{why}")
        if hidden and part is None:
            lines.append(
                f"  ({hidden} wrong in the held-back test part, not listed: --part test lists "
                "them; a change to the offline model or the prompts is judged on them unread)"
            )
    return "\n".join(lines)


HOW_ASKED = (
    "Every decision the engine asks a model to make, as labelled cases "
    "(`bench/eval/cases/*.yaml`, one file per kind; agents in `bench/eval/agents/`), each asked "
    "exactly as a turn asks it: the case is put in the state of the turn that decides it and the "
    "turn's own stage functions build the prompt and read the answer — recall and the match "
    "round's batches (every guideline recall keeps is in the packed prompt a turn sends; only "
    "the labelled ones are scored), node selection through the step every stage moves a journey "
    "by, tool calls planned by the tool stage and then passed through the action gate (a right "
    "call the gate would not run counts as wrong); canned replies are asked with the canned "
    "prompt builder on the case's instructions and templates. "
    '"Hard cases" are the ones the set is weighted to: a condition that held earlier but not '
    "now, an action already applied, half an answer, a topic switch mid-journey, a correction, "
    "a refusal."
)

PARTS_RULE = (
    "The set is split by scenario into a **development** part and a held-back **test** part "
    "(about a third): a scenario — a case, with the cases that paraphrase it — is in the test "
    "part when the SHA-256 of its name is divisible by 3 (`bench/eval/cases.py`), so no file "
    "says which and paraphrases never straddle the two. Work on the offline model or on the "
    "prompts may read the development part; **a change to either is judged on the test part "
    "only**, whose failures are not read while the change is made."
)


def markdown_table(run: EvalRun) -> str:
    """The offline model's section for docs/BENCHMARKS.md."""
    lines = [
        HOW_ASKED,
        "",
        PARTS_RULE,
        "",
        "Run it on any model and compare:",
        "",
        "```",
        "python -m bench eval                                    # the offline model",
        "OPENAI_API_KEY=sk-... python -m bench eval --llm openai --model gpt-4o-mini",
        "OPENAI_BASE_URL=http://localhost:8000/v1 python -m bench eval --llm openai --model M",
        "python -m bench eval --part dev --kind values --failures 20   # one kind, what went wrong",
        "python -m bench eval --write-doc                        # refresh this table",
        "```",
        "",
        "A real model's run of the whole set (`--llm openai --model M`) writes M's dated section "
        'under "Decision accuracy of real models" (a section the first such run adds); '
        "this table is the offline model's.",
        "",
        f"Model: `{run.provider}` / `{run.model}`, {counted(run)}. "
        "Tokens are per case (the offline model estimates them as characters / 4); "
        "latency is the model calls' own time.",
        "",
        *table_lines(run),
    ]
    return "\n".join(lines)


def counted(run: EvalRun) -> str:
    dev = sum(r.part == "dev" for r in run.results)
    return f"{len(run.results)} labelled cases ({dev} development, {len(run.results) - dev} test)"


def table_lines(run: EvalRun) -> list[str]:
    """The accuracy table as Markdown lines."""
    return [
        "| " + " | ".join(HEADERS) + " |",
        "|" + "|".join("---" for _ in HEADERS) + "|",
        *("| " + " | ".join(_cells(r)) + " |" for r in run.rows()),
    ]
