"""Real models' runs of the evaluation set in docs/BENCHMARKS.md: one dated section per model
and day, newest first, in their own block — the offline model's table is never touched.

`python -m bench eval --llm openai --model M` writes (or, run again the same day, replaces) the
section of M for that day; other models' and other days' sections stay.
"""

from __future__ import annotations

import re
from pathlib import Path

from bench.blocks import make_block, read_block
from bench.eval.report import counted, table_lines
from bench.eval.runner import EvalRun

BLOCK = "eval-models"
HEADING = "## Decision accuracy of real models (`python -m bench eval --llm openai`)"

INTRO = (
    "Each section is one model's run of the evaluation set above — the same cases, asked "
    "through the same stage functions, with the development and held-back test parts reported "
    "apart — written by `python -m bench eval --llm openai --model M` (`OPENAI_BASE_URL` for any "
    "OpenAI-compatible server), newest first. A run again the same day replaces that day's "
    "section of that model."
)

_MARK = re.compile(r"^<!-- eval-run: (?P<key>.+?) -->$", re.MULTILINE)


def section_key(run: EvalRun, day: str) -> str:
    return f"{run.provider} / {run.model} / {day}"


def model_section(run: EvalRun, day: str, *, scope: str = "") -> str:
    """One run's section: heading, what ran, the table. `scope` says when only part of the set
    ran (`--kind`, `--limit`, `--part`)."""
    errors = sum(r.error is not None for r in run.results)
    lines = [
        f"<!-- eval-run: {section_key(run, day)} -->",
        f"### `{run.model}` ({run.provider}), {day}",
        "",
        f"{counted(run)}{f' — {scope}' if scope else ''}; {run.seconds:.0f} s wall; "
        f"{errors} failed model call{'s' if errors != 1 else ''} (counted wrong). Tokens are "
        "the server's counts per case; latency is the model calls' own time.",
        "",
        *table_lines(run),
    ]
    return "\n".join(lines)


def write_model_section(path: Path, run: EvalRun, day: str, *, scope: str = "") -> None:
    """Put the run's section into the document's block of model runs: replacing the same model's
    section of that day, else first; the block is added at the end when the file has none."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    current = read_block(text, BLOCK)
    sections = _sections(current) if current is not None else []
    key = section_key(run, day)
    sections = [s for s in sections if _key(s) != key]
    sections.insert(0, model_section(run, day, scope=scope))
    block = make_block(BLOCK, "\n\n".join([INTRO, *sections]))
    if current is not None:
        text = text.replace(current, block)
    else:
        text = f"{text.rstrip()}\n\n{HEADING}\n\n{block}\n"
    path.write_text(text, encoding="utf-8")


def _sections(block: str) -> list[str]:
    """The sections of a block (markers and introduction dropped), in order."""
    body = block.split("\n", 1)[1].rsplit("\n", 1)[0]
    starts = [m.start() for m in _MARK.finditer(body)]
    return [body[a:b].strip() for a, b in zip(starts, [*starts[1:], len(body)], strict=True)]


def _key(section: str) -> str:
    found = _MARK.match(section)
    return found.group("key") if found else ""
