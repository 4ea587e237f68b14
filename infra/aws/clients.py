"""Lazily created, cached boto3 clients, configured from the environment.

Sync boto3 on purpose: a Lambda container serves one request at a time, aioboto3 adds ~450 ms of
import to every cold start and does not work under in-process moto (docs/data-model.md).
Clients are thread-safe and cached per (service, region, endpoint), so a warm container reuses its
connections; `reset_clients()` drops them (tests, or after the endpoint changed).

A boto3 client is a botocore client: they are created from one botocore session, without
importing `boto3` itself, whose import (its resource layer, s3transfer and multiprocessing) cost
a worker's cold start ≈ 40 ms for methods no code here calls (`upload_file`, resources).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, replace
from typing import Any

import botocore.session
from botocore.config import Config

from engine.errors import WaypointError
from infra.aws.service_models import use_service_model_loader

ENDPOINT_URL_ENV = "WAYPOINT_AWS_ENDPOINT_URL"  # set to moto's server URL by the local stack
TABLE_ENV = "WAYPOINT_TABLE"
BUCKET_ENV = "WAYPOINT_BUCKET"
QUEUE_URL_ENV = "WAYPOINT_QUEUE_URL"

CALL_BUDGET_ENV = "WAYPOINT_AWS_CALL_BUDGET"  # which function's budget: set per function


@dataclass(frozen=True)
class CallBudget:
    """How long ONE AWS call may take, botocore's retries included: connect and read timeouts per
    attempt and the total number of attempts ("standard" mode: jittered exponential backoff).

    botocore's defaults (60 s connect, 60 s read, several attempts) let one call outlast a short
    Lambda many times over; a call that cannot fit must fail while the function can still answer
    (a 503 to the platform, a failed SQS record) rather than be killed half-way."""

    connect_timeout: float
    read_timeout: float
    total_max_attempts: int

    def config(self) -> Config:
        return Config(
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            retries={"mode": "standard", "total_max_attempts": self.total_max_attempts},
            tcp_keepalive=True,
        )

    @property
    def worst_case_seconds(self) -> float:
        """Every attempt timing out, plus the longest backoff standard mode sleeps between them
        (min(2**i, 20) s before retry i+1, throttling scale; jitter only shortens it)."""
        per_attempt = self.connect_timeout + self.read_timeout
        backoff = sum(min(2.0**i, 20.0) for i in range(self.total_max_attempts - 1))
        return self.total_max_attempts * per_attempt + backoff


# One budget per Lambda, sized so that one call's worst case fits well inside the function's
# Timeout in template.yaml (tests/functions/test_template.py checks it): webhook 10 s, worker
# 120 s, management 29 s. The webhook's is the tightest: a claim, a session creation and an
# enqueue must all be answered before API Gateway and the platform give up.
CALL_BUDGETS: dict[str, CallBudget] = {
    "webhook": CallBudget(connect_timeout=1, read_timeout=2, total_max_attempts=2),
    "worker": CallBudget(connect_timeout=2, read_timeout=5, total_max_attempts=3),
    "management": CallBudget(connect_timeout=1, read_timeout=4, total_max_attempts=3),
}
DEFAULT_CALL_BUDGET = "worker"  # the CLI, the local stack, the tool Lambda


def call_budget() -> CallBudget:
    """The budget named by `WAYPOINT_AWS_CALL_BUDGET` (the worker's when unset)."""
    name = os.environ.get(CALL_BUDGET_ENV) or DEFAULT_CALL_BUDGET
    budget = CALL_BUDGETS.get(name)
    if budget is None:
        raise AwsConfigurationError(
            f"{CALL_BUDGET_ENV}={name!r} names no call budget; use one of "
            f"{', '.join(sorted(CALL_BUDGETS))} (template.yaml sets it per function)"
        )
    return budget


# (service, region, endpoint, budget, a local endpoint's credentials) → client
_ClientKey = tuple[str, str, str | None, CallBudget, tuple[tuple[str, str], ...]]
_clients: dict[_ClientKey, Any] = {}
_session: botocore.session.Session | None = None
_lock = threading.Lock()


class AwsConfigurationError(WaypointError):
    """A required AWS setting is missing from the environment."""


def aws_region() -> str:
    """`AWS_REGION` (set by Lambda) or `AWS_DEFAULT_REGION`, else us-east-1."""
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


def endpoint_url() -> str | None:
    """A custom endpoint (moto server) from `WAYPOINT_AWS_ENDPOINT_URL`; None means real AWS."""
    return os.environ.get(ENDPOINT_URL_ENV) or None


def client(service: str, **budget_overrides: Any) -> Any:
    """The cached boto3 client for `service` ("dynamodb", "s3", "sqs", "stepfunctions", …),
    configured with this function's `call_budget()`. `budget_overrides` replace fields of it for
    a call that needs its own (Step Functions' StartSyncExecution holds the request open for the
    whole execution and must not be retried)."""
    budget = replace(call_budget(), **budget_overrides)
    credentials = _endpoint_credentials()
    key = (service, aws_region(), endpoint_url(), budget, credentials)
    cached = _clients.get(key)
    if cached is not None:
        return cached
    # Creating clients from a shared session is not thread-safe: serialize it.
    with _lock:
        if key not in _clients:
            _clients[key] = _shared_session().create_client(
                service,
                region_name=key[1],
                endpoint_url=key[2],
                config=budget.config(),
                **dict(credentials),
            )
        return _clients[key]


def _endpoint_credentials() -> tuple[tuple[str, str], ...]:
    """For a custom endpoint (the local stack), the environment's credentials as they are now,
    passed explicitly: the shared session resolves credentials once and keeps them, and a local
    stack accepts only its own, new with each stack (infra.aws.moto_access). Against AWS,
    nothing: boto3's usual chain (role, profile, environment) applies."""
    key_id = os.environ.get("AWS_ACCESS_KEY_ID")
    secret = os.environ.get("AWS_SECRET_ACCESS_KEY")
    if endpoint_url() is None or not key_id or not secret:
        return ()
    token = os.environ.get("AWS_SESSION_TOKEN")
    return (
        ("aws_access_key_id", key_id),
        ("aws_secret_access_key", secret),
        *((("aws_session_token", token),) if token else ()),
    )


def model_client(service: str, *, region: str, endpoint_url: str | None, budget: CallBudget) -> Any:
    """A cached client for a model service (`bedrock-runtime`), with its own region, endpoint and
    call budget: a generation takes longer than a DynamoDB write and is retried by the turn, not
    by botocore (`infra.llm.bedrock_client`), and the local stack's endpoint does not serve it —
    `endpoint_url` is the service's own (a VPC endpoint) or None for AWS's. Credentials come from
    boto3's usual chain (on Lambda, the function's role)."""
    key = (f"model:{service}", region, endpoint_url, budget, ())
    with _lock:
        if key not in _clients:
            _clients[key] = _shared_session().create_client(
                service, region_name=region, endpoint_url=endpoint_url, config=budget.config()
            )
        return _clients[key]


def shared_session() -> botocore.session.Session:
    """The process's one boto3 session (tests hook its events: `tests/fakes/bedrock_runtime.py`)."""
    return _shared_session()


def _shared_session() -> botocore.session.Session:
    # One session for every client: it caches the parsed service models and endpoint data
    # (~0.3 s of JSON per new session), so later clients cost milliseconds.
    global _session
    if _session is None:
        session = botocore.session.Session()
        use_service_model_loader(session)  # the same models, read for less (its module)
        _session = session
    return _session


def reset_clients() -> None:
    """Forget every cached client; the next `client()` call builds a new one from the env.
    The shared session (parsed models only) is kept."""
    with _lock:
        _clients.clear()


def required_env(name: str, what: str) -> str:
    """The value of env var `name`, or an `AwsConfigurationError` that says how to set it."""
    value = os.environ.get(name)
    if not value:
        raise AwsConfigurationError(
            f"{name} is not set: it must name {what}. The SAM template sets it for every "
            "function; from a shell, export it from your deployed stack, or start `waypoint "
            "serve` and export the lines it prints"
        )
    return value
