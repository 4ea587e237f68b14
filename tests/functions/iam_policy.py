"""IAM, as far as our functions need it: the policy each function's role gets from template.yaml
(after the SAM transform, so policy templates count as AWS expands them), the IAM requests an
AWS API call makes (action, resource ARN, condition keys), and a recorder of the calls boto3
clients make (botocore's `provide-client-params` event), which can also refuse the calls a
policy does not allow, the way AWS would.

Nothing here lists what a function is expected to be allowed: the requests come from the calls
the code really makes, the grants from the template.
"""

from __future__ import annotations

import copy
import dataclasses
import fnmatch
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar
from urllib.parse import urlsplit

import botocore.session
from botocore.exceptions import ClientError

from infra.aws import clients
from infra.aws.local_resources import ACCOUNT_ID, TemplateNotSupported
from infra.aws.local_stack import LocalStack, _Resolver

# --------------------------------------------------------------------------------------------------
# The template's policies


@dataclass(frozen=True)
class Condition:
    """One key of a statement's Condition: `operator` (StringEquals, StringLike, ArnEquals,
    ArnLike) on the request's context key `key`, any of `values` (policy variables allowed)."""

    operator: str
    key: str
    values: tuple[str, ...]

    def holds(self, request: IamRequest) -> bool:
        context = dict(request.context)
        value = context.get(self.key)
        if value is None:  # a key the request lacks: the condition does not hold
            return False
        patterns = [_with_variables(v, context) for v in self.values]
        if self.operator in ("StringEquals", "ArnEquals"):
            return value in patterns
        return any(_glob(value, pattern) for pattern in patterns)


_CONDITION_OPERATORS = ("StringEquals", "StringLike", "ArnEquals", "ArnLike")


@dataclass(frozen=True)
class Statement:
    sid: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    leading_keys: tuple[str, ...] | None  # ForAllValues:StringLike dynamodb:LeadingKeys
    conditions: tuple[Condition, ...] = ()

    def allows(self, request: IamRequest) -> bool:
        context = dict(request.context)
        return (
            any(_glob(request.action.lower(), a.lower()) for a in self.actions)
            and any(_glob(request.resource, _with_variables(r, context)) for r in self.resources)
            and self._condition_holds(request)
        )

    def _condition_holds(self, request: IamRequest) -> bool:
        if not all(condition.holds(request) for condition in self.conditions):
            return False
        if self.leading_keys is None:
            return True
        # ForAllValues: every leading key of the request matches one of the patterns (and a
        # request without the key passes, as in IAM; our DynamoDB calls always carry one).
        return all(
            any(_glob(key, pattern) for pattern in self.leading_keys)
            for key in request.leading_keys
        )


def _glob(value: str, pattern: str) -> bool:
    # IAM's wildcards: * any run of characters (including /), ? one character.
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


def _with_variables(pattern: str, context: dict[str, str]) -> str:
    """`pattern` with its IAM policy variables (`${aws:PrincipalAccount}`) replaced by the
    request's context values."""
    for key, value in context.items():
        pattern = pattern.replace("${" + key + "}", value)
    return pattern


@dataclass(frozen=True)
class Policy:
    function: str
    statements: tuple[Statement, ...]

    def allows(self, request: IamRequest) -> bool:
        return any(statement.allows(request) for statement in self.statements)

    def grants(self) -> Iterator[tuple[Statement, str, str]]:
        """Every (statement, action, resource) the policy grants."""
        for statement in self.statements:
            for action in statement.actions:
                for resource in statement.resources:
                    yield statement, action, resource


class _TemplateResolver(_Resolver):
    """The local stack's intrinsic resolver, plus the resources it does not emulate (the state
    machine, log groups): their ARNs as CloudFormation would name them."""

    def ref(self, name: str) -> str:
        try:
            return super().ref(name)
        except TemplateNotSupported:
            return self._arn(name)

    def get_att(self, logical_id: str, attribute: str) -> str:
        try:
            return super().get_att(logical_id, attribute)
        except TemplateNotSupported:
            if attribute == "Arn":
                return self._arn(logical_id)
            raise

    def _arn(self, logical_id: str) -> str:
        kind = self.stack.template["Resources"][logical_id]["Type"]
        region = self.stack.region
        if kind == "AWS::Serverless::StateMachine":
            return f"arn:aws:states:{region}:{ACCOUNT_ID}:stateMachine:{logical_id}"
        if kind == "AWS::Serverless::Function":
            return f"arn:aws:lambda:{region}:{ACCOUNT_ID}:function:{logical_id}"
        raise TemplateNotSupported(f"no ARN for {logical_id} ({kind})")


