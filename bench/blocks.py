"""Marked blocks in the generated docs: sections another command owns (the load results of
`make soak`), kept when `python -m bench` rewrites docs/BENCHMARKS.md.

A block is the text between `<!-- NAME:begin -->` and `<!-- NAME:end -->` lines."""

from __future__ import annotations

from pathlib import Path


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def read_block(text: str, name: str) -> str | None:
    """The block `name` of `text`, markers included, or None when there is none."""
    begin, end = _markers(name)
    start = text.find(begin)
    stop = text.find(end, start)
    if start < 0 or stop < 0:
        return None
    return text[start : stop + len(end)]


def make_block(name: str, body: str) -> str:
    begin, end = _markers(name)
    return f"{begin}\n{body.strip()}\n{end}"


def update_block(path: Path, name: str, body: str, *, heading: str) -> None:
    """Replace the block `name` in the file at `path` with `body`; append it under `heading`
    when the file has no such block yet."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    block = make_block(name, body)
    current = read_block(text, name)
    if current is not None:
        text = text.replace(current, block)
    else:
        text = f"{text.rstrip()}\n\n{heading}\n\n{block}\n"
    path.write_text(text, encoding="utf-8")
