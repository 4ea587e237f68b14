"""`python -m bench`: run the benchmarks, print the tables, rewrite docs/BENCHMARKS.md.

`python -m bench eval …` runs the labelled evaluation set instead (`bench.eval.cli`);
`python -m bench turn-requests` what one message costs in AWS requests (`bench.turn_requests`),
`python -m bench monthly-cost` the monthly cost table of docs/deploy.md (`bench.monthly_cost`);
`python -m bench paraphrase …` the paraphrase suite (`bench.paraphrase`); `python -m bench
speculation` speculation off against on (`bench.speculation`); `python -m bench
offline-agents` the offline model on agents written for that measurement
(`bench.offline_agents.measure`); `python -m bench scale` the scale model and its check
against the local stack (`bench.scale`); `python -m bench languages …` the language-detection comparison
(`bench.language_report`)."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from bench.config import DEFAULT, QUICK, SECTIONS
from bench.document import DOC, write_document
from bench.report import console_report
from bench.run import console_progress, run


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["long-session"]:  # one session to 1,000 turns on moto (bench/long_session.py)
        from bench.long_session import main as long_session

        return long_session(argv[1:])
    if argv[:1] == ["turn-requests"]:  # AWS requests and tokens per message (docs/deploy.md)
        from bench.turn_requests import main as turn_requests

        return turn_requests(argv[1:])
    if argv[:1] == ["monthly-cost"]:  # docs/deploy.md's monthly cost table
        from bench.monthly_cost import main as monthly_cost

        return monthly_cost(argv[1:])
    if argv[:1] == ["compare"]:  # opt-in: installs the reference engine (bench/compare.py)
        from bench.compare import main as compare

        return compare(argv[1:])
    if argv[:1] == ["eval"]:
        from bench.eval.cli import main as eval_main

        return eval_main(argv[1:])
    if argv[:1] == ["languages"]:  # language-identification libraries on short messages
        from bench.language_report import main as languages_main

        return languages_main(argv[1:])
    if argv[:1] == ["offline-agents"]:  # the offline model on agents not written for it
        from bench.offline_agents.measure import main as offline_agents_main

        return offline_agents_main(argv[1:])
    if argv[:1] == ["speculation"]:  # the reply drafted beside round 1, off against on
        from bench.speculation import main as speculation_main

        return speculation_main(argv[1:])
    if argv[:1] == ["scale"]:  # the scale model: 10,000 conversations (docs/capacity.md)
        from bench.scale import main as scale_main

        return scale_main(argv[1:])
    if argv[:1] == ["paraphrase"]:  # the paraphrase suite's pass rate per agent
        from bench.paraphrase import main as paraphrase_main

        return paraphrase_main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Waypoint benchmarks: per-turn LLM cost, engine overhead, scale, "
        "embeddings, cold start; writes docs/BENCHMARKS.md. `python -m bench eval --help`: "
        "the decision evaluation set; `python -m bench compare --help`: side by side with the "
        "reference engine (installs it on first use).",
    )
    parser.add_argument("--quick", action="store_true", help="about a minute: fewer repeats")
    parser.add_argument(
        "--latency-ms", type=float, default=None, help="simulated latency per LLM call (400)"
    )
    parser.add_argument(
        "--latency-per-token-ms",
        type=float,
        default=None,
        help="extra simulated latency per completion token (0)",
    )
    parser.add_argument(
        "--estimate-tokens",
        action="store_true",
        help="count tokens as chars/4 even when a tokenizer is installed",
    )
    parser.add_argument(
        "--only",
        default=None,
        help=f"comma-separated sections to run ({', '.join(SECTIONS)}); the document still "
        "gets written",
    )
    parser.add_argument("--output", type=Path, default=DOC, help="Markdown report path")
    parser.add_argument("--no-write", action="store_true", help="do not write the document")
    args = parser.parse_args(argv)

    config = QUICK if args.quick else DEFAULT
    if args.latency_ms is not None:
        config = replace(config, latency_ms=args.latency_ms)
    if args.latency_per_token_ms is not None:
        config = replace(config, latency_per_token_ms=args.latency_per_token_ms)
    if args.estimate_tokens:
        config = replace(config, tokenizer=False)
    if args.only:
        wanted = tuple(s.strip() for s in args.only.split(",") if s.strip())
        unknown = set(wanted) - set(SECTIONS)
        if unknown:
            parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
        config = replace(config, sections=wanted)

    result = run(config, console_progress(time.perf_counter()))
    print(console_report(result))
    if not args.no_write:
        path = write_document(result, args.output)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