def function_policies(transformed: dict[str, Any], stack: LocalStack) -> dict[str, Policy]:
    """The inline policies of every function's role in the transformed template, resolved to
    the local stack's names. Managed policies (logs, X-Ray, the SQS poller) serve the Lambda
    service, not the function's code, and are left out."""
    resolve = _TemplateResolver(stack, ()).resolve
    policies: dict[str, Policy] = {}
    for logical_id, resource in transformed["Resources"].items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        role = resource["Properties"]["Role"]["Fn::GetAtt"][0]
        documents = transformed["Resources"][role]["Properties"].get("Policies", [])
        # A policy granted on a condition (Bedrock, when models are configured) is resolved
        # with the stack's parameters: it is there or it is not.
        documents = [resolve(copy.deepcopy(d)) if "Fn::If" in d else d for d in documents]
        documents = [d for d in documents if isinstance(d, dict) and "PolicyDocument" in d]
        statements = [
            _statement(s, resolve) for d in documents for s in d["PolicyDocument"]["Statement"]
        ]
        policies[logical_id] = Policy(logical_id, tuple(statements))
    return policies


def _statement(raw: dict[str, Any], resolve: Any) -> Statement:
    assert raw["Effect"] == "Allow", f"unexpected Deny statement {raw}"
    resources = resolve(copy.deepcopy(raw["Resource"]))
    actions = raw["Action"]
    condition = resolve(copy.deepcopy(raw.get("Condition") or {}))
    leading_keys = None
    conditions: list[Condition] = []
    for operator, keys in condition.items():
        if operator == "ForAllValues:StringLike":
            assert set(keys) == {"dynamodb:LeadingKeys"}, f"unsupported condition key {keys}"
            value = keys["dynamodb:LeadingKeys"]
            leading_keys = tuple([value] if isinstance(value, str) else value)
            continue
        assert operator in _CONDITION_OPERATORS, f"unsupported condition {condition}"
        for key, value in keys.items():
            values = tuple([value] if isinstance(value, str) else value)
            conditions.append(Condition(operator, key, values))
    return Statement(
        sid=str(raw.get("Sid", "")),
        actions=tuple([actions] if isinstance(actions, str) else actions),
        resources=tuple([resources] if isinstance(resources, str) else resources),
        leading_keys=leading_keys,
        conditions=tuple(conditions),
    )


# --------------------------------------------------------------------------------------------------
# AWS API calls → IAM requests


@dataclass(frozen=True)
class ApiCall:
    service: str  # the signing name, which is the IAM prefix ("states" for Step Functions)
    operation: str
    params: dict[str, Any]


@dataclass(frozen=True)
class IamRequest:
    action: str
    resource: str
    leading_keys: tuple[str, ...] = ()
    # the request's condition context: (key, value) pairs (aws:RequestedRegion, …)
    context: tuple[tuple[str, str], ...] = ()


# Operations authorized under another action's name (the Service Authorization Reference).
_AUTHORIZED_AS = {
    ("s3", "HeadObject"): "s3:GetObject",
    ("s3", "ListObjectsV2"): "s3:ListBucket",
    ("s3", "HeadBucket"): "s3:ListBucket",
}
# TransactWriteItems / TransactGetItems are authorized item by item, under these actions.
_TRANSACT_ITEM_ACTION = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
    "Get": "dynamodb:GetItem",
}


def iam_requests(call: ApiCall, region: str) -> list[IamRequest]:
    """What IAM evaluates for one API call, with the global context keys every request has."""
    globals_ = (("aws:RequestedRegion", region), ("aws:PrincipalAccount", ACCOUNT_ID))
    return [
        dataclasses.replace(request, context=(*globals_, *request.context))
        for request in _requests(call, region)
    ]


