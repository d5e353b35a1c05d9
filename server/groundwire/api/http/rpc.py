"""The bridge from HTTP to the gRPC contract: every HTTP surface calls an RPC
here, through the very handlers the gRPC server registered and the very
interceptor that wraps them there (api/interceptors.py), so authentication,
permissions, the tenant, admission, the configuration snapshot, deadlines,
error mapping, the access log and the RPC metrics are the gRPC port's, not a
copy of them.

`Procedures` collects the generated `add_*_to_server` registrations into a map
from full method name to handler; `RpcCall` is the grpc.aio.ServicerContext the
interceptor and servicers see, and `RpcAborted` is how an aborted call comes
back: its gRPC status code, message and trailing metadata (with the
google.rpc.Status details).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import grpc
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2

from groundwire.api.errors import ERROR_DOMAIN
from groundwire.api.http.asgi import BodyTooLarge, Receive, read_body
from groundwire.api.interceptors import ServiceInterceptor, transport_var
from groundwire.api.server import ServiceRegistration
from groundwire.api.tokens import Issuer
from groundwire.domain.auth import Principal
from groundwire.domain.errors import GroundwireError

access_log = logging.getLogger("groundwire.access")


class AbortError(Exception):
    """Raised by `RpcCall.abort`. Named like grpc.aio's own abort exception, which
    the interceptor lets through unchanged (it recognises it by name)."""

    def __init__(self, code: grpc.StatusCode, details: str, trailing: Sequence[tuple[str, Any]]):
        super().__init__(code.name)
        self.code = code
        self.details = details
        self.trailing = tuple(trailing)


class RpcAborted(Exception):
    """A call that ended with a non-OK status."""

    def __init__(self, code: grpc.StatusCode, message: str, status: status_pb2.Status | None):
        super().__init__(code.name)
        self.code = code
        self.message = message
        # The google.rpc.Status of the `grpc-status-details-bin` trailer (ErrorInfo, ...).
        self.status = status

    @property
    def reason(self) -> str:
        """The stable ErrorInfo reason of the status, else the code's name."""
        if self.status is not None:
            for detail in self.status.details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return str(info.reason)
        return self.code.name


class RpcCall:
    """The grpc.aio.ServicerContext of one HTTP call: only what the interceptor
    and the servicers use (initial and trailing metadata, the deadline, done,
    abort)."""

    def __init__(
        self,
        metadata: tuple[tuple[str, str], ...],
        timeout_s: float | None,
        transport: str = "connect_rpc",
    ) -> None:
        self._metadata = metadata
        # The metrics' rpc.system and the access log's transport for this call.
        self.transport = transport
        self._deadline = None if timeout_s is None else time.monotonic() + timeout_s
        self.trailing: tuple[tuple[str, Any], ...] = ()
        # Told of the initial metadata a servicer sends before its answer (a
        # push's operation id: the dashboard's streamed upload answer).
        self.on_initial_metadata: Callable[[Sequence[tuple[str, Any]]], Awaitable[None]] | None = (
            None
        )

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def set_trailing_metadata(self, metadata: Sequence[tuple[str, Any]]) -> None:
        self.trailing = tuple(metadata)

    async def send_initial_metadata(self, metadata: Sequence[tuple[str, Any]]) -> None:
        # An HTTP answer's headers go out with it: they join its trailers.
        self.trailing = (*self.trailing, *metadata)
        if self.on_initial_metadata is not None:
            await self.on_initial_metadata(metadata)

    def time_remaining(self) -> float | None:
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - time.monotonic())

    def done(self) -> bool:
        """Whether the call is over for its caller. A client that disconnects
        cancels the handler's task (asgi.CancelOnDisconnect), so code that runs is
        serving a live call; its deadline is `time_remaining`."""
        return False

    async def abort(
        self, code: grpc.StatusCode, details: str = "", trailing_metadata: Sequence[Any] = ()
    ) -> None:
        self.trailing = (*self.trailing, *trailing_metadata)
        raise AbortError(code, details, trailing_metadata)

    def text_trailers(self) -> list[tuple[str, str]]:
        """The trailing metadata an HTTP answer carries as text (the request id);
        `-bin` entries travel in the protocol's own status fields."""
        return [(k, v) for k, v in self.trailing if isinstance(v, str) and not k.endswith("-bin")]

    def request_id(self) -> str | None:
        for key, value in self.trailing:
            if key == "x-request-id" and isinstance(value, str):
                return value
        return None


