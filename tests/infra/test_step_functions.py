"""Tool dispatch through Step Functions: the real ASL file (statemachine/tools.asl.json) runs in
moto's interpreter, and its Lambda tasks run the real tool handler (functions/tool_task.py)
in-process. This module is also the handler's tool module: it exposes `registry`."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

from engine.ports import ToolCall, ToolContext, ToolDispatcher
from engine.stages.tools_ahead import ToolsAhead
from engine.toolkit import ToolContextWithKey, ToolRegistry, ToolResult, spec_of, tool
from examples.banking import bank
from examples.banking import tools as banking
from functions import tool_task
from infra.aws.asl import (
    TOOLS_ASL,
    InvalidStateMachineDefinition,
    Substitution,
    check_references,
    load_definition,
    render_definition,
)
from infra.aws.lambda_routing import (
    LambdaRouter,
    LambdaServiceFault,
    ToolStateMachine,
    create_tool_state_machine,
)
from infra.aws.sfn_dispatcher import (
    StepFunctionsDispatcher,
    execution_name,
    json_safe,
    task_timeout_seconds,
)
from tests.engine.pipeline_kit import make_agent

MOTO_CONFIG: Any = {
    "lambda": {"use_docker": False},
    "stepfunctions": {"execute_state_machine": True},
}
TOOL_FUNCTION = "waypoint-tools"
CONTEXT = ToolContext(agent_id="concierge", session_id="s1", customer_id="c1", turn_id="t1")

# --------------------------------------------------------------------------------------------------
# The tools the handler finds through WAYPOINT_TOOLS_MODULE=<this module>

stuck_tool_returned = threading.Event()


@tool(description="Repeat the text")
async def echo(text: str) -> ToolResult:
    return ToolResult(data={"echo": text})


@tool(description="Always fails")
def explode() -> ToolResult:
    raise RuntimeError("card network down")


@tool(description="Sleeps longer than it may", timeout_seconds=0.2)
async def slow(seconds: float) -> ToolResult:
    await asyncio.sleep(seconds)
    return ToolResult(data="too late")


@tool(description="Blocks its thread; its own timeout cannot interrupt it")
def stuck(seconds: float) -> ToolResult:
    try:
        time.sleep(seconds)
    finally:
        stuck_tool_returned.set()
    return ToolResult(data="unblocked")


@tool(description="Tells which idempotency key it ran under")
def whoami(context: ToolContextWithKey) -> ToolResult:
    return ToolResult(data={"key": context.idempotency_key, "session": context.session_id})


registry = ToolRegistry([*banking.TOOLS, echo, explode, slow, stuck, whoami])


def call(call_id: str, tool_name: str, **arguments: Any) -> ToolCall:
    return ToolCall(call_id, tool_name, arguments, idempotency_key=f"s1:t1:{call_id}")


# --------------------------------------------------------------------------------------------------
# Fixtures


@dataclass
class ToolStack:
    sfn: Any
    lambda_client: Any
    iam: Any
    router: LambdaRouter
    machine: ToolStateMachine

    def dispatcher(self, **options: Any) -> StepFunctionsDispatcher:
        options.setdefault("timeout_seconds", 10.0)
        return StepFunctionsDispatcher(
            self.machine.state_machine_arn, self.sfn, mode="poll", **options
        )

    def executions(self, machine: ToolStateMachine | None = None) -> list[dict[str, Any]]:
        arn = (machine or self.machine).state_machine_arn
        return self.sfn.list_executions(stateMachineArn=arn)["executions"]

    def history(self, machine: ToolStateMachine | None = None) -> list[dict[str, Any]]:
        (execution,) = self.executions(machine)
        return self.sfn.get_execution_history(executionArn=execution["executionArn"])["events"]

    def wait_until_finished(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while any(e["status"] == "RUNNING" for e in self.executions()):
            assert time.monotonic() < deadline, "an execution is still running"
            time.sleep(0.02)

    def task_failures(self) -> list[str]:
        return [
            e["taskFailedEventDetails"]["error"]
            for e in self.history()
            if e["type"] == "TaskFailed"
        ]


def _worker_threads() -> set[threading.Thread]:
    # asyncio's to_thread workers belong to the test's event loop and go with it.
    return {t for t in threading.enumerate() if not t.name.startswith("asyncio_")}


@pytest.fixture(scope="module")
def aws_clients() -> tuple[Any, Any, Any]:
    # Built once: a boto3 client loads its service model (~0.1 s each). moto mocks clients made
    # before mock_aws() starts, and each mock_aws() starts empty.
    session = boto3.session.Session(
        region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    return tuple(session.client(s) for s in ("stepfunctions", "lambda", "iam"))  # type: ignore[return-value]


@pytest.fixture
def stack(
    monkeypatch: pytest.MonkeyPatch, aws_clients: tuple[Any, Any, Any]
) -> Iterator[ToolStack]:
    """moto with executing Step Functions, the tool Lambda routed to the real handler, and the
    tool state machine created from the real ASL file. Teardown waits for every worker thread."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv(tool_task.TOOLS_MODULE_ENV, __name__)
    tool_task.load_registry.cache_clear()
    stuck_tool_returned.clear()
    bank.reset_bank()
    before = _worker_threads()
    with mock_aws(config=MOTO_CONFIG), LambdaRouter({TOOL_FUNCTION: tool_task.handler}) as router:
        sfn, lambda_client, iam = aws_clients
        machine = create_tool_state_machine(sfn, lambda_client, iam=iam, task_timeout_seconds=15)
        yield ToolStack(sfn, lambda_client, iam, router, machine)
        deadline = time.monotonic() + 5
        while _worker_threads() - before and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _worker_threads() - before, "execution threads outlived the test"
    tool_task.load_registry.cache_clear()


