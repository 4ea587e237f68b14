"""What the whole suite shares: how many workers `pytest -n auto` (`make test`) starts, and the
order that lets them finish together."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterator

import pytest

LONG = "long"
"""`pytestmark = pytest.mark.long(seconds)`: the module keeps a worker busy for about that many
seconds during `make test` on an idle 2-core machine, mostly waiting (served stacks, CLI
subprocesses, restarts). Such modules start their workers' shares
(`pytest_collection_modifyitems`)."""


# Variables a command run in-process sets for the process it believes it owns (`waypoint chat`
# quiets the worker's logs with POWERTOOLS_LOG_LEVEL): each test gets the environment back as it
# found it, so no later test's Lambda containers or loggers inherit them.
PROCESS_VARIABLES = ("POWERTOOLS_LOG_LEVEL",)


@pytest.fixture(autouse=True)
def _process_variables_restored() -> Iterator[None]:
    before = {name: os.environ.get(name) for name in PROCESS_VARIABLES}
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{LONG}(seconds): a test that keeps its worker busy about that long; under pytest-xdist "
        "it is scheduled at the start of a worker's share so that no worker is left alone with "
        "it at the end",
    )


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """Two workers per CPU. A good part of the suite waits rather than computes — on served
    stacks, CLI subprocesses, restarts, retry back-offs — so one worker per CPU left a core idle
    about half the time (`/usr/bin/time` on two cores: 147 % CPU with two workers, 187 % with
    four; docs/development.md). `PYTEST_XDIST_AUTO_NUM_WORKERS` still decides when it is set."""
    del config
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist's own hook reads it
    return 2 * max(1, len(os.sched_getaffinity(0)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist's work stealing (`make test`), each worker is first given one
    contiguous share of the collected tests, and an idle worker later steals the second half of
    the longest queue — never a test already running. In collection order the longest tests
    (restarts, load, the newcomer's path, the benchmark smoke run) came last, so one worker ran
    them alone for minutes while the other cores idled. Here the modules marked `long` are dealt
    out first, the longest to the least loaded share, and each share starts with its long
    modules, then continues in collection order. Every worker computes the same order (it
    depends only on the collection and the worker count), as pytest-xdist requires."""
    del config
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if workers < 2:
        return
    long_modules: dict[str, list[pytest.Item]] = defaultdict(list)
    seconds: dict[str, float] = defaultdict(float)
    rest: list[pytest.Item] = []
    for item in items:
        marker = item.get_closest_marker(LONG)
        if marker is None:
            rest.append(item)
            continue
        module = item.nodeid.split("::", 1)[0]
        long_modules[module].append(item)
        # The module's estimate (a module's `pytestmark` marks each of its tests alike).
        seconds[module] = max(seconds[module], float(marker.args[0]) if marker.args else 30.0)
    if not long_modules:
        return
    # Longest first, each to the share with the fewest seconds so far (ties: the first).
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    load = [0.0] * workers
    for module in sorted(long_modules, key=lambda m: (-seconds[m], m)):
        target = min(range(workers), key=lambda i: (load[i], i))
        shares[target] += long_modules[module]
        load[target] += seconds[module]
    # pytest-xdist's first distribution: worker i gets len(pending) // (workers - i) of what is
    # left, in order. Fill each share up to that size with the rest, in collection order.
    ordered: list[pytest.Item] = []
    remaining = len(items)
    for i, share in enumerate(shares):
        size = remaining // (workers - i)
        fill = max(0, size - len(share))
        ordered += share + rest[:fill]
        rest = rest[fill:]
        remaining -= size
    items[:] = ordered + rest
