"""The example agents. Their snapshots are immutable, so each is read and validated once per
process and shared until its `agent.yaml` changes (size or modification time): the demo, the
benchmarks and a thousand tests load them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.model import AgentSnapshot

_loaded: dict[Path, tuple[tuple[int, int], AgentSnapshot]] = {}


def loaded_once(path: Path, load: Callable[[], AgentSnapshot]) -> AgentSnapshot:
    """`load()`'s snapshot of the agent at `path`, loaded again only when the file changed."""
    stat = path.stat()
    key = (stat.st_mtime_ns, stat.st_size)
    kept = _loaded.get(path)
    if kept is None or kept[0] != key:
        kept = _loaded[path] = (key, load())
    return kept[1]
