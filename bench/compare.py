"""`python -m bench compare`: Waypoint and the reference engine (Parlant, pinned) side by side.

Opt-in (not in `make test` or `make bench`): it installs the reference engine into its own
virtual environment on first use (`.bench-venvs/parlant`: the pinned set of bench/reference-constraints.txt,
installed by pip's normal resolver and checked by `pip check`), then:

1. exports one agent — the reference's 30-guideline worked example as bench/worked_example.py
   builds it for us (25 actionable, 2 observational, 2 previously applied, the return journey with
   a tool step, one tool on a guideline) — to a neutral JSON spec;
2. drives our engine (`bench.compare_ours`, a fresh process) through the five customer
   messages with our fake LLM, recording per turn what it decided (guidelines matched, journey
   steps, tools run with their arguments, the reply); writes that into the spec as `script`;
3. drives the reference (`bench/reference_driver.py`, a fresh process of the reference's venv,
   through its SDK's server and REST API) through the same messages with a fake that follows
   the script (`bench/reference_fake.py`) and records what the reference then did; both fakes
   at the same latency model (400 ms per call);
4. measures per turn: LLM calls, sequential rounds, prompt tokens (chars/4 on both sides: the
   unit of the reference figures), wall time; then engine CPU, import time and peak memory;
5. writes the side-by-side tables, ratios, whether the decisions agreed and what is not like
   for like into the marked `compare` block of docs/BENCHMARKS.md (kept when `python -m bench`
   rewrites the file).

If installing or driving the reference fails, what did work is still written, with the failure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.blocks import update_block
from bench.coldstart import FASTAPI_FLOOR, REFERENCE_VENV, handler_modules, reference_env
from bench.document import COMPARE_BLOCK as BLOCK
from bench.document import COMPARE_HEADING as HEADING
from bench.document import DOC
from bench.peak_memory import PROBE_SOURCE
from bench.stats import median

ROOT = Path(__file__).resolve().parents[1]
VENV = REFERENCE_VENV
# The reference's dependencies, pinned (a set `pip check` accepts): see the file's header.
CONSTRAINTS = ROOT / "bench" / "reference-constraints.txt"
REFERENCE_PACKAGE = "parlant"
REFERENCE_VERSION = "3.3.1"
MESSAGES = (
    "Hello there",
    "I want to return a product I bought last week",
    "The order number is ORD-5521. And what is the shipment status of ORD-5521?",
    "It arrived damaged.",
    "Thanks, that's all",
)


# --------------------------------------------------------------------------------------------------
# The shared agent


def agent_spec() -> dict[str, Any]:
    """The reference scenario's agent as plain data both drivers build from."""
    from bench.worked_example import reference_agent
    from engine.model import NodeKind

    snapshot = reference_agent("tool_via_guideline")
    journey_conditions = {gid for j in snapshot.journeys for gid in j.condition_guideline_ids}
    guidelines = [
        {"id": g.id, "condition": g.condition, "action": g.action, "tools": list(g.tools)}
        for g in snapshot.guidelines
        if g.id not in journey_conditions and g.scoped_journey_id is None
    ]
    journeys = []
    for j in snapshot.journeys:
        nodes = {
            n.id: {
                "id": n.id,
                "kind": "tool" if n.kind is NodeKind.TOOL else "chat",
                "action": n.action,
                "tools": list(n.tools),
            }
            for n in j.nodes
        }
        edges = [
            {"source": e.source, "target": e.target, "condition": e.condition} for e in j.edges
        ]
        journeys.append(
            {
                "id": j.id,
                "title": j.title,
                "description": j.description,
                "conditions": list(j.conditions),
                "root": j.root_id,
                "nodes": list(nodes.values()),
                "edges": edges,
            }
        )
    tools = [
        {
            "name": t.name,
            "description": t.description,
            "parameters": [{"name": p.name, "description": p.description} for p in t.parameters],
        }
        for t in snapshot.tools
    ]
    return {
        "name": snapshot.name,
        "description": snapshot.description,
        "guidelines": guidelines,
        "journeys": journeys,
        "tools": tools,
        "applied": [g["id"] for g in guidelines if str(g["id"]).startswith("applied")],
        "messages": list(MESSAGES),
    }


def with_script(spec: dict[str, Any], our_run: dict[str, Any]) -> dict[str, Any]:
    """The spec with `script`: per customer message, what our engine decided on that turn (the
    guidelines that matched, where its journeys went, the tools it ran, its reply). The
    reference's fake (bench/reference_fake.py) answers by it."""
    script = [{"message": t["message"], **t["decisions"]} for t in our_run.get("turns", [])]
    return {**spec, "script": script}


