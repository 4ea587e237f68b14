"""docs/deploy.md §12's deployer policy covers what `sam deploy` of template.yaml creates, and no
more than it must.

For every resource of the transformed template (with the default parameters, and with the
optional ones set), the calls CloudFormation makes to create, read, update and delete it — the
handler permissions of its type's registry schema, as cfn-lint ships them — in the type's own
service must be allowed on that resource's ARN as the template names it. The calls of features
the template does not use are listed below, each with why. The artifacts every code resource is
read from, and the roles passed to Lambda and Step Functions, must be allowed too. The retained
table and bucket must not be deletable by the deployer, and the policy must fit one IAM managed
policy.
"""

from __future__ import annotations

import fnmatch
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.functions.test_template import _transform

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "deploy.md"
STAGE, STACK, ACCOUNT, REGION = "dev", "waypoint", "111122223333", "us-east-1"
ARTIFACT = f"arn:aws:s3:::aws-sam-cli-managed-default-samclisourcebucket-1a2b3c4d/{STACK}/0f9e8d"
MANAGED_POLICY_LIMIT = 6_144  # characters, whitespace not counted

# The service each resource type's own calls belong to.
NAMESPACES = {
    "AWS::Lambda::Function": "lambda",
    "AWS::Lambda::LayerVersion": "lambda",
    "AWS::Lambda::Permission": "lambda",
    "AWS::Lambda::EventSourceMapping": "lambda",
    "AWS::IAM::Role": "iam",
    "AWS::DynamoDB::Table": "dynamodb",
    "AWS::S3::Bucket": "s3",
    "AWS::SQS::Queue": "sqs",
    "AWS::ApiGatewayV2::Api": "apigateway",
    "AWS::ApiGatewayV2::Stage": "apigateway",
    "AWS::StepFunctions::StateMachine": "states",
    "AWS::Events::Rule": "events",
    "AWS::Logs::LogGroup": "logs",
    "AWS::CloudWatch::Alarm": "cloudwatch",
    "AWS::SecretsManager::Secret": "secretsmanager",
}

