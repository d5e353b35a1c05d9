"""The S3 API client of `kind = "s3"` sources: aiobotocore (botocore's signing,
pagination, retries and error model over aiohttp, async like the server), held to
groundwire's rules for server-side requests:

- the endpoint is the configured one (AWS's regional endpoint when none is set);
  every request goes to its host, or to `BUCKET.` + its host in virtual-hosted
  addressing, and to nothing else: a redirect to another host is never followed
  (refused as SOURCE_REFUSED), whichever layer would follow it (aiohttp's redirect
  loop, botocore's region redirector);
- every address a host name resolves to passes the URL policy
  (ingestion/url_policy.py: no loopback, private, link-local or metadata address
  unless the source allows it), checked when the connection is made, so a DNS
  answer cannot swap the peer after a check; a literal address is checked too;
- no proxies from the environment (they would bypass those checks), no
  credentials but the source's own references (never the default chain, whose
  instance-metadata lookup is itself a request to a metadata address);
- connect and read timeouts from the source; few retries (a dead server fails the
  run quickly, the next run retries).

Failures become GroundwireErrors naming the source as s3://bucket/prefix and the
S3 error code, never a key, a secret or a presigned URL.
"""

from __future__ import annotations

import asyncio
import configparser
import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiobotocore.config import AioConfig
from aiobotocore.httpsession import AIOHTTPSession
from aiobotocore.session import get_session
from botocore.exceptions import BotoCoreError, ClientError

from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.domain.operations import OperationErrorCode
from groundwire.indexes.sources import S3Credentials, S3Source, SecretReference
from groundwire.ingestion.url_policy import (
    AllowList,
    UrlRefused,
    check_address,
    literal_address,
)

log = logging.getLogger("groundwire.ingestion")
# botocore's DEBUG records show request headers (the signed Authorization header
# with the access key id) and bodies: never in groundwire's logs, whatever level
# the operator sets for the root logger.
for _name in ("botocore", "aiobotocore"):
    logging.getLogger(_name).setLevel(logging.WARNING)

# S3 error codes that mean "these credentials may not do this".
_DENIED = frozenset(
    {
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "TokenRefreshRequired",
        "AllAccessDisabled",
        "AccountProblem",
        "403",
    }
)


# Codes named in errors and logs; any other code the server sends is its own text
# (a hostile server could echo a key into it) and is reported as "unrecognised".
_KNOWN_CODES = _DENIED | {
    "NoSuchBucket",
    "NoSuchKey",
    "InternalError",
    "ServiceUnavailable",
    "SlowDown",
    "RequestTimeout",
    "PermanentRedirect",
    "TemporaryRedirect",
    "AuthorizationHeaderMalformed",
    "InvalidRequest",
    "InvalidBucketName",
    "InvalidArgument",
    "MethodNotAllowed",
    "NotImplemented",
    "500",
    "503",
}


class HostRefused(aiohttp.ClientError):
    """A request to a host or address the source's policy refuses."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def source_error(src: S3Source, code: OperationErrorCode, detail: str) -> GroundwireError:
    """The run's error: names the source (s3://bucket/prefix), never a secret."""
    kind = {
        OperationErrorCode.SOURCE_ACCESS_DENIED: ErrorKind.PERMISSION_DENIED,
        OperationErrorCode.SOURCE_REFUSED: ErrorKind.FAILED_PRECONDITION,
    }.get(code, ErrorKind.UNAVAILABLE)
    message = f"s3 source {src.location}: {detail}"
    log.error(
        "s3 source failed",
        extra={"source": src.location, "error_code": code.value, "detail": detail},
    )
    return GroundwireError(kind, code.value, message)


def _secret(ref: SecretReference | None) -> str | None:
    if ref is None:
        return None
    if ref.env is not None:
        return (os.environ.get(ref.env) or "").strip() or None
    assert ref.file is not None
    try:
        return ref.file.read_text().strip() or None
    except OSError:
        return None


def resolve_credentials(creds: S3Credentials) -> tuple[str, str, str | None] | None:
    """(access key id, secret access key, session token) from the references, or
    None when any needed one is missing (read at every sync: rotation applies)."""
    if creds.credentials_file is not None:
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(creds.credentials_file.read_text())
        except (OSError, configparser.Error, UnicodeError):
            return None
        if not parser.has_section(creds.profile):
            return None
        section = parser[creds.profile]
        key, secret = section.get("aws_access_key_id"), section.get("aws_secret_access_key")
        token = section.get("aws_session_token")
    else:
        key, secret = _secret(creds.access_key_id), _secret(creds.secret_access_key)
        token = _secret(creds.session_token)
    if not key or not secret:
        return None
    return key.strip(), secret.strip(), (token or "").strip() or None


@dataclass(slots=True)
class _Guard:
    """The hosts a source's requests may go to, and the address policy."""

    hosts: frozenset[str]
    allow: AllowList
    refusal: str = ""

    def check_host(self, host: str) -> None:
        if host.lower().rstrip(".") not in self.hosts:
            self.refusal = "a redirect or request to another host"
            raise HostRefused(self.refusal)
        address = literal_address(host)
        if address is not None:
            self.check_address(host, address)

    def check_address(self, host: str, address: Any) -> None:
        try:
            check_address(host, address, self.allow)
        except UrlRefused as exc:
            self.refusal = f"the endpoint's address is refused ({exc.refusal.value})"
            raise HostRefused(self.refusal) from None


