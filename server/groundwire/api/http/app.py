"""The one place the HTTP port's ASGI app is assembled.

`HttpRoutes` maps exact paths and path prefixes to ASGI apps; the Connect
protocol serves one prefix per service (`/groundwire.v1.AgentService/...`),
the OpenAI facade `/v1/...`. Other surfaces mount theirs the same way
(`routes.mount("/mcp", app)`, `routes.mount("/console", app)`) before the
server starts. CORS, when configured, wraps the whole app.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp

from groundwire.api.auth import PRINCIPALS_HEADER
from groundwire.api.http.asgi import Receive, Scope, Send, respond
from groundwire.api.http.connect import ConnectApp, error_json
from groundwire.api.http.dashboard_upload import UploadBounds
from groundwire.api.http.openai_chat import OpenAIChatApp
from groundwire.api.http.openai_embeddings import EmbedderLookup, OpenAIEmbeddingsApp
from groundwire.api.http.rpc import Procedures, not_found
from groundwire.api.mcp.tools import ToolLimits

# What a browser may send and read (Connect's and ours; the key is a header,
# never a cookie, so credentials mode stays off).
CORS_ALLOW_HEADERS = (
    "authorization",
    "content-type",
    "connect-protocol-version",
    "connect-timeout-ms",
    "x-request-id",
    PRINCIPALS_HEADER,
    "x-user-agent",
    "x-grpc-web",
    "grpc-timeout",
)
CORS_EXPOSE_HEADERS = ("trailer-x-request-id", "x-request-id", "grpc-status", "grpc-message")


class HttpRoutes:
    """Path -> ASGI app: exact routes first, then the longest mounted prefix."""

    def __init__(self) -> None:
        self._exact: dict[str, ASGIApp] = {}
        self._prefixes: list[tuple[str, ASGIApp]] = []

    def route(self, path: str, app: ASGIApp) -> None:
        """Serve exactly `path`."""
        if path in self._exact:
            raise ValueError(f"the HTTP path {path} is already routed")
        self._exact[path] = app

    def mount(self, prefix: str, app: ASGIApp) -> None:
        """Serve `prefix` and every path under `prefix/` (the app sees the full path)."""
        prefix = prefix.rstrip("/")
        if any(p == prefix for p, _ in self._prefixes):
            raise ValueError(f"the HTTP prefix {prefix} is already mounted")
        self._prefixes.append((prefix, app))
        self._prefixes.sort(key=lambda item: len(item[0]), reverse=True)

    def resolve(self, path: str) -> ASGIApp | None:
        app = self._exact.get(path)
        if app is not None:
            return app
        for prefix, mounted in self._prefixes:
            if path == prefix or path.startswith(prefix + "/"):
                return mounted
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # no lifespan or websocket handling: the app is started by lifecycle
        app = self.resolve(scope["path"])
        if app is None:
            err = not_found()
            body = error_json(err.code, "no route has that path", err.status)
            await respond(send, 404, [(b"content-type", b"application/json")], body)
            return
        await app(scope, receive, send)


class HttpApp:
    """The routes plus the middleware around them: `routes` to mount more,
    `asgi` to serve."""

    def __init__(self, routes: HttpRoutes, cors_origins: Sequence[str], cors_max_age: int) -> None:
        self.routes = routes
        # (start, stop) of what a mounted surface runs beside its requests (the
        # MCP session manager): started before the port accepts, stopped after.
        self.lifecycle: list[
            tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]
        ] = []
        self.asgi: ASGIApp = routes
        if cors_origins:
            self.asgi = CORSMiddleware(
                routes,
                allow_origins=list(cors_origins),
                allow_methods=["GET", "POST", "OPTIONS"],
                allow_headers=list(CORS_ALLOW_HEADERS),
                expose_headers=list(CORS_EXPOSE_HEADERS),
                allow_credentials=False,
                max_age=cors_max_age,
            )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.asgi(scope, receive, send)


def build_http_app(
    procedures: Procedures,
    *,
    max_message_bytes: int,
    cors_origins: Sequence[str] = (),
    cors_max_age: int = 600,
    mcp_limits: Callable[[], ToolLimits] | None = None,
    version: str = "",
    console: bool = False,
    embedders: EmbedderLookup | None = None,
    dashboard: bool = False,
    uploads: UploadBounds | None = None,
) -> HttpApp:
    """The HTTP port's app: Connect for every service, the OpenAI facade, and
    with `mcp_limits` (the current retrieval limits, for the tools' input
    schemas) MCP over streamable HTTP at /mcp, and with `console` the web
    console's static files at /console. `embedders` finds an index's embedder
    for /v1/embeddings (without it, every model is unknown there). With
    `dashboard`, the dashboard management REST API at /api/rag (its file
    uploads bounded by `uploads`: by default 64 MiB, whatever the index)."""
    routes = HttpRoutes()
    connect = ConnectApp(procedures, max_message_bytes)
    for service in sorted({m.lstrip("/").partition("/")[0] for m in procedures.methods()}):
        routes.mount(f"/{service}", connect)
    openai = OpenAIChatApp(procedures, max_message_bytes)
    routes.route("/v1/chat/completions", openai.chat_completions)
    routes.route("/v1/models", openai.list_models)
    routes.mount("/v1/models", openai.get_model)
    routes.route(
        "/v1/embeddings",
        OpenAIEmbeddingsApp(procedures, max_message_bytes, embedders or (lambda _: None)),
    )
    if dashboard:
        from groundwire.api.http.dashboard import PATH as DASHBOARD_PATH
        from groundwire.api.http.dashboard import DashboardApp

        routes.mount(DASHBOARD_PATH, DashboardApp(procedures, max_message_bytes, uploads))
    app = HttpApp(routes, cors_origins, cors_max_age)
    if mcp_limits is not None:
        from groundwire.api.http.mcp import PATH, McpHttpApp

        mcp = McpHttpApp(
            procedures,
            mcp_limits,
            max_message_bytes=max_message_bytes,
            allowed_origins=cors_origins,
            version=version,
        )
        routes.mount(PATH, mcp)
        app.lifecycle.append((mcp.start, mcp.stop))
    if console:
        from groundwire.api.http.console import PATH as CONSOLE_PATH
        from groundwire.api.http.console import ConsoleApp
        from groundwire.api.http.sign_in import PATH as SIGN_IN_PATH
        from groundwire.api.http.sign_in import SignInApp

        sign_in = SignInApp(procedures)
        console_app = ConsoleApp.from_package(sign_in.connect_origins)
        if console_app is not None:
            routes.mount(CONSOLE_PATH, console_app)
            routes.route(SIGN_IN_PATH, sign_in)
    return app
