"""Tool calls of a worker turn go through the tool state machine (the same ASL file SAM deploys)
to the tool Lambda's handler — here moto's Step Functions interpreter with the handler routed in
process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from examples.banking import load as load_bank
from functions import tool_task
from infra.aws.lambda_routing import LambdaRouter, create_tool_state_machine
from infra.runtime import Runtime
from tests.channels.payloads import tg_text_update
from tests.functions import signed_events as signed
from tests.functions.conftest import drain, invoke_webhook
from tests.functions.platforms import FakePlatforms


def test_a_turn_runs_its_tools_as_a_step_functions_execution(
    make_runtime: Callable[..., Runtime], stack: Any, platforms: FakePlatforms
) -> None:
    with LambdaRouter({"waypoint-tools": tool_task.handler}) as router:
        machine = create_tool_state_machine(
            stack.client("stepfunctions"), stack.client("lambda"), iam=stack.client("iam")
        )
        runtime = make_runtime(
            tool_state_machine_arn=machine.state_machine_arn, tool_dispatch_mode="poll"
        )
        runtime.run(runtime.publish_agent(load_bank()))

        for update_id, text in enumerate(["I want a stock price", "Apple"], start=1):
            invoke_webhook(signed.telegram(tg_text_update(text, update_id=update_id)))
            assert drain(stack) == [{"batchItemFailures": []}]

        tools = [i.event["call"]["tool"] for i in router.invocations_of("waypoint-tools")]
    assert tools == ["lookup_stock_symbol", "lookup_stock_price"]
    assert "187.20" in platforms.replies()[-1].json()["text"]
