"""What `python -m bench compare` measures, like for like: the reference engine's CPU is its
engine's tasks only (a client polling on the same event loop or in another thread is not in
it), memory is a fresh process's own peak (not its parent's carried in), the report labels both
perceived-performance settings of the reference, and the reference installs from a pinned set
that `pip check` accepts. Nothing here installs the reference; the checks that need its venv
skip when `python -m bench compare` has not installed it."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bench.compare import (
    CONSTRAINTS,
    VENV,
    Side,
    _our_env,
    constraints_stamp,
    import_cost,
    venv_python,
)
from bench.compare_report import DELAYS_DEFAULT, DELAYS_OFF, LIKE_FOR_LIKE, render
from bench.peak_memory import peak_rss_mb
from bench.task_cpu import TaskCpu, install


def _burn(ms: float) -> None:
    """Spend `ms` of this thread's CPU."""
    end = time.thread_time() + ms / 1000
    while time.thread_time() < end:
        pass


def test_the_engine_cpu_excludes_a_busy_client_polling_beside_it() -> None:
    install()  # before the loop starts, as the driver does: every callback is timed
    account = TaskCpu()
    client_ms = 0.0

    async def client() -> None:  # polls on the same loop, busy, all the turn long
        nonlocal client_ms
        while not done.is_set():
            _burn(3)
            client_ms += 3
            await asyncio.sleep(0)

    async def analysis() -> None:  # created by the turn: its CPU is the turn's
        _burn(10)
        await asyncio.sleep(0.001)
        _burn(10)

    async def turn() -> None:
        account.mark()
        for _ in range(5):
            _burn(5)
            await asyncio.sleep(0.001)
        await asyncio.create_task(analysis())

    done = threading.Event()
    other = threading.Thread(target=_burn, args=(150,))  # another thread of the process

    async def main() -> float:
        polling = asyncio.create_task(client())
        await asyncio.sleep(0)
        other.start()
        started = time.process_time()
        await asyncio.create_task(turn())
        done.set()
        await polling
        other.join()
        return (time.process_time() - started) * 1000

    process_ms = asyncio.run(main())
    turn_ms = 5 * 5 + 2 * 10
    assert client_ms >= 30 and process_ms > turn_ms + client_ms  # the client did keep busy
    assert turn_ms <= account.ms < turn_ms + 10  # the turn's work, and none of the client's
    assert account.callbacks >= 7  # every step of the turn and of the task it created


def test_memory_is_the_fresh_processs_own_not_its_parents() -> None:
    ballast = bytearray(300 * 1024 * 1024)
    ballast[::4096] = b"\1" * len(ballast[::4096])  # resident, not only reserved
    assert peak_rss_mb() >= 300  # this process's own peak sees it
    child = import_cost(sys.executable, "json", runs=1, env=_our_env())
    del ballast
    # A child of this 300 MB process: `ru_maxrss` would report at least 300 MB here.
    assert 0 < child["rss_mb"] < 100


def _turn(wall_ms: float, cpu_ms: float, **extra: object) -> dict[str, object]:
    return {
        "message": "hi",
        "calls": 3,
        "rounds": 2,
        "prompt_tokens": 3000,
        "wall_ms": wall_ms,
        "engine_cpu_ms": cpu_ms,
        **extra,
    }


def test_the_report_labels_both_perceived_performance_settings_and_both_cpu_figures() -> None:
    ours = Side("Waypoint", "commit x", run={"turns": [_turn(800.0, 5.0)]})
    theirs = Side(
        "parlant (reference)",
        "3.3.1",
        run={"turns": [_turn(1000.0, 25.0, calls=16, process_cpu_ms=100.0)]},
        default_delays={"turns": [_turn(3000.0, 26.0, calls=16, process_cpu_ms=110.0)]},
    )
    context = {"date": "d", "machine": "m", "load": "1", "latency_ms": 400.0, "seconds": 1.0}
    body = render(ours, theirs, context)
    assert (
        "| wall ms (reference: perceived-performance waits off) | 800 | 1,000 | 1.2× (ours 0.80×) |"
        in body
    )
    assert (
        "| wall ms, reference with its default policy (1.5–2 s wait before a preamble, 1–2 s "
        "after it) | 800 | 3,000 | 3.8× (ours 0.27×) |"
    ) in body
    assert (
        "| engine CPU ms (reference: its engine's tasks) | 5.0 | 25.0 | 5.0× (ours 0.20×) |" in body
    )
    assert "client's polling) | – | 100.0 | – |" in body
    row = "| 1 | hi | 3 / 2 / 3,000 / 800 / 5.0 | 16 / 2 / 3,000 / 1,000 / 25.0 | 3,000 |"
    assert row in body
    assert DELAYS_OFF in body and DELAYS_DEFAULT in body
    assert all(item in body for item in LIKE_FOR_LIKE)


def test_the_reference_constraints_pin_every_release_and_settle_its_conflicts() -> None:
    pins = {}
    for line in CONSTRAINTS.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert re.fullmatch(r"[A-Za-z0-9_.\-]+", name) and version, line
            pins[name.lower().replace("_", "-")] = version
    # aiopenapi3 0.9.0 (pinned by Parlant 3.3.1) requires exactly this pydantic; botocore < 3.
    assert pins["aiopenapi3"] == "0.9.0" and pins["pydantic"] == "2.11.9"
    assert int(pins["python-dateutil"].split(".")[0]) < 3
    assert {"fastapi", "mcp", "fastmcp", "uvicorn", "starlette", "httpx"} <= set(pins)
    assert len(constraints_stamp()) == 64


needs_reference = pytest.mark.skipif(
    not venv_python(VENV).exists(),
    reason="the reference's venv (.bench-venvs/parlant) is not installed: `python -m bench "
    "compare` installs it",
)


@needs_reference
def test_the_installed_reference_is_the_pinned_set_and_pip_check_accepts_it() -> None:
    python = str(venv_python(VENV))
    checked = subprocess.run(
        [python, "-m", "pip", "check"], capture_output=True, text=True, timeout=300
    )
    assert checked.returncode == 0, checked.stdout
    frozen = subprocess.run(
        [python, "-m", "pip", "freeze"], capture_output=True, text=True, timeout=300
    ).stdout.splitlines()
    lines = CONSTRAINTS.read_text(encoding="utf-8").splitlines()
    pinned = {line for line in lines if line and not line.startswith("#")}
    assert pinned <= set(frozen)


@needs_reference
def test_what_the_driver_patches_exists_in_the_pinned_reference() -> None:
    probe = (
        "import parlant.sdk as p\n"
        "from parlant.core.app_modules.sessions import SessionModule\n"
        "from parlant.core.services.tools.plugins import PluginServer\n"
        "assert callable(SessionModule._process_session) and callable(PluginServer._create_app)\n"
        "names = ('get_preamble_delay', 'get_processing_indicator_delay', 'get_follow_up_delay')\n"
        "assert all(hasattr(p.BasicPerceivedPerformancePolicy, n) for n in names)\n"
    )
    done = subprocess.run(
        [str(venv_python(VENV)), "-c", probe],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
