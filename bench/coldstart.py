"""Cold start: import time of each Lambda handler module, and the first turn, in fresh processes.

Like shared/notes/aws-local.md §8: a new interpreter per measurement, `time.perf_counter()`
around the import, `.pyc` files present (one unmeasured warm-up run first), median of N. The
handler modules are the ones template.yaml names (`Handler:`), else the four the design plans
(webhook, worker, management, tool_task); a module that does not exist yet gets a "not present"
row. A few component modules are measured too, to explain the handlers' numbers, and
`-X importtime` names the heaviest packages each handler pulls in.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.results import ColdHandlerRow, ColdTurnRow, FirstTurnRow, ImportRow
from bench.stats import median

Progress = Callable[[str], None]
ROOT = Path(__file__).resolve().parents[1]

FASTAPI_FLOOR = "bench.fastapi_floor"
PLANNED_HANDLERS = {
    "functions.webhook": "webhook (channel ingress)",
    "functions.worker": "turn worker",
    "functions.management": "management API",
    "functions.tool_task": "tool task (Step Functions)",
}
COMPONENTS = {
    "engine.turn": "component: the engine alone",
    "infra.aws.dynamo_sessions": "component: DynamoDB session store (boto3)",
    "infra.llm.openai_llm": "component: OpenAI adapter",
    FASTAPI_FLOOR: "component: a one-route FastAPI + Mangum + Logger app (a FastAPI handler's floor)",
}

# What a Lambda has in its environment; dummy credentials keep botocore from probing for any.
# Not AWS_LAMBDA_FUNCTION_NAME: with it the worker builds its whole runtime at import (its init
# phase, `functions.worker_init`), which the cold-turn table's handler row measures; these rows
# are each module's import alone.
LAMBDA_ENV = {
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "WAYPOINT_TABLE": "waypoint-bench-state",
    "WAYPOINT_BUCKET": "waypoint-bench-embeddings",
    "WAYPOINT_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/waypoint-bench.fifo",
}


def handler_modules(template: Path = ROOT / "template.yaml") -> dict[str, str]:
    """Module → role for every function in template.yaml, plus the planned ones."""
    modules: dict[str, str] = {}
    try:
        from infra.aws.cfn_template import load_template

        resources = load_template(template).get("Resources", {})
    except Exception:  # no template or unreadable: the planned list still applies
        resources = {}
    for logical_id, resource in resources.items():
        if resource.get("Type") not in ("AWS::Serverless::Function", "AWS::Lambda::Function"):
            continue
        handler = str(resource.get("Properties", {}).get("Handler", ""))
        if "." in handler:
            module = handler.rsplit(".", 1)[0].replace("/", ".")
            modules[module] = PLANNED_HANDLERS.get(module, f"handler of {logical_id}")
    for module, role in PLANNED_HANDLERS.items():
        modules.setdefault(module, role)
    return modules


# The reference engine's SDK, measured beside our handlers when `python -m bench compare` has
# installed it (its own virtual environment, nothing of ours on its path): the handler import
# target is a share of it, compared within one run.
REFERENCE_MODULE = "parlant.sdk"
REFERENCE_ROLE = "reference engine's SDK (Parlant, .bench-venvs/parlant; not ours)"
REFERENCE_VENV = ROOT / ".bench-venvs" / "parlant"  # `python -m bench compare` installs it
REFERENCE_PYTHON = REFERENCE_VENV / "bin" / "python"
# Importing its SDK creates its home (else `parlant-data/` in the working directory).
_IMPORT_HOME = str(Path(tempfile.gettempdir()) / "waypoint-bench-parlant-home")


def reference_import(rows: Iterable[ImportRow]) -> ImportRow | None:
    """The reference SDK's import measured in this run, if it was."""
    return next(
        (r for r in rows if r.module == REFERENCE_MODULE and r.status == "ok" and r.median_ms),
        None,
    )