class _CheckingResolver(aiohttp.abc.AbstractResolver):
    """Resolves with the system resolver and refuses the answer when any address
    is one the policy refuses (the connection goes only to checked addresses)."""

    def __init__(self, guard: _Guard) -> None:
        self._guard = guard
        self._inner = aiohttp.ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[aiohttp.abc.ResolveResult]:
        self._guard.check_host(host)
        answers = await self._inner.resolve(host, port, family)
        for answer in answers:
            address = literal_address(answer["host"].split("%", 1)[0])
            if address is None:
                raise HostRefused("unparsable address")
            self._guard.check_address(host, address)
        return answers

    async def close(self) -> None:
        await self._inner.close()


def _guarded_session_class(guard: _Guard) -> type[AIOHTTPSession]:
    """aiobotocore's aiohttp session whose ClientSession checks every request,
    redirects included, against the guard (aiohttp follows redirects itself)."""

    async def same_host_only(
        req: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
    ) -> aiohttp.ClientResponse:
        guard.check_host(req.url.host or "")
        return await handler(req)

    class GuardedSession(AIOHTTPSession):  # type: ignore[misc]
        async def _get_session(self, proxy_url: Any) -> aiohttp.ClientSession:
            session: aiohttp.ClientSession | None = self._sessions.get(proxy_url)
            if session is None:
                async with self._sessions_lock:
                    session = self._sessions.get(proxy_url)
                    if session is None:
                        connector = await self._create_connector(proxy_url)
                        session = await self._exit_stack.enter_async_context(
                            aiohttp.ClientSession(
                                connector=connector,
                                timeout=self._timeout,
                                skip_auto_headers={"CONTENT-TYPE"},
                                auto_decompress=False,
                                middlewares=(same_host_only,),
                            )
                        )
                        self._sessions[proxy_url] = session
            return session

    return GuardedSession


def _allowed_hosts(src: S3Source) -> frozenset[str]:
    host = (urlsplit(src.endpoint).hostname or "").lower().rstrip(".")
    return frozenset({host, f"{src.bucket}.{host}"})


@dataclass(slots=True)
class S3Client:
    """One source's open client (see `open_client`)."""

    source: S3Source
    client: Any
    guard: _Guard

    def failure(self, exc: BaseException) -> GroundwireError:
        """The run's error for an exception of a listing or a read."""
        src = self.source
        if isinstance(exc, HostRefused) or self.guard.refusal:
            return source_error(src, OperationErrorCode.SOURCE_REFUSED, self.guard.refusal)
        if isinstance(exc, ClientError):
            code = str(exc.response.get("Error", {}).get("Code", ""))
            code = code if code in _KNOWN_CODES else ("unrecognised" if code else "")
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
            if 300 <= status < 400:
                return source_error(
                    src, OperationErrorCode.SOURCE_REFUSED, f"the server redirected ({status})"
                )
            if code in _DENIED or status == 403:
                return source_error(
                    src,
                    OperationErrorCode.SOURCE_ACCESS_DENIED,
                    f"the bucket refused the credentials ({code or status})",
                )
            return source_error(
                src,
                OperationErrorCode.SOURCE_UNAVAILABLE,
                f"the server answered {code or 'an error'} ({status})",
            )
        return source_error(
            src,
            OperationErrorCode.SOURCE_UNAVAILABLE,
            f"the server could not be reached or stopped answering ({type(exc).__name__})",
        )


@asynccontextmanager
async def open_client(src: S3Source) -> AsyncIterator[S3Client]:
    """An S3 client for one source, closed on exit. Raises the run's
    GroundwireError when the credentials are not set."""
    creds = resolve_credentials(src.credentials)
    if creds is None:
        raise source_error(
            src,
            OperationErrorCode.SOURCE_ACCESS_DENIED,
            "its credentials are not set (the referenced variables or files are missing or empty)",
        )
    guard = _Guard(_allowed_hosts(src), AllowList.of(src.allow_hosts, src.allow_cidrs))
    config = AioConfig(
        connect_timeout=src.connect_timeout_seconds,
        read_timeout=src.read_timeout_seconds,
        retries={"total_max_attempts": 2, "mode": "standard"},
        s3={"addressing_style": "path" if src.path_style else "virtual"},
        proxies={},
        connector_args={"resolver": _CheckingResolver(guard)},
        http_session_cls=_guarded_session_class(guard),
        # Checksums of every response body would be computed for nothing here.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    session = get_session()
    stack = AsyncExitStack()
    client = await stack.enter_async_context(
        session.create_client(
            "s3",
            endpoint_url=src.endpoint,
            region_name=src.region,
            aws_access_key_id=creds[0],
            aws_secret_access_key=creds[1],
            aws_session_token=creds[2],
            verify=str(src.ca_file) if src.ca_file is not None else True,
            config=config,
        )
    )
    try:
        yield S3Client(src, client, guard)
    finally:
        with contextlib.suppress(Exception):
            await stack.aclose()


TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    BotoCoreError,
    ClientError,
    aiohttp.ClientError,
    OSError,
    asyncio.TimeoutError,
)