def _requests(call: ApiCall, region: str) -> list[IamRequest]:
    action = _AUTHORIZED_AS.get((call.service, call.operation), f"{call.service}:{call.operation}")
    p = call.params
    if call.service == "dynamodb":
        if call.operation in ("TransactWriteItems", "TransactGetItems"):
            return [
                _dynamodb(_TRANSACT_ITEM_ACTION[kind], body, region)
                for item in p["TransactItems"]
                for kind, body in item.items()
            ]
        if call.operation in ("BatchWriteItem", "BatchGetItem"):  # one request per table
            return [
                IamRequest(
                    action,
                    f"arn:aws:dynamodb:{region}:{ACCOUNT_ID}:table/{table}",
                    tuple(key["pk"]["S"] for key in _batch_keys(call.operation, body)),
                )
                for table, body in p["RequestItems"].items()
            ]
        return [_dynamodb(action, p, region)]
    if call.service == "s3" and call.operation == "DeleteObjects":  # each object, as DeleteObject
        return [
            IamRequest("s3:DeleteObject", f"arn:aws:s3:::{p['Bucket']}/{o['Key']}")
            for o in p["Delete"]["Objects"]
        ]
    if call.service == "s3":
        bucket_arn = f"arn:aws:s3:::{p['Bucket']}"
        return [IamRequest(action, f"{bucket_arn}/{p['Key']}" if "Key" in p else bucket_arn)]
    if call.service == "sqs":
        name = urlsplit(p["QueueUrl"]).path.rsplit("/", 1)[-1]
        return [IamRequest(action, f"arn:aws:sqs:{region}:{ACCOUNT_ID}:{name}")]
    if call.service == "lambda":
        name = p["FunctionName"]
        arn = (
            name
            if name.startswith("arn:")
            else f"arn:aws:lambda:{region}:{ACCOUNT_ID}:function:{name}"
        )
        return [IamRequest("lambda:InvokeFunction", arn)]
    if call.service == "states":
        arn = p.get("stateMachineArn") or p["executionArn"]
        return [IamRequest(action, arn)]
    if call.service == "ssm":
        names = p["Names"] if "Names" in p else [p.get("Name") or p["Path"]]
        return [
            IamRequest(action, f"arn:aws:ssm:{region}:{ACCOUNT_ID}:parameter{name}")
            for name in names
        ]
    if call.service == "secretsmanager":
        return [IamRequest(action, p["SecretId"])]  # our code names secrets by ARN
    if call.service == "bedrock" and call.operation in ("Converse", "InvokeModel"):
        return bedrock_requests(p["modelId"], region)
    raise AssertionError(f"teach iam_requests about {call.service}:{call.operation}")


# Where a cross-region inference profile may send a call (the regions of its geography).
PROFILE_DESTINATION = "us-west-2"


def bedrock_requests(model_id: str, region: str) -> list[IamRequest]:
    """What IAM evaluates for a Converse or InvokeModel call (both authorized as
    bedrock:InvokeModel): the foundation model, or an inference profile (`us.vendor.model`) and
    then the model in the region the profile routed the call to, with the profile's ARN in the
    context (`bedrock:InferenceProfileArn`)."""
    if model_id.startswith("arn:"):
        return [IamRequest("bedrock:InvokeModel", model_id)]
    parts = model_id.split(".")
    if len(parts) >= 3 and parts[0].isalpha() and len(parts[0]) <= 7:  # us., eu., apac., global.
        base = ".".join(parts[1:])
        profile = f"arn:aws:bedrock:{region}:{ACCOUNT_ID}:inference-profile/{model_id}"
        return [
            IamRequest("bedrock:InvokeModel", profile),
            IamRequest(
                "bedrock:InvokeModel",
                f"arn:aws:bedrock:{PROFILE_DESTINATION}::foundation-model/{base}",
                context=(("bedrock:InferenceProfileArn", profile),),
            ),
        ]
    return [
        IamRequest("bedrock:InvokeModel", f"arn:aws:bedrock:{region}::foundation-model/{model_id}")
    ]


def _batch_keys(operation: str, body: Any) -> list[dict[str, Any]]:
    """The keys of one table's part of a BatchWriteItem or BatchGetItem."""
    if operation == "BatchGetItem":
        return list(body["Keys"])
    return [
        (request.get("DeleteRequest") or {}).get("Key") or request["PutRequest"]["Item"]
        for request in body
    ]