def reference_env(home: str | None = None) -> dict[str, str]:
    """The reference's own environment (nothing of ours on its path), its PARLANT_HOME `home`
    or else a fresh temporary directory — so no evaluation cache of an earlier run spares its
    server's boot the LLM evaluations."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PARLANT_HOME"] = home or tempfile.mkdtemp(prefix="parlant-home-")
    return env


def _env() -> dict[str, str]:
    env = {**os.environ, **LAMBDA_ENV}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _present(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _fresh_python(
    *args: str, timeout: float, reference: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run `python *args` in a fresh interpreter from the repository root (the reference's
    interpreter and environment with `reference`)."""
    return subprocess.run(
        [str(REFERENCE_PYTHON) if reference else sys.executable, *args],
        cwd=ROOT,
        env=reference_env(_IMPORT_HOME) if reference else _env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _last_output_line(*args: str, timeout: float, reference: bool = False) -> str:
    """The last line `python *args` prints; RuntimeError with its last error line if it fails."""
    done = _fresh_python(*args, timeout=timeout, reference=reference)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise RuntimeError(last[:200])
    return done.stdout.strip().splitlines()[-1]


def _import_once(module: str, *, bytecode: bool = True) -> tuple[float, float]:
    """(wall ms, CPU ms) of `import module` in a fresh interpreter. Without `bytecode`, the
    interpreter finds no .pyc and writes none (its bytecode cache is an empty folder), so it
    compiles every module it imports from source: a Lambda whose read-only package has none."""
    code = (
        "import time\n_t, _c = time.perf_counter(), time.process_time()\n"
        f"import {module}\n"
        "print((time.perf_counter() - _t) * 1000, (time.process_time() - _c) * 1000)"
    )
    reference = module == REFERENCE_MODULE
    if bytecode:
        line = _last_output_line("-c", code, timeout=120, reference=reference)
    else:
        with tempfile.TemporaryDirectory(prefix="waypoint-no-pyc-") as empty:
            line = _last_output_line("-B", "-X", f"pycache_prefix={empty}", "-c", code, timeout=240)
    wall, cpu = line.split()
    return float(wall), float(cpu)


def _attempt(module: str) -> tuple[float, float] | str:
    """`_import_once`, with a failure turned into its message."""
    try:
        return _import_once(module)
    except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
        return str(exc)


_IMPORTTIME = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)$")


def heaviest_packages(module: str, top: int = 6) -> list[tuple[str, float]]:
    """Top-level packages by cumulative import time (first import of each, ms)."""
    done = _fresh_python("-X", "importtime", "-c", f"import {module}", timeout=120)
    per_package: dict[str, float] = {}
    for line in done.stderr.splitlines():
        m = _IMPORTTIME.match(line)
        if not m:
            continue
        package = m.group(4).split(".")[0]
        per_package[package] = max(per_package.get(package, 0.0), int(m.group(2)) / 1000)
    ranked = sorted(per_package.items(), key=lambda kv: -kv[1])
    return [(name, round(ms, 1)) for name, ms in ranked[:top]]


