"""Where the generic channel may POST replies: its callback allow-list, and no private address.

A `callback_url` comes from the (signed) inbound request, so whoever holds the generic secret, or
a compromised relay, chooses where our Lambda sends an HTTP request from inside AWS. Two rules
keep that from becoming a server-side request forgery:

1. An allow-list of hosts is required (`WAYPOINT_CALLBACK_HOSTS`, the template's
   `GenericCallbackHosts`): without one the generic channel does not start. Hosts compare as
   written (lower-cased), so `2130706433` or `0x7f000001` never match `127.0.0.1`.
2. Before each send, the host is resolved (`getaddrinfo`) and EVERY address it resolves to must
   be public (`ipaddress`: not private, loopback, link-local, the metadata address 169.254.169.254,
   shared 100.64/10, unspecified, multicast or reserved; IPv4 inside IPv6 — `::ffff:a.b.c.d`,
   6to4, Teredo — is judged by its IPv4 address). An allow-listed DNS name that resolves to a
   private address (a mistake, or DNS rebinding) is refused.

The one opt-in: a host written in the allow-list as an IP address in standard notation
(`127.0.0.1` for `waypoint serve`'s own reply inbox) is trusted as that exact address, private or
not. It is explicit, so it cannot happen by default; any other spelling of an address
(`2130706433`, `0x7f000001`, `0177.0.0.1`) is resolved like a name and refused if private.

Residual risk (documented in docs/RELIABILITY.md): the HTTP client resolves the name again when
it connects, so a DNS server answering differently within those milliseconds could still aim one
request at a private address; pointing callbacks only at hosts whose DNS you control closes it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from urllib.parse import SplitResult, urlsplit

from infra.channels.errors import ChannelConfigError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# host, port → every address the host resolves to (strings, as getaddrinfo gives them)
Resolver = Callable[[str, int], Awaitable[list[str]]]

CALLBACK_HOSTS_SETTING = "WAYPOINT_CALLBACK_HOSTS"


class CallbackRefused(Exception):
    """The callback URL may not receive replies; the message says why (safe to return)."""


class CallbackUnresolvable(Exception):
    """The callback host did not resolve (maybe for now): the delivery is retried."""


async def resolve_with_getaddrinfo(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, through the system resolver (never blocking the loop)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def ip_literal(host: str) -> IPAddress | None:
    """`host` as an IP address when written as one in standard notation (dotted IPv4, IPv6),
    else None. Legacy forms (2130706433, 0x7f000001, 0177.0.0.1) are NOT literals here: they
    count as names, so they are resolved and judged by the addresses they resolve to."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def is_public(address: IPAddress) -> bool:
    """Whether a request to `address` leaves for the public internet (see the module docstring)."""
    if isinstance(address, ipaddress.IPv6Address):
        teredo = address.teredo[1] if address.teredo else None
        for embedded in (address.ipv4_mapped, address.sixtofour, teredo):
            if embedded is not None and not is_public(embedded):
                return False
    return (
        address.is_global
        and not address.is_multicast
        and not address.is_reserved
        and not address.is_link_local
        and not address.is_loopback
        and not address.is_unspecified
    )


class CallbackTargets:
    """The allow-list of callback hosts and the address rule (module docstring)."""

    def __init__(self, hosts: Iterable[str] | None, *, resolve: Resolver | None = None) -> None:
        listed = frozenset(h.strip().lower() for h in hosts or () if h.strip())
        if not listed:
            raise ChannelConfigError(
                f"the generic channel needs the hosts its callback_url may target: set "
                f"{CALLBACK_HOSTS_SETTING} (template parameter GenericCallbackHosts), e.g. "
                "widget.example.com; an empty list would let any request aim replies anywhere"
            )
        self.hosts = listed
        # IP literals written in the allow-list: trusted as that address, private included.
        self.trusted_addresses = frozenset(
            address for host in listed if (address := ip_literal(host.strip("[]"))) is not None
        )
        self._resolve = resolve or resolve_with_getaddrinfo

    def __repr__(self) -> str:
        return f"CallbackTargets(hosts={sorted(self.hosts)!r})"

    def check_url(self, url: str) -> SplitResult:
        """The parsed URL if its form and host are allowed, else `CallbackRefused`."""
        try:
            parts = urlsplit(url)
            hostname = parts.hostname
            parts.port  # noqa: B018 — raises ValueError on a malformed port
        except ValueError:
            raise CallbackRefused("callback_url is not a valid URL") from None
        if parts.scheme not in ("http", "https") or not hostname:
            raise CallbackRefused("callback_url must be an absolute http(s) URL")
        if hostname.lower() not in self.hosts:
            raise CallbackRefused(
                f"callback_url host {hostname[:100]!r} is not in the allowed callback hosts "
                f"({CALLBACK_HOSTS_SETTING})"
            )
        return parts

    async def check_destination(self, url: str) -> None:
        """`check_url`, then resolve the host: every address must be public unless the host is
        an allow-listed IP literal. `CallbackRefused` / `CallbackUnresolvable` otherwise."""
        parts = self.check_url(url)
        host = str(parts.hostname)
        literal = ip_literal(host)
        if literal is not None and literal in self.trusted_addresses:
            return
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            resolved = await self._resolve(host, port)
        except OSError as exc:
            raise CallbackUnresolvable(
                f"callback host {host[:100]!r} did not resolve ({type(exc).__name__})"
            ) from None
        if not resolved:
            raise CallbackUnresolvable(f"callback host {host[:100]!r} has no address")
        for raw in resolved:
            address = ipaddress.ip_address(raw.split("%", 1)[0])  # drop an IPv6 scope id
            if not is_public(address):
                raise CallbackRefused(
                    f"callback host {host[:100]!r} resolves to {address}, a private, loopback, "
                    "link-local or reserved address; replies go to public addresses only"
                )