def _dynamodb(action: str, params: dict[str, Any], region: str) -> IamRequest:
    key = params.get("Key") or params.get("Item") or {}
    leading = (key["pk"]["S"],) if "pk" in key else ()
    table = f"arn:aws:dynamodb:{region}:{ACCOUNT_ID}:table/{params['TableName']}"
    return IamRequest(action, table, leading)


# --------------------------------------------------------------------------------------------------
# Recording (and refusing) the calls boto3 makes


@dataclass
class CallRecorder:
    """Hooks every botocore client created while installed. Inside `acting_as(function)`, each
    call is recorded for that function and, when `enforce` is on, refused with AccessDenied if
    the function's policy does not allow it — before it reaches moto."""

    policies: dict[str, Policy]
    region: str
    enforce: bool = False
    calls: dict[str, list[ApiCall]] = field(default_factory=dict)
    _function: str | None = None
    _faults: dict[str, ClientError] = field(default_factory=dict)

    @contextmanager
    def acting_as(self, function: str) -> Iterator[None]:
        previous, self._function = self._function, function
        self.calls.setdefault(function, [])
        try:
            yield
        finally:
            self._function = previous

    def fail_next(self, operation: str, code: str = "ServiceUnavailable") -> None:
        """The next call of `operation` fails with `code` (a fault at that exact call)."""
        error = {"Error": {"Code": code, "Message": f"injected {code}"}}
        self._faults[operation] = ClientError(error, operation)  # type: ignore[arg-type]

    def requests(self, function: str) -> list[tuple[ApiCall, IamRequest]]:
        return [
            (call, request)
            for call in self.calls.get(function, [])
            for request in iam_requests(call, self.region)
        ]

    # ---- botocore event handlers

    def _on_params(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if self._function is None:
            return
        call = ApiCall(model.service_model.signing_name, model.name, copy.deepcopy(params))
        self.calls[self._function].append(call)
        if self.enforce:
            policy = self.policies[self._function]
            for request in iam_requests(call, self.region):
                if not policy.allows(request):
                    code = "AccessDenied" if call.service == "s3" else "AccessDeniedException"
                    message = (
                        f"{self._function} is not authorized to perform {request.action} on "
                        f"{request.resource}"
                    )
                    raise ClientError({"Error": {"Code": code, "Message": message}}, model.name)
        fault = self._faults.pop(model.name, None)
        if fault is not None:
            raise fault

    def _before_call(self, model: Any, params: dict[str, Any], **_: Any) -> Any:
        # moto has no StartSyncExecution (docs/tools.md): once recorded, answer it the way an
        # Express execution that failed would, so the caller's failure handling runs.
        if model.name != "StartSyncExecution":
            return None
        now = datetime.now(UTC)
        parsed = {
            "executionArn": "arn:aws:states:::express:not-emulated",
            "status": "FAILED",
            "error": "NotEmulated",
            "cause": "moto has no StartSyncExecution",
            "startDate": now,
            "stopDate": now,
        }
        return _Answered(), parsed


class _Answered:
    status_code = 200
    headers: ClassVar[dict[str, str]] = {}


@contextmanager
def recording(
    policies: dict[str, Policy], region: str, *, enforce: bool = False
) -> Iterator[CallRecorder]:
    """Install a `CallRecorder` on every client created from now on (the adapters' cached
    clients are dropped so they are recreated with it)."""
    recorder = CallRecorder(policies, region, enforce)
    original = botocore.session.Session.create_client

    def create_client(self: botocore.session.Session, *args: Any, **kwargs: Any) -> Any:
        client = original(self, *args, **kwargs)
        client.meta.events.register("provide-client-params", recorder._on_params)
        client.meta.events.register("before-call", recorder._before_call)
        return client

    botocore.session.Session.create_client = create_client  # type: ignore[method-assign]
    forget_clients()
    try:
        yield recorder
    finally:
        botocore.session.Session.create_client = original  # type: ignore[method-assign]
        forget_clients()


def forget_clients() -> None:
    """Drop every cached client and warm-container cache, as a new Lambda container starts."""
    from infra.aws.dynamo_agents import clear_warm_caches
    from infra.aws.s3_vectors import clear_warm_vectors

    clients.reset_clients()  # every client, Step Functions' too, comes from infra.aws.clients
    clear_warm_caches()
    clear_warm_vectors()
