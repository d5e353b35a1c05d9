"""One interceptor for every RPC: request id, authentication and permissions,
tenant admission, deadline propagation, safe request decoding, error mapping and a content-free
access log.

- The request id comes from the caller's `x-request-id` metadata (bounded,
  printable) or is generated, is bound in a contextvar for logs, and is returned
  in the `x-request-id` trailing metadata.
- Every call of a limited family (api/admission.py) is admitted against its
  tenant's concurrency cap and token bucket before the handler runs, and holds
  its slot until it ends (a stream: until its last message); a refusal is
  RESOURCE_EXHAUSTED with RetryInfo, counted by family and reason.
- A request that protobuf cannot decode (for example invalid UTF-8 in a string
  field) becomes INVALID_ARGUMENT / MALFORMED_REQUEST instead of grpcio's
  generic INTERNAL.
- GroundwireError becomes its rich status; any other exception becomes INTERNAL
  with reason INTERNAL and no exception text (only its type and frames are
  logged, keyed by the request id).
- The access log line carries method, status code, duration, request id, the
  key's id (never the key) and the tenant, and a refused or failed call's
  stable reason: never request or response content.
- Embedding usage of the call (queries, pushes, agent searches, embedding
  rerankers) is metered and added to the caller's tenant totals (the key's
  tenant, else the declared one), whatever the call's outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import re
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from groundwire.api.admission import admission_tenant, family_of, refused
from groundwire.api.auth import (
    PRINCIPALS_HEADER,
    AuthPolicy,
    call_identity,
    principal_var,
    readers_var,
)
from groundwire.api.errors import STATUS_CODES, to_rpc_status
from groundwire.api.snapshot import SnapshotHolder
from groundwire.domain.admission import Admission
from groundwire.domain.auth import Principal
from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.instruments import ADMISSION_REJECTIONS, RPC_DURATION
from groundwire.providers.embeddings.usage import metered
from groundwire.stores import request_scope
from groundwire.stores.usage import UsageRecorder

log = logging.getLogger("groundwire.access")
error_log = logging.getLogger("groundwire.errors")

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
# The surface a call came in on ("grpc"; api/http/ sets "connect_rpc" or "openai_http"):
# the metrics' rpc.system and the access log's transport.
transport_var: contextvars.ContextVar[str] = contextvars.ContextVar("rpc_transport", default="grpc")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


class _Malformed:
    """Sentinel request for bytes protobuf could not decode."""


_MALFORMED = _Malformed()
# What another transport (api/http/) hands the interceptor for a body it could not
# decode: the same refusal, after the same authentication, as undecodable gRPC bytes.
UNDECODABLE: Any = _MALFORMED

MALFORMED = GroundwireError(
    ErrorKind.INVALID_ARGUMENT, "MALFORMED_REQUEST", "the request message could not be decoded"
)
INTERNAL = GroundwireError(ErrorKind.INTERNAL, "INTERNAL", "internal error; see server logs")


def _safe_deserializer(inner: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if inner is None:
        return None

    def deserialize(data: bytes) -> Any:
        try:
            return inner(data)
        except (DecodeError, ValueError, UnicodeDecodeError):
            return _MALFORMED

    return deserialize


def _request_id(metadata: tuple[tuple[str, str | bytes], ...] | None) -> str:
    for key, value in metadata or ():
        if key == "x-request-id" and isinstance(value, str) and _REQUEST_ID.match(value):
            return value
    return uuid.uuid4().hex


def _log_unexpected(exc: BaseException, method: str) -> None:
    frames = "".join(traceback.format_tb(exc.__traceback__))
    error_log.error(
        "unhandled exception",
        extra={"method": method, "exception_type": type(exc).__name__, "frames": frames},
    )


class ServiceInterceptor(grpc.aio.ServerInterceptor):
    """See module docstring."""

    def __init__(
        self,
        auth: AuthPolicy | None = None,
        admission: Admission | None = None,
        snapshots: SnapshotHolder | None = None,
        usage: UsageRecorder | None = None,
    ) -> None:
        self._auth = auth or AuthPolicy(keys=None)
        self._admission = admission
        # With live reconfiguration, keys and limits come from the call's snapshot.
        self._snapshots = snapshots
        self._usage = usage

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        metadata = handler_call_details.invocation_metadata
        deserializer = _safe_deserializer(handler.request_deserializer)
        if handler.unary_unary is not None:
            inner_uu: Any = handler.unary_unary

            async def unary_unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
                async with self._scope(method, metadata, request, context):
                    return await inner_uu(request, context)

            return grpc.unary_unary_rpc_method_handler(
                unary_unary,
                request_deserializer=deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None and not inspect.isasyncgenfunction(
            handler.unary_stream
        ):
            # A stream written with context.write() (grpc.health.v1 Watch), not yielded.
            inner_uw: Any = handler.unary_stream

            async def unary_stream_writer(
                request: Any, context: grpc.aio.ServicerContext[Any, Any]
            ) -> None:
                async with self._scope(method, metadata, request, context):
                    await inner_uw(request, context)

            return grpc.unary_stream_rpc_method_handler(
                unary_stream_writer,
                request_deserializer=deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            inner_us: Any = handler.unary_stream

            async def unary_stream(
                request: Any, context: grpc.aio.ServicerContext[Any, Any]
            ) -> AsyncIterator[Any]:
                async with self._scope(method, metadata, request, context):
                    async for item in inner_us(request, context):
                        yield item

            return grpc.unary_stream_rpc_method_handler(
                unary_stream,
                request_deserializer=deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_unary is not None:
            inner_su: Any = handler.stream_unary

            async def stream_unary(
                requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]
            ) -> Any:
                # Admission keys on the key's tenant (no request is read yet).
                async with self._scope(method, metadata, None, context):
                    return await inner_su(_decoded(requests), context)

            return grpc.stream_unary_rpc_method_handler(
                stream_unary,
                request_deserializer=deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_stream is not None:
            inner_ss: Any = handler.stream_stream

            async def stream_stream(
                requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]
            ) -> AsyncIterator[Any]:
                # Admission keys on the key's tenant (no request is read yet).
                async with self._scope(method, metadata, None, context):
                    async for item in inner_ss(_decoded(requests), context):
                        yield item

            return grpc.stream_stream_rpc_method_handler(
                stream_stream,
                request_deserializer=deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler

    @contextlib.asynccontextmanager
    async def _scope(
        self,
        method: str,
        metadata: tuple[tuple[str, str | bytes], ...] | None,
        request: Any,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[None]:
        """Everything an RPC of either shape gets: request id, authentication,
        decoding check, admission, deadline, error mapping and the access log."""
        rid = _request_id(metadata)
        token = request_id_var.set(rid)
        started = time.perf_counter()
        code = grpc.StatusCode.OK
        # Who called and why a call was refused, for the access log.
        principal: Principal | None = None
        refusal = ""
        try:
            # One configuration snapshot for the whole call (api/snapshot.py).
            with self._live() as (auth, admission):
                context.set_trailing_metadata((("x-request-id", rid),))
                # An identity provider's token may need its issuer's keys fetched.
                await auth.prepare(_authorization(metadata))
                try:
                    principal = auth.authorize(method, _authorization(metadata))
                except GroundwireError:
                    # A caller refused for a permission is still named in the access log.
                    if auth.enabled:
                        with contextlib.suppress(GroundwireError):
                            principal = auth.authenticate(_authorization(metadata))
                    raise
                principal, readers = call_identity(principal, _principals_header(metadata))
                principal_var.set(principal)
                readers_var.set(readers)
                if request is _MALFORMED:
                    raise MALFORMED
                # The tenant the call is admitted, metered and queued as (read once).
                tenant = admission_tenant(principal, request)
                with (
                    self._admit(method, tenant, admission),
                    self._metered(tenant),
                    # The tenant and deadline the store's fair queues and statement
                    # timeouts see (stores/request_scope.py).
                    request_scope.bind(tenant, context.time_remaining()),
                ):
                    async with _deadline(context):
                        yield
        except GroundwireError as err:
            code = STATUS_CODES[err.kind]
            refusal = err.reason
            await _abort(context, err, rid)
        except asyncio.CancelledError:
            # gRPC cancels the handler when the caller's deadline passes or it goes
            # away: the access log says which, not the OK it was initialised with.
            left = context.time_remaining()
            # (the cancellation can land a hair before the deadline by our clock)
            expired = left is not None and left < 0.1
            code = grpc.StatusCode.DEADLINE_EXCEEDED if expired else grpc.StatusCode.CANCELLED
            raise
        except Exception as exc:
            if _is_abort(exc):
                code = grpc.StatusCode.UNKNOWN
                raise
            code = grpc.StatusCode.INTERNAL
            refusal = INTERNAL.reason
            _log_unexpected(exc, method)
            await _abort(context, INTERNAL, rid)
        finally:
            _access(method, code, started, rid, principal, request, refusal)
            request_id_var.reset(token)

    @contextlib.contextmanager
    def _metered(self, tenant: str) -> Iterator[None]:
        """Meter the call's embedding usage and add it to its tenant's totals."""
        if self._usage is None:
            yield
            return
        with metered() as meter:
            try:
                yield
            finally:
                by_task = meter.by_task
                if by_task:  # (a lexical Retrieve embeds nothing)
                    self._usage.record(tenant, by_task)

    @contextlib.contextmanager
    def _admit(self, method: str, tenant: str, admission: Admission | None) -> Iterator[None]:
        """Hold one admission slot of the method's family for the call's lifetime."""
        family = family_of(method)
        if admission is None or family is None:
            yield
            return
        rejection = admission.try_acquire(family, tenant)
        if rejection is not None:
            ADMISSION_REJECTIONS.add(1, {"family": family.value, "reason": rejection.refusal.value})
            raise refused(rejection)
        try:
            yield
        finally:
            admission.release(family, tenant)

    @contextlib.contextmanager
    def _live(self) -> Iterator[tuple[AuthPolicy, Admission | None]]:
        """The keys and limits of this call: its snapshot's, when reloadable."""
        if self._snapshots is None:
            yield self._auth, self._admission
            return
        with self._snapshots.enter() as snapshot:
            yield snapshot.auth, snapshot.admission


