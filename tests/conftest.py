"""What the whole suite shares: how many workers `pytest -n auto` (`make test`) starts."""

from __future__ import annotations

import os

import pytest


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """Two workers per CPU. A good part of the suite waits rather than computes — on served
    stacks, CLI subprocesses, restarts, retry back-offs — so one worker per CPU left a core idle
    about half the time (`/usr/bin/time` on two cores: 147 % CPU with two workers, 187 % with
    four; docs/development.md). `PYTEST_XDIST_AUTO_NUM_WORKERS` still decides when it is set."""
    del config
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist's own hook reads it
    return 2 * max(1, len(os.sched_getaffinity(0)))
