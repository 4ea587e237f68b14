"""`ToolDispatcher` over Step Functions: one execution of `statemachine/tools.asl.json` per batch.

The execution maps over the calls and invokes the tool Lambda (`functions/tool_task.py`) once per
call; the outcomes come back in call order. Two ways to wait for them (docs/tools.md):

- `mode="sync"` (default for `express=True`): `StartSyncExecution` on an Express workflow, one
  blocking request that returns the output. What runs in the cloud.
- `mode="poll"`: `StartExecution` + `DescribeExecution` until the status is terminal. For a
  Standard workflow, and for moto, which does not implement `StartSyncExecution` (it answers
  404 "Not yet implemented").

This module also defines the wire format between the dispatcher, the state machine and the tool
Lambda (`encode_*` / `decode_*`). It imports boto3 lazily, so the tool Lambda can use the wire
format without paying boto3's import at cold start.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import enum
import hashlib
import json
import logging
import math
import re
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Literal

from engine.ports import ToolCall, ToolContext, ToolOutcome
from engine.tools.spec import ToolSpec

log = logging.getLogger(__name__)

DispatchMode = Literal["sync", "poll"]

STATE_MACHINE_ENV = "WAYPOINT_TOOL_STATE_MACHINE_ARN"  # set on the turn worker by the template

MAX_EXECUTION_INPUT_BYTES = 256 * 1024  # Step Functions' limit on input and output
TASK_TIMEOUT_HEADROOM_SECONDS = 5  # a cold start plus importing the tool registry
_TERMINAL = {"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"}
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def task_timeout_seconds(
    specs: Iterable[ToolSpec], headroom_seconds: int = TASK_TIMEOUT_HEADROOM_SECONDS
) -> int:
    """The `ToolTimeoutSeconds` substitution: the slowest tool's timeout plus headroom.

    The handler enforces each tool's own timeout; this task timeout is the backstop for a stuck
    Lambda, so it must be larger. The tool Lambda's own Timeout must be at least this value.
    """
    slowest = max((s.timeout_seconds for s in specs), default=0.0)
    return math.ceil(slowest) + headroom_seconds


# --------------------------------------------------------------------------------------------------
# Wire format (JSON) of statemachine/tools.asl.json


def json_safe(value: Any) -> Any:
    """`value` as plain JSON data. Decimals become strings (money stays exact), dates ISO
    strings, sets lists, enums their value, pydantic models and dataclasses dicts. Raises
    ValueError for NaN/Infinity, which Step Functions would reject."""
    return json.loads(json.dumps(value, default=_json_default, allow_nan=False))


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dt.date | dt.time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if isinstance(value, enum.Enum):
        return value.value
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return str(value)


def encode_call(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "tool": call.tool,
        "arguments": json_safe(call.arguments),
        "idempotency_key": call.idempotency_key,
    }


def decode_call(data: Mapping[str, Any]) -> ToolCall:
    """Raises KeyError/TypeError when a field is missing or of the wrong type."""
    arguments = data.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise TypeError(f"arguments must be an object, got {type(arguments).__name__}")
    return ToolCall(
        id=str(data["id"]),
        tool=str(data["tool"]),
        arguments=arguments,
        idempotency_key=str(data["idempotency_key"]),
    )


def encode_context(context: ToolContext) -> dict[str, Any]:
    # Only the ToolContext fields: a subclass (ToolContextWithKey) carries per-call data.
    return {f.name: json_safe(getattr(context, f.name)) for f in dataclasses.fields(ToolContext)}


def decode_context(data: Mapping[str, Any]) -> ToolContext:
    names = {f.name for f in dataclasses.fields(ToolContext)}
    return ToolContext(**{k: v for k, v in data.items() if k in names})


def encode_outcome(outcome: ToolOutcome) -> dict[str, Any]:
    """A ToolOutcome as JSON data; raises ValueError/TypeError if it cannot be."""
    return {
        "call_id": outcome.call_id,
        "tool": outcome.tool,
        "data": json_safe(outcome.data),
        "metadata": json_safe(outcome.metadata),
        "control": json_safe(outcome.control),
        "view": json_safe(outcome.view),
        "fragments": json_safe(list(outcome.fragments)),
        "error": outcome.error,
        "duration_ms": outcome.duration_ms,
    }


def decode_outcome(data: Any, call: ToolCall) -> ToolOutcome:
    """The outcome of `call` from the state machine's output; anything malformed (or the outcome
    of another call) becomes an error outcome for `call`."""
    if not isinstance(data, Mapping):
        return _failed(call, f"tool task returned {type(data).__name__}, not an outcome")
    if data.get("call_id") != call.id:
        return _failed(call, f"tool task returned the outcome of call {data.get('call_id')!r}")
    try:
        return ToolOutcome(
            call_id=call.id,
            tool=call.tool,
            data=data.get("data"),
            metadata=dict(data.get("metadata") or {}),
            control=dict(data.get("control") or {}),
            view=dict(data["view"]) if data.get("view") is not None else None,
            fragments=tuple(dict(f) for f in data.get("fragments") or ()),
            error=None if data.get("error") is None else str(data["error"]),
            duration_ms=float(data.get("duration_ms") or 0.0),
        )
    except (TypeError, ValueError) as exc:
        return _failed(call, f"tool task returned a malformed outcome: {exc}")


def _failed(call: ToolCall, error: str, **metadata: Any) -> ToolOutcome:
    return ToolOutcome(call_id=call.id, tool=call.tool, error=error, metadata=metadata)


def execution_name(calls: Sequence[ToolCall]) -> str:
    """A unique, readable execution name: the first call's key, a digest of all keys, a nonce.

    The nonce matters: Step Functions refuses a name used before (for 90 days on Standard), and a
    redelivered turn dispatches the same calls again. Exactly-once is the tools' job, through the
    idempotency key each call carries — not the execution name's.
    """
    keys = "\n".join(c.idempotency_key for c in calls)
    digest = hashlib.sha256(keys.encode()).hexdigest()[:12]
    readable = _NAME_UNSAFE.sub("-", calls[0].idempotency_key if calls else "tools")[:40]
    return f"{readable.strip('-') or 'tools'}-{digest}-{secrets.token_hex(4)}"


# --------------------------------------------------------------------------------------------------
# The dispatcher


@dataclasses.dataclass(frozen=True)
class _Execution:
    status: str
    output: str | None = None
    error: str | None = None
    cause: str | None = None


class StepFunctionsDispatcher:
    """Runs a batch of tool calls as one execution of the tool state machine.

    Never raises for a failed batch: when the execution fails, times out, or cannot be started,
    every call gets an error outcome (details in `metadata["failure"]`, which the LLM never
    sees). boto3 calls run in a worker thread, so the event loop is not blocked.

    `mode` defaults to "sync" for an Express workflow and "poll" for a Standard one. Use
    `mode="poll"` against moto even when the state machine is Express. `timeout_seconds` bounds
    the whole batch: in poll mode an execution still running then is stopped; in sync mode it
    sets the read timeout of the client built here (an injected client keeps its own).
    """

    def __init__(
        self,
        state_machine_arn: str,
        client: Any = None,
        *,
        express: bool = True,
        mode: DispatchMode | None = None,
        poll_interval: float = 0.05,
        timeout_seconds: float = 60.0,
    ) -> None:
        self.state_machine_arn = state_machine_arn
        self.mode: DispatchMode = mode or ("sync" if express else "poll")
        if self.mode not in ("sync", "poll"):
            raise ValueError(f"mode must be 'sync' or 'poll', not {self.mode!r}")
        self.poll_interval = poll_interval
        self.timeout_seconds = timeout_seconds
        self._client = client

    @classmethod
    def from_environment(cls, **options: Any) -> StepFunctionsDispatcher:
        """The dispatcher for the state machine named by `WAYPOINT_TOOL_STATE_MACHINE_ARN`."""
        from infra.aws import clients  # imports boto3

        arn = clients.required_env(STATE_MACHINE_ENV, "the tool state machine's ARN")
        return cls(arn, **options)

    @property
    def client(self) -> Any:
        """The boto3 Step Functions client (built on first use; blocking: imports boto3)."""
        if self._client is None:
            from infra.aws import clients  # imports boto3

            # Not the shared client: StartSyncExecution holds the request open for the whole
            # execution, longer than the function's usual read timeout, and a retried
            # StartSyncExecution would run every tool again. Polling calls may retry.
            self._client = clients.client(
                "stepfunctions",
                read_timeout=self.timeout_seconds + 5,
                total_max_attempts=1 if self.mode == "sync" else 3,
            )
        return self._client

    async def dispatch(self, calls: Sequence[ToolCall], context: ToolContext) -> list[ToolOutcome]:
        if not calls:
            return []
        try:
            payload = json.dumps(
                {"calls": [encode_call(c) for c in calls], "context": encode_context(context)}
            )
        except (TypeError, ValueError) as exc:
            return [_failed(c, f"tool arguments are not JSON-serializable: {exc}") for c in calls]
        if len(payload.encode()) > MAX_EXECUTION_INPUT_BYTES:
            return [
                _failed(c, "tool calls exceed the 256 KB Step Functions input limit") for c in calls
            ]
        name = execution_name(calls)
        try:
            if self._client is None:  # the first dispatch of a container builds the client
                await asyncio.to_thread(lambda: self.client)
            if self.mode == "sync":
                execution = await asyncio.to_thread(self._run_sync, name, payload)
            else:
                execution = await self._run_polling(name, payload)
        except Exception as exc:  # an AWS/network failure is an outcome too, never a crashed turn
            log.exception("tool execution %s could not run", name)
            execution = _Execution("FAILED", error=type(exc).__name__, cause=str(exc))
        return self._outcomes(calls, name, execution)

    def _run_sync(self, name: str, payload: str) -> _Execution:
        response = self.client.start_sync_execution(
            stateMachineArn=self.state_machine_arn, name=name, input=payload
        )
        return _Execution(
            response["status"], response.get("output"), response.get("error"), response.get("cause")
        )

    async def _run_polling(self, name: str, payload: str) -> _Execution:
        started = await asyncio.to_thread(
            self.client.start_execution,
            stateMachineArn=self.state_machine_arn,
            name=name,
            input=payload,
        )
        arn = started["executionArn"]
        deadline = time.monotonic() + self.timeout_seconds
        while True:
            described = await asyncio.to_thread(self.client.describe_execution, executionArn=arn)
            status = described["status"]
            if status in _TERMINAL:
                return _Execution(
                    status, described.get("output"), described.get("error"), described.get("cause")
                )
            if time.monotonic() >= deadline:
                await asyncio.to_thread(self._stop, arn)
                return _Execution(
                    "TIMED_OUT",
                    error="Waypoint.DispatchTimeout",
                    cause=f"no result after {self.timeout_seconds:g}s",
                )
            await asyncio.sleep(self.poll_interval)

    def _stop(self, arn: str) -> None:
        try:
            self.client.stop_execution(
                executionArn=arn, error="Waypoint.DispatchTimeout", cause="dispatcher gave up"
            )
        except Exception:  # it may have finished meanwhile; the outcome is decided already
            log.warning("could not stop tool execution %s", arn, exc_info=True)

    def _outcomes(
        self, calls: Sequence[ToolCall], name: str, execution: _Execution
    ) -> list[ToolOutcome]:
        if execution.status != "SUCCEEDED":
            error = (
                f"tool execution {execution.status.lower()}: {execution.error or 'unknown error'}"
            )
            failure = {
                "execution": name,
                "status": execution.status,
                "error": execution.error,
                "cause": execution.cause,
            }
            return [_failed(c, error, failure=failure) for c in calls]
        try:
            outcomes = json.loads(execution.output or "null")["outcomes"]
            if not isinstance(outcomes, list):
                raise TypeError("outcomes is not a list")
        except (TypeError, ValueError, KeyError) as exc:
            failure = {"execution": name, "output": (execution.output or "")[:1000]}
            return [
                _failed(c, f"tool execution returned no outcomes: {exc}", failure=failure)
                for c in calls
            ]
        if len(outcomes) != len(calls):
            error = f"tool execution returned {len(outcomes)} outcomes for {len(calls)} calls"
            return [_failed(c, error, failure={"execution": name}) for c in calls]
        return [decode_outcome(data, call) for data, call in zip(outcomes, calls, strict=True)]
