"""Runs the HTTP port's ASGI app with uvicorn inside the server's event loop.

The socket is bound here (so port 0 works and a taken port fails start-up with
an OSError, not uvicorn's process exit) and uvicorn's own signal handling is
bypassed: the process's SIGTERM/SIGINT/SIGHUP handling stays app/cli.py's.
TLS, when the gRPC port has it, uses the same certificate, key and client CA
(read when the HTTP port starts; a restart picks up renewed files)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from groundwire.api.http.app import HttpApp

log = logging.getLogger("groundwire.http")
KEEP_ALIVE_SECONDS = 65


@dataclass(frozen=True, slots=True)
class HttpTls:
    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None


class HttpServer:
    """One listening HTTP port."""

    def __init__(self, app: HttpApp, host: str, port: int, tls: HttpTls | None = None) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit it: without it, a response's body (written
        # after its headers) waits for the client's delayed ACK, 40 ms per call
        # on a kept-alive connection.
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self._socket.bind((host, port))
        except OSError:
            self._socket.close()
            raise
        self._socket.set_inheritable(True)
        self.app = app
        self.port: int = self._socket.getsockname()[1]
        self._config = uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            lifespan="off",
            server_header=False,
            # Longer than clients' and load balancers' idle timeouts (httpx 5 s, AWS
            # ALB 60 s), so a pooled connection is never closed under a request.
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
            ssl_certfile=str(tls.cert_file) if tls else None,
            ssl_keyfile=str(tls.key_file) if tls else None,
            ssl_ca_certs=str(tls.client_ca_file) if tls and tls.client_ca_file else None,
            ssl_cert_reqs=ssl.CERT_REQUIRED if tls and tls.client_ca_file else ssl.CERT_NONE,
        )
        self._server = uvicorn.Server(self._config)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        started = []
        try:
            for start, stop in self.app.lifecycle:
                await start()
                started.append(stop)
            self._config.load()
            self._server.lifespan = self._config.lifespan_class(self._config)
            await self._server.startup(sockets=[self._socket])
        except BaseException:
            for stop in reversed(started):
                with contextlib.suppress(Exception):
                    await stop()
            raise
        self._task = asyncio.create_task(self._server.main_loop())
        log.info("http serving", extra={"port": self.port, "tls": self._config.is_ssl})

    async def stop(self, grace: float) -> None:
        """Stop accepting, let running requests finish for up to `grace` seconds
        (streams are then cut), and close."""
        # At least a second: uvicorn's wait with no time at all reports (at ERROR)
        # a cut even when nothing runs; idle connections close at once anyway.
        self._config.timeout_graceful_shutdown = max(1, math.ceil(grace))
        self._server.should_exit = True
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            with contextlib.suppress(Exception):
                await self._server.shutdown(sockets=[self._socket])
        self._socket.close()
        for _, stop in reversed(self.app.lifecycle):
            await stop()
