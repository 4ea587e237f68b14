"""Run Lambda invokes as in-process Python handlers under moto (tests and the local stack).

Without Docker, moto's Lambda (`LambdaSimpleBackend`) echoes the payload and never runs code.
`LambdaRouter` patches its `invoke` so an invoke of a routed function calls a Python handler —
including the invokes the Step Functions interpreter makes, so the real ASL drives the real
handlers. moto-internal API: pinned to moto 5.2.x (pyproject) and covered by
tests/infra/test_step_functions.py.

    with mock_aws(config=MOTO_CONFIG), LambdaRouter({"waypoint-tools": tool_task.handler}):
        machine = create_tool_state_machine(sfn, lambda_client, TOOLS_ASL)
        ...

A handler that raises becomes a Lambda function error (`FunctionError: Unhandled`, errorType =
the exception's class name), as on AWS. Raise `LambdaServiceFault` to simulate a failure of the
Lambda service itself (`Lambda.ServiceException`, `Lambda.TooManyRequestsException`), which the
state machine retries.

Dev-only: imports moto. Never import this module from a Lambda.
"""

from __future__ import annotations

import json
import threading
import traceback
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.core.exceptions import JsonRESTError

from infra.aws.asl import TOOLS_ASL, render_definition

LambdaHandler = Callable[[Any, Any], Any]

# A zip with no entries: moto stores it; the routed Python handler is what runs.
EMPTY_ZIP = b"PK\x05\x06" + b"\0" * 18
DEFAULT_TOOL_FUNCTION = "waypoint-tools"
DEFAULT_TOOL_STATE_MACHINE = "waypoint-tools"


class LambdaServiceFault(Exception):
    """Raised by a routed handler to make the invoke itself fail with `Lambda.<error_code>`
    (a Lambda service error rather than an error of the function)."""

    def __init__(
        self,
        message: str = "injected fault",
        error_code: str = "ServiceException",
        status: int = 500,
    ):
        super().__init__(message)
        self.error_code = error_code
        self.status = status


class _LambdaServiceError(JsonRESTError):
    def __init__(self, fault: LambdaServiceFault):
        super().__init__(fault.error_code, str(fault))
        self.code = fault.status


@dataclass(frozen=True)
class LocalLambdaContext:
    """The parts of the Lambda context object handlers use."""

    function_name: str
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = ""

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@dataclass(frozen=True)
class Invocation:
    """One routed invoke, as recorded by the router."""

    function_name: str
    event: Any
    error: str | None = None  # the exception's class name when the handler raised


class LambdaRouter:
    """Context manager: while active, invokes of the routed functions (by name or ARN) run the
    given handlers in-process; an unrouted function fails loudly. `invocations` records every
    routed invoke (thread-safe: Map iterations run on threads)."""

    def __init__(self, handlers: Mapping[str, LambdaHandler] | None = None) -> None:
        self.handlers: dict[str, LambdaHandler] = dict(handlers or {})
        self.invocations: list[Invocation] = []
        self._lock = threading.Lock()
        self._previous: Any = None

    def route(self, function_name: str, handler: LambdaHandler) -> None:
        self.handlers[function_name] = handler

    def invocations_of(self, function_name: str) -> list[Invocation]:
        with self._lock:
            return [i for i in self.invocations if i.function_name == function_name]

    def __enter__(self) -> LambdaRouter:
        self._previous = LambdaSimpleBackend.__dict__.get("invoke")
        router = self

        def invoke(
            backend: LambdaSimpleBackend,
            function_name: str,
            qualifier: str | None,
            body: Any,
            headers: Any,
            response_headers: Any,
        ) -> bytes:
            return router._invoke(function_name, body, response_headers)

        LambdaSimpleBackend.invoke = invoke  # type: ignore[method-assign,assignment]
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        LambdaSimpleBackend.invoke = self._previous  # type: ignore[method-assign]

    def _invoke(self, function_name: str, body: Any, response_headers: dict[str, str]) -> bytes:
        # function_name is a name, an ARN, or an ARN with a qualifier.
        name = function_name.split(":function:")[-1].split(":")[0]
        handler = self.handlers.get(name)
        if handler is None:
            response_headers["x-amz-function-error"] = "Unhandled"
            return _error_payload(
                "FunctionNotRouted",
                f"no in-process handler for Lambda {name!r}; routed: {sorted(self.handlers)}",
            )
        raw = body.decode() if isinstance(body, bytes) else body
        event = json.loads(raw) if raw else {}
        try:
            result = handler(event, LocalLambdaContext(function_name=name))
        except LambdaServiceFault as fault:
            self._record(Invocation(name, event, type(fault).__name__))
            raise _LambdaServiceError(fault) from fault
        except Exception as exc:  # the function's own error: Lambda reports it, SFN sees errorType
            self._record(Invocation(name, event, type(exc).__name__))
            response_headers["x-amz-function-error"] = "Unhandled"
            return _error_payload(type(exc).__name__, str(exc), traceback.format_exc())
        self._record(Invocation(name, event))
        return json.dumps(result).encode()

    def _record(self, invocation: Invocation) -> None:
        with self._lock:
            self.invocations.append(invocation)


def _error_payload(error_type: str, message: str, stack: str = "") -> bytes:
    payload = {"errorType": error_type, "errorMessage": message, "stackTrace": stack.splitlines()}
    return json.dumps(payload).encode()


@dataclass(frozen=True)
class ToolStateMachine:
    """What `create_tool_state_machine` created."""

    state_machine_arn: str
    function_name: str
    function_arn: str
    express: bool


def create_tool_state_machine(
    sfn: Any,
    lambda_client: Any,
    asl_path: str | Path = TOOLS_ASL,
    *,
    iam: Any = None,
    task_timeout_seconds: int = 15,
    function_name: str = DEFAULT_TOOL_FUNCTION,
    state_machine_name: str = DEFAULT_TOOL_STATE_MACHINE,
    express: bool = True,
    role_arn: str | None = None,
) -> ToolStateMachine:
    """Create the tool Lambda (a placeholder: route it with `LambdaRouter`) and the tool state
    machine from the ASL file, with the substitutions SAM applies in the cloud.

    moto's Lambda requires an existing IAM role: pass `role_arn`, or an `iam` client to create
    one. Route `function_name` to `functions.tool_task.handler` before starting executions.
    """
    if role_arn is None:
        if iam is None:
            raise ValueError("pass role_arn, or an iam client to create the role")
        role_arn = iam.create_role(
            RoleName=f"{function_name}-role",
            AssumeRolePolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {
                                "Service": ["lambda.amazonaws.com", "states.amazonaws.com"]
                            },
                            "Action": "sts:AssumeRole",
                        }
                    ],
                }
            ),
        )["Role"]["Arn"]
    function_arn = lambda_client.create_function(
        FunctionName=function_name,
        Runtime="python3.12",
        Role=role_arn,
        Handler="functions.tool_task.handler",
        Code={"ZipFile": EMPTY_ZIP},
        Timeout=task_timeout_seconds,
    )["FunctionArn"]
    definition = render_definition(
        asl_path, {"ToolFunctionArn": function_arn, "ToolTimeoutSeconds": task_timeout_seconds}
    )
    state_machine_arn = sfn.create_state_machine(
        name=state_machine_name,
        definition=definition,
        roleArn=role_arn,
        type="EXPRESS" if express else "STANDARD",
    )["stateMachineArn"]
    return ToolStateMachine(state_machine_arn, function_name, function_arn, express)