def aborted(err: AbortError) -> RpcAborted:
    """The status of an aborted call, with its rich details parsed."""
    status = None
    for key, value in err.trailing:
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            status = status_pb2.Status.FromString(value)
    return RpcAborted(err.code, err.details, status)


# The contract has no client streams (Connect over HTTP/1.1 could not carry them);
# health Watch writes with context.write(), which a request/response exchange has
# no use for (Check answers the same question).
_NOT_ON_HTTP = frozenset({"/grpc.health.v1.Health/Watch"})


class _Details(NamedTuple):
    method: str
    invocation_metadata: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Procedure:
    """One RPC as the HTTP surfaces see it."""

    method: str  # "/groundwire.v1.RetrieverService/Retrieve"
    input_type: type[Message]
    output_type: type[Message]
    server_streaming: bool
    handler: grpc.RpcMethodHandler[Any, Any]


class _Capture:
    """Stands in for the grpc.aio.Server the generated `add_*_to_server` call
    registers on, keeping the method handlers it builds."""

    def __init__(self) -> None:
        self.handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}

    def add_generic_rpc_handlers(self, handlers: Sequence[object]) -> None:
        del handlers  # the per-method handlers below are the same ones

    def add_registered_method_handlers(
        self, service: str, handlers: Mapping[str, grpc.RpcMethodHandler[Any, Any]]
    ) -> None:
        for name, handler in handlers.items():
            self.handlers[f"/{service}/{name}"] = handler


