"""The SSRF guard for web tools: which addresses a model-chosen URL may reach.

Every host is turned into IP addresses here (IP literals in any form, or DNS through
`getaddrinfo`) and each address is checked; the caller then connects to exactly the
addresses returned, so a DNS answer that changes between check and connect cannot
smuggle in a private address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable

from gateway.sdk import ToolError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[Address]]]

# Cloud instance-metadata endpoints; most are also link-local, but say so plainly.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean
        "169.254.170.2",  # AWS ECS task metadata
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud (classic)
        "fd00:ec2::254",  # AWS IMDS over IPv6
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class BlockedAddress(ToolError):
    """The URL points at an address web tools must not reach."""


def parse_ip(host: str) -> Address | None:
    """The IP address `host` denotes, including the forms `inet_aton` accepts.

    `2130706433`, `0x7f000001`, `0177.0.0.1` and `127.1` all mean 127.0.0.1 to a
    resolver, so they must mean it to the guard too. Returns None for a DNS name.
    """
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        pass
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers: list[int] = []
    for part in parts:
        try:
            if part.lower().startswith("0x"):
                numbers.append(int(part[2:] or "0", 16))
            elif len(part) > 1 and part.startswith("0"):
                numbers.append(int(part, 8))
            else:
                numbers.append(int(part, 10))
        except ValueError:
            return None
    # inet_aton: the last number fills all the bytes the earlier ones leave.
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        raise BlockedAddress(f"{host!r} is not a valid IP address.")
    value = last
    for index, number in enumerate(head):
        value |= number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def blocked_reason(ip: Address) -> str | None:
    """Why `ip` must not be reached (e.g. "a loopback address"), or None when it is public."""
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is None and ip.teredo is not None:
            embedded = ip.teredo[1]
        if embedded is not None:
            inner = blocked_reason(embedded)
            return f"an IPv6 form of {embedded}, {inner}" if inner else None
    # fec0::/10 was deprecated (RFC 3879) but routers may still treat it as internal, and
    # Python counts it as global.
    site_local = isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local
    checks = (
        (ip.is_loopback, "a loopback address"),
        (site_local, "a site-local address"),
        (ip.is_link_local, "a link-local address"),
        (ip.is_multicast, "a multicast address"),
        (ip.is_unspecified, "an unspecified address"),
        (ip.is_reserved, "a reserved address"),
        (ip.is_private, "a private address"),
        (not ip.is_global, "not a public address"),
    )
    return next((reason for hit, reason in checks if hit), None)


async def system_resolve(host: str, port: int) -> list[Address]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    out: list[Address] = []
    for *_, sockaddr in infos:
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if ip not in out:
            out.append(ip)
    return out


class AddressGuard:
    """Vets hosts for web tools; hosts listed in `allow_hosts` skip the address checks."""

    def __init__(
        self, allow_hosts: Iterable[str] = (), resolver: Resolver = system_resolve
    ) -> None:
        self._names: set[str] = set()
        self._ips: set[Address] = set()
        for entry in allow_hosts:
            name = entry.strip().lower().rstrip(".")
            try:
                ip = parse_ip(name)
            except BlockedAddress:
                ip = None
            if ip is None:
                self._names.add(_ascii_name(name))
            else:
                self._ips.add(ip)
        self._resolve = resolver

    def allowed(self, host: str) -> bool:
        name = host.lower().rstrip(".")
        if name in self._names:
            return True
        try:
            ip = parse_ip(name)
        except BlockedAddress:
            return False
        return ip is not None and ip in self._ips

    async def vet(self, host: str, port: int) -> list[Address]:
        """The addresses to connect to for `host`, every one checked.

        Raises BlockedAddress when any address is not public: a name with one private
        record among public ones is refused, since the caller might connect to either.
        """
        name = host.lower().rstrip(".")
        allowed = self.allowed(name)
        ip = parse_ip(name)
        if ip is not None:
            reason = None if allowed else blocked_reason(ip)
            if reason:
                raise BlockedAddress(
                    f"refused: {host} is {reason}; only public web addresses can be fetched."
                )
            return [ip]
        try:
            addresses = await self._resolve(name, port)
        except (OSError, UnicodeError):
            addresses = []
        if not addresses:
            raise ToolError(f"the host {host!r} could not be resolved; check the URL.")
        if not allowed:
            for address in addresses:
                reason = blocked_reason(address)
                if reason:
                    raise BlockedAddress(
                        f"refused: {host} resolves to {address}, {reason}; "
                        "only public web addresses can be fetched."
                    )
        return addresses


def _ascii_name(name: str) -> str:
    """The IDNA (punycode) form of a host name, which is what URLs are checked by."""
    try:
        return name.encode("idna").decode("ascii")
    except UnicodeError:
        return name
