"""`python -m bench eval --llm offline|openai [--model M]`: run the evaluation set, print the table.

`--llm openai` scores a real model in one command: the whole set's run writes a dated section for
that model into docs/BENCHMARKS.md (`bench.eval.model_runs`). The offline model's table there is
refreshed only with `--write-doc`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict
from datetime import date
from pathlib import Path

from bench.blocks import update_block
from bench.document import DOC, EVAL_BLOCK, EVAL_HEADING
from bench.eval.cases import KINDS, PARTS, CaseFileError, count, load_cases, part_of
from bench.eval.model_runs import write_model_section
from bench.eval.report import console_table, markdown_table
from bench.eval.runner import CaseResult, EvalRun, run_eval
from engine.errors import LLMError
from infra.llm.factory import build_llm

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench eval",
        description="Run the labelled evaluation set (bench/eval/cases) through the engine's "
        "stage functions and a model; report accuracy per decision kind on the development "
        "and the held-back test part, tokens and latency. Changes to the offline model or the "
        "prompts are judged on the test part only.",
    )
    p.add_argument(
        "--llm",
        choices=("offline", "openai"),
        default="offline",
        help="offline: the built-in heuristic model; openai: OPENAI_API_KEY (and "
        "OPENAI_BASE_URL for any compatible server)",
    )
    p.add_argument("--model", default=None, help=f"model name for openai ({DEFAULT_OPENAI_MODEL})")
    p.add_argument(
        "--kind", action="append", choices=KINDS, help="only this decision kind (repeatable)"
    )
    p.add_argument("--part", choices=PARTS, default=None, help="only this part of the set")
    p.add_argument("--limit", type=int, default=None, help="at most this many cases per kind")
    p.add_argument("--concurrency", type=int, default=4, help="model calls in flight (4)")
    p.add_argument(
        "--failures",
        type=int,
        default=0,
        help="list up to N wrong cases of the development part (of the test part only with "
        "--part test: its failures are not read while changing the model or the prompts)",
    )
    p.add_argument("--json", type=Path, default=None, help="also write every result as JSON")
    doc = DOC.relative_to(DOC.parents[1])
    p.add_argument(
        "--write-doc",
        action="store_true",
        help=f"offline: replace the accuracy table in {doc}; openai: write the model's dated "
        "section even for a partial run (--kind, --part, --limit)",
    )
    p.add_argument(
        "--no-write-doc",
        action="store_true",
        help=f"openai: do not write the model's dated section into {doc}",
    )
    p.add_argument(
        "--date",
        type=date.fromisoformat,
        default=None,
        help="the day a model's section is dated (today)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        cases = load_cases()
    except CaseFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.kind:
        cases = {k: v for k, v in cases.items() if k in args.kind}
    if args.part:
        cases = {k: [c for c in v if part_of(c) == args.part] for k, v in cases.items()}
    if args.limit is not None:
        cases = {k: v[: max(0, args.limit)] for k, v in cases.items()}
    try:
        llm = build_llm(args.llm)
    except LLMError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    model = (
        args.model or DEFAULT_OPENAI_MODEL if args.llm == "openai" else getattr(llm, "model", "")
    )
    print(f"running {count(cases)} cases on {args.llm} / {model} …", file=sys.stderr)
    run = asyncio.run(
        run_eval(llm, cases, provider=args.llm, model=model, concurrency=args.concurrency)
    )
    print(console_table(run, failures=args.failures, part=args.part))
    if args.json is not None:
        args.json.write_text(_as_json(run), encoding="utf-8")
    scope = _scope(args)
    if args.llm == "openai" and not args.no_write_doc and (args.write_doc or not scope):
        day = (args.date or date.today()).isoformat()
        write_model_section(DOC, run, day, scope=scope)
        print(f"wrote {model}'s section of {day} in {DOC}")
    elif args.llm != "openai" and args.write_doc:
        update_block(DOC, EVAL_BLOCK, markdown_table(run), heading=EVAL_HEADING)
        print(f"wrote {DOC}")
    return 0


def _scope(args: argparse.Namespace) -> str:
    """What part of the set a run covered, when not all of it ("" for the whole set)."""
    parts = []
    if args.kind:
        parts.append("kinds " + ", ".join(args.kind))
    if args.part:
        parts.append(f"the {args.part} part only")
    if args.limit is not None:
        parts.append(f"at most {args.limit} cases per kind")
    return "; ".join(parts)


def _as_json(run: EvalRun) -> str:
    def result(r: CaseResult) -> dict[str, object]:
        return asdict(r)

    return json.dumps(
        {
            "provider": run.provider,
            "model": run.model,
            "seconds": run.seconds,
            "results": [result(r) for r in run.results],
        },
        indent=1,
        default=str,
        ensure_ascii=False,
    )