# --------------------------------------------------------------------------------------------------
# The reference's virtual environment


def _say(message: str) -> None:
    print(f"[compare] {message}", file=sys.stderr, flush=True)


def venv_python(venv: Path = VENV) -> Path:
    return venv / "bin" / "python"


def installed_version(venv: Path = VENV) -> str | None:
    python = venv_python(venv)
    if not python.exists():
        return None
    done = subprocess.run(
        [
            str(python),
            "-c",
            f"import importlib.metadata as m; print(m.version({REFERENCE_PACKAGE!r}))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def constraints_stamp(constraints: Path = CONSTRAINTS) -> str:
    """What a venv installed from `constraints` records: the file's sha256."""
    return hashlib.sha256(constraints.read_bytes()).hexdigest()


def _stamp_path(venv: Path) -> Path:
    return venv / "waypoint-reference-constraints.sha256"


def _pip(venv: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv_python(venv)), "-m", "pip", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ensure_reference(venv: Path = VENV, constraints: Path = CONSTRAINTS) -> str:
    """The reference engine installed in its own venv with the pinned set of
    bench/reference-constraints.txt (pip's normal resolver, then `pip check`); its version.

    A venv installed from another constraints file (or before there was one) is made anew, so
    no release outside the pinned set stays behind."""
    stamp = constraints_stamp(constraints)
    version = installed_version(venv)
    recorded = _stamp_path(venv).read_text().strip() if _stamp_path(venv).exists() else None
    if version == REFERENCE_VERSION and recorded == stamp:
        _say(f"reference engine {REFERENCE_PACKAGE} {version} found in {venv} (pinned set)")
        return version
    if venv.exists():
        _say(f"{venv} was not installed from {constraints.name}: making it anew")
        shutil.rmtree(venv)
    _say(f"creating the virtual environment {venv}")
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=300)
    spec = f"{REFERENCE_PACKAGE}=={REFERENCE_VERSION}"
    _say(f"installing {spec} into {venv} with {constraints.name} (about a minute)")
    process = subprocess.Popen(
        [
            str(venv_python(venv)),
            "-m",
            "pip",
            "install",
            "--progress-bar",
            "off",
            "--constraint",
            str(constraints),
            spec,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith(("Installing", "Successfully", "ERROR")):
            _say(line.rstrip())
    if process.wait() != 0:
        raise RuntimeError(
            f"pip install {spec} -c {constraints.name} failed (exit {process.returncode})"
        )
    checked = _pip(venv, "check", timeout=300)
    if checked.returncode != 0:
        raise RuntimeError(f"pip check rejects the installed set: {checked.stdout.strip()}")
    _say(f"pip check: {checked.stdout.strip()}")
    version = installed_version(venv)
    if version != REFERENCE_VERSION:
        raise RuntimeError(f"{spec} installed but reports version {version!r}")
    _stamp_path(venv).write_text(stamp + "\n", encoding="utf-8")
    return version


# --------------------------------------------------------------------------------------------------
# Measurements in fresh processes


def _run_json(argv: list[str], *, env: dict[str, str] | None = None, timeout: float) -> Any:
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise RuntimeError(f"{Path(argv[1]).name if len(argv) > 1 else argv[0]} failed: {tail}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# Wall and CPU of the import, the process's own peak RSS after it (VmHWM: not the parent's
# high-water mark that `ru_maxrss` carries into a child, see bench/peak_memory.py), modules.
IMPORT_PROBE = (
    "import sys, time\n_t, _c = time.perf_counter(), time.process_time()\n"
    "import {module}\n"
    "_wall, _cpu = (time.perf_counter() - _t) * 1000, (time.process_time() - _c) * 1000\n"
    + PROBE_SOURCE
    + "print(_wall, _cpu, _peak_rss_mb, len(sys.modules))"
)


def import_cost(python: str, module: str, runs: int, env: dict[str, str]) -> dict[str, float]:
    """Median wall / CPU ms, peak RSS MB (the fresh process's own) and modules loaded by
    `import module`, fresh processes."""
    samples = []
    for _ in range(runs + 1):  # the first writes .pyc files: not counted
        done = subprocess.run(
            [python, "-c", IMPORT_PROBE.format(module=module)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise RuntimeError(f"import {module}: {done.stderr.strip().splitlines()[-1:]}")
        samples.append([float(x) for x in done.stdout.split()])
    samples = samples[1:]
    return {
        "wall_ms": median(s[0] for s in samples),
        "cpu_ms": median(s[1] for s in samples),
        "rss_mb": median(s[2] for s in samples),
        "modules": median(s[3] for s in samples),
    }


def _our_env() -> dict[str, str]:
    from bench.coldstart import LAMBDA_ENV

    env = {**os.environ, **LAMBDA_ENV}
    env["PYTHONPATH"] = str(ROOT)
    return env


@dataclass
class Side:
    name: str
    version: str
    status: str = "ok"
    imports: dict[str, float] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)  # turns + cpu + memory, from the driver
    # the reference only: the same conversation with its default perceived-performance policy
    # (`run` has its waits off); its wall times are reported beside, labelled
    default_delays: dict[str, Any] = field(default_factory=dict)
    # every Lambda handler's `import` (template.yaml): module → median wall ms (ours only)
    handlers: dict[str, float] = field(default_factory=dict)
    # a one-route FastAPI + Mangum + Logger app's import (ours only): a FastAPI handler's floor
    http_floor_ms: float | None = None


def measure_ours(spec_path: Path, latency_ms: float, runs: int) -> Side:
    side = Side("Waypoint", _our_version())
    side.imports = import_cost(sys.executable, "functions.worker", runs, _our_env())
    for module in handler_modules():
        if module == "functions.worker":
            side.handlers[module] = side.imports["wall_ms"]
            continue
        side.handlers[module] = import_cost(sys.executable, module, runs, _our_env())["wall_ms"]
    side.http_floor_ms = import_cost(sys.executable, FASTAPI_FLOOR, runs, _our_env())["wall_ms"]
    side.run = _run_json(
        [sys.executable, "-m", "bench.compare_ours", str(spec_path), str(latency_ms)],
        env=_our_env(),
        timeout=600,
    )
    return side


def measure_reference(spec_path: Path, latency_ms: float, runs: int, version: str) -> Side:
    side = Side(f"{REFERENCE_PACKAGE} (reference)", version)
    python = str(venv_python())
    try:
        side.imports = import_cost(python, "parlant.sdk", runs, reference_env())
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        side.status = f"import failed: {exc}"
        return side
    driver = ROOT / "bench" / "reference_driver.py"
    # Its perceived-performance waits off (like for like with ours, which has none), then its
    # default policy, whose deliberate waits the report shows apart.
    for delays in ("off", "default"):
        try:
            run = _run_json(
                [python, str(driver), str(spec_path), str(latency_ms), "--delays", delays],
                env=reference_env(),
                timeout=1200,
            )
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
            side.status = f"driving failed (delays {delays}): {exc}"
            return side
        if delays == "off":
            side.run = run
        else:
            side.default_delays = run
    return side


def _our_version() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    return f"commit {done.stdout.strip()}" if done.returncode == 0 else "working tree"


# --------------------------------------------------------------------------------------------------
# Entry point


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench compare",
        description="Waypoint vs the reference engine (Parlant "
        f"{REFERENCE_VERSION}) on the same agent and conversation; writes the `compare` block "
        "of docs/BENCHMARKS.md. Installs the reference into .bench-venvs/parlant on first use.",
    )
    parser.add_argument("--latency-ms", type=float, default=400.0, help="per LLM call (400)")
    parser.add_argument("--import-runs", type=int, default=5, help="fresh processes per import")
    parser.add_argument("--output", type=Path, default=DOC)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)

    from bench.compare_report import render

    started = time.perf_counter()
    spec_path = ROOT / ".bench-venvs" / "compare-agent.json"
    spec_path.parent.mkdir(parents=True, exist_ok=True)
    spec = agent_spec()
    spec_path.write_text(json.dumps(spec, indent=2), encoding="utf-8")
    _say("our engine: imports and the conversation")
    ours = measure_ours(spec_path, args.latency_ms, args.import_runs)
    # The reference's fake follows what our engine decided, turn by turn.
    spec_path.write_text(json.dumps(with_script(spec, ours.run), indent=2), encoding="utf-8")
    try:
        version = ensure_reference()
    except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
        theirs = Side(f"{REFERENCE_PACKAGE} (reference)", "not installed", f"install failed: {exc}")
    else:
        _say("reference engine: imports and the conversation")
        theirs = measure_reference(spec_path, args.latency_ms, args.import_runs, version)
    context = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}",
        "load": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
        "latency_ms": args.latency_ms,
        "seconds": time.perf_counter() - started,
    }
    body = render(ours, theirs, context)
    print(body)
    if not args.no_write:
        update_block(args.output, BLOCK, body, heading=HEADING)
        _say(f"wrote the `{BLOCK}` block of {args.output}")
    return 0 if theirs.status == "ok" else 1
