"""The generic channel's callbacks cannot be aimed at our own network (issue #14, SSRF): an
allow-list is required, and every address a host resolves to must be public, in every encoding
(resolved by the real `getaddrinfo`, which accepts the legacy numeric forms)."""

from __future__ import annotations

import httpx
import pytest

from infra.channels.base import OutboundReply
from infra.channels.callbacks import CallbackRefused, CallbackTargets, ip_literal, is_public
from infra.channels.errors import (
    ChannelConfigError,
    DeliveryRejected,
    DeliveryUnavailable,
    MalformedRequest,
)
from infra.channels.generic import GenericChannel
from tests.channels.conftest import SettableClock
from tests.channels.fake_platform import FakePlatform
from tests.channels.payloads import generic_message
from tests.channels.signed import GENERIC_SECRET, generic_request

# Every way we know to write an address that must never receive a reply.
HOSTILE_HOSTS = [
    "169.254.169.254",  # EC2 / ECS metadata
    "2130706433",  # 127.0.0.1 as a decimal
    "0x7f000001",  # … as hex
    "0177.0.0.1",  # … as octal
    "127.1",  # … shortened
    "127.0.0.1",
    "0.0.0.0",
    "0",
    "10.0.0.8",
    "172.16.3.4",
    "192.168.1.1",
    "100.64.0.1",  # carrier-grade NAT, shared address space
    "::1",
    "::ffff:127.0.0.1",  # IPv4-mapped IPv6
    "::ffff:169.254.169.254",
    "fd00::1",  # unique local
    "fe80::1",  # link-local
    "::",
]


def _url(host: str) -> str:
    return f"http://[{host}]/cb" if ":" in host else f"http://{host}/cb"


def test_without_an_allow_list_the_generic_channel_does_not_start(clock: SettableClock) -> None:
    for hosts in (None, [], ["", " "]):
        with pytest.raises(ChannelConfigError, match="WAYPOINT_CALLBACK_HOSTS"):
            GenericChannel(secret=GENERIC_SECRET, clock=clock, callback_hosts=hosts)


@pytest.mark.parametrize("host", HOSTILE_HOSTS)
def test_a_callback_to_a_host_outside_the_allow_list_is_a_400(
    clock: SettableClock, host: str
) -> None:
    channel = GenericChannel(
        secret=GENERIC_SECRET, clock=clock, callback_hosts=["widget.example.com"]
    )
    with pytest.raises(MalformedRequest, match="allowed callback hosts") as caught:
        channel.handle(generic_request(generic_message(callback_url=_url(host))))
    assert caught.value.status == 400


@pytest.mark.parametrize("host", HOSTILE_HOSTS)
async def test_an_allow_listed_name_written_as_a_private_address_is_refused_after_resolving(
    host: str,
) -> None:
    # The operator listed the name itself; getaddrinfo turns every spelling into the address.
    targets = CallbackTargets([host.strip("[]")] if ":" not in host else [host])
    if ip_literal(host) is not None:  # a standard literal: the explicit opt-in
        await targets.check_destination(_url(host))
        return
    with pytest.raises(CallbackRefused, match="resolves to"):
        await targets.check_destination(_url(host))


@pytest.mark.parametrize("address", [h for h in HOSTILE_HOSTS if ip_literal(h) is not None])
async def test_an_allow_listed_host_resolving_to_a_private_address_gets_no_reply(
    clock: SettableClock, platform: FakePlatform, http: httpx.AsyncClient, address: str
) -> None:
    async def rebinding(host: str, port: int) -> list[str]:
        return ["93.184.215.14", address]  # one public answer does not excuse a private one

    channel = GenericChannel(
        secret=GENERIC_SECRET,
        clock=clock,
        callback_hosts=["widget.example.com"],
        resolve=rebinding,
    )
    reply = OutboundReply(text="hi", reply_to={"callback_url": "https://widget.example.com/cb"})
    with pytest.raises(DeliveryRejected, match="private, loopback"):
        await channel.send(reply, http)
    assert platform.requests == []


async def test_a_host_that_does_not_resolve_is_retried_not_dropped(
    clock: SettableClock, http: httpx.AsyncClient
) -> None:
    async def nxdomain(host: str, port: int) -> list[str]:
        raise OSError("Name or service not known")

    channel = GenericChannel(
        secret=GENERIC_SECRET, clock=clock, callback_hosts=["gone.example"], resolve=nxdomain
    )
    reply = OutboundReply(text="hi", reply_to={"callback_url": "https://gone.example/cb"})
    with pytest.raises(DeliveryUnavailable, match="did not resolve"):
        await channel.send(reply, http)


async def test_the_local_servers_own_loopback_address_is_allowed_when_listed_as_an_address(
    clock: SettableClock, platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    channel = GenericChannel(secret=GENERIC_SECRET, clock=clock, callback_hosts=["127.0.0.1"])
    await channel.send(
        OutboundReply(text="hi", reply_to={"callback_url": platform.url("cb")}), http
    )
    assert len(platform.requests) == 1
    # The name `localhost` is not the opt-in: it resolves to loopback and is refused.
    by_name = CallbackTargets(["localhost"])
    with pytest.raises(CallbackRefused, match="resolves to"):
        await by_name.check_destination("http://localhost/cb")


@pytest.mark.parametrize(
    "url", ["http://[host]/", "http://[::1/", "http://example.com:99999/", "http://:80/"]
)
def test_an_unparseable_callback_url_is_a_clear_400(clock: SettableClock, url: str) -> None:
    channel = GenericChannel(secret=GENERIC_SECRET, clock=clock, callback_hosts=["host"])
    with pytest.raises(MalformedRequest, match="callback_url") as caught:
        channel.handle(generic_request(generic_message(callback_url=url)))
    assert caught.value.status == 400


def test_public_addresses_are_public() -> None:
    import ipaddress

    for raw in ("93.184.215.14", "8.8.8.8", "2606:4700:4700::1111"):
        assert is_public(ipaddress.ip_address(raw))
    for raw in (
        "2002:7f00:1::",
        "2001:0:4136:e378:8000:63bf:80ff:fffe",
    ):  # 6to4 / Teredo → private v4
        assert not is_public(ipaddress.ip_address(raw))
