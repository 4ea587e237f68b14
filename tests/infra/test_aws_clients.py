"""Every AWS client the code creates takes its timeouts and retries from one place
(`infra.aws.clients`), and each function's budget fits inside that function's Lambda Timeout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infra.aws import clients
from infra.aws.cfn_template import load_template

REPO = Path(__file__).resolve().parents[2]
# boto3.client(…), Session().client(…), session.resource(…), botocore Config(…)
_CLIENT_CREATION = re.compile(
    r"boto3\.(client|resource)\(|Session\(\)\.(client|resource)\(|\bConfig\("
)


def test_no_module_creates_an_aws_client_outside_infra_aws_clients() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{number}"
        for folder in ("infra", "functions")
        for path in sorted((REPO / folder).rglob("*.py"))
        if path != REPO / "infra" / "aws" / "clients.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if _CLIENT_CREATION.search(line) and "uvicorn" not in line
    ]
    assert offenders == []


def test_every_client_gets_its_timeouts_and_retries_from_the_function_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for name, budget in clients.CALL_BUDGETS.items():
        monkeypatch.setenv(clients.CALL_BUDGET_ENV, name)
        for service in ("dynamodb", "sqs", "s3", "stepfunctions"):
            config = clients.client(service).meta.config
            assert (config.connect_timeout, config.read_timeout) == (
                budget.connect_timeout,
                budget.read_timeout,
            )
            assert config.retries == {
                "mode": "standard",
                "total_max_attempts": budget.total_max_attempts,
            }
    clients.reset_clients()


def test_an_unknown_budget_name_says_which_ones_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(clients.CALL_BUDGET_ENV, "webhok")
    with pytest.raises(clients.AwsConfigurationError, match="management, webhook, worker"):
        clients.call_budget()


def test_each_functions_budget_fits_its_lambda_timeout_with_room_to_answer() -> None:
    """One call's worst case (every attempt timing out, the longest backoffs) must leave the
    function a quarter of its Timeout to answer (a 503, a failed SQS record) rather than be
    killed mid-way; the webhook makes several calls, but a single hung one is the danger."""
    functions = {
        resource["Properties"]["Environment"]["Variables"].get(clients.CALL_BUDGET_ENV): resource
        for resource in load_template()["Resources"].values()
        if resource["Type"] == "AWS::Serverless::Function"
        and "Environment" in resource["Properties"]
    }
    assert set(clients.CALL_BUDGETS) <= set(functions)
    for name, budget in clients.CALL_BUDGETS.items():
        timeout = functions[name]["Properties"]["Timeout"]
        assert budget.worst_case_seconds <= 0.75 * timeout, name
        assert budget.total_max_attempts >= 2, name  # a lost response must get one retry
