"""The embedded local AWS stack: moto in-process (tests) or as a threaded server (local dev).

Tables, buckets, queues and generated secrets are created from `template.yaml` itself — its
resources of type AWS::DynamoDB::Table, AWS::S3::Bucket, AWS::SQS::Queue and
AWS::SecretsManager::Secret (a value generated here, as CloudFormation would) — so there is no
hand-kept duplicate of the infrastructure. The env vars the adapters read are the ones the
template gives every function (`Globals.Function.Environment.Variables`), resolved against the
local resources. moto keeps a bucket's lifecycle rules without applying them: the stack applies
them when it is restored (`apply_lifecycle_rules`, `infra.aws.s3_lifecycle`).

moto is imported only when a stack starts: it is a dev dependency (`waypoint[local]`), never
shipped in a Lambda.

    with LocalStack() as stack:                 # in-process, for tests
        store = DynamoSessionStore()            # reads WAYPOINT_TABLE set by the stack
    with LocalStack(server=True) as stack:      # http://127.0.0.1:<port>, for `waypoint serve`
        print(stack.endpoint_url)
    with LocalStack(server=True, data_dir=Path(".waypoint")):   # state kept on disk across restarts

With `data_dir`, the server's DynamoDB, SQS and S3 state is restored from that directory at start
and written back after every change (`infra.aws.moto_persistence`); resources the template declares
that are already there are kept as they are.

The template is read by `infra.aws.cfn_template`; each resource is created from its properties by
`infra.aws.local_resources`.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from infra.aws import clients
from infra.aws.cfn_template import (
    BUCKET,
    QUEUE,
    SECRET,
    TABLE,
    declared_resources,
    load_template,
)
from infra.aws.local_resources import (
    ACCOUNT_ID,
    CREATORS,
    LocalResource,
    TemplateNotSupported,
    resource_name,
)

# Logical ids of the resources the adapters use (template.yaml).
STATE_TABLE = "StateTable"
EMBEDDINGS_BUCKET = "EmbeddingsBucket"
TURN_QUEUE = "TurnQueue"
TURN_DEAD_LETTER_QUEUE = "TurnDeadLetterQueue"


MOTO_CONFIG: dict[str, Any] = {
    "lambda": {"use_docker": False},  # no Docker here: Lambda invokes echo unless patched
    "stepfunctions": {"execute_state_machine": True},  # run ASL for real (LocalStack's parser)
}


# --------------------------------------------------------------------------------------------------
# The stack


class LocalStack:
    """moto standing in for DynamoDB, S3, SQS (and Step Functions / Lambda), built from the SAM
    template. Use as a context manager; `start()` / `stop()` for longer-lived stacks."""

    def __init__(
        self,
        *,
        server: bool = False,
        template: str | Path | None = None,
        parameters: Mapping[str, str] | None = None,
        region: str = "us-east-1",
        port: int = 0,
        data_dir: Path | None = None,
        credentials: Any = None,
    ):
        if data_dir is not None and not server:
            raise TemplateNotSupported(
                "data_dir needs server=True: only moto's threaded server keeps its state on disk"
            )
        self.server = server
        self.data_dir = data_dir
        self.state_files: Any = None  # moto_persistence.MotoStateFiles when data_dir is given
        self.template = load_template(template)
        self.region = region
        self.stack_name = "waypoint-local"
        self.parameters = self._parameters(parameters or {"Stage": "local"})
        self.resources: dict[str, LocalResource] = {}
        self.env: dict[str, str] = {}
        self.unresolved_env: list[str] = []  # function env vars naming resources not emulated here
        self.endpoint_url: str | None = None
        # moto_access.LocalCredentials of a server stack: given (kept across restarts by
        # `waypoint serve`), else new at each start.
        self.credentials: Any = credentials
        self._port = port
        self._mock: Any = None
        self._server: Any = None
        self._saved_env: dict[str, str | None] = {}

    # ---- lifecycle

    def __enter__(self) -> LocalStack:
        self.start()
        try:
            self.create_resources()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start moto (in-process mock or threaded server) with empty state."""
        self._set_env({"AWS_DEFAULT_REGION": self.region, "AWS_REGION": self.region})
        if self.server:
            self._start_server()
        else:
            from moto import mock_aws  # dev dependency: imported only here

            self._mock = mock_aws(config=MOTO_CONFIG)  # type: ignore[call-overload]
            self._mock.start()
        _forget_warm_state()

    def stop(self) -> None:
        """Stop moto, restore the environment and drop clients bound to this stack."""
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self.state_files is not None:
            self.state_files.close()
            self.state_files = None
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved_env.clear()
        _forget_warm_state()

    def _start_server(self) -> None:
        from infra.aws import moto_fidelity
        from infra.aws.moto_access import LocalCredentials

        moto_fidelity.install()  # many threads hit the server: keep DynamoDB's and SQS's semantics
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
        self.credentials = self.credentials or LocalCredentials.new()
        # moto's backends live in this process: a server started after another one (a second
        # `waypoint chat` in one test run) would see its tables. Start from empty state, in
        # process: moto's control API is not served over HTTP (infra.aws.moto_access).
        _reset_moto()
        self._server = _guarded_moto_server(self.credentials, self._port)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint_url = f"http://{host}:{port}"
        self._set_env(
            {
                clients.ENDPOINT_URL_ENV: self.endpoint_url,
                # The Step Functions interpreter calls other services at localhost:$MOTO_PORT.
                "MOTO_PORT": str(port),
                # The only credentials the server accepts; the local processes sign with them.
                "AWS_ACCESS_KEY_ID": self.credentials.access_key_id,
                "AWS_SECRET_ACCESS_KEY": self.credentials.secret_access_key,
            }
        )
        if self.data_dir is not None:
            self._restore_state(self.data_dir)

    @property
    def restored(self) -> bool:
        """True when this stack's state came back from its data directory."""
        return bool(self.state_files is not None and self.state_files.restored)

    def _restore_state(self, data_dir: Path) -> None:
        from infra.aws.moto_persistence import MotoStateFiles

        files = MotoStateFiles(data_dir, ACCOUNT_ID, self.region)
        files.open()
        self.state_files = files
        # Every later request goes through the snapshotting app, inside the access guard (which
        # reads `guard.app` per request); snapshots start once the stored state is back.
        guard = self._server.guard
        guard.app = files.wrap(guard.app)
        files.restore()

    def _set_env(self, values: Mapping[str, str]) -> None:
        for name, value in values.items():
            self._saved_env.setdefault(name, os.environ.get(name))
            os.environ[name] = value
        clients.reset_clients()

    # ---- resources

    @property
    def table_name(self) -> str:
        return self.resources[STATE_TABLE].name

    @property
    def bucket(self) -> str:
        return self.resources[EMBEDDINGS_BUCKET].name

    @property
    def queue_url(self) -> str:
        return self.resources[TURN_QUEUE].ref

    @property
    def dead_letter_queue_url(self) -> str:
        return self.resources[TURN_DEAD_LETTER_QUEUE].ref

    def client(self, service: str) -> Any:
        """A boto3 client bound to this stack (same cache the adapters use)."""
        return clients.client(service)

    def create_resources(self) -> dict[str, LocalResource]:
        """Create every table, bucket, queue and generated secret of the template, then export
        the functions' env."""
        for logical_id in declared_resources(self.template, TABLE, BUCKET, QUEUE, SECRET):
            self._provision(logical_id, pending=())
        self.env, self.unresolved_env = self._function_env()
        self._set_env(self.env)
        if self.restored:  # what S3's lifecycle would have expired while the stack was down
            self.apply_lifecycle_rules()
        return dict(self.resources)

    def apply_lifecycle_rules(self, now: datetime | None = None) -> list[str]:
        """Expire the objects the buckets' lifecycle rules have expired by `now`, as S3 does
        (moto keeps the rules but never applies them: `infra.aws.s3_lifecycle`); returns the
        deleted keys."""
        from infra.aws.s3_lifecycle import expire_objects

        deleted: list[str] = []
        for resource in self.resources.values():
            if resource.type == BUCKET:
                deleted += expire_objects(self.client("s3"), resource.name, now)
        return deleted

    def _provision(self, logical_id: str, pending: tuple[str, ...]) -> LocalResource:
        if logical_id in self.resources:
            return self.resources[logical_id]
        if self.restored:
            kept = self._kept(logical_id, pending)
            if kept is not None:
                self.resources[logical_id] = kept
                return kept
        if logical_id in pending:
            raise TemplateNotSupported(f"circular reference: {' → '.join(pending)} → {logical_id}")
        resource = self.template.get("Resources", {}).get(logical_id)
        kind = resource.get("Type") if resource else None
        create = CREATORS.get(kind or "")
        if resource is None or create is None:
            raise TemplateNotSupported(
                f"{logical_id} ({kind or 'not in template'}) is not emulated by the local stack; "
                f"supported types: {', '.join(CREATORS)}"
            )
        resolve = _Resolver(self, (*pending, logical_id)).resolve
        properties = resolve(resource.get("Properties", {}))
        created = create(self, logical_id, properties)
        self.resources[logical_id] = created
        return created

    def _kept(self, logical_id: str, pending: tuple[str, ...]) -> LocalResource | None:
        """The resource as restored from the data directory, or None if it is not there."""
        resource = self.template.get("Resources", {}).get(logical_id) or {}
        kind = resource.get("Type")
        properties = _Resolver(self, (*pending, logical_id)).resolve(resource.get("Properties", {}))
        name = resource_name(self, logical_id, kind, properties)
        from botocore.exceptions import ClientError

        try:
            if kind == TABLE:
                table = self.client("dynamodb").describe_table(TableName=name)["Table"]
                return LocalResource(logical_id, TABLE, name, table["TableArn"])
            if kind == BUCKET:
                self.client("s3").head_bucket(Bucket=name)
                return LocalResource(logical_id, BUCKET, name, f"arn:aws:s3:::{name}")
            if kind == QUEUE:
                url = self.client("sqs").get_queue_url(QueueName=name)["QueueUrl"]
                arn = f"arn:aws:sqs:{self.region}:{ACCOUNT_ID}:{name}"
                return LocalResource(logical_id, QUEUE, name, arn, url)
            if kind == SECRET:  # its value stays: what it keyed is still checked against it
                arn = self.client("secretsmanager").describe_secret(SecretId=name)["ARN"]
                return LocalResource(logical_id, SECRET, name, arn)
        except ClientError:  # not there (yet): created from the template
            return None
        return None

    def _function_env(self) -> tuple[dict[str, str], list[str]]:
        variables = (
            self.template.get("Globals", {})
            .get("Function", {})
            .get("Environment", {})
            .get("Variables", {})
        )
        env: dict[str, str] = {}
        unresolved: list[str] = []
        for name, value in variables.items():
            try:
                env[name] = str(_Resolver(self, ()).resolve(value))
            except TemplateNotSupported:
                unresolved.append(name)
        return env, unresolved

    def _parameters(self, overrides: Mapping[str, str]) -> dict[str, str]:
        values: dict[str, str] = {}
        for name, spec in self.template.get("Parameters", {}).items():
            if name in overrides:
                values[name] = str(overrides[name])
            elif "Default" in spec:
                values[name] = str(spec["Default"])
            else:
                raise TemplateNotSupported(f"parameter {name} has no Default; pass parameters=")
        return values

    def condition(self, name: str) -> bool:
        """The value of the template's condition `name` (for `Fn::If`)."""
        conditions = self.template.get("Conditions", {})
        if name not in conditions:
            raise TemplateNotSupported(f"condition {name} is not declared in the template")
        return bool(_Resolver(self, ()).resolve(conditions[name]))

    def _pseudo(self, name: str) -> str | None:
        return {
            "AWS::Region": self.region,
            "AWS::AccountId": ACCOUNT_ID,
            "AWS::StackName": self.stack_name,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
        }.get(name)


