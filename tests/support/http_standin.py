"""The threaded loopback HTTP harness every stand-in server shares: binds
127.0.0.1 on an ephemeral port, records every request, answers JSON, runs as a
context manager, and stops promptly even while a handler is sleeping (handlers
wait on `_stopping`, through `wait`).

A stand-in answers a POST from `respond(path, body, headers)` (body None when it
is not JSON); one that streams (chat completions) subclasses `JsonRequestHandler`
for its own `do_POST` instead."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Protocol, Self, TypeVar

__all__ = ["JsonRequestHandler", "LoopbackStandIn", "RecordedRequest"]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as a stand-in received it."""

    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any


class JsonRequestHandler(BaseHTTPRequestHandler):
    """Reads and records a JSON request, writes a JSON answer, logs nothing.

    HTTP/1.0: one request per connection, so no idle keep-alive thread outlives a
    test. `standin` is set on the subclass `LoopbackStandIn._handler` makes."""

    protocol_version = "HTTP/1.0"
    standin: LoopbackStandIn

    def read_json(self) -> tuple[dict[str, str], Any]:
        """(lower-cased headers, parsed body or None), recorded on the stand-in."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = None
        self.standin._record(RecordedRequest("POST", self.path, headers, body))
        return headers, body

    def send_json(self, status: int, payload: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            if self.close_connection and self.protocol_version != "HTTP/1.0":
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (timeout tests); nothing to deliver.
            pass

    def do_POST(self) -> None:
        headers, body = self.read_json()
        self.send_json(*self.standin.respond(self.path, body, headers))

    def do_GET(self) -> None:
        self.close_connection = True
        self.send_json(405, self.standin.method_not_allowed)

    def log_message(self, format: str, *args: Any) -> None:
        return None


class LoopbackStandIn:
    """Subclasses implement `respond` (or give `handler_class` a `do_POST` of its
    own); `url_prefix` is what `base_url` adds after the host and port (e.g.
    "/v1"); `method_not_allowed` is the body of the 405 to any GET."""

    url_prefix = ""
    handler_class: type[JsonRequestHandler] = JsonRequestHandler
    method_not_allowed = b'{"error": {"message": "method not allowed"}}'

    # Where it listens: loopback, or this namespace's address on a test network
    # (tests/support/netns.py) for servers on other network namespaces.
    bind_host = "127.0.0.1"

    def __init__(self) -> None:
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def respond(self, path: str, body: Any, headers: dict[str, str]) -> tuple[int, bytes]:
        """(status, JSON payload) for one POST; `body` is None when not JSON."""
        raise NotImplementedError

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        return type("Handler", (self.handler_class,), {"standin": self})

    def reset(self) -> None:
        """An empty request log (subclasses also restore their behaviour)."""
        with self._lock:
            self._requests.clear()

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True when the stand-in is stopping instead."""
        return self._stopping.wait(seconds)

    @property
    def base_url(self) -> str:
        """The value to give a client."""
        if self._server is None:
            raise RuntimeError("stand-in not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{self.url_prefix}"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def start(self) -> Self:
        server = ThreadingHTTPServer((self.bind_host, 0), self._handler())
        server.daemon_threads = True
        # A slow handler must not hold up stop(); it wakes on `_stopping` anyway.
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class _Closable(Protocol):
    async def aclose(self) -> None: ...


R = TypeVar("R", bound=_Closable)


@contextlib.asynccontextmanager
async def closing_clients(build: Callable[..., R]) -> AsyncIterator[Callable[..., R]]:
    """A factory over `build(**overrides)` whose clients (adapters, embedders, chat
    models) are all closed on exit."""
    created: list[R] = []

    def factory(**overrides: Any) -> R:
        adapter = build(**overrides)
        created.append(adapter)
        return adapter

    try:
        yield factory
    finally:
        for adapter in created:
            await adapter.aclose()