def measure_imports(
    runs: int,
    progress: Progress,
    *,
    warmup: bool = True,
    profile: bool = True,
    components: bool = True,
    parallel: bool = False,
    only: tuple[str, ...] = (),
    source_runs: int = 3,
) -> list[ImportRow]:
    """Median of `runs` fresh-process imports per module. Runs are interleaved across modules
    (round robin), so a burst of load from elsewhere on the machine hits every module alike.
    Each handler is also imported `source_runs` times without bytecode (`_import_once`)."""
    modules = {**handler_modules(), **(COMPONENTS if components else {})}
    if REFERENCE_PYTHON.exists():
        modules[REFERENCE_MODULE] = REFERENCE_ROLE
    rows: dict[str, ImportRow] = {}
    walls: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    for module, role in modules.items():
        if module != REFERENCE_MODULE and not _present(module):
            rows[module] = ImportRow(module, role, "not present")
            progress(f"import {module}: not present")
            continue
        if only and module not in only:
            rows[module] = ImportRow(module, role, "skipped in this configuration")
            continue
        try:
            if warmup:
                _import_once(module)  # .pyc written, files in the page cache
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
            rows[module] = ImportRow(module, role, f"error: {exc}")
            progress(f"import {module}: error: {exc}")
            continue
        walls[module], cpus[module] = [], []
    for _ in range(runs):
        pending = list(walls)
        if parallel:
            with ThreadPoolExecutor(max_workers=len(pending) or 1) as pool:
                outcomes = list(pool.map(_attempt, pending))
        else:
            outcomes = [_attempt(module) for module in pending]
        for module, outcome in zip(pending, outcomes, strict=True):
            if isinstance(outcome, str):
                rows[module] = ImportRow(module, modules[module], f"error: {outcome}")
                del walls[module], cpus[module]
                continue
            walls[module].append(outcome[0])
            cpus[module].append(outcome[1])
    for module, times in walls.items():
        row = ImportRow(
            module,
            modules[module],
            "ok",
            median_ms=median(times),
            min_ms=min(times),
            max_ms=max(times),
            cpu_median_ms=median(cpus[module]),
            runs=runs,
            heaviest=heaviest_packages(module)
            if profile and module.startswith("functions.")
            else [],
        )
        rows[module] = row
        progress(
            f"import {module}: median {row.median_ms:.0f} ms wall, {row.cpu_median_ms:.0f} ms "
            f"CPU over {runs} fresh processes"
        )
    _measure_without_bytecode(
        [rows[m] for m in walls if m.startswith("functions.")], source_runs, progress
    )
    return [rows[m] for m in modules]


def _measure_without_bytecode(rows: list[ImportRow], runs: int, progress: Progress) -> None:
    """Each row's import compiled from source, `runs` times interleaved (median)."""
    times: dict[str, list[float]] = {row.module: [] for row in rows}
    for _ in range(runs):
        for row in rows:
            try:
                times[row.module].append(_import_once(row.module, bytecode=False)[0])
            except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
                progress(f"import {row.module} without bytecode: error: {exc}")
    for row in rows:
        if times[row.module]:
            row.source_median_ms = median(times[row.module])
            row.source_runs = len(times[row.module])
            progress(
                f"import {row.module} without bytecode: median {row.source_median_ms:.0f} ms "
                f"over {row.source_runs} fresh processes"
            )


def measure_first_turn(runs: int, progress: Progress, *, warmup: bool = True) -> FirstTurnRow:
    results: list[dict[str, Any]] = []
    for _ in range(runs + int(warmup)):
        try:
            line = _last_output_line("-m", "bench.first_turn", timeout=300)
        except RuntimeError as exc:
            return FirstTurnRow(0, 0.0, 0.0, 0.0, 0.0, status=f"error: {exc}")
        results.append(json.loads(line))
    results = results[int(warmup) :]
    row = FirstTurnRow(
        runs=runs,
        import_ms=median(r["import_ms"] for r in results),
        agent_ms=median(r["agent_ms"] for r in results),
        first_turn_ms=median(r["first_turn_ms"] for r in results),
        second_turn_ms=median(r["second_turn_ms"] for r in results),
    )
    progress(
        f"fresh process: engine import {row.import_ms:.0f} ms, banking agent {row.agent_ms:.0f} ms, "
        f"first turn {row.first_turn_ms:.0f} ms, second turn {row.second_turn_ms:.0f} ms"
    )
    return row


COLD_TURN_PARTS = (
    "import_ms",
    "runtime_ms",
    "snapshot_ms",
    "vectors_ms",
    "session_ms",
    "turn_ms",
    "commit_ms",
)


def measure_cold_turn(
    runs: int, progress: Progress, *, warmup: bool = True, handler_warm_turns: int = 20
) -> ColdTurnRow:
    """The first turn of a fresh worker process against a moto server holding the published
    banking agent (`bench.cold_turn`), each part's median over `runs` processes; then the same
    through the real handler in a Lambda container (`bench.cold_handler`), its twins' warm turns
    `handler_warm_turns` per container."""
    row = _measure_engine_path(runs, progress, warmup=warmup)
    row.handler = measure_handler_path(runs, handler_warm_turns, progress, warmup=warmup)
    return row