def _reset_moto() -> None:
    """moto's in-process state emptied and configured for the local stack (what `POST
    /moto-api/reset` and `/moto-api/config` do, without serving them)."""
    from moto.moto_api._internal.models import moto_api_backend  # dev dependency

    moto_api_backend.reset()
    moto_api_backend.set_config(MOTO_CONFIG)


def _guarded_moto_server(credentials: Any, port: int) -> Any:
    """moto's threaded server with its app wrapped by `MotoAccessGuard` before it serves its
    first request (moto-internal: `ThreadedMotoServer._server_entry`, pinned to moto 5.2.x and
    covered by tests/cli/test_local_aws_endpoint.py)."""
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    from infra.aws.moto_access import MotoAccessGuard

    class GuardedMotoServer(ThreadedMotoServer):
        def __init__(self) -> None:
            super().__init__(ip_address="127.0.0.1", port=port, verbose=False)
            self.guard = MotoAccessGuard(
                DomainDispatcherApplication(create_backend_app), credentials
            )

        def _server_entry(self) -> None:
            self._server = make_server(
                self._ip_address, self._port, self.guard, True, request_handler=MotoRequestHandler
            )
            self.guard.listen_on(self._server.server_port)  # before the first request is read
            self._server_ready_event.set()
            # `shutdown()` waits for the loop to look: every 50 ms, not werkzeug's 500.
            self._server.serve_forever(poll_interval=0.05)

    return GuardedMotoServer()


