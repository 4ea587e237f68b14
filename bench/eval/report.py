"""The evaluation's tables: for the console and for docs/BENCHMARKS.md."""

from __future__ import annotations

import json

from bench.eval.runner import EvalRun, KindRow


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def _cells(row: KindRow) -> list[str]:
    return [
        row.name,
        str(row.cases),
        f"{row.correct}/{row.cases}",
        _pct(row.accuracy),
        f"{_pct(row.hard_accuracy)} of {row.hard}",
        f"{row.prompt_tokens:.0f}",
        f"{row.completion_tokens:.0f}",
        f"{row.latency_ms_p50:.1f}",
        str(row.errors),
    ]


HEADERS = [
    "decision",
    "cases",
    "right",
    "accuracy",
    "hard cases",
    "prompt tok",
    "compl. tok",
    "p50 ms",
    "errors",
]


def console_table(run: EvalRun, *, failures: int = 0) -> str:
    """A fixed-width table; `failures` > 0 lists that many wrong cases with what came back."""
    rows = [HEADERS, *(_cells(r) for r in run.rows())]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS))]
    lines = [f"Evaluation set: {run.provider} / {run.model} — {len(run.results)} cases"]
    for n, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    cpu = sum(r.cpu_ms for r in run.results) / max(1, len(run.results))
    lines.append(f"wall {run.seconds:.1f}s; CPU per case {cpu:.1f} ms (prompt, call, verification)")
    for result in run.failures[:failures]:
        got = json.dumps(result.got, default=str, ensure_ascii=False)
        want = json.dumps(result.expect, default=str, ensure_ascii=False)
        why = f" ({result.error})" if result.error else ""
        lines.append(f"  ✗ {result.kind}/{result.case_id}: want {want}, got {got}{why}")
    return "\n".join(lines)


def markdown_table(run: EvalRun) -> str:
    """The table for docs/BENCHMARKS.md."""
    lines = [
        "Every decision the engine asks a model to make, as labelled cases "
        "(`bench/eval/cases/*.yaml`, one file per kind; agents in `bench/eval/agents/`), run "
        "through the engine's own prompt builders, schemas and answer verification. "
        '"Hard cases" are the ones the set is weighted to: a condition that held earlier but '
        "not now, an action already applied, half an answer, a topic switch mid-journey, a "
        "correction, a refusal. Run it on any model and compare:",
        "",
        "```",
        "python -m bench eval                                    # the offline model",
        "OPENAI_API_KEY=sk-... python -m bench eval --llm openai --model gpt-4o-mini",
        "OPENAI_BASE_URL=http://localhost:8000/v1 python -m bench eval --llm openai --model M",
        "python -m bench eval --kind values --failures 20        # one kind, list what went wrong",
        "python -m bench eval --write-doc                        # refresh this table",
        "```",
        "",
        f"Model: `{run.provider}` / `{run.model}`, {len(run.results)} labelled cases. "
        "Tokens are per case (the offline model estimates them as characters / 4); "
        "latency is the model call's own time.",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "|".join("---" for _ in HEADERS) + "|",
    ]
    lines.extend("| " + " | ".join(_cells(r)) + " |" for r in run.rows())
    return "\n".join(lines)
