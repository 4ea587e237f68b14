"""Rotating the management API key and a channel's secret without downtime, as deployed: the
values live in the SSM secrets path, a warm container reads them again after
`secrets_max_age_seconds`. While a parameter holds the new and the old value ("NEW OLD"), both are
accepted; once it holds only the new one, the old is refused — by every warm container within the
max age, with no redeploy. A failed re-read keeps what was read before."""

from __future__ import annotations

import dataclasses
from typing import Any

import httpx
import pytest

from infra import runtime as runtime_module
from infra.runtime import Runtime, install_runtime
from infra.runtime_settings import RuntimeSettings
from tests.channels.payloads import slack_event
from tests.functions import signed_events as signed
from tests.functions.conftest import invoke_management, invoke_webhook
from tests.functions.lambda_events import http_event
from tests.functions.platforms import FakePlatforms

PATH = "/waypoint/rotation"
MAX_AGE = 60.0
OLD_KEY, NEW_KEY = "old-management-key-0123456789", "new-management-key-9876543210"
OLD_SIGNING, NEW_SIGNING = "0ld5ecret0ld5ecret0ld5ecret0ld5e", "9ew5ecret9ew5ecret9ew5ecret9ew5e"


class Clock:
    """The runtime's monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    ticking = Clock()
    monkeypatch.setattr(runtime_module, "_monotonic", ticking)
    return ticking


EXPORTED = (
    "WAYPOINT_MANAGEMENT_API_KEY",
    "WAYPOINT_SLACK_SIGNING_SECRET",
    "WAYPOINT_SLACK_BOT_TOKEN",
)


@pytest.fixture
def ssm(stack: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The secrets path of the deployment; nothing secret in the environment, and what the
    runtime exports from the path is undone after the test."""
    for name in EXPORTED:
        monkeypatch.setenv(name, "placeholder")  # recorded, so the teardown restores the original
        monkeypatch.delenv(name)
    return stack.client("ssm")


def put(ssm: Any, name: str, value: str) -> None:
    ssm.put_parameter(Name=f"{PATH}/{name}", Value=value, Type="SecureString", Overwrite=True)


@pytest.fixture
def deployed(ssm: Any, clock: Clock, platforms: FakePlatforms) -> Runtime:
    """A warm container of the deployed functions: settings from the environment, secrets from
    the path (read again after MAX_AGE seconds)."""
    settings = dataclasses.replace(
        RuntimeSettings.from_env(), secrets_path=PATH, secrets_max_age_seconds=MAX_AGE
    )
    return install_runtime(
        Runtime(settings, http=httpx.AsyncClient(transport=platforms.transport()))
    )


def status_with_key(key: str) -> int:
    response = invoke_management(http_event("GET", "/", headers={"x-api-key": key}))
    return int(response["statusCode"])


def test_the_management_api_key_is_rotated_without_downtime(
    ssm: Any, clock: Clock, deployed: Runtime
) -> None:
    put(ssm, "WAYPOINT_MANAGEMENT_API_KEY", OLD_KEY)
    assert status_with_key(OLD_KEY) == 200
    assert status_with_key(NEW_KEY) == 401

    # 1. The new key is added; the old one stays valid.
    put(ssm, "WAYPOINT_MANAGEMENT_API_KEY", f"{NEW_KEY} {OLD_KEY}")
    clock.now += MAX_AGE
    assert status_with_key(NEW_KEY) == 200
    assert status_with_key(OLD_KEY) == 200  # clients not yet switched keep working

    # 2. Every client uses the new key; the old one is removed.
    put(ssm, "WAYPOINT_MANAGEMENT_API_KEY", NEW_KEY)
    assert status_with_key(OLD_KEY) == 200  # within the max age: this container has not re-read
    clock.now += MAX_AGE
    assert status_with_key(OLD_KEY) == 401
    assert status_with_key(NEW_KEY) == 200