async def _decoded(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """A request stream whose undecodable messages fail like a unary one's."""
    async for request in requests:
        if request is _MALFORMED:
            raise MALFORMED
        yield request


def _principals_header(metadata: tuple[tuple[str, str | bytes], ...] | None) -> str | None:
    for key, value in metadata or ():
        if key == PRINCIPALS_HEADER and isinstance(value, str):
            return value
    return None


def _authorization(metadata: tuple[tuple[str, str | bytes], ...] | None) -> str | None:
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str):
            return value
    return None


@contextlib.asynccontextmanager
async def _deadline(context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[None]:
    """Propagate the caller's deadline into the handler: every await below (the
    database, embedding, reranking and model calls) is cancelled when it passes."""
    remaining = context.time_remaining()
    if remaining is None:
        yield
        return
    try:
        async with asyncio.timeout(max(0.0, remaining)):
            yield
    except TimeoutError:
        raise GroundwireError(
            ErrorKind.DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED", "the call's deadline passed"
        ) from None


def _is_abort(exc: BaseException) -> bool:
    # grpc.aio signals context.abort() by raising AbortError; let it through.
    return type(exc).__name__ == "AbortError"


async def _abort(
    context: grpc.aio.ServicerContext[Any, Any], err: GroundwireError, rid: str
) -> None:
    status = to_rpc_status(err)
    trailing = (*status.trailing_metadata, ("x-request-id", rid))
    await context.abort(status.code, status.details, trailing)


def _record_rpc(method: str, code: grpc.StatusCode, seconds: float) -> None:
    service, _, name = method.lstrip("/").partition("/")
    RPC_DURATION.record(
        seconds,
        {
            "rpc.system": transport_var.get(),
            "rpc.service": service,
            "rpc.method": name,
            "rpc.grpc.status_code": code.value[0],
        },
    )


def _access(
    method: str,
    code: grpc.StatusCode,
    started: float,
    rid: str,
    principal: Principal | None = None,
    request: Any = None,
    reason: str = "",
) -> None:
    # The tenant goes to the log line only, never to a metric label.
    _record_rpc(method, code, time.perf_counter() - started)
    # The fingerprint of the retrieval profile the call reported, never its
    # parts (api/convert.py note_profile; issue 30).
    from groundwire.api.convert import take_profile_fingerprint

    profile = take_profile_fingerprint()
    if not log.isEnabledFor(logging.INFO):
        # The line would be dropped: skip building it (every call passes here).
        return
    log.info(
        "rpc",
        extra={
            "method": method,
            "code": code.name,
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
            "request_id": rid,
            "transport": transport_var.get(),
            # The key's id (never the key), or a token's issuer and subject hash
            # (never the token or the subject), and the tenant the call ran as.
            "key_id": principal.key_id if principal is not None else None,
            "tenant": admission_tenant(principal, request),
            **({"reason": reason} if reason else {}),
            **({"profile": profile} if profile else {}),
        },
    )
