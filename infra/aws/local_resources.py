"""Creating the local stack's tables, buckets and queues from their CloudFormation properties.

Each creator maps the properties the template declares onto the boto3 call moto answers;
an unknown property fails loudly (`TemplateNotSupported`) rather than making local differ from
AWS.
"""

from __future__ import annotations

import json
import secrets
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.errors import WaypointError
from infra.aws.cfn_template import BUCKET, QUEUE, SECRET, TABLE

if TYPE_CHECKING:
    from infra.aws.local_stack import LocalStack

ACCOUNT_ID = "123456789012"  # moto's default account


class TemplateNotSupported(WaypointError):
    """template.yaml uses something the local stack cannot create or resolve; extend
    infra/aws/local_resources.py (resources) or infra/aws/local_stack.py (intrinsic functions)."""


@dataclass(frozen=True)
class LocalResource:
    """One created resource: `ref` is what !Ref returns (name, or URL for a queue)."""

    logical_id: str
    type: str
    name: str
    arn: str
    url: str | None = None

    @property
    def ref(self) -> str:
        if self.type == SECRET:  # a secret's !Ref is its ARN
            return self.arn
        return self.url or self.name


def _check_properties(
    logical_id: str, properties: Mapping[str, Any], used: set[str], ignored: set[str]
) -> None:
    # Unknown properties fail loudly: silently dropping one would make local differ from AWS.
    unknown = set(properties) - used - ignored
    if unknown:
        raise TemplateNotSupported(
            f"{logical_id}: properties {sorted(unknown)} are not emulated by the local stack; "
            "map them in infra/aws/local_resources.py (or list them as ignored if local needs none)"
        )


def resource_name(
    stack: LocalStack, logical_id: str, kind: str | None, props: Mapping[str, Any]
) -> str:
    """The physical name CloudFormation would give (the declared one, else a stack-derived one)."""
    if kind == TABLE:
        return str(props.get("TableName") or f"{stack.stack_name}-{logical_id}")
    if kind == BUCKET:
        return str(props.get("BucketName") or f"{stack.stack_name}-{logical_id.lower()}")
    if kind == SECRET:
        return str(props.get("Name") or f"{stack.stack_name}-{logical_id}")
    fifo = bool(props.get("FifoQueue", False))
    return str(
        props.get("QueueName") or f"{stack.stack_name}-{logical_id}" + (".fifo" if fifo else "")
    )


def _create_table(stack: LocalStack, logical_id: str, props: dict[str, Any]) -> LocalResource:
    used = {
        "TableName",
        "AttributeDefinitions",
        "KeySchema",
        "BillingMode",
        "ProvisionedThroughput",
        "GlobalSecondaryIndexes",
        "LocalSecondaryIndexes",
        "StreamSpecification",
        "TimeToLiveSpecification",
    }
    ignored = {
        "SSESpecification",
        "PointInTimeRecoverySpecification",
        "Tags",
        "DeletionProtectionEnabled",
        "ContributorInsightsSpecification",
        "TableClass",
    }
    _check_properties(logical_id, props, used, ignored)
    name = resource_name(stack, logical_id, TABLE, props)
    kwargs: dict[str, Any] = {
        "TableName": name,
        "AttributeDefinitions": props["AttributeDefinitions"],
        "KeySchema": props["KeySchema"],
        "BillingMode": props.get("BillingMode", "PROVISIONED"),
    }
    for key in ("ProvisionedThroughput", "GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
        if key in props:
            kwargs[key] = props[key]
    if "StreamSpecification" in props:
        kwargs["StreamSpecification"] = {"StreamEnabled": True, **props["StreamSpecification"]}
    ddb = stack.client("dynamodb")
    arn = ddb.create_table(**kwargs)["TableDescription"]["TableArn"]
    ttl = props.get("TimeToLiveSpecification")
    if ttl:
        ddb.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={
                "AttributeName": ttl["AttributeName"],
                "Enabled": bool(ttl.get("Enabled", True)),
            },
        )
    return LocalResource(logical_id, TABLE, name, arn)


