"""The handlers' cold start does not pay for the X-Ray SDK: no handler module imports
`aws_xray_sdk`, the worker still answers with tracing off, and the SDK tracer is built on the
first invocation only when `WAYPOINT_XRAY_SDK` asks for it inside a Lambda runtime
(functions/tracing.py). Each case runs in a fresh interpreter, so `sys.modules` tells the truth."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = ("functions.worker", "functions.webhook", "functions.management", "functions.tool_task")
TRACE_HEADER = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"

# A handler decorated like the worker's, invoked once; prints what happened as JSON.
INVOKE = """
import asyncio, json, sys
from functions.tracing import LazyTracer

tracer = LazyTracer("svc")

@tracer.capture_method
async def answer(n):
    return n + 1

@tracer.capture_method
def double(n):
    return n * 2

@tracer.capture_lambda_handler
def handler(event, context):
    return double(asyncio.run(answer(event["n"])))

class Context:
    function_name = "f"
    memory_limit_in_mb = 128
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:f"
    aws_request_id = "r-1"

before = "aws_xray_sdk" in sys.modules
result = handler({"n": 20}, Context())
print(json.dumps({"before": before, "result": result,
                  "sdk": "aws_xray_sdk" in sys.modules, "built": tracer.tracer is not None}))
"""


def _python(code: str, **env: str) -> str:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("LAMBDA_TASK_ROOT", "WAYPOINT_XRAY_SDK", "POWERTOOLS_TRACE_DISABLED")
    }
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**base, "PYTHONPATH": str(ROOT), "AWS_DEFAULT_REGION": "us-east-1", **env},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("module", HANDLERS)
def test_importing_a_handler_does_not_import_the_xray_sdk(module: str) -> None:
    # Inside a Lambda runtime with the SDK switched on: still nothing at import.
    out = _python(
        f"import sys, {module}; print('aws_xray_sdk' in sys.modules)",
        LAMBDA_TASK_ROOT="/var/task",
        WAYPOINT_XRAY_SDK="1",
    )
    assert out == "False"


def test_tracing_off_by_default_runs_the_handler_without_the_sdk() -> None:
    got = json.loads(_python(INVOKE, LAMBDA_TASK_ROOT="/var/task", _X_AMZN_TRACE_ID=TRACE_HEADER))
    assert got == {"before": False, "result": 42, "sdk": False, "built": False}


def test_switch_outside_lambda_keeps_the_sdk_out() -> None:
    got = json.loads(_python(INVOKE, WAYPOINT_XRAY_SDK="true"))
    assert got == {"before": False, "result": 42, "sdk": False, "built": False}


def test_powertools_trace_disabled_wins_over_the_switch() -> None:
    got = json.loads(
        _python(
            INVOKE,
            LAMBDA_TASK_ROOT="/var/task",
            WAYPOINT_XRAY_SDK="1",
            POWERTOOLS_TRACE_DISABLED="1",
        )
    )
    assert got["sdk"] is False and got["result"] == 42


def test_switch_in_lambda_builds_the_sdk_tracer_on_the_first_invocation() -> None:
    got = json.loads(
        _python(
            INVOKE,
            LAMBDA_TASK_ROOT="/var/task",
            WAYPOINT_XRAY_SDK="1",
            _X_AMZN_TRACE_ID=TRACE_HEADER,
        )
    )
    # Not at import (`before`), but by the time the handler returned; the result is unchanged.
    assert got == {"before": False, "result": 42, "sdk": True, "built": True}