class Flaky:
    """Wraps the tool handler: the first `failures` invokes of each call fail with a Lambda
    service error — before the handler runs, or after it (the response was lost)."""

    def __init__(
        self, failures: int, *, after_handler: bool = False, code: str = "ServiceException"
    ):
        self.failures = failures
        self.after_handler = after_handler
        self.code = code
        self.attempts: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        call_id = event["call"]["id"]
        with self._lock:
            attempt = self.attempts[call_id] = self.attempts.get(call_id, 0) + 1
        result = tool_task.handler(event, context) if self.after_handler else None
        if attempt <= self.failures:
            raise LambdaServiceFault(f"attempt {attempt} failed", error_code=self.code, status=500)
        return result if result is not None else tool_task.handler(event, context)


# --------------------------------------------------------------------------------------------------
# Dispatching through the state machine


async def test_calls_run_on_the_real_handler_and_come_back_in_call_order(stack: ToolStack) -> None:
    calls = [call("c1", "lookup_stock_price", symbol="NVDA"), call("c2", "echo", text="hi")]

    outcomes = await stack.dispatcher().dispatch(calls, CONTEXT)

    assert [o.call_id for o in outcomes] == ["c1", "c2"]
    assert [o.error for o in outcomes] == [None, None]
    assert outcomes[0].data == {"symbol": "NVDA", "price": "129.40", "currency": "USD"}
    assert outcomes[1].data == {"echo": "hi"}
    assert len(stack.router.invocations_of(TOOL_FUNCTION)) == 2
    (execution,) = stack.executions()
    assert execution["status"] == "SUCCEEDED"


async def test_a_tool_that_raises_is_an_error_outcome_and_the_other_call_succeeds(
    stack: ToolStack,
) -> None:
    calls = [call("c1", "explode"), call("c2", "echo", text="still here")]

    outcomes = await stack.dispatcher().dispatch(calls, CONTEXT)

    assert outcomes[0].error == "RuntimeError: card network down"
    assert outcomes[1].error is None and outcomes[1].data == {"echo": "still here"}
    assert stack.executions()[0]["status"] == "SUCCEEDED"