# Calls of features the template does not use: a handler makes them only when the property is set.
UNUSED = {
    "AWS::DynamoDB::Table": {
        # retained (DeletionPolicy: Retain): CloudFormation never deletes it; §11 does, by hand
        "dynamodb:DeleteTable",
        # no ImportSourceSpecification: the import reads the items in (and writes them)
        "dynamodb:ImportTable",
        "dynamodb:DescribeImport",
        "dynamodb:Scan",
        "dynamodb:Query",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:BatchWriteItem",
        # no replicas (a global table), no Kinesis stream, no contributor insights, no
        # resource policy
        "dynamodb:CreateTableReplica",
        "dynamodb:AssociateTableReplica",
        "dynamodb:EnableKinesisStreamingDestination",
        "dynamodb:DisableKinesisStreamingDestination",
        "dynamodb:UpdateKinesisStreamingDestination",
        "dynamodb:UpdateContributorInsights",
        "dynamodb:PutResourcePolicy",
        "dynamodb:DeleteResourcePolicy",
    },
    "AWS::S3::Bucket": {
        "s3:DeleteBucket",  # retained
        "s3:DeleteObject",  # (emptying it: §11)
        # none of these is configured: CORS, lifecycle, logging, notifications, replication,
        # website, versioning, object lock, ownership controls, ACLs, analytics, inventory,
        # metrics, intelligent tiering, acceleration, metadata tables, ABAC
        "s3:PutBucketCORS",
        "s3:DeleteBucketCors",
        "s3:PutLifecycleConfiguration",
        "s3:DeleteBucketLifecycle",
        "s3:PutBucketLogging",
        "s3:PutBucketNotification",
        "s3:PutReplicationConfiguration",
        "s3:PutBucketReplication",
        "s3:DeleteBucketReplication",
        "s3:PutBucketWebsite",
        "s3:DeleteBucketWebsite",
        "s3:PutBucketVersioning",
        "s3:PutBucketObjectLockConfiguration",
        "s3:PutObjectLockConfiguration",
        "s3:PutBucketOwnershipControls",
        "s3:PutBucketAcl",
        "s3:PutObjectAcl",
        "s3:PutAnalyticsConfiguration",
        "s3:DeleteBucketAnalyticsConfiguration",
        "s3:PutInventoryConfiguration",
        "s3:PutMetricsConfiguration",
        "s3:DeleteBucketMetricsConfiguration",
        "s3:PutIntelligentTieringConfiguration",
        "s3:PutAccelerateConfiguration",
        "s3:CreateBucketMetadataTableConfiguration",
        "s3:DeleteBucketMetadataTableConfiguration",
        "s3:UpdateBucketMetadataAnnotationTableConfiguration",
        "s3:UpdateBucketMetadataInventoryTableConfiguration",
        "s3:UpdateBucketMetadataJournalTableConfiguration",
        "s3:PutBucketAbac",
        "s3:DeleteBucketEncryption",  # the encryption is set, never removed
    },
    "AWS::Lambda::Function": {
        # no AutoPublishAlias / versions, reserved concurrency, code signing, runtime
        # management, recursion or scaling settings, capacity providers
        "lambda:PublishVersion",
        "lambda:PutFunctionConcurrency",
        "lambda:DeleteFunctionConcurrency",
        "lambda:PutFunctionCodeSigningConfig",
        "lambda:DeleteFunctionCodeSigningConfig",
        "lambda:GetCodeSigningConfig",
        "lambda:PutRuntimeManagementConfig",
        "lambda:AssociateRuntimeAlias",
        "lambda:PutFunctionRecursionConfig",
        "lambda:PutFunctionScalingConfig",
        "lambda:PassCapacityProvider",
    },
    "AWS::SecretsManager::Secret": {
        "secretsmanager:DeleteSecret",  # the erasure key is retained: §11 deletes it by hand
        # no replicas in other regions
        "secretsmanager:ReplicateSecretToRegions",
        "secretsmanager:RemoveRegionsFromReplication",
    },
    "AWS::IAM::Role": {
        # no PermissionsBoundary in the template (§12 says how to add one)
        "iam:PutRolePermissionsBoundary",
        "iam:DeleteRolePermissionsBoundary",
    },
    "AWS::Logs::LogGroup": {
        # no KMS key, data protection, index, field or resource policies, deletion
        # protection, bearer tokens on these groups
        "logs:AssociateKmsKey",
        "logs:DisassociateKmsKey",
        "logs:PutDataProtectionPolicy",
        "logs:DeleteDataProtectionPolicy",
        "logs:GetDataProtectionPolicy",
        "logs:PutIndexPolicy",
        "logs:DeleteIndexPolicy",
        "logs:DescribeIndexPolicies",
        "logs:DeleteResourcePolicy",
        "logs:PutLogGroupDeletionProtection",
        "logs:PutBearerTokenAuthentication",
    },
}


# -- the policy and the template -------------------------------------------------------------


