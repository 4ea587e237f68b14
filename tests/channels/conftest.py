"""Fixtures for the channel tests: a settable clock, the channels built from test secrets, a real
local fake of the platforms' send APIs, and an httpx client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta

import httpx
import pytest

from infra.channels.base import Channel
from infra.channels.registry import build_channels
from tests.channels.fake_platform import FakePlatform
from tests.channels.signed import NOW, PUBLIC_BASE_URL, channel_secrets


class SettableClock:
    """Reads a fixed instant; tests move it with `advance`."""

    def __init__(self, start: datetime = NOW) -> None:
        self.current = start

    def now(self) -> datetime:
        return self.current

    def advance(self, seconds: float) -> None:
        self.current += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> SettableClock:
    return SettableClock()


@pytest.fixture(scope="session")
def platform_server() -> Iterator[FakePlatform]:
    with FakePlatform() as server:
        yield server


@pytest.fixture
def platform(platform_server: FakePlatform) -> FakePlatform:
    platform_server.reset()
    return platform_server


@pytest.fixture
def channels(clock: SettableClock, platform: FakePlatform) -> dict[str, Channel]:
    """Every channel enabled, its send API pointed at the fake platform."""
    return build_channels(
        channel_secrets(),
        clock,
        base_urls={
            "telegram": platform.url("telegram"),
            "slack": platform.url("slack/api"),
            "whatsapp": platform.url("graph"),
            "twilio": platform.url("twilio"),
        },
        public_base_url=PUBLIC_BASE_URL,
        callback_hosts=("127.0.0.1",),  # the fake platform's own address, allowed explicitly
    )


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=5) as client:
        yield client