async def test_a_crashed_task_is_caught_as_an_error_outcome_for_that_call_only(
    stack: ToolStack,
) -> None:
    def crash_on_c1(event: dict[str, Any], context: Any) -> dict[str, Any]:
        if event["call"]["id"] == "c1":
            raise MemoryError("Runtime exited: out of memory")
        return tool_task.handler(event, context)

    stack.router.route(TOOL_FUNCTION, crash_on_c1)
    calls = [call("c1", "echo", text="lost"), call("c2", "echo", text="kept")]

    outcomes = await stack.dispatcher().dispatch(calls, CONTEXT)

    assert outcomes[0].error == "tool task failed: MemoryError"
    assert "out of memory" in outcomes[0].metadata["failure"]["Cause"]
    assert outcomes[1].data == {"echo": "kept"}
    assert stack.task_failures() == ["MemoryError"]  # a function error is not retried
    assert stack.executions()[0]["status"] == "SUCCEEDED"


async def test_a_transient_lambda_failure_is_retried_then_succeeds(stack: ToolStack) -> None:
    flaky = Flaky(failures=1)
    stack.router.route(TOOL_FUNCTION, flaky)

    outcomes = await stack.dispatcher().dispatch([call("c1", "echo", text="again")], CONTEXT)

    assert outcomes[0].error is None and outcomes[0].data == {"echo": "again"}
    assert flaky.attempts == {"c1": 2}
    assert stack.task_failures() == ["Lambda.ServiceException"]


async def test_throttling_past_the_retries_is_an_error_outcome(stack: ToolStack) -> None:
    flaky = Flaky(failures=99, code="TooManyRequestsException")
    stack.router.route(TOOL_FUNCTION, flaky)

    outcomes = await stack.dispatcher().dispatch([call("c1", "echo", text="x")], CONTEXT)

    assert outcomes[0].error == "tool task failed: Lambda.TooManyRequestsException"
    assert flaky.attempts == {"c1": 3}  # the first attempt and MaxAttempts=2 retries
    assert stack.executions()[0]["status"] == "SUCCEEDED"


async def test_a_tool_exceeding_its_timeout_is_an_error_outcome(stack: ToolStack) -> None:
    outcomes = await stack.dispatcher().dispatch([call("c1", "slow", seconds=5)], CONTEXT)

    assert outcomes[0].error == "timed out after 0.2s"
    assert outcomes[0].data is None


async def test_a_task_stuck_past_the_task_timeout_is_an_error_outcome(stack: ToolStack) -> None:
    # A blocking tool ignores its own timeout; the ASL's TimeoutSeconds is the backstop.
    machine = create_tool_state_machine(
        stack.sfn,
        stack.lambda_client,
        iam=stack.iam,
        task_timeout_seconds=3,  # headroom for the quick task on a loaded machine
        function_name="waypoint-tools-short",
        state_machine_name="waypoint-tools-short",
    )
    stack.router.route(machine.function_name, tool_task.handler)
    dispatcher = StepFunctionsDispatcher(machine.state_machine_arn, stack.sfn, mode="poll")
    calls = [call("c1", "stuck", seconds=6), call("c2", "echo", text="quick")]

    outcomes = await dispatcher.dispatch(calls, CONTEXT)

    assert outcomes[0].error == "tool task failed: States.Timeout"
    assert outcomes[1].data == {"echo": "quick"}
    assert stuck_tool_returned.wait(30)


async def test_the_idempotency_key_and_context_reach_the_tool(stack: ToolStack) -> None:
    outcomes = await stack.dispatcher().dispatch([call("c7", "whoami")], CONTEXT)

    assert outcomes[0].data == {"key": "s1:t1:c7", "session": "s1"}


async def test_a_retried_transfer_moves_the_money_once(stack: ToolStack) -> None:
    # The transfer ran, then its response was lost: Step Functions retries the task, and the
    # tool recognizes the idempotency key.
    flaky = Flaky(failures=1, after_handler=True)
    stack.router.route(TOOL_FUNCTION, flaky)
    transfer = call(
        "c1", "transfer_money", account_id="1234567890", to_account_id="1234324", amount="250"
    )

    # The logged-in principal travels with the context through the state machine to the tool.
    logged_in = dataclasses.replace(CONTEXT, sender_id="c1", principal={"username": "seldo"})
    (outcome,) = await stack.dispatcher().dispatch([transfer], logged_in)

    assert outcome.error is None
    assert outcome.data["status"] == "completed"
    assert flaky.attempts == {"c1": 2}
    assert bank.BANK.transfers == [{"from": "1234567890", "to": "1234324", "amount": "250.00"}]
    assert bank.BANK.accounts["1234567890"].balance == Decimal("750.00")