@cache
def documented_policies() -> list[dict[str, Any]]:
    """The JSON blocks of docs/deploy.md §12: the stack's policy, then the erasure key's."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## 12. The deployer's IAM permissions") :]
    section = section[: section.find("\n## ", 1)] if "\n## " in section[1:] else section
    blocks = re.findall(r"```json\n(.*?)\n```", section, re.S)
    assert blocks, "§12 has no ```json block"
    return [json.loads(block) for block in blocks]


def documented_policy() -> dict[str, Any]:
    """Every statement the deployer is given (all of §12's policies)."""
    policies = documented_policies()
    return {**policies[0], "Statement": [s for p in policies for s in p["Statement"]]}


def _listed(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def allowed(action: str, resource: str) -> bool:
    """Whether an Allow statement names `action` on `resource` (IAM's wildcards; conditions
    narrow a grant further, they never widen it, so they are not needed for this)."""
    for statement in documented_policy()["Statement"]:
        if statement["Effect"] != "Allow":
            continue
        actions = _listed(statement["Action"])
        resources = _listed(statement["Resource"])
        if any(_glob(action.lower(), a.lower()) for a in actions) and any(
            _glob(resource, r) for r in resources
        ):
            return True
    return False


def _glob(value: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


@cache
def handler_permissions(kind: str) -> frozenset[str]:
    """Every permission the CloudFormation handlers of `kind` list (create, read, update,
    delete), from the registry schemas cfn-lint ships."""
    import cfnlint

    schemas = Path(cfnlint.__file__).parent / "data" / "schemas"
    providers = json.loads((schemas / "providers" / "us-east-1.json").read_text())
    schema = json.loads((schemas / "resources" / f"{providers[kind]}.json").read_text())
    handlers = schema.get("handlers", {})
    return frozenset(
        permission
        for handler in ("create", "read", "update", "delete")
        for permission in handlers.get(handler, {}).get("permissions", [])
    )


def _sub(value: Any) -> str:
    """A name as the template gives it, for the documented stage, account and region."""
    if isinstance(value, dict) and "Fn::Sub" in value:
        text = value["Fn::Sub"]
        for name, replacement in (
            ("Stage", STAGE),
            ("AWS::AccountId", ACCOUNT),
            ("AWS::Region", REGION),
            ("AWS::StackName", STACK),
        ):
            text = text.replace("${" + name + "}", replacement)
        assert "${" not in text, text
        return str(text)
    assert isinstance(value, str), value
    return value


def resource_arn(template: dict[str, Any], logical_id: str) -> str:
    """The ARN a resource gets when the template is deployed as documented: its own name, or
    the `<stack>-<logical id>-<suffix>` CloudFormation gives an unnamed one."""
    resource = template["Resources"][logical_id]
    kind, props = resource["Type"], resource.get("Properties", {})
    generated = f"{STACK}-{logical_id}-1A2B3C4D5E6F"
    if kind == "AWS::DynamoDB::Table":
        return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{_sub(props['TableName'])}"
    if kind == "AWS::S3::Bucket":
        return f"arn:aws:s3:::{_sub(props['BucketName'])}"
    if kind == "AWS::SQS::Queue":
        return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{_sub(props['QueueName'])}"
    if kind == "AWS::Lambda::Function":
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{_sub(props['FunctionName'])}"
    if kind == "AWS::Lambda::Permission":
        return resource_arn(template, props["FunctionName"]["Ref"])
    if kind == "AWS::Lambda::LayerVersion":
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:layer:{_sub(props['LayerName'])}:7"
    if kind == "AWS::Lambda::EventSourceMapping":
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:event-source-mapping:0f1e2d3c-4b5a"
    if kind == "AWS::IAM::Role":
        return f"arn:aws:iam::{ACCOUNT}:role/{generated}"
    if kind == "AWS::Logs::LogGroup":
        return f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{_sub(props['LogGroupName'])}"
    if kind == "AWS::CloudWatch::Alarm":
        return f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:{_sub(props['AlarmName'])}"
    if kind == "AWS::ApiGatewayV2::Api":
        return f"arn:aws:apigateway:{REGION}::/apis/a1b2c3d4e5"
    if kind == "AWS::ApiGatewayV2::Stage":
        return f"arn:aws:apigateway:{REGION}::/apis/a1b2c3d4e5/stages/$default"
    if kind == "AWS::Events::Rule":
        return f"arn:aws:events:{REGION}:{ACCOUNT}:rule/{generated}"
    if kind == "AWS::StepFunctions::StateMachine":
        return f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{_sub(props['StateMachineName'])}"
    if kind == "AWS::SecretsManager::Secret":  # Secrets Manager appends six random characters
        return f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{_sub(props['Name'])}-a1B2c3"
    raise AssertionError(
        f"{logical_id} is a {kind}: a type the deployer policy (docs/deploy.md §12) does not "
        "cover yet; add its statement, then its naming here"
    )


def targets(template: dict[str, Any], logical_id: str, action: str, arn: str) -> list[str]:
    """What a call made for a resource acts on: the resource itself, but for a function's
    layers, which CloudFormation reads by the layers' own ARNs."""
    resource = template["Resources"][logical_id]
    if resource["Type"] == "AWS::Lambda::Function" and action == "lambda:GetLayerVersion":
        layers = resource["Properties"].get("Layers", [])
        return [resource_arn(template, layer["Ref"]) for layer in layers]
    return [arn]


TEMPLATES = {
    "defaults": {},
    "optional parameters set": {
        "StudioOrigins": "http://localhost:8750",
        "AlarmTopicArn": f"arn:aws:sns:{REGION}:{ACCOUNT}:waypoint-alarms",
        "SupportSlackChannel": "C0123ABCD",
        "SupportSlackTeams": "T0123ABCD",
    },
}


@pytest.fixture(scope="module", params=list(TEMPLATES), ids=list(TEMPLATES))
def template(request: pytest.FixtureRequest) -> dict[str, Any]:
    return _transform({"Stage": STAGE, **TEMPLATES[request.param]})


# -- the checks --------------------------------------------------------------------------------


def test_every_resource_type_the_template_deploys_is_covered(template: dict[str, Any]) -> None:
    kinds = {resource["Type"] for resource in template["Resources"].values()}
    assert kinds <= set(NAMESPACES), f"not covered: {sorted(kinds - set(NAMESPACES))}"


def test_each_resource_allows_every_call_cloudformation_makes_for_it(
    template: dict[str, Any],
) -> None:
    missing = []
    for logical_id, resource in template["Resources"].items():
        kind = resource["Type"]
        arn = resource_arn(template, logical_id)
        service = NAMESPACES[kind] + ":"
        needed = {p for p in handler_permissions(kind) if p.lower().startswith(service)}
        for action in sorted(needed - UNUSED.get(kind, set())):
            for target in targets(template, logical_id, action, arn):
                if not allowed(action, target):
                    missing.append(f"{logical_id} ({kind}): {action} on {target}")
    assert missing == [], "\n".join(missing)


def test_code_is_read_from_the_artifacts_and_roles_are_passed(template: dict[str, Any]) -> None:
    for logical_id, resource in template["Resources"].items():
        kind = resource["Type"]
        if kind in ("AWS::Lambda::Function", "AWS::Lambda::LayerVersion"):
            assert allowed("s3:GetObject", ARTIFACT), logical_id
        if kind in ("AWS::Lambda::Function", "AWS::StepFunctions::StateMachine"):
            role = resource["Properties"][
                "RoleArn" if "RoleArn" in resource["Properties"] else "Role"
            ]
            role_arn = resource_arn(template, role["Fn::GetAtt"][0])
            assert allowed("iam:PassRole", role_arn), logical_id
    assert allowed(
        "cloudformation:CreateChangeSet",
        f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{STACK}/x",
    )
    assert allowed(
        "cloudformation:CreateChangeSet",
        f"arn:aws:cloudformation:{REGION}:aws:transform/Serverless-2016-10-31",
    )
    parameter = f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/waypoint/{STAGE}/llm-provider"
    assert allowed("ssm:GetParameters", parameter)  # LlmProvider is resolved at deploy time


def test_the_deployer_cannot_delete_the_retained_table_or_bucket(template: dict[str, Any]) -> None:
    retained = [
        lid for lid, r in template["Resources"].items() if r.get("DeletionPolicy") == "Retain"
    ]
    assert sorted(retained) == ["EmbeddingsBucket", "ErasureKey", "StateTable"]
    assert not allowed("secretsmanager:DeleteSecret", resource_arn(template, "ErasureKey"))
    assert not allowed("dynamodb:DeleteTable", resource_arn(template, "StateTable"))
    assert not allowed("s3:DeleteBucket", resource_arn(template, "EmbeddingsBucket"))
    assert not allowed("s3:DeleteObject", resource_arn(template, "EmbeddingsBucket") + "/agents/x")


def test_nothing_is_granted_on_every_resource_but_what_iam_allows_only_so() -> None:
    wildcard = [
        action
        for statement in documented_policy()["Statement"]
        if "*" in _listed(statement["Resource"]) and "Condition" not in statement
        for action in _listed(statement["Action"])
    ]
    # Log delivery (HTTP API access logs, the state machine's logs): these actions have no
    # resource-level permissions.
    assert sorted(wildcard) == [
        "logs:*LogDelivery",
        "logs:DescribeResourcePolicies",
        "logs:ListLogDeliveries",
        "logs:PutResourcePolicy",
        "secretsmanager:GetRandomPassword",  # generating the erasure key
    ]
    assert all(
        a != "*" and not a.endswith(":*")
        for s in documented_policy()["Statement"]
        for a in _listed(s["Action"])
    )


def test_each_policy_fits_one_managed_policy() -> None:
    sizes = [len(json.dumps(p, separators=(",", ":"))) for p in documented_policies()]
    assert len(sizes) == 2 and max(sizes) <= MANAGED_POLICY_LIMIT, sizes
    assert f"{sizes[0]:,} of IAM's {MANAGED_POLICY_LIMIT:,} characters" in DOC.read_text()
