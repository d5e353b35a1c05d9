"""The threaded loopback HTTP harness every stand-in server shares: binds
127.0.0.1 on an ephemeral port, records every request, runs as a context manager,
and stops promptly even while a handler is sleeping (handlers wait on
`_stopping`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

__all__ = ["LoopbackStandIn", "RecordedRequest"]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as a stand-in received it."""

    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any


class LoopbackStandIn:
    """Subclasses return their request handler class from `_handler`; `url_prefix`
    is what `base_url` adds after the host and port (e.g. "/v1")."""

    url_prefix = ""

    def __init__(self) -> None:
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

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
        server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
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
