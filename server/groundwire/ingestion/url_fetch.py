"""HTTP GET for `url` sources, safe by construction.

- Only http/https, no user info (`url_policy.check_url`), on the configured URL and
  on every redirect target; at most `max_redirects` redirects.
- The host is resolved here, every address it resolves to is checked
  (`url_policy.check_address`) and the connection goes to a checked address: the
  network backend below is the only way this client opens a socket, so a DNS answer
  that changes between check and connect (rebinding) cannot swap the peer. The
  request still names the host (Host header, TLS SNI and certificate check).
- Connect and read timeouts plus one overall deadline; the body is streamed and the
  fetch aborts as soon as it exceeds `max_bytes` (or Content-Length announces it).
- The media type must be one a loader of the index handles; the body must not be
  content-encoded (we ask for identity).
- Conditional requests (If-None-Match / If-Modified-Since) from the validators of
  the previous fetch: 304 means unchanged, nothing is re-read or re-embedded.
- No proxies from the environment (they would bypass the address checks), no
  cookies, no credentials.

Errors and logs name the URL's origin (scheme://host[:port]) at most, never its
path, query or user info.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import urljoin

import httpcore

from groundwire.ingestion.url_policy import (
    AllowList,
    CheckedUrl,
    IPAddress,
    UrlRefused,
    check_address,
    check_url,
    literal_address,
)

__all__ = [
    "FetchError",
    "FetchFailure",
    "FetchSettings",
    "Fetched",
    "NotModified",
    "Resolver",
    "Validators",
    "fetch_url",
    "system_resolver",
]

Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_VALIDATOR_CHARS = 256
_CHUNK = 64 * 1024


class FetchFailure(StrEnum):
    """Why a fetch failed (stable, content-free; refusals carry a UrlRefusal too)."""

    REFUSED = "REFUSED"  # the URL policy refused the URL or an address (see refusal)
    TOO_MANY_REDIRECTS = "TOO_MANY_REDIRECTS"
    BAD_REDIRECT = "BAD_REDIRECT"  # a redirect without a usable Location
    TOO_LARGE = "TOO_LARGE"
    UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
    UNSUPPORTED_ENCODING = "UNSUPPORTED_ENCODING"
    HTTP_STATUS = "HTTP_STATUS"
    TIMEOUT = "TIMEOUT"
    DNS_FAILED = "DNS_FAILED"
    CONNECT_FAILED = "CONNECT_FAILED"
    TLS_FAILED = "TLS_FAILED"
    PROTOCOL_ERROR = "PROTOCOL_ERROR"


class FetchError(Exception):
    """A fetch that produced no document. `str()` is the failure code only."""

    def __init__(
        self,
        failure: FetchFailure,
        origin: str,
        *,
        refusal: str = "",
        status: int = 0,
    ) -> None:
        super().__init__(failure.value)
        self.failure = failure
        self.origin = origin
        self.refusal = refusal
        self.status = status


@dataclass(frozen=True, slots=True)
class Validators:
    """What the server said identifies this representation (bounded, printable)."""

    etag: str = ""
    last_modified: str = ""

    def __bool__(self) -> bool:
        return bool(self.etag or self.last_modified)


@dataclass(frozen=True, slots=True)
class Fetched:
    body: bytes
    media_type: str  # lower case, without parameters
    charset: str  # lower case; "" when not given
    validators: Validators
    redirects: int


@dataclass(frozen=True, slots=True)
class NotModified:
    """304 to a conditional request: the stored document is current."""

    redirects: int


@dataclass(frozen=True, slots=True)
class FetchSettings:
    allow: AllowList
    media_types: frozenset[str]
    max_bytes: int
    max_redirects: int = 5
    connect_timeout: float = 5.0
    read_timeout: float = 15.0
    total_timeout: float = 60.0
    user_agent: str = "groundwire-url-source/1"


async def system_resolver(host: str, port: int) -> list[IPAddress]:
    """Every address the system resolver returns for host (a literal is itself)."""
    literal = literal_address(host)
    if literal is not None:
        return [literal]
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    out: list[IPAddress] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in out:
            out.append(address)
    return out


class _CheckedBackend(httpcore.AsyncNetworkBackend):
    """Resolves, checks every address, connects only to checked ones."""

    def __init__(self, allow: AllowList, resolver: Resolver) -> None:
        self._allow = allow
        self._resolver = resolver
        self._inner = httpcore.AnyIOBackend()
        self.origin = ""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore backend interface)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            addresses = await self._resolver(host, port)
        except (OSError, UnicodeError):
            raise FetchError(FetchFailure.DNS_FAILED, self.origin) from None
        if not addresses:
            raise FetchError(FetchFailure.DNS_FAILED, self.origin)
        # Every address must pass, not just the first: a name that resolves to a
        # public and a private address is refused rather than tried in turn.
        for address in addresses:
            check_address(host, address, self._allow)
        last: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore backend interface)
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise FetchError(FetchFailure.CONNECT_FAILED, self.origin)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _validator(value: str | None) -> str:
    if value is None or len(value) > MAX_VALIDATOR_CHARS:
        return ""
    value = value.strip()
    return value if value.isprintable() and value.isascii() else ""


def _media_type(value: str | None) -> tuple[str, str]:
    if not value:
        return "", ""
    main, _, params = value.partition(";")
    charset = ""
    for param in params.split(";"):
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset":
            charset = val.strip().strip('"').lower()
    return main.strip().lower(), charset


def _request_headers(
    url: CheckedUrl, settings: FetchSettings, conditional: Validators | None
) -> list[tuple[bytes, bytes]]:
    headers = [
        (b"Host", url.authority.encode("ascii")),
        (b"User-Agent", settings.user_agent.encode("ascii")),
        (b"Accept", ", ".join(sorted(settings.media_types)).encode("ascii")),
        (b"Accept-Encoding", b"identity"),
    ]
    if conditional is not None:
        if conditional.etag:
            headers.append((b"If-None-Match", conditional.etag.encode("ascii")))
        if conditional.last_modified:
            headers.append((b"If-Modified-Since", conditional.last_modified.encode("ascii")))
    return headers


async def _read_body(response: httpcore.Response, settings: FetchSettings, origin: str) -> bytes:
    length = _header(response.headers, b"content-length")
    if length is not None and length.strip().isdigit() and int(length) > settings.max_bytes:
        raise FetchError(FetchFailure.TOO_LARGE, origin)
    body = bytearray()
    async for chunk in response.aiter_stream():
        body += chunk
        if len(body) > settings.max_bytes:
            raise FetchError(FetchFailure.TOO_LARGE, origin)
    return bytes(body)


async def _fetch_chain(
    pool: httpcore.AsyncConnectionPool,
    backend: _CheckedBackend,
    url: str,
    settings: FetchSettings,
    conditional: Validators | None,
) -> Fetched | NotModified:
    timeouts = {
        "connect": settings.connect_timeout,
        "read": settings.read_timeout,
        "write": settings.read_timeout,
        "pool": settings.connect_timeout,
    }
    redirects = 0
    current = url
    while True:
        try:
            checked = check_url(current)
        except UrlRefused as exc:
            raise FetchError(
                FetchFailure.REFUSED, backend.origin, refusal=exc.refusal.value
            ) from None
        backend.origin = checked.origin
        request_url = httpcore.URL(
            scheme=checked.scheme.encode("ascii"),
            host=checked.host.encode("ascii"),
            port=checked.port,
            target=checked.target.encode("utf-8"),
        )
        async with pool.stream(
            "GET",
            request_url,
            headers=_request_headers(checked, settings, conditional),
            extensions={"timeout": timeouts},
        ) as response:
            status = response.status
            if status in REDIRECT_STATUSES:
                location = _header(response.headers, b"location")
                if not location:
                    raise FetchError(FetchFailure.BAD_REDIRECT, checked.origin, status=status)
                if redirects >= settings.max_redirects:
                    raise FetchError(FetchFailure.TOO_MANY_REDIRECTS, checked.origin)
                redirects += 1
                current = urljoin(current, location.strip())
                continue
            if status == 304 and conditional:
                return NotModified(redirects)
            if status != 200:
                raise FetchError(FetchFailure.HTTP_STATUS, checked.origin, status=status)
            encoding = (_header(response.headers, b"content-encoding") or "identity").strip()
            if encoding.lower() not in ("", "identity"):
                raise FetchError(FetchFailure.UNSUPPORTED_ENCODING, checked.origin)
            media_type, charset = _media_type(_header(response.headers, b"content-type"))
            if media_type not in settings.media_types:
                raise FetchError(FetchFailure.UNSUPPORTED_MEDIA_TYPE, checked.origin)
            body = await _read_body(response, settings, checked.origin)
            validators = Validators(
                _validator(_header(response.headers, b"etag")),
                _validator(_header(response.headers, b"last-modified")),
            )
            return Fetched(body, media_type, charset, validators, redirects)


async def fetch_url(
    url: str,
    settings: FetchSettings,
    *,
    conditional: Validators | None = None,
    resolver: Resolver = system_resolver,
    ssl_context: ssl.SSLContext | None = None,
) -> Fetched | NotModified:
    """GET `url` under `settings`; raises FetchError (never with the URL in it)."""
    backend = _CheckedBackend(settings.allow, resolver)
    try:
        backend.origin = check_url(url).origin
    except UrlRefused as exc:
        raise FetchError(FetchFailure.REFUSED, "", refusal=exc.refusal.value) from None
    pool = httpcore.AsyncConnectionPool(
        ssl_context=ssl_context,
        max_connections=1,
        network_backend=backend,
        retries=0,
    )
    try:
        async with asyncio.timeout(settings.total_timeout):
            return await _fetch_chain(pool, backend, url, settings, conditional)
    except UrlRefused as exc:
        raise FetchError(FetchFailure.REFUSED, backend.origin, refusal=exc.refusal.value) from None
    except (TimeoutError, httpcore.TimeoutException):
        raise FetchError(FetchFailure.TIMEOUT, backend.origin) from None
    except httpcore.ConnectError as exc:
        failure = (
            FetchFailure.TLS_FAILED
            if isinstance(exc.__cause__ or exc.__context__, ssl.SSLError)
            else FetchFailure.CONNECT_FAILED
        )
        raise FetchError(failure, backend.origin) from None
    except (httpcore.ProtocolError, httpcore.NetworkError, httpcore.UnsupportedProtocol):
        raise FetchError(FetchFailure.PROTOCOL_ERROR, backend.origin) from None
    # A server's bytes that no request may carry (a Location httpcore cannot encode).
    except (ValueError, UnicodeError):
        raise FetchError(FetchFailure.PROTOCOL_ERROR, backend.origin) from None
    finally:
        await pool.aclose()