def measure_handler_path(
    runs: int, warm_turns: int, progress: Progress, *, warmup: bool = True
) -> ColdHandlerRow:
    """`bench.cold_handler`: a cold Lambda container of the worker, init and first invocation."""
    from bench.cold_handler import handler_row, measure_cold_handler

    try:
        measured = measure_cold_handler(runs, warm_turns, progress, warmup=warmup)
    except (RuntimeError, subprocess.TimeoutExpired, OSError, ValueError) as exc:
        progress(f"cold turn through the handler: error: {exc}")
        return ColdHandlerRow(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, False, status=f"error: {exc}")
    row = handler_row(measured, warm_turns)
    progress(
        f"cold turn through the handler: init {row.init_ms:.0f} ms + first invocation "
        f"{row.invocation_ms:.0f} ms − model {row.model_ms:.0f} ms = {row.total_ms:.0f} ms; "
        f"warm turn CPU p95 {row.turn_cpu_p95_ms:.1f} ms (unfrozen {row.unfrozen_turn_cpu_p95_ms:.1f}), "
        f"a full collection {row.full_pass_ms:.1f} ms (unfrozen {row.unfrozen_full_pass_ms:.1f})"
    )
    return row


def _measure_engine_path(runs: int, progress: Progress, *, warmup: bool = True) -> ColdTurnRow:
    """`bench.cold_turn`: the engine's turn path without the handler, each part's median."""
    import asyncio
    import tempfile

    from examples import banking
    from infra.aws.local_stack import LocalStack
    from infra.embeddings import HashingEmbedder
    from infra.runtime import Runtime

    results: list[dict[str, float]] = []
    try:
        with LocalStack(server=True) as stack:
            publisher = Runtime(embedder=HashingEmbedder())
            asyncio.run(publisher.publish_agent(banking.load()))
            publisher.close()
            env = {**stack.env, **{k: os.environ[k] for k in _STACK_ENV if k in os.environ}}
            for n in range(runs + int(warmup)):
                with tempfile.TemporaryDirectory(prefix="waypoint-cold-") as cache:
                    done = subprocess.run(
                        [sys.executable, "-m", "bench.cold_turn", f"cold-{n}"],
                        cwd=ROOT,
                        env={**_env(), **env, "WAYPOINT_CACHE_DIR": cache},
                        capture_output=True,
                        text=True,
                        timeout=300,
                    )
                if done.returncode != 0:
                    last = (done.stderr.strip().splitlines() or ["failed"])[-1]
                    raise RuntimeError(last[:200])
                results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    except (RuntimeError, subprocess.TimeoutExpired, OSError, ValueError) as exc:
        progress(f"cold turn on moto: error: {exc}")
        return ColdTurnRow(
            runs=0, parts_ms={}, total_ms=0.0, llm_fake_ms=0.0, status=f"error: {exc}"
        )
    results = results[int(warmup) :]
    row = ColdTurnRow(
        runs=runs,
        parts_ms={p: median(r[p] for r in results) for p in COLD_TURN_PARTS},
        total_ms=median(r["total_ms"] for r in results),
        llm_fake_ms=median(r["llm_fake_ms"] for r in results),
        llm_calls=int(median(r["llm_calls"] for r in results)),
    )
    parts = ", ".join(f"{p[:-3]} {ms:.0f}" for p, ms in row.parts_ms.items())
    progress(f"cold turn on moto: {row.total_ms:.0f} ms without the LLM ({parts} ms)")
    return row


# What the stack sets in this process for its clients (endpoint, credentials, region).
_STACK_ENV = (
    "WAYPOINT_AWS_ENDPOINT_URL",
    "MOTO_PORT",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
)
