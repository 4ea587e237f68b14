"""`python -m bench languages [--quick] [--only NAME] [--write-doc]`: the language-detection
comparison (`bench.language_detection`) as tables: accuracy on both parts of the set, what a
message costs, what the library costs to import and install; `--write-doc` puts them in
docs/languages.md ("Detection")."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path

from bench.blocks import update_block
from bench.language_candidates import CANDIDATES, NOT_MEASURED
from bench.language_detection import MODES, ColdRow, ModeResult, cold, load_cases, score
from bench.machine import describe_machine
from bench.table import Table, render_markdown, render_text

DOC = Path(__file__).resolve().parents[1] / "docs" / "languages.md"
BLOCK = "language-detection"
HEADING = "## Detection"
GROUPS = (
    "en",
    "es",
    "pt",
    "fr",
    "de",
    "ja",
    "zh-Hans",
    "zh-Hant",
    "zh",
    "it",
    "nl",
    "ko",
    "ru",
    "none",
)


def _pct(value: float | None) -> str:
    return "–" if value is None or math.isnan(value) else f"{100 * value:.1f}%"


def _ms(value: float | None) -> str:
    return "–" if value is None or math.isnan(value) else f"{value:,.1f}"


def accuracy_table(results: Sequence[ModeResult], colds: dict[str, ColdRow]) -> Table:
    """One row per library and mode: accuracy on dev and test, and what it costs."""
    rows = []
    for r in results:
        c = colds.get(r.candidate)
        if r.status != "ok":
            rows.append([r.candidate, r.mode, r.status, *["–"] * 12])
            continue
        rows.append(
            [
                r.candidate,
                r.mode,
                f"{r.threshold:.3f}",
                f"{_pct(r.accuracy['dev'])} / {_pct(r.accuracy['test'])}",
                f"{_pct(r.short['dev'])} / {_pct(r.short['test'])}",
                f"{_pct(r.none_rate['dev'])} / {_pct(r.none_rate['test'])}",
                f"{_pct(r.silenced['dev'])} / {_pct(r.silenced['test'])}",
                f"{r.median_us:,.0f} / {r.p95_us:,.0f}",
                _ms(c.first_call_ms.get(r.mode)) if c else "–",
                _ms(c.import_ms) if c else "–",
                f"{c.installed_mb:.1f}" if c else "–",
                f"{next(x.wheel_mb for x in CANDIDATES if x.name == r.candidate):.1f}",
                ("yes" if c.deterministic else "NO")
                if c and c.status == "ok"
                else (c.status if c else "–"),
            ]
        )
    return Table(
        "Language detection per library: accuracy (dev / test) and cost",
        [
            "library",
            "languages",
            "threshold (dev)",
            "accuracy",
            "accuracy < 10 chars",
            "None on no-language messages",
            "None on a served-language message",
            "µs per message p50 / p95",
            "first call ms",
            "cold import ms",
            "installed MB",
            "wheel MB",
            "same answers across hash seeds and runs",
        ],
        rows,
        [
            "Every library runs through the engine's steps (`read_language`): addresses, numbers "
            "and 'ok' dropped; kana → ja, Hangul → ko, Han → Chinese with its script by "
            "hanzidentifier; the library ranks the rest. languages: all = every language the "
            "library knows; shipped = the shipped languages' bases (en es pt fr de ja zh), by the "
            "library's own restriction or by filtering its ranking. threshold = the confidence "
            "under which a message is in no language, chosen on the dev part alone. Over "
            "'shipped', a message in another language (it, nl, ko, ru) is right when the answer "
            "names no shipped language. first call = building the detector and its first "
            "answer (the model loaded), cold import = `import` of its module, both in a fresh "
            "interpreter (median over 3 hash seeds). installed MB: the distribution and what it "
            "brings beyond Waypoint's own dependencies (hanzidentifier + zhon, the Chinese script "
            "step shared by all, add 0.25 MB). µs per message: the whole reading, warm.",
            *(f"Not measured: {name} — {why}." for name, why in NOT_MEASURED.items()),
        ],
    )


def per_language_table(results: Sequence[ModeResult], part: str) -> Table:
    groups = [g for g in GROUPS if any(g in r.per_language for r in results)]
    rows = [
        [r.candidate, r.mode, *(_pct(r.per_language.get(g, {}).get(part)) for g in groups)]
        for r in results
        if r.status == "ok"
    ]
    return Table(
        f"Accuracy per language, {part} part",
        ["library", "languages", *groups],
        rows,
        [
            "zh = Chinese whose characters are the same in both scripts (好的): right when "
            "answered zh. none = amounts, ids, names, emoji, 'ok': right when answered None."
        ],
    )


def counts_table() -> Table:
    cases = load_cases()
    rows = []
    for g in GROUPS:
        label = None if g == "none" else g
        dev = sum(1 for c in cases if c.label == label and c.part == "dev")
        test = sum(1 for c in cases if c.label == label and c.part == "test")
        short = sum(1 for c in cases if c.label == label and len(c.text) < 10)
        rows.append([g, str(dev), str(test), str(short)])
    return Table(
        "The evaluation set (bench/language_cases)",
        ["label", "dev", "test", "< 10 chars"],
        rows,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench languages",
        description="Compare language-identification libraries on short customer messages.",
    )
    parser.add_argument("--only", default=None, help="libraries whose name contains this")
    parser.add_argument(
        "--quick", action="store_true", help="skip the fresh-interpreter measurements"
    )
    parser.add_argument("--write-doc", action="store_true", help=f"update {DOC.name}")
    args = parser.parse_args(argv)
    cases = load_cases()
    chosen = [c for c in CANDIDATES if not args.only or args.only in c.name]
    results = [score(c, mode, cases) for c in chosen for mode in MODES]
    colds = {} if args.quick else {c.name: cold(c) for c in chosen}
    tables = [
        counts_table(),
        accuracy_table(results, colds),
        per_language_table(results, "dev"),
        per_language_table(results, "test"),
    ]
    print("\n\n".join(render_text(t) for t in tables))
    if args.write_doc:
        machine = describe_machine()
        head = (
            f"_Measured by `python -m bench languages --write-doc` on {machine.get('date', '')}, "
            f"commit {machine.get('commit', '')}; {machine.get('cpu', '')}, "
            f"{machine.get('cores', '')} cores, load average {machine.get('load_average', '')} "
            "at the end (the machine is shared: times carry its noise)._"
        )
        body = "\n\n".join([head, *(render_markdown(t, "####") for t in tables)])
        update_block(DOC, BLOCK, body, heading=HEADING)
        print(f"wrote {DOC}")
    return 0