def slack_says(event_id: str, secret: str) -> int:
    event = slack_event("hi", event_id=event_id, ts=f"1595926230.{event_id[-4:]}00")
    return int(invoke_webhook(signed.slack(event, secret=secret))["statusCode"])


def test_a_channel_signing_secret_is_rotated_without_downtime(
    ssm: Any, clock: Clock, deployed: Runtime
) -> None:
    put(ssm, "WAYPOINT_SLACK_BOT_TOKEN", "xoxb-rotation-test")
    put(ssm, "WAYPOINT_SLACK_SIGNING_SECRET", OLD_SIGNING)
    assert slack_says("Ev0001", OLD_SIGNING) == 200
    assert slack_says("Ev0002", NEW_SIGNING) == 401

    # Slack regenerated the secret: the new value goes first, the old one stays for requests
    # signed before the switch (and Slack's retries of them).
    put(ssm, "WAYPOINT_SLACK_SIGNING_SECRET", f"{NEW_SIGNING} {OLD_SIGNING}")
    clock.now += MAX_AGE
    assert slack_says("Ev0003", NEW_SIGNING) == 200
    assert slack_says("Ev0004", OLD_SIGNING) == 200

    put(ssm, "WAYPOINT_SLACK_SIGNING_SECRET", NEW_SIGNING)
    clock.now += MAX_AGE
    assert slack_says("Ev0005", OLD_SIGNING) == 401
    assert slack_says("Ev0006", NEW_SIGNING) == 200


def test_secrets_are_checked_once_per_max_age_and_decrypted_only_when_changed(
    ssm: Any, clock: Clock, deployed: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(ssm, "WAYPOINT_MANAGEMENT_API_KEY", OLD_KEY)
    decrypted: list[list[str]] = []
    checked: list[list[str]] = []
    read, versions = Runtime._read_parameters, Runtime._parameter_versions

    def counted_read(path: str, names: list[str]) -> Any:
        decrypted.append(names)
        return read(path, names)

    def counted_check(path: str, names: list[str]) -> Any:
        checked.append(names)
        return versions(path, names)

    monkeypatch.setattr(deployed, "_read_parameters", counted_read)
    monkeypatch.setattr(deployed, "_parameter_versions", counted_check)
    for _ in range(5):
        assert status_with_key(OLD_KEY) == 200
    assert (decrypted, checked) == ([["WAYPOINT_MANAGEMENT_API_KEY"]], [])  # once, not per request

    clock.now += MAX_AGE  # unchanged: its version is checked, nothing is decrypted (no KMS cost)
    assert status_with_key(OLD_KEY) == 200
    assert (len(decrypted), checked) == (1, [["WAYPOINT_MANAGEMENT_API_KEY"]])

    put(ssm, "WAYPOINT_MANAGEMENT_API_KEY", NEW_KEY)  # a new version: decrypted again
    clock.now += MAX_AGE
    assert status_with_key(NEW_KEY) == 200 and len(decrypted) == 2


def test_a_failed_re_read_keeps_the_secrets_read_before(
    ssm: Any, clock: Clock, deployed: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(ssm, "WAYPOINT_MANAGEMENT_API_KEY", OLD_KEY)
    assert status_with_key(OLD_KEY) == 200

    def unavailable(path: str, names: list[str]) -> Any:
        raise ConnectionError("SSM is unreachable")

    monkeypatch.setattr(deployed, "_parameter_versions", unavailable)
    monkeypatch.setattr(deployed, "_read_parameters", unavailable)
    clock.now += MAX_AGE
    assert status_with_key(OLD_KEY) == 200  # the key read before is kept, not lost
    assert status_with_key(NEW_KEY) == 401


def test_a_key_parameter_holding_three_values_refuses_every_request_and_logs_why(
    ssm: Any, deployed: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    put(ssm, "WAYPOINT_MANAGEMENT_API_KEY", f"{NEW_KEY} {OLD_KEY} third-key-0123456789")
    assert status_with_key(NEW_KEY) == 401
    assert "holds 3 space-separated values" in caplog.text
    assert NEW_KEY not in caplog.text
