"""Helpers for the CLI tests: the CLI as a user runs it (a subprocess in a folder of their own),
and a chat over a real local stack driven line by line."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rich.console import Console

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The local stack as the tests run it: the offline model, a cache of the test's own, quiet
    Lambda logs. Autouse in every test module that imports it."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "WAYPOINT_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WAYPOINT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "CRITICAL")


def run_cli(
    *args: str, cwd: Path, stdin: str = "", timeout: float = 240, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m waypoint.cli ARGS` in `cwd`, offline, with this checkout first on the path
    (the way a user's shell runs `waypoint`, but never the installed copy of another tree)."""
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "WAYPOINT_LLM_PROVIDER")
    }
    environ.update(
        {
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "COLUMNS": "200",
            "WAYPOINT_CACHE_DIR": str(cwd / ".cache"),
            **(env or {}),
        }
    )
    return subprocess.run(
        [sys.executable, "-m", "waypoint.cli", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environ,
    )


def serve_banner(
    *args: str,
    cwd: Path,
    timeout: float = 120,
    command: str = "serve",
    env_extra: dict[str, str] | None = None,
) -> str:
    """Start `python -m waypoint.cli serve ARGS` (or `command`) in `cwd` (this checkout on the
    path) and return what it printed up to its "Ctrl-C to stop" line; the server is stopped
    before returning."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "200",
        "WAYPOINT_CACHE_DIR": str(cwd / ".cache"),
        **(env_extra or {}),  # last: a test may narrow COLUMNS, say
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "waypoint.cli", command, *args],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    try:
        seen = ""
        deadline = time.monotonic() + timeout
        assert process.stdout is not None
        while "Ctrl-C to stop" not in seen and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            seen += line
        return seen
    finally:
        process.terminate()
        process.wait(timeout=30)


class Lines:
    """Typed lines for `Chat.run`; a callable instead of a line runs first (edit a file, …)."""

    def __init__(self, *items: str | Callable[[], None]) -> None:
        self._items: Iterator[str | Callable[[], None]] = iter(items)

    def __call__(self) -> str:
        for item in self._items:
            if callable(item):
                item()
                continue
            return item
        raise EOFError


def recording_console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200, force_terminal=False, color_system=None), out