def _forget_warm_state() -> None:
    # A fresh stack is a fresh world: drop clients and warm-container caches of the old one.
    from infra.aws.dynamo_agents import clear_warm_caches
    from infra.aws.s3_vectors import clear_warm_vectors

    clients.reset_clients()
    clear_warm_caches()
    clear_warm_vectors()


# --------------------------------------------------------------------------------------------------
# Intrinsic functions (the subset our template uses)


class _NoValue:
    """`!Ref AWS::NoValue`: the property (or list item) is left out."""


_NO_VALUE = _NoValue()


class _Resolver:
    def __init__(self, stack: LocalStack, pending: tuple[str, ...]):
        self.stack = stack
        self.pending = pending

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            items = [self.resolve(v) for v in value]
            return [item for item in items if item is not _NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Fn::GetAtt":
                return self.get_att(*self.resolve(arg))
            if key == "Fn::Sub":
                return self.sub(arg)
            if key == "Fn::Join":
                separator, parts = arg
                return str(separator).join(str(p) for p in self.resolve(parts))
            if key == "Fn::If":
                condition, when_true, when_false = arg
                return self.resolve(when_true if self.stack.condition(condition) else when_false)
            if key == "Fn::Equals":
                left, right = self.resolve(arg)
                return str(left) == str(right)  # CloudFormation compares the values as strings
            if key == "Fn::Not":
                (operand,) = arg
                return not self.resolve(operand)
            if key == "Fn::Or":
                return any(self.resolve(operand) for operand in arg)
            if key == "Fn::Split":
                separator, text = arg
                return str(self.resolve(text)).split(separator)
            if key == "Fn::Select":
                index, items = self.resolve(arg)
                return items[int(index)]
            if key == "Condition":
                return self.stack.condition(arg)
            if key.startswith("Fn::"):
                raise TemplateNotSupported(f"{key} is not supported by the local stack")
        resolved = {k: self.resolve(v) for k, v in value.items()}
        return {k: v for k, v in resolved.items() if v is not _NO_VALUE}

    def ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return _NO_VALUE
        if name in self.stack.parameters:
            return self.stack.parameters[name]
        pseudo = self.stack._pseudo(name)
        if pseudo is not None:
            return pseudo
        return self.stack._provision(name, self.pending).ref

    def get_att(self, logical_id: str, attribute: str) -> str:
        resource = self.stack._provision(logical_id, self.pending)
        values = {"Arn": resource.arn, "QueueName": resource.name, "QueueUrl": resource.url}
        value = values.get(attribute)
        if value is None:
            raise TemplateNotSupported(f"!GetAtt {logical_id}.{attribute} is not supported")
        return value

    def sub(self, arg: Any) -> str:
        text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], self.resolve(arg[1]))

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):  # ${!Literal} is an escaped literal
                return "${" + name[1:] + "}"
            if name in variables:
                return str(variables[name])
            if "." in name:
                return self.get_att(*name.split(".", 1))
            return self.ref(name)

        return re.sub(r"\$\{([^}]+)\}", replace, text)