class Procedures:
    """Every RPC of the registered services, callable through the interceptor."""

    def __init__(
        self, registrations: Sequence[ServiceRegistration], interceptor: ServiceInterceptor
    ) -> None:
        capture = _Capture()
        for registration in registrations:
            registration.register(capture)  # type: ignore[arg-type]
        pool = descriptor_pool.Default()
        self._interceptor = interceptor
        self._procedures: dict[str, Procedure] = {}
        for method, handler in capture.handlers.items():
            service, _, name = method.lstrip("/").partition("/")
            desc = pool.FindServiceByName(service).methods_by_name[name]
            if desc.client_streaming or method in _NOT_ON_HTTP:
                continue
            self._procedures[method] = Procedure(
                method=method,
                input_type=message_factory.GetMessageClass(desc.input_type),
                output_type=message_factory.GetMessageClass(desc.output_type),
                server_streaming=desc.server_streaming,
                handler=handler,
            )

    def get(self, method: str) -> Procedure | None:
        return self._procedures.get(method)

    def token_issuers(self) -> Sequence[Issuer]:
        """The identity providers the current snapshot accepts tokens from."""
        with self._interceptor._live() as (auth, _):
            return [] if auth.tokens is None else auth.tokens.issuers

    async def prepare(self, metadata: Sequence[tuple[str, str]]) -> None:
        """Fetch the signing keys an identity provider's token needs (bounded,
        api/jwks.py) before `authenticate` checks it."""
        authorization = next((v for k, v in metadata if k == "authorization"), None)
        with self._interceptor._live() as (auth, _):
            await auth.prepare(authorization)

    def authenticate(self, metadata: Sequence[tuple[str, str]]) -> Principal | None:
        """The request's key as the current snapshot knows it (None when
        authentication is off); raises UNAUTHENTICATED for a missing or unknown
        key. Grants nothing by itself: every RPC still authorizes its own call."""
        authorization = next((v for k, v in metadata if k == "authorization"), None)
        with self._interceptor._live() as (auth, _):
            if not auth.enabled:
                return None
            return auth.authenticate(authorization)

    def identify(self, metadata: Sequence[tuple[str, str]]) -> Principal | None:
        """The key of a request refused before any RPC ran (None when absent,
        unknown or authentication is off): for the access log only."""
        try:
            return self.authenticate(metadata)
        except GroundwireError:
            return None

    def refused(
        self,
        route: str,
        err: RpcAborted,
        metadata: Sequence[tuple[str, str]],
        transport: str,
        status: int | None = None,
    ) -> None:
        """The access log line of an HTTP request refused before any RPC ran
        (oversized or undecodable body, media type, origin, missing key): its
        route (a constant, or a contract method), the key's id and tenant when
        the key is valid, and the refusal's reason. Never the key or the body.
        (Calls that reach an RPC are logged once, by the interceptor.)"""
        principal = self.identify(metadata)
        access_log.info(
            "refused",
            extra={
                "method": route,
                "code": err.code.name,
                "http_status": status,
                "transport": transport,
                "key_id": principal.key_id if principal is not None else None,
                "tenant": principal.tenant if principal is not None else "",
                "reason": err.reason,
            },
        )

    def methods(self) -> list[str]:
        return sorted(self._procedures)

    async def _intercepted(
        self, procedure: Procedure, call: RpcCall
    ) -> grpc.RpcMethodHandler[Any, Any]:
        async def continuation(_: object) -> grpc.RpcMethodHandler[Any, Any]:
            return procedure.handler

        # Each ASGI request runs in a task of its own: the value ends with it.
        transport_var.set(call.transport)
        details: Any = _Details(procedure.method, call.invocation_metadata())
        handler = await self._interceptor.intercept_service(continuation, details)
        assert handler is not None
        return handler

    async def unary(self, procedure: Procedure, request: Any, call: RpcCall) -> Message:
        """Run a unary RPC; raises RpcAborted."""
        handler = await self._intercepted(procedure, call)
        try:
            response: Message = await handler.unary_unary(request, call)  # type: ignore[misc,arg-type]
        except AbortError as err:
            raise aborted(err) from None
        return response

    async def stream(
        self, procedure: Procedure, request: Any, call: RpcCall
    ) -> AsyncIterator[Message]:
        """Run a server-streaming RPC; raises RpcAborted when it ends in error."""
        handler = await self._intercepted(procedure, call)
        stream: Any = handler.unary_stream(request, call)  # type: ignore[misc,arg-type]
        try:
            async for item in stream:
                yield item
        except AbortError as err:
            raise aborted(err) from None
        finally:
            await stream.aclose()


def transport_error(code: grpc.StatusCode, reason: str, message: str) -> RpcAborted:
    """An error of the HTTP surface itself (before any RPC runs), with the same
    ErrorInfo shape as the contract's errors."""
    info = error_details_pb2.ErrorInfo(reason=reason, domain=ERROR_DOMAIN)
    status = status_pb2.Status(code=getattr(code_pb2, code.name), message=message)
    status.details.add().Pack(info)
    return RpcAborted(code, message, status)


async def request_body(receive: Receive, limit: int) -> bytes:
    """The request body, refused past `limit` bytes as the gRPC port refuses an
    oversized message (RESOURCE_EXHAUSTED, MESSAGE_TOO_LARGE)."""
    try:
        return await read_body(receive, limit)
    except BodyTooLarge:
        raise transport_error(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "MESSAGE_TOO_LARGE",
            "the request is larger than the server's message size bound",
        ) from None


def not_found() -> RpcAborted:
    return transport_error(
        grpc.StatusCode.UNIMPLEMENTED, "METHOD_NOT_FOUND", "no RPC has that path"
    )


def metadata_of(scope: MutableMapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The gRPC metadata of an HTTP request: its headers, less the transport's own
    (content, Connect and gRPC-Web framing headers, host)."""
    out = []
    for key, value in scope["headers"]:
        name = bytes(key).decode("latin-1").lower()
        if name.startswith(("connect-", "content-", "grpc-")) or name in (
            "host",
            "accept-encoding",
        ):
            continue
        out.append((name, bytes(value).decode("latin-1")))
    return tuple(out)
