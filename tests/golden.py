"""Golden files for pure prompt builders and map texts (tests/snapshots/*.txt).

After an intended change: `WAYPOINT_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/engine`, then review
the diff of tests/snapshots/ like any other code change.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"


def assert_snapshot(name: str, text: str) -> None:
    """Compare with tests/snapshots/<name>.txt; WAYPOINT_UPDATE_SNAPSHOTS=1 rewrites it."""
    path = SNAPSHOTS / f"{name}.txt"
    actual = text + "\n"
    if os.environ.get("WAYPOINT_UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    how = "WAYPOINT_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/engine"
    if not path.exists():
        pytest.fail(f"missing golden file {path}; create it with: {how}")
    expected = path.read_text(encoding="utf-8")
    if expected != actual:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                actual.splitlines(keepends=True),
                f"{name}.txt (golden)",
                f"{name}.txt (now)",
            )
        )
        pytest.fail(f"{name} differs from its golden file:\n{diff}\nIf intended, run: {how}")
