"""Lazily created, cached boto3 clients, configured from the environment.

Sync boto3 on purpose: a Lambda container serves one request at a time, aioboto3 adds ~450 ms of
import to every cold start and does not work under in-process moto (docs/data-model.md).
Clients are thread-safe and cached per (service, region, endpoint), so a warm container reuses its
connections; `reset_clients()` drops them (tests, or after the endpoint changed).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import boto3
from botocore.config import Config

from engine.errors import WaypointError

ENDPOINT_URL_ENV = "WAYPOINT_AWS_ENDPOINT_URL"  # set to moto's server URL by the local stack
TABLE_ENV = "WAYPOINT_TABLE"
BUCKET_ENV = "WAYPOINT_BUCKET"
QUEUE_URL_ENV = "WAYPOINT_QUEUE_URL"

# Short timeouts: a turn must fail fast and be retried by SQS rather than hang until the Lambda
# timeout. "standard" retry mode backs off on throttling with jitter.
_CONFIG = Config(
    connect_timeout=3,
    read_timeout=10,
    retries={"mode": "standard", "max_attempts": 4},
    tcp_keepalive=True,
)

_clients: dict[tuple[str, str, str | None], Any] = {}
_session: boto3.session.Session | None = None
_lock = threading.Lock()


class AwsConfigurationError(WaypointError):
    """A required AWS setting is missing from the environment."""


def aws_region() -> str:
    """`AWS_REGION` (set by Lambda) or `AWS_DEFAULT_REGION`, else us-east-1."""
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


def endpoint_url() -> str | None:
    """A custom endpoint (moto server) from `WAYPOINT_AWS_ENDPOINT_URL`; None means real AWS."""
    return os.environ.get(ENDPOINT_URL_ENV) or None


def client(service: str) -> Any:
    """The cached boto3 client for `service` ("dynamodb", "s3", "sqs", "stepfunctions", …)."""
    key = (service, aws_region(), endpoint_url())
    cached = _clients.get(key)
    if cached is not None:
        return cached
    # Creating clients from a shared session is not thread-safe: serialize it.
    with _lock:
        if key not in _clients:
            _clients[key] = _shared_session().client(
                service, region_name=key[1], endpoint_url=key[2], config=_CONFIG
            )
        return _clients[key]


def resource(service: str) -> Any:
    """The cached boto3 resource for `service`. Unlike clients, resources are not thread-safe:
    use them from one thread (the adapters here use clients only)."""
    key = (f"resource:{service}", aws_region(), endpoint_url())
    with _lock:
        if key not in _clients:
            _clients[key] = _shared_session().resource(
                service, region_name=key[1], endpoint_url=key[2], config=_CONFIG
            )
        return _clients[key]


def _shared_session() -> boto3.session.Session:
    # One session for every client: it caches the parsed service models and endpoint data
    # (~0.3 s of JSON per new session), so later clients cost milliseconds.
    global _session
    if _session is None:
        _session = boto3.session.Session()
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
            "function; locally, `waypoint local` (infra.aws.local_stack.LocalStack) sets it"
        )
    return value