async def test_a_dispatch_that_times_out_stops_the_execution_and_fails_every_call(
    stack: ToolStack, count_calls: Any
) -> None:
    stops = count_calls(stack.sfn, "StopExecution")
    calls = [call("c1", "stuck", seconds=1), call("c2", "echo", text="x")]

    outcomes = await stack.dispatcher(timeout_seconds=0.3).dispatch(calls, CONTEXT)

    assert [o.error for o in outcomes] == ["tool execution timed_out: Waypoint.DispatchTimeout"] * 2
    assert [s["executionArn"] for s in stops] == [stack.executions()[0]["executionArn"]]
    # moto only notices the stop once the blocked task returns (then ends FAILED, not ABORTED).
    assert stuck_tool_returned.wait(30)
    stack.wait_until_finished()


async def test_a_missing_state_machine_fails_every_call_without_raising(stack: ToolStack) -> None:
    arn = stack.machine.state_machine_arn + "-gone"
    dispatcher = StepFunctionsDispatcher(arn, stack.sfn, mode="poll")

    outcomes = await dispatcher.dispatch([call("c1", "echo", text="x")], CONTEXT)

    assert outcomes[0].error == "tool execution failed: StateMachineDoesNotExist"
    assert "StateMachineDoesNotExist" in outcomes[0].metadata["failure"]["cause"]


async def test_moto_lacks_start_sync_execution_so_local_dispatch_polls(stack: ToolStack) -> None:
    # If this starts failing, moto implemented StartSyncExecution: local runs can use "sync".
    dispatcher = StepFunctionsDispatcher(stack.machine.state_machine_arn, stack.sfn)
    assert dispatcher.mode == "sync"

    outcomes = await dispatcher.dispatch([call("c1", "echo", text="x")], CONTEXT)

    assert "Not yet implemented" in outcomes[0].metadata["failure"]["cause"]
    assert stack.executions() == []


async def test_an_empty_batch_starts_no_execution(stack: ToolStack) -> None:
    assert await stack.dispatcher().dispatch([], CONTEXT) == []
    assert stack.executions() == []


async def test_a_call_run_ahead_goes_through_the_state_machine_once_and_is_taken(
    stack: ToolStack,
) -> None:
    """Speculation's calls run ahead (`engine.stages.tools_ahead`) take the same port: one
    execution, under ids and keys of their own; the verified turn's identical call takes that
    outcome under its own id and starts nothing; its other call runs as usual."""
    agent = make_agent(tools=[spec_of(echo).model_copy(update={"speculative": True})])
    ahead = ToolsAhead(stack.dispatcher(), agent, "s1", "t1")
    predicted = [call("t1:0", "echo", text="hi")]
    assert ahead.refusal(predicted) is None

    (drafted_with,) = await ahead.run_ahead(predicted, CONTEXT)
    verified = await ahead.dispatch(
        [call("t1:0", "echo", text="hi"), call("t1:1", "echo", text="other")], CONTEXT
    )

    assert drafted_with.call_id == "t1:0" and drafted_with.data == {"echo": "hi"}
    assert [(o.call_id, o.data) for o in verified] == [
        ("t1:0", {"echo": "hi"}), ("t1:1", {"echo": "other"})
    ]  # fmt: skip
    invoked = [i.event["call"] for i in stack.router.invocations_of(TOOL_FUNCTION)]
    assert [(c["id"], c["idempotency_key"], c["arguments"]) for c in invoked] == [
        ("t1:ahead:0", "s1:t1:ahead:0", {"text": "hi"}),
        ("t1:1", "s1:t1:t1:1", {"text": "other"}),
    ]
    assert len(stack.executions()) == 2
    assert [(r.tool, r.status) for r in await ahead.settle()] == [("echo", "used")]


