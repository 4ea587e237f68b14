"""template.yaml: cfn-lint clean, transformed by the SAM translator (what `sam deploy` does
first), and wired the way the code expects — least privilege included."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from functions import webhook, worker_backpressure, worker_delivery, worker_telemetry
from infra.aws.cfn_template import load_template
from infra.aws.sfn_dispatcher import STATE_MACHINE_ENV, task_timeout_seconds
from infra.channels.registry import ChannelSecrets
from infra.runtime_settings import (
    MANAGEMENT_API_KEY_ENV,
    MODEL_RATE_LIMIT_ENV,
    ONE_MOMENT_AFTER_ENV,
    TOOL_STATE_MACHINE_ENV,
    RuntimeSettings,
    load_tool_registry,
)

REPO = Path(__file__).resolve().parents[2]


def test_the_template_passes_cfn_lint() -> None:
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    result = subprocess.run(
        [str(cfn_lint), str(REPO / "template.yaml")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


class _NoManagedPolicies:
    def load(self) -> dict[str, str]:
        return {}


@pytest.fixture(scope="module")
def transformed() -> dict[str, Any]:
    """The template after the SAM transform, with the s3:// URIs `sam package` would write."""
    return _transform({})


def _transform(parameters: dict[str, str]) -> dict[str, Any]:
    """The SAM transform of the template deployed with these parameter values."""
    from samtranslator.translator.transform import transform

    template = copy.deepcopy(load_template())
    template["Globals"]["Function"]["CodeUri"] = "s3://waypoint-artifacts/code.zip"
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Serverless::StateMachine":
            resource["Properties"]["DefinitionUri"] = "s3://waypoint-artifacts/tools.asl.json"
        if resource["Type"] == "AWS::Serverless::LayerVersion":
            resource["Properties"]["ContentUri"] = "s3://waypoint-artifacts/layer.zip"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        result: dict[str, Any] = transform(template, parameters, _NoManagedPolicies())
    return result


def _resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {lid: r for lid, r in template["Resources"].items() if r["Type"] == kind}


def _statements(transformed: dict[str, Any], role: str) -> list[dict[str, Any]]:
    """Every statement the role may get: a conditional policy or statement (`Fn::If`,
    Bedrock's) counts as granted, so what no function may ever have is checked on it too."""
    policies = transformed["Resources"][role]["Properties"].get("Policies", [])
    policies = [p["Fn::If"][1] if "Fn::If" in p else p for p in policies]
    statements = [s for p in policies for s in p["PolicyDocument"]["Statement"]]
    return [s["Fn::If"][1] if "Fn::If" in s else s for s in statements]


def _actions(transformed: dict[str, Any], role: str) -> set[str]:
    actions: set[str] = set()
    for statement in _statements(transformed, role):
        value = statement["Action"]
        actions.update([value] if isinstance(value, str) else value)
    return actions


def test_the_sam_translator_produces_every_function_api_and_the_state_machine(
    transformed: dict[str, Any],
) -> None:
    functions = _resources(transformed, "AWS::Lambda::Function")
    assert set(functions) == {
        "WebhookFunction",
        "WorkerFunction",
        "ManagementFunction",
        "ToolFunction",
        "HandoffSweepFunction",
    }
    for function in functions.values():
        properties = function["Properties"]
        assert properties["Runtime"] == "python3.11"
        assert properties["Architectures"] == ["arm64"]
    assert len(_resources(transformed, "AWS::ApiGatewayV2::Api")) == 2
    (machine,) = _resources(transformed, "AWS::StepFunctions::StateMachine").values()
    assert machine["Properties"]["StateMachineType"] == "EXPRESS"
    assert set(machine["Properties"]["DefinitionSubstitutions"]) == {
        "ToolFunctionArn",
        "ToolTimeoutSeconds",
    }


