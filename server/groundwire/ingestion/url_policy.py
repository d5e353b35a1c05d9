"""Which URLs a `url` source may fetch, as pure rules (no I/O): the URL's shape,
then every address its host resolves to. The fetcher (`url_fetch`) applies them
to the configured URL, to the address it actually connects to, and again to every
redirect target.

A URL source is a server-side request made on behalf of configuration, so the
default is to refuse anything that is not a public unicast address: loopback,
private (RFC 1918), link-local (where cloud metadata services live), unique-local,
CGNAT, multicast, reserved and unspecified addresses, the well-known metadata
addresses that are not in those ranges, and IPv6 forms that embed a refused IPv4
address (mapped, NAT64, 6to4). An operator opens a door explicitly with an
allow-list of host names and/or CIDR blocks.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ALLOWED_SCHEMES = frozenset({"http", "https"})

# Metadata endpoints outside the link-local and unique-local ranges (those are
# refused as a whole already): Azure's WireServer and Alibaba's, which sits in
# CGNAT space but is named here so the reason says what it is.
_METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean ...
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "168.63.129.16",  # Azure WireServer
        "100.100.100.200",  # Alibaba Cloud
    )
)
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")


class UrlRefusal(StrEnum):
    """Why a URL or an address was refused (stable, content-free codes)."""

    SCHEME_NOT_ALLOWED = "SCHEME_NOT_ALLOWED"
    CREDENTIALS_IN_URL = "CREDENTIALS_IN_URL"
    MALFORMED_URL = "MALFORMED_URL"
    METADATA_ADDRESS = "METADATA_ADDRESS"
    LOOPBACK_ADDRESS = "LOOPBACK_ADDRESS"
    PRIVATE_ADDRESS = "PRIVATE_ADDRESS"
    LINK_LOCAL_ADDRESS = "LINK_LOCAL_ADDRESS"
    UNIQUE_LOCAL_ADDRESS = "UNIQUE_LOCAL_ADDRESS"
    CGNAT_ADDRESS = "CGNAT_ADDRESS"
    MULTICAST_ADDRESS = "MULTICAST_ADDRESS"
    RESERVED_ADDRESS = "RESERVED_ADDRESS"


@dataclass(frozen=True, slots=True)
class AllowList:
    """Operator-permitted exceptions: host names (exact, case-insensitive) whose
    resolved addresses are all accepted, and CIDR blocks accepted for any host."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def of(cls, hosts: Iterable[str] = (), cidrs: Iterable[str] = ()) -> AllowList:
        """Raises ValueError for a CIDR block that does not parse."""
        return cls(
            frozenset(h.lower().rstrip(".") for h in hosts),
            tuple(ipaddress.ip_network(c, strict=False) for c in cidrs),
        )

    def permits_host(self, host: str) -> bool:
        return host.lower().rstrip(".") in self.hosts

    def permits_address(self, address: IPAddress) -> bool:
        return any(address.version == n.version and address in n for n in self.networks)


@dataclass(frozen=True, slots=True)
class CheckedUrl:
    """A URL that passed the shape rules, split into what the fetcher needs."""

    scheme: str
    host: str  # lower case, IPv6 without brackets
    port: int
    target: str  # path and query, as sent in the request line ("/" when empty)

    @property
    def authority(self) -> str:
        """host[:port] as the Host header names it (the port only when not the
        scheme's default, IPv6 in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host + ("" if self.port == default else f":{self.port}")

    @property
    def origin(self) -> str:
        """scheme://host[:port]: the only part of a URL that logs and errors show."""
        return f"{self.scheme}://{self.authority}"


class UrlRefused(Exception):
    """A URL or address the policy refuses; `str()` never shows the URL."""

    def __init__(self, refusal: UrlRefusal) -> None:
        super().__init__(refusal.value)
        self.refusal = refusal


def check_url(url: str) -> CheckedUrl:
    """The shape rules: absolute http(s), a host, no user info, no control
    characters or whitespace. Raises UrlRefused."""
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise UrlRefused(UrlRefusal.MALFORMED_URL)
    try:
        parts = urlsplit(url)
        port = parts.port
        host = parts.hostname
    except ValueError:
        raise UrlRefused(UrlRefusal.MALFORMED_URL) from None
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        raise UrlRefused(UrlRefusal.SCHEME_NOT_ALLOWED)
    if "@" in parts.netloc:
        raise UrlRefused(UrlRefusal.CREDENTIALS_IN_URL)
    if not host:
        raise UrlRefused(UrlRefusal.MALFORMED_URL)
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise UrlRefused(UrlRefusal.MALFORMED_URL) from None
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return CheckedUrl(scheme, host.lower(), port or (443 if scheme == "https" else 80), target)


def literal_address(host: str) -> IPAddress | None:
    """The host as an IP address when it is one (dotted quad or IPv6)."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64 or address in _NAT64_LOCAL:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None


def address_refusal(address: IPAddress) -> UrlRefusal | None:
    """Why the default policy refuses `address`, or None for a public unicast one."""
    if address in _METADATA_ADDRESSES:
        return UrlRefusal.METADATA_ADDRESS
    if isinstance(address, ipaddress.IPv6Address):
        inner = _embedded_ipv4(address)
        if inner is not None:
            return address_refusal(inner)
        if address in ipaddress.IPv6Network("fc00::/7"):
            return UrlRefusal.UNIQUE_LOCAL_ADDRESS
    if address.is_loopback:
        return UrlRefusal.LOOPBACK_ADDRESS
    if address.is_link_local:
        return UrlRefusal.LINK_LOCAL_ADDRESS
    if address.is_multicast:
        return UrlRefusal.MULTICAST_ADDRESS
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return UrlRefusal.CGNAT_ADDRESS
    if address.is_private:
        return UrlRefusal.PRIVATE_ADDRESS
    if address.is_unspecified or address.is_reserved or not address.is_global:
        return UrlRefusal.RESERVED_ADDRESS
    return None


def check_address(host: str, address: IPAddress, allow: AllowList) -> None:
    """Raise UrlRefused unless `address` (which `host` resolved to) may be
    connected to: public unicast, or permitted by the allow-list."""
    if allow.permits_host(host) or allow.permits_address(address):
        return
    refusal = address_refusal(address)
    if refusal is not None:
        raise UrlRefused(refusal)
