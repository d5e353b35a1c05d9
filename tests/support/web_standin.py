"""A loopback web server for `url` sources: GET routes that answer pages with
validators (ETag/Last-Modified, honouring If-None-Match/If-Modified-Since),
redirects, slow or oversized bodies, and a record of every request (path and
lower-cased headers). Binds 127.0.0.1 on an ephemeral port; HTTP/1.0, so no
keep-alive thread outlives a test."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

__all__ = ["Page", "WebStandIn"]


@dataclass
class Page:
    """One route's answer. `etag`/`last_modified` make it conditional-aware."""

    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    etag: str = ""
    last_modified: str = ""
    location: str = ""  # for 3xx
    delay: float = 0.0  # seconds before the body
    headers: dict[str, str] = field(default_factory=dict)
    send_length: bool = True


class WebStandIn:
    """With `tls` (a server-side SSLContext) it speaks HTTPS and records the SNI
    name each client sent in `sni_names`."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.tls = tls
        self.sni_names: list[str | None] = []
        self.pages: dict[str, Page | Callable[[WebStandIn], Page]] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{host}:{self.port}{path}"

    def hits(self, path: str) -> list[dict[str, str]]:
        with self._lock:
            return [h for p, h in self.requests if p == path]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_GET(self) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                with standin._lock:
                    standin.requests.append((self.path, headers))
                route = standin.pages.get(self.path.split("?", 1)[0])
                page = route(standin) if callable(route) else route
                if page is None:
                    page = Page(b"not found", "text/plain", 404)
                status = page.status
                if status == 200 and (
                    (page.etag and headers.get("if-none-match") == page.etag)
                    or (
                        page.last_modified
                        and headers.get("if-modified-since") == page.last_modified
                    )
                ):
                    status = 304
                try:
                    self.send_response(status)
                    if status != 304:
                        self.send_header("Content-Type", page.content_type)
                    if page.etag:
                        self.send_header("ETag", page.etag)
                    if page.last_modified:
                        self.send_header("Last-Modified", page.last_modified)
                    if page.location:
                        self.send_header("Location", page.location)
                    for k, v in page.headers.items():
                        self.send_header(k, v)
                    if page.send_length and status != 304:
                        self.send_header("Content-Length", str(len(page.body)))
                    self.end_headers()
                    if page.delay and standin._stopping.wait(page.delay):
                        return
                    if status != 304:
                        self.wfile.write(page.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                return None

        return Handler

    def start(self) -> Self:
        server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        server.daemon_threads = True
        server.block_on_close = False
        if self.tls is not None:

            def remember(sock: ssl.SSLObject | ssl.SSLSocket, name: str | None, _: object) -> None:
                self.sni_names.append(name)

            self.tls.sni_callback = remember
            server.socket = self.tls.wrap_socket(server.socket, server_side=True)
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