def test_the_worker_reports_partial_batch_failures_on_the_fifo_queue(
    transformed: dict[str, Any],
) -> None:
    (mapping,) = _resources(transformed, "AWS::Lambda::EventSourceMapping").values()
    properties = mapping["Properties"]
    assert properties["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert properties["BatchSize"] == 10
    assert properties["EventSourceArn"] == {"Fn::GetAtt": ["TurnQueue", "Arn"]}
    template = load_template()
    worker_timeout = template["Resources"]["WorkerFunction"]["Properties"]["Timeout"]
    visibility = template["Resources"]["TurnQueue"]["Properties"]["VisibilityTimeout"]
    assert worker_timeout < visibility  # an event source mapping refuses anything else


def test_the_worker_concurrency_cap_and_the_rate_limit_settings_are_parameters(
    transformed: dict[str, Any],
) -> None:
    """A campaign cannot exhaust the model's quota: the mapping's MaximumConcurrency is a
    parameter (AWS's bounds, 2 to 1000); what a rate-limited turn does is one too, read by both
    functions that run turns, with the code's defaults."""
    (mapping,) = _resources(transformed, "AWS::Lambda::EventSourceMapping").values()
    assert mapping["Properties"]["ScalingConfig"] == {
        "MaximumConcurrency": {"Ref": "WorkerMaxConcurrency"}
    }
    template = load_template()
    parameters = template["Parameters"]
    cap = parameters["WorkerMaxConcurrency"]
    assert (cap["Default"], cap["MinValue"], cap["MaxValue"]) == (50, 2, 1000)
    defaults = RuntimeSettings()
    mode = parameters["ModelRateLimit"]
    assert mode["AllowedValues"] == ["defer", "fallback"]
    assert mode["Default"] == defaults.on_model_rate_limit == "defer"
    assert parameters["OneMomentAfterSeconds"]["Default"] == defaults.one_moment_after_seconds
    resources = template["Resources"]
    worker = resources["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    management = resources["ManagementFunction"]["Properties"]["Environment"]["Variables"]
    assert (
        worker[MODEL_RATE_LIMIT_ENV]
        == management[MODEL_RATE_LIMIT_ENV]
        == {"Ref": "ModelRateLimit"}
    )
    assert worker[ONE_MOMENT_AFTER_ENV] == {"Ref": "OneMomentAfterSeconds"}


def test_a_deferred_message_waits_out_every_receive_before_the_dead_letter_queue() -> None:
    """The back-offs of maxReceiveCount deferrals (docs/capacity.md states their sum) all stay
    under the queue's visibility timeout, which they replace."""
    queue = load_template()["Resources"]["TurnQueue"]["Properties"]
    receives = queue["RedrivePolicy"]["maxReceiveCount"]
    backoffs = [worker_backpressure.visibility_backoff(n) for n in range(1, receives + 1)]
    assert sum(backoffs) == 242
    assert max(backoffs) == worker_backpressure.DEFER_CAP_SECONDS < queue["VisibilityTimeout"]


def test_the_tool_timeouts_fit_the_tools() -> None:
    resources = load_template()["Resources"]
    substitutions = resources["ToolStateMachine"]["Properties"]["DefinitionSubstitutions"]
    task_timeout = int(substitutions["ToolTimeoutSeconds"])
    registry = load_tool_registry("examples.banking.tools")
    assert task_timeout >= task_timeout_seconds(registry.specs)
    assert resources["ToolFunction"]["Properties"]["Timeout"] >= task_timeout


def test_the_worker_gets_the_state_machine_under_the_name_the_dispatcher_reads() -> None:
    assert TOOL_STATE_MACHINE_ENV == STATE_MACHINE_ENV
    env = load_template()["Resources"]["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    assert env[STATE_MACHINE_ENV] == {"Ref": "ToolStateMachine"}


def test_each_function_gets_only_the_permissions_it_needs(transformed: dict[str, Any]) -> None:
    """What every grant is for is derived in test_iam_derived.py (each call the code makes on
    moto against these policies, and each grant used); here: what no function may ever have."""
    webhook = _actions(transformed, "WebhookFunctionRole")
    worker = _actions(transformed, "WorkerFunctionRole")
    management = _actions(transformed, "ManagementFunctionRole")
    tools = _actions(transformed, "ToolFunctionRole")
    machine = _actions(transformed, "ToolStateMachineRole")
    sweep = _actions(transformed, "HandoffSweepFunctionRole")

    for actions in (webhook, worker, management, sweep):  # never a scan, a table delete, a wildcard
        assert not {"dynamodb:Scan", "dynamodb:DeleteTable"} & actions
        assert not any("*" in a for a in actions)
        assert "ssm:GetParametersByPath" not in actions  # secrets are granted one by one
    assert "dynamodb:DeleteItem" not in worker and "dynamodb:DeleteItem" not in sweep
    assert not any(a.startswith(("ssm:", "states:")) for a in sweep)  # no secrets, no tools
    # The management API deletes only to erase a customer, and never an agent version.
    (erase,) = [
        st
        for st in _statements(transformed, "ManagementFunctionRole")
        if "dynamodb:BatchWriteItem"
        in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"])
    ]
    leading = erase["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
    assert sorted(leading) == [
        "AGENT#*#INFLIGHT#*",
        "CUSTOMER#*",
        "HANDOFFS",
        "INBOX#*",
        "SESSION#*",
        "SESSIONS#*",
        "VARS#*",
    ]
    # Batch writes only to erase (a huge session, 25 deletes per call), under those keys.
    assert "dynamodb:BatchWriteItem" not in webhook | worker | sweep
    assert "dynamodb:DeleteItem" not in management
    assert "states:StartExecution" not in worker and "s3:DeleteObject" not in worker

    assert tools == set()  # the tool Lambda touches no AWS resource of ours
    assert "lambda:InvokeFunction" in machine
    assert not any(a.startswith(("dynamodb:", "s3:", "sqs:")) for a in machine)

    start_sync = [
        s
        for s in _statements(transformed, "WorkerFunctionRole")
        if s["Action"] == "states:StartSyncExecution"
    ]
    assert [s["Resource"] for s in start_sync] == [{"Ref": "ToolStateMachine"}]


def test_the_bedrock_grants_are_one_statement_per_kind_whatever_the_number_of_models(
    transformed: dict[str, Any],
) -> None:
    """No slot per model (CloudFormation has no loops): each kind of grant is one statement, on a
    condition of its own, whose ARNs come from its parameter split at the commas — any number,
    none when it is empty (tests/functions/test_iam_bedrock.py evaluates them). The worker and
    the management API get the same grants."""
    conditions = load_template()["Conditions"]
    assert not [name for name in conditions if name.startswith(("BedrockModel", "BedrockProfile"))]
    by_role = {
        role: [s for s in _statements(transformed, role) if s["Action"] == "bedrock:InvokeModel"]
        for role in ("WorkerFunctionRole", "ManagementFunctionRole")
    }
    assert by_role["WorkerFunctionRole"] == by_role["ManagementFunctionRole"]
    statements = {s["Sid"]: s for s in by_role["WorkerFunctionRole"]}
    assert set(statements) == {
        "InvokeConfiguredBedrockModels",
        "InvokeConfiguredBedrockProfiles",
        "InvokeProfileModelsThroughConfiguredProfiles",
    }
    for sid, parameter in (
        ("InvokeConfiguredBedrockModels", "BedrockModelIds"),
        ("InvokeConfiguredBedrockProfiles", "BedrockInferenceProfileIds"),
    ):
        resource = statements[sid]["Resource"]
        assert set(resource) == {"Fn::Split"} and {"Ref": parameter} in _leaves(resource)
        # the stack's region, not the wildcard the literal prefix has to carry
        region = statements[sid]["Condition"]["StringEquals"]["aws:RequestedRegion"]
        assert region == {"Ref": "AWS::Region"}
    through = statements["InvokeProfileModelsThroughConfiguredProfiles"]["Condition"]
    assert {"Ref": "BedrockInferenceProfileIds"} in _leaves(
        through["ArnLike"]["bedrock:InferenceProfileArn"]
    )


def _leaves(value: Any) -> list[Any]:
    """Every dict and string nested in `value` (an intrinsic function's arguments)."""
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    if isinstance(value, dict):
        return [value, *(leaf for item in value.values() for leaf in _leaves(item))]
    return [value]


def test_both_apis_write_access_logs_to_their_own_log_group() -> None:
    resources = load_template()["Resources"]
    apis = {lid: r for lid, r in resources.items() if r["Type"] == "AWS::Serverless::HttpApi"}
    assert len(apis) == 2
    groups = set()
    for api in apis.values():
        settings = api["Properties"]["AccessLogSettings"]
        (group, attribute) = settings["DestinationArn"]["Fn::GetAtt"]
        assert attribute == "Arn" and resources[group]["Type"] == "AWS::Logs::LogGroup"
        assert resources[group]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}
        assert (
            "$context.status" in settings["Format"] and "$context.requestId" in settings["Format"]
        )
        groups.add(group)
    assert len(groups) == 2


def test_every_log_group_of_the_stack_has_a_retention_and_every_function_logs_to_one() -> None:
    """No log kept (and billed) forever: the group Lambda creates by itself has no retention, so
    every function names its own group, which has the stack's `LogRetentionDays`."""
    template = load_template()
    resources = template["Resources"]
    days = template["Parameters"]["LogRetentionDays"]
    assert days["Default"] in days["AllowedValues"] and 0 < days["Default"] <= 365
    groups = {lid for lid, r in resources.items() if r["Type"] == "AWS::Logs::LogGroup"}
    for lid in groups:
        assert "RetentionInDays" in resources[lid]["Properties"], lid
    functions = {lid: r for lid, r in resources.items() if r["Type"] == "AWS::Serverless::Function"}
    named = []
    for lid, function in functions.items():
        group = function["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        assert group in groups, lid
        assert resources[group]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}
        named.append(group)
    assert len(set(named)) == len(functions)  # one group per function: logs stay apart


def test_the_access_logs_name_routes_never_the_ids_in_a_path() -> None:
    """`DELETE /customers/telegram/5151` is logged as its route key: the erased id stays out
    of the 30 days of access logs (issue #33; `waypoint serve` does the same)."""
    resources = load_template()["Resources"]
    for api in (r for r in resources.values() if r["Type"] == "AWS::Serverless::HttpApi"):
        log_format = api["Properties"]["AccessLogSettings"]["Format"]
        assert "$context.routeKey" in log_format
        assert "$context.path" not in log_format and "$context.resourcePath" not in log_format


def test_no_secret_is_in_the_template() -> None:
    """Secrets are SecureString parameters read at run time, never deploy-time values."""
    template = load_template()
    secret_variables = {ChannelSecrets.env_var(f) for f in ChannelSecrets.model_fields} | {
        MANAGEMENT_API_KEY_ENV,
        "OPENAI_API_KEY",
    }
    for lid, resource in template["Resources"].items():
        env = resource.get("Properties", {}).get("Environment", {}).get("Variables", {})
        assert not secret_variables & set(env), f"{lid} sets a secret as an environment variable"
    for name, parameter in template["Parameters"].items():
        if "SECRET" in name.upper():
            assert str(parameter["Default"]).startswith("/"), f"{name} must name an SSM path"
    text = json.dumps(template)
    assert "xoxb-" not in text and "sk-" not in text


def test_the_outputs_name_a_webhook_url_per_channel_and_the_management_api() -> None:
    outputs = load_template()["Outputs"]
    for channel in ("telegram", "slack", "whatsapp", "twilio", "generic"):
        (url,) = [
            o["Value"]["Fn::Sub"] for o in outputs.values() if f"/webhooks/{channel}" in str(o)
        ]
        assert url.startswith("https://${WebhookApi}.execute-api.")
    assert outputs["ManagementApiUrl"]["Value"]["Fn::Sub"].startswith("https://${ManagementApi}")


def test_every_function_runs_waypoint_from_the_layer_the_makefile_builds() -> None:
    # What `sam build` packages: each function an (almost) empty folder, and one layer built by
    # the Makefile's build-WaypointLayer target, installing this checkout with bytecode
    # (tests/cli/test_scaffold.py runs that recipe and checks the bytecode a read-only layer loads).
    import shutil
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    template = load_template()
    code = root / template["Globals"]["Function"]["CodeUri"]
    assert sorted(p.name for p in code.iterdir()) == ["README.md"]
    assert template["Globals"]["Function"]["Layers"] == [{"Ref": "WaypointLayer"}]
    for function in _resources(template, "AWS::Serverless::Function").values():
        assert "CodeUri" not in function["Properties"] and "Layers" not in function["Properties"]
    layer = template["Resources"]["WaypointLayer"]
    assert layer["Properties"]["ContentUri"] == "."
    assert layer["Metadata"] == {"BuildMethod": "makefile", "BuildArchitecture": "arm64"}
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    recipe = subprocess.run(
        [make, "-n", "--no-print-directory", "build-WaypointLayer", "ARTIFACTS_DIR=/artifacts"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert '--target "/artifacts/python"' in recipe and "--platform manylinux2014_aarch64" in recipe
    install = next(line for line in recipe.splitlines() if "--target" in line)
    assert install.rstrip().endswith(" .")  # this checkout, with its dependencies
    assert "--invalidation-mode unchecked-hash" in recipe


def test_the_agent_id_parameters_follow_the_one_agent_id_rule() -> None:
    from engine.agent_id import AGENT_ID_PATTERN

    parameters = load_template()["Parameters"]
    assert parameters["AgentId"]["AllowedPattern"] == AGENT_ID_PATTERN
    body = AGENT_ID_PATTERN.removeprefix("^").removesuffix("$")
    assert body in parameters["ChannelAgents"]["AllowedPattern"]


def test_the_turn_queue_outlasts_the_worker_six_times_and_leaves_room_for_every_send_attempt() -> (
    None
):
    resources = load_template()["Resources"]
    queue = resources["TurnQueue"]["Properties"]
    worker_timeout = resources["WorkerFunction"]["Properties"]["Timeout"]
    assert queue["VisibilityTimeout"] >= 6 * worker_timeout  # AWS's guidance for SQS → Lambda
    # A dead worker's outbox lease runs out before SQS hands its record to another worker.
    assert queue["VisibilityTimeout"] > worker_delivery.DELIVERY_LEASE_SECONDS
    receives_to_give_up = math.ceil(
        worker_delivery.MAX_DELIVERY_ATTEMPTS / worker_delivery.SENDS_PER_INVOCATION
    )
    max_receives = queue["RedrivePolicy"]["maxReceiveCount"]
    assert max_receives >= max(5, receives_to_give_up + 3)  # deferrals, throttles, crashes
    # A webhook's inbox claim is taken over only once its Lambda is certainly dead.
    assert resources["WebhookFunction"]["Properties"]["Timeout"] < webhook.CLAIM_LEASE_SECONDS


def test_the_alarms_watch_the_dead_letter_queue_and_the_metric_the_worker_emits() -> None:
    resources = load_template()["Resources"]
    dead_letter = resources["TurnDeadLetterAlarm"]["Properties"]
    assert (dead_letter["Namespace"], dead_letter["MetricName"]) == (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
    )
    assert dead_letter["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": ["TurnDeadLetterQueue", "QueueName"]}}
    ]
    assert (dead_letter["Threshold"], dead_letter["ComparisonOperator"]) == (
        0,
        "GreaterThanThreshold",
    )
    failed = resources["DeliveryFailedAlarm"]["Properties"]
    worker_env = resources["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    assert failed["Namespace"] == worker_env["POWERTOOLS_METRICS_NAMESPACE"]
    assert failed["MetricName"] == worker_delivery.DELIVERIES_FAILED_METRIC
    assert failed["Dimensions"] == [{"Name": "service", "Value": worker_telemetry.SERVICE}]
    assert (failed["Statistic"], failed["Threshold"]) == ("Sum", 0)


def test_every_management_route_is_an_http_api_route_of_the_template() -> None:
    """API Gateway answers 404 for a route the template does not declare, whatever the app
    serves: each route of the management app must be one of the function's HttpApi events."""
    from fastapi.routing import APIRoute

    from functions import management

    served = {
        (method, route.path)
        for route in management.app.routes
        if isinstance(route, APIRoute)
        for method in route.methods
    }
    served.add(("GET", management.app.openapi_url))  # FastAPI's own route, not an APIRoute
    events = load_template()["Resources"]["ManagementFunction"]["Properties"]["Events"]
    declared = {
        (e["Properties"]["Method"], e["Properties"]["Path"])
        for e in events.values()
        if e["Type"] == "HttpApi"
    }
    assert served == declared


# --------------------------------------------------------------------------------------------------
# CORS of the management API (StudioOrigins): what API Gateway will be given once CloudFormation
# resolves the transformed template's conditions with the parameter values.


def _resolve(value: Any, template: dict[str, Any], parameters: dict[str, str]) -> Any:
    """`value` with the intrinsics the CORS configuration uses resolved as CloudFormation does
    (Ref of a parameter or AWS::NoValue, Fn::If on a condition, Fn::Split, Fn::Equals, Fn::Not)."""
    if isinstance(value, list):
        items = [_resolve(v, template, parameters) for v in value]
        return [i for i in items if i is not _NO_VALUE]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Ref"}:
        name = value["Ref"]
        if name == "AWS::NoValue":
            return _NO_VALUE
        return parameters.get(name, template["Parameters"][name].get("Default"))
    if set(value) == {"Condition"}:
        condition = template["Conditions"][value["Condition"]]
        return _resolve(condition, template, parameters)
    if set(value) == {"Fn::If"}:
        name, when_true, when_false = value["Fn::If"]
        holds = _resolve(template["Conditions"][name], template, parameters)
        return _resolve(when_true if holds else when_false, template, parameters)
    if set(value) == {"Fn::Not"}:
        return not _resolve(value["Fn::Not"][0], template, parameters)
    if set(value) == {"Fn::Equals"}:
        left, right = (_resolve(v, template, parameters) for v in value["Fn::Equals"])
        return left == right
    if set(value) == {"Fn::Split"}:
        separator, text = (_resolve(v, template, parameters) for v in value["Fn::Split"])
        return text.split(separator)
    resolved = {k: _resolve(v, template, parameters) for k, v in value.items()}
    return {k: v for k, v in resolved.items() if v is not _NO_VALUE}


_NO_VALUE = object()


def _management_api_cors(parameters: dict[str, str]) -> Any:
    """The `x-amazon-apigateway-cors` API Gateway gets for the management API, or None."""
    transformed = _transform(parameters)
    body = transformed["Resources"]["ManagementApi"]["Properties"]["Body"]
    resolved = _resolve({"cors": body.get("x-amazon-apigateway-cors")}, transformed, parameters)
    return resolved.get("cors")


def test_the_management_api_has_no_cors_by_default() -> None:
    assert load_template()["Parameters"]["StudioOrigins"]["Default"] == ""
    assert _management_api_cors({}) is None
    env = load_template()["Resources"]["ManagementFunction"]["Properties"]["Environment"]
    assert _resolve(env["Variables"]["WAYPOINT_CORS_ORIGINS"], load_template(), {}) == ""


def test_studio_origins_give_the_management_api_cors_for_exactly_those_origins() -> None:
    """The studio page on another origin may call the API with its key header; nothing else."""
    from functions.management_cors import API_KEY_HEADER

    origins = "http://localhost:8750,https://studio.example.com"
    cors = _management_api_cors({"StudioOrigins": origins})
    assert cors["allowOrigins"] == ["http://localhost:8750", "https://studio.example.com"]
    assert API_KEY_HEADER.lower() in {h.lower() for h in cors["allowHeaders"]}
    assert "content-type" in {h.lower() for h in cors["allowHeaders"]}
    assert set(cors["allowMethods"]) == {"GET", "POST", "DELETE", "OPTIONS"}
    assert cors["allowCredentials"] is False
    assert 0 < cors["maxAge"] <= 3600
    # The function gets the same origins, for its own CORS on any other host.
    template = load_template()
    env = template["Resources"]["ManagementFunction"]["Properties"]["Environment"]["Variables"]
    assert _resolve(env["WAYPOINT_CORS_ORIGINS"], template, {"StudioOrigins": origins}) == origins


@pytest.mark.parametrize(
    "value",
    [
        "*",
        "http://localhost:8750/",
        "localhost:8750",
        "http://a.example,*",
        "http://x.example/studio",
    ],
)
def test_studio_origins_refuse_wildcards_and_paths(value: str) -> None:
    import re

    pattern = load_template()["Parameters"]["StudioOrigins"]["AllowedPattern"]
    assert re.fullmatch(pattern, value) is None
    assert re.fullmatch(pattern, "http://localhost:8750,https://studio.example.com")


def test_the_support_relay_is_configured_alike_where_it_is_read_and_needs_its_teams() -> None:
    """The webhook (drops support-channel messages from outside the allow-list) and the worker
    (relays the rest) get the same three settings; a channel without teams is refused at deploy,
    as the functions would refuse to start without them; the parameters' patterns accept the
    ids the relay accepts."""
    import re

    from infra.channels.support_channel import (
        SUPPORT_CHANNEL_ENV,
        SUPPORT_TEAMS_ENV,
        SUPPORT_USERS_ENV,
        SupportRelay,
    )

    template = load_template()
    expected = {
        SUPPORT_CHANNEL_ENV: {"Ref": "SupportSlackChannel"},
        SUPPORT_TEAMS_ENV: {"Ref": "SupportSlackTeams"},
        SUPPORT_USERS_ENV: {"Ref": "SupportSlackUsers"},
    }
    for function in ("WebhookFunction", "WorkerFunction"):
        env = template["Resources"][function]["Properties"]["Environment"]["Variables"]
        assert {name: env.get(name) for name in expected} == expected, function
    rule = template["Rules"]["SupportChannelNeedsTeams"]
    assert "SupportSlackTeams" in json.dumps(rule["Assertions"])
    parameters = template["Parameters"]
    values = {"SupportSlackTeams": "T0123ABCD,E0GRID", "SupportSlackUsers": "U0123ABCD,W0GRID"}
    for name, value in values.items():
        assert re.fullmatch(parameters[name]["AllowedPattern"], value)
        assert not re.fullmatch(parameters[name]["AllowedPattern"], value.lower())
    assert SupportRelay.from_env(
        {
            SUPPORT_CHANNEL_ENV: "C0123ABCD",
            SUPPORT_TEAMS_ENV: values["SupportSlackTeams"],
            SUPPORT_USERS_ENV: values["SupportSlackUsers"],
        }
    )