# --------------------------------------------------------------------------------------------------
# Sync mode (what runs in the cloud), against a recorded StartSyncExecution answer


class SyncClient:
    def __init__(self, response: dict[str, Any]):
        self.response = response
        self.requests: list[dict[str, Any]] = []

    def start_sync_execution(self, **request: Any) -> dict[str, Any]:
        self.requests.append(request)
        return self.response


async def test_sync_mode_reads_the_outcomes_from_the_sync_execution_output() -> None:
    output = {"outcomes": [{"call_id": "c1", "tool": "echo", "data": {"echo": "x"}}]}
    client = SyncClient({"status": "SUCCEEDED", "output": json.dumps(output)})
    dispatcher = StepFunctionsDispatcher("arn:sm", client, express=True)

    (outcome,) = await dispatcher.dispatch([call("c1", "echo", text="x")], CONTEXT)

    assert (outcome.call_id, outcome.data, outcome.error) == ("c1", {"echo": "x"}, None)
    (request,) = client.requests
    assert json.loads(request["input"])["calls"][0]["idempotency_key"] == "s1:t1:c1"
    assert request["name"].startswith("s1-t1-c1-")


async def test_a_failed_sync_execution_fails_every_call() -> None:
    client = SyncClient({"status": "TIMED_OUT", "error": "States.Timeout", "cause": "5 min"})
    dispatcher = StepFunctionsDispatcher("arn:sm", client)

    outcomes = await dispatcher.dispatch([call("c1", "echo"), call("c2", "echo")], CONTEXT)

    assert [o.error for o in outcomes] == ["tool execution timed_out: States.Timeout"] * 2


async def test_an_outcome_for_another_call_is_not_trusted() -> None:
    output = {"outcomes": [{"call_id": "c9", "tool": "echo", "data": 1}]}
    client = SyncClient({"status": "SUCCEEDED", "output": json.dumps(output)})

    (outcome,) = await StepFunctionsDispatcher("arn:sm", client).dispatch(
        [call("c1", "echo")], CONTEXT
    )

    assert outcome.call_id == "c1" and outcome.error is not None and "'c9'" in outcome.error


def test_the_dispatcher_is_a_tool_dispatcher() -> None:
    assert isinstance(StepFunctionsDispatcher("arn:sm", object()), ToolDispatcher)


def test_execution_names_are_valid_and_unique_per_dispatch() -> None:
    calls = [call("c1", "echo"), call("c2", "echo")]
    first, second = execution_name(calls), execution_name(calls)
    assert first != second and first[:-8] == second[:-8]  # same keys, different nonce
    assert len(first) <= 80 and all(ch.isalnum() or ch in "-_" for ch in first)


def test_money_stays_exact_on_the_wire() -> None:
    assert json_safe({"amount": Decimal("12.50"), "ids": {"b"}}) == {
        "amount": "12.50",
        "ids": ["b"],
    }


# --------------------------------------------------------------------------------------------------
# The tool Lambda handler


def test_the_handler_runs_a_call_from_the_configured_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(tool_task.TOOLS_MODULE_ENV, "examples.banking.tools")
    tool_task.load_registry.cache_clear()
    event = {
        "call": {
            "id": "c1",
            "tool": "lookup_stock_symbol",
            "arguments": {"company": "apple"},
            "idempotency_key": "s1:t1:c1",
        },
        "context": {"agent_id": "a", "session_id": "s1", "customer_id": "c", "turn_id": "t1"},
    }

    result = tool_task.handler(event, None)

    assert result["call_id"] == "c1" and result["data"] == {"symbol": "AAPL"}
    assert result["error"] is None
    json.dumps(result)  # JSON-safe
    tool_task.load_registry.cache_clear()


def test_a_malformed_call_is_an_error_outcome(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tool_task.TOOLS_MODULE_ENV, __name__)
    result = tool_task.handler({"call": {"id": "c1", "tool": "echo"}, "context": {}}, None)
    assert result["call_id"] == "c1"
    assert result["error"].startswith("invalid tool task: KeyError")