def _create_bucket(stack: LocalStack, logical_id: str, props: dict[str, Any]) -> LocalResource:
    ignored = {
        "BucketEncryption",
        "PublicAccessBlockConfiguration",
        "VersioningConfiguration",
        "OwnershipControls",
        "Tags",
    }
    _check_properties(logical_id, props, {"BucketName", "LifecycleConfiguration"}, ignored)
    name = resource_name(stack, logical_id, BUCKET, props)
    kwargs: dict[str, Any] = {"Bucket": name}
    if stack.region != "us-east-1":  # S3 rejects an explicit us-east-1 location constraint
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": stack.region}
    s3 = stack.client("s3")
    s3.create_bucket(**kwargs)
    if "LifecycleConfiguration" in props:
        # moto keeps the rules but never applies them: `infra.aws.s3_lifecycle` does, locally.
        rules = [_lifecycle_rule(logical_id, r) for r in props["LifecycleConfiguration"]["Rules"]]
        s3.put_bucket_lifecycle_configuration(Bucket=name, LifecycleConfiguration={"Rules": rules})
    return LocalResource(logical_id, BUCKET, name, f"arn:aws:s3:::{name}")


def _lifecycle_rule(logical_id: str, rule: Mapping[str, Any]) -> dict[str, Any]:
    """A CloudFormation lifecycle rule (prefix and expiration in days) as the S3 API takes it."""
    _check_properties(
        f"{logical_id} lifecycle rule", rule, {"Id", "Status", "Prefix", "ExpirationInDays"}, set()
    )
    api: dict[str, Any] = {
        "ID": rule["Id"],
        "Status": rule["Status"],
        "Filter": {"Prefix": rule.get("Prefix", "")},
    }
    if "ExpirationInDays" in rule:
        api["Expiration"] = {"Days": int(rule["ExpirationInDays"])}
    return api


def _create_secret(stack: LocalStack, logical_id: str, props: dict[str, Any]) -> LocalResource:
    _check_properties(
        logical_id, props, {"Name", "GenerateSecretString"}, {"Description", "KmsKeyId", "Tags"}
    )
    generate = props.get("GenerateSecretString")
    if generate is None:  # a secret whose value the template would give: never in a template
        raise TemplateNotSupported(f"{logical_id}: only generated secrets are emulated")
    _check_properties(
        f"{logical_id} GenerateSecretString",
        generate,
        {"PasswordLength", "ExcludePunctuation"},
        set(),
    )
    alphabet = string.ascii_letters + string.digits
    if not generate.get("ExcludePunctuation", False):
        alphabet += string.punctuation
    length = int(generate.get("PasswordLength", 32))
    value = "".join(secrets.choice(alphabet) for _ in range(length))
    name = resource_name(stack, logical_id, SECRET, props)
    arn = stack.client("secretsmanager").create_secret(Name=name, SecretString=value)["ARN"]
    return LocalResource(logical_id, SECRET, name, arn)


_QUEUE_ATTRIBUTES = {
    "FifoQueue",
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "FifoThroughputLimit",
    "VisibilityTimeout",
    "MessageRetentionPeriod",
    "DelaySeconds",
    "MaximumMessageSize",
    "ReceiveMessageWaitTimeSeconds",
    "RedrivePolicy",
    "RedriveAllowPolicy",
    "SqsManagedSseEnabled",
    "KmsMasterKeyId",
    "KmsDataKeyReusePeriodSeconds",
}


def _queue_attribute(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def _create_queue(stack: LocalStack, logical_id: str, props: dict[str, Any]) -> LocalResource:
    _check_properties(logical_id, props, {"QueueName", *_QUEUE_ATTRIBUTES}, {"Tags"})
    name = resource_name(stack, logical_id, QUEUE, props)
    attributes = {k: _queue_attribute(v) for k, v in props.items() if k in _QUEUE_ATTRIBUTES}
    sqs = stack.client("sqs")
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = f"arn:aws:sqs:{stack.region}:{ACCOUNT_ID}:{name}"
    return LocalResource(logical_id, QUEUE, name, arn, url)


CREATORS: dict[str, Callable[[LocalStack, str, dict[str, Any]], LocalResource]] = {
    TABLE: _create_table,
    BUCKET: _create_bucket,
    QUEUE: _create_queue,
    SECRET: _create_secret,
}
