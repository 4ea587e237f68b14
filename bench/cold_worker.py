"""Run in a fresh process by the cold-turn benchmark: `python -m bench.cold_worker EVENTS.json`.

A cold Lambda container of the turn worker, as Lambda runs it: the init phase is the import of
`functions.worker` (Lambda imports the handler module before the first invocation; with
`AWS_LAMBDA_FUNCTION_NAME` set, the worker builds its runtime, the LLM client and the channels'
HTTP client there, then freezes the garbage collector), then the first invocation: the real
handler on an SQS FIFO event as the event source mapping delivers it. The parent
(`bench.cold_handler`) runs a threaded moto server holding the published banking agent, a fake
OpenAI-compatible server (the real `openai` client talks to it over HTTP, zero latency) and the
generic channel's callback receiver, and reports the model servers' own time apart.

EVENTS.json holds the SQS events: the first is the cold invocation, the others are warm turns
whose CPU each invocation takes is reported (the per-turn CPU and its full garbage-collection
passes). Modules the Lambda layer does not ship are refused (`bench.lambda_package`: the
development environment's extras and CLI packages would otherwise be imported). `--unfrozen` undoes the init phase's `gc.freeze()` before the warm turns: the same
container without it, for comparison.

Prints one JSON line.
"""

from __future__ import annotations

import os
import sys
import time


class _NotInTheLayer:
    """Refuses the modules the Lambda layer does not ship (`bench.lambda_package`), as Lambda's
    own import system would not find them."""

    refused = frozenset(filter(None, os.environ.get("WAYPOINT_BENCH_NOT_IN_LAYER", "").split(",")))

    @classmethod
    def find_spec(cls, fullname: str, path: object = None, target: object = None) -> None:
        if fullname.partition(".")[0] in cls.refused:
            raise ModuleNotFoundError(f"No module named {fullname!r} in the layer", name=fullname)


sys.meta_path.insert(0, _NotInTheLayer)  # type: ignore[arg-type]

_STARTED, _STARTED_CPU = time.perf_counter(), time.process_time()

import gc  # noqa: E402

_MODULES_BEFORE = set(sys.modules)

import functions.worker  # noqa: E402  (Lambda's init phase)

_INITIALIZED, _INITIALIZED_CPU = time.perf_counter(), time.process_time()

import json  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402


class LambdaContext:
    """The parts of Lambda's context object the handler reads (`infra.aws.lambda_routing` has
    one too, but importing it imports moto: not in a Lambda container)."""

    function_name = "waypoint-bench-worker"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:waypoint-bench-worker"
    memory_limit_in_mb = 1024
    aws_request_id = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return 120_000


class FullCollections:
    """Each generation-2 (full) collection's duration, from `gc.callbacks`."""

    def __init__(self) -> None:
        self.ms: list[float] = []
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.ms.append((time.perf_counter() - self._started) * 1000)


def _ms(start: float, end: float) -> float:
    return (end - start) * 1000


def main(events: list[dict[str, Any]], *, unfrozen: bool) -> dict[str, Any]:
    frozen_objects = gc.get_freeze_count()
    context = LambdaContext()
    before_invocation = set(sys.modules)
    started, started_cpu = time.perf_counter(), time.process_time()
    first = functions.worker.handler(events[0], context)
    invoked, invoked_cpu = time.perf_counter(), time.process_time()
    imported_in_invocation = sorted(set(sys.modules) - before_invocation)
    if first.get("batchItemFailures"):
        raise RuntimeError(f"the cold invocation failed: {first}")
    if unfrozen:
        gc.unfreeze()
    collections = FullCollections()
    gc.callbacks.append(collections)
    cpu_ms: list[float] = []
    for event in events[1:]:
        cpu = time.process_time()
        response = functions.worker.handler(event, context)
        cpu_ms.append((time.process_time() - cpu) * 1000)
        if response.get("batchItemFailures"):
            raise RuntimeError(f"a warm invocation failed: {response}")
    gc.callbacks.remove(collections)
    full_passes = []  # what one full collection costs a turn, whenever one falls in it
    for _ in range(3):
        cpu = time.process_time()
        gc.collect()
        full_passes.append((time.process_time() - cpu) * 1000)
    return {
        "init_ms": _ms(_STARTED, _INITIALIZED),
        "invoke_ms": _ms(started, invoked),
        "init_cpu_ms": _ms(_STARTED_CPU, _INITIALIZED_CPU),
        "invoke_cpu_ms": _ms(started_cpu, invoked_cpu),
        "invoked_at": started,  # perf_counter is CLOCK_MONOTONIC: the parent's clock too
        "invoke_done_at": invoked,
        "frozen_objects": frozen_objects,
        "modules_at_init": len(set(sys.modules) - _MODULES_BEFORE),
        "modules_in_invocation": len(imported_in_invocation),
        "openai_in_invocation": any(m.split(".")[0] == "openai" for m in imported_in_invocation),
        "warm_cpu_ms": cpu_ms,
        "full_gc_ms": collections.ms,
        "full_pass_ms": sorted(full_passes)[1],
    }


if __name__ == "__main__":
    loaded = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    print(json.dumps(main(loaded, unfrozen="--unfrozen" in sys.argv[2:])))