def test_a_missing_tool_module_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(tool_task.TOOLS_MODULE_ENV, raising=False)
    with pytest.raises(tool_task.ToolRegistryNotConfigured, match="WAYPOINT_TOOLS_MODULE"):
        tool_task.handler({"call": {}, "context": {}}, None)
    with pytest.raises(tool_task.ToolRegistryNotConfigured, match="cannot be imported"):
        tool_task.load_registry("examples.no_such_tools")


def test_the_task_timeout_covers_the_slowest_tool() -> None:
    assert task_timeout_seconds(registry.specs) == 15  # 10 s default tool timeout + 5 s headroom


# --------------------------------------------------------------------------------------------------
# The ASL file itself

SUBSTITUTIONS: dict[str, Substitution] = {
    "ToolFunctionArn": "arn:aws:lambda:us-east-1:123456789012:function:waypoint-tools",
    "ToolTimeoutSeconds": 15,
}


def test_the_tool_asl_parses_and_its_references_resolve() -> None:
    definition = render_definition(TOOLS_ASL, SUBSTITUTIONS)
    AmazonStateLanguageParser.parse(definition)
    check_references(json.loads(definition))
    task = json.loads(definition)["States"]["RunToolCalls"]["ItemProcessor"]["States"]["InvokeTool"]
    assert task["TimeoutSeconds"] == 15
    assert task["Parameters"]["FunctionName"] == SUBSTITUTIONS["ToolFunctionArn"]


def test_a_dangling_reference_is_reported_with_its_path() -> None:
    definition = copy.deepcopy(load_definition(TOOLS_ASL, SUBSTITUTIONS))
    processor = definition["States"]["RunToolCalls"]["ItemProcessor"]
    processor["States"]["InvokeTool"]["Catch"][0]["Next"] = "ToolTaskFaild"
    del processor["States"]["ToolTaskFailed"]["End"]

    with pytest.raises(InvalidStateMachineDefinition) as error:
        check_references(definition)

    assert error.value.problems == [
        "$.States.RunToolCalls.ItemProcessor.States.InvokeTool.Catch[0].Next → 'ToolTaskFaild' "
        "is not a state here (states: InvokeTool, ToolTaskFailed)",
        "$.States.RunToolCalls.ItemProcessor.States.ToolTaskFailed: a Pass state needs `Next` or "
        '`"End": true`',
    ]


def test_references_inside_parallel_branches_and_choices_are_checked() -> None:
    definition = {
        "StartAt": "Fork",
        "States": {
            "Fork": {
                "Type": "Parallel",
                "Branches": [{"StartAt": "Missing", "States": {"A": {"Type": "Succeed"}}}],
                "Next": "Pick",
            },
            "Pick": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.x", "IsPresent": True, "Next": "Nowhere"}],
                "Default": "Done",
            },
            "Done": {"Type": "Succeed"},
        },
    }
    with pytest.raises(InvalidStateMachineDefinition) as error:
        check_references(definition)
    assert [p.split(" → ")[0] for p in error.value.problems] == [
        "$.States.Fork.Branches[0].StartAt",
        "$.States.Pick.Choices[0].Next",
    ]


def test_a_missing_substitution_is_reported() -> None:
    with pytest.raises(InvalidStateMachineDefinition, match=r"\$\{ToolTimeoutSeconds\}"):
        render_definition(TOOLS_ASL, {"ToolFunctionArn": "arn:x"})


async def test_a_transfer_without_a_login_is_refused_by_the_tool(stack: ToolStack) -> None:
    transfer = call(
        "c1", "transfer_money", account_id="1234567890", to_account_id="1234324", amount="250"
    )
    stranger = dataclasses.replace(CONTEXT, sender_id="c2", principal={"username": "friend"})

    outcomes = await stack.dispatcher().dispatch([transfer], CONTEXT)
    theirs = await stack.dispatcher().dispatch([transfer], stranger)

    assert outcomes[0].error == "the customer is not logged in"
    assert theirs[0].error == "account '1234567890' is not one of this customer's accounts"
    assert bank.BANK.transfers == []
