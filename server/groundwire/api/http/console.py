"""The web console's static files at /console on the HTTP port.

The built single-page app (console/, built by scripts/build_console.sh into
console_assets/ beside this module and shipped as package data) is read into
memory once: a request path only ever selects one of those files by exact
name, so no request can reach the file system, and `..`, encoded slashes or
symlinks lead nowhere. Paths that name no file and look like a route (no file
extension, not under assets/) get index.html, so /console/search reloads.

The files need no API key (they hold no data); every call the console makes
is a Connect call that carries the key from its field like any other client.
Responses carry a Content-Security-Policy that allows only the console's own
origin, so the page loads nothing and talks to nothing else, but for the token
endpoints of the identity providers it signs in with (api/http/sign_in.py).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from groundwire.api.http.asgi import Headers, Receive, Scope, Send, header, respond

log = logging.getLogger("groundwire.http")

PATH = "/console"
ASSETS_DIR = Path(__file__).parent / "console_assets"
INDEX = "index.html"
# Bounds on what is loaded: the build is ~200 KB in a handful of files.
MAX_FILES = 256
MAX_TOTAL_BYTES = 16 * 1024 * 1024

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'"
)


def content_security_policy(connect_origins: Sequence[str] = ()) -> str:
    """The policy, its connect-src widened to exactly `connect_origins` (origins
    only: scheme://host[:port], checked by api/http/sign_in.py)."""
    if not connect_origins:
        return CONTENT_SECURITY_POLICY
    extra = " ".join(connect_origins)
    return CONTENT_SECURITY_POLICY.replace("connect-src 'self'", f"connect-src 'self' {extra}")


# Fixed, not the platform's mimetypes table (which varies with /etc/mime.types).
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".json": "application/json",
    ".txt": "text/plain; charset=utf-8",
    ".woff2": "font/woff2",
}
# Vite names everything under assets/ by content hash: such a name never
# changes meaning, so browsers may keep it. index.html is revalidated (ETag).
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
SHORT = "public, max-age=3600"


@dataclass(frozen=True, slots=True)
class StaticFile:
    body: bytes
    content_type: str
    cache_control: str
    etag: str


def load_assets(root: Path) -> dict[str, StaticFile]:
    """Every regular file under `root` by its POSIX path relative to it."""
    files: dict[str, StaticFile] = {}
    total = 0
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        body = path.read_bytes()
        total += len(body)
        if len(files) >= MAX_FILES or total > MAX_TOTAL_BYTES:
            raise ValueError("the console assets passed their size bound")
        if rel == INDEX:
            cache = REVALIDATE
        elif rel.startswith("assets/"):
            cache = IMMUTABLE
        else:
            cache = SHORT
        files[rel] = StaticFile(
            body=body,
            content_type=CONTENT_TYPES.get(path.suffix.lower(), "application/octet-stream"),
            cache_control=cache,
            etag='"' + hashlib.sha256(body).hexdigest()[:32] + '"',
        )
    return files


class ConsoleApp:
    """ASGI app serving the console's files under PATH (GET and HEAD)."""

    def __init__(
        self,
        files: dict[str, StaticFile],
        connect_origins: Callable[[], Sequence[str]] = lambda: (),
    ) -> None:
        if INDEX not in files:
            raise ValueError("the console assets have no index.html")
        self._files = files
        self._connect_origins = connect_origins

    @classmethod
    def from_package(
        cls, connect_origins: Callable[[], Sequence[str]] = lambda: ()
    ) -> ConsoleApp | None:
        """The console built into the package, None (logged) when it is missing."""
        try:
            return cls(load_assets(ASSETS_DIR), connect_origins)
        except (OSError, ValueError):
            log.warning("console assets missing: /console is not served")
            return None

    def resolve(self, path: str) -> tuple[int, StaticFile | None]:
        """(status, file) for a request path under PATH."""
        rel = path[len(PATH) :].lstrip("/")
        found = self._files.get(rel)
        if found is not None:
            return 200, found
        segments = rel.split("/")
        if (
            rel.startswith("assets/")
            or "." in segments[-1]  # a file name that is not there
            or any(s in ("..", ".") for s in segments)
            or any(c in rel for c in "\\%\x00")  # no route has them
        ):
            return 404, None
        return 200, self._files[INDEX]  # a client-side route: the app decides

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope.get("method", "GET")
        base: Headers = [
            (
                b"content-security-policy",
                content_security_policy(self._connect_origins()).encode(),
            ),
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"no-referrer"),
        ]
        if method not in ("GET", "HEAD"):
            await respond(
                send,
                405,
                [*base, (b"allow", b"GET, HEAD"), (b"content-type", b"text/plain; charset=utf-8")],
                b"method not allowed\n",
            )
            return
        status, found = self.resolve(scope["path"])
        if found is None:
            await respond(
                send,
                404,
                [
                    *base,
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"cache-control", b"no-cache"),
                ],
                b"not found\n",
            )
            return
        headers: Headers = [
            *base,
            (b"content-type", found.content_type.encode()),
            (b"cache-control", found.cache_control.encode()),
            (b"etag", found.etag.encode()),
        ]
        if header(scope, b"if-none-match") == found.etag:
            await send({"type": "http.response.start", "status": 304, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        body = b"" if method == "HEAD" else found.body
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [*headers, (b"content-length", str(len(found.body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})
