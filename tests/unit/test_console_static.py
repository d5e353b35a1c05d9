"""The web console's static files (api/http/console.py) over ASGI: the built
assets from the package, content types, cache headers, ETags, the SPA fallback,
the security headers, refusals (unknown files, traversal, methods) and the
`[http] console` switch."""

from __future__ import annotations

import re
from pathlib import Path
from typing import cast

import httpx
import pytest

from groundwire.api.http.app import build_http_app
from groundwire.api.http.console import (
    ASSETS_DIR,
    CONTENT_SECURITY_POLICY,
    ConsoleApp,
    StaticFile,
    load_assets,
)
from groundwire.api.http.rpc import Procedures
from groundwire.api.interceptors import ServiceInterceptor
from groundwire.app.config import ConfigError, parse_config


@pytest.fixture(scope="module")
def console() -> ConsoleApp:
    app = ConsoleApp.from_package()
    assert app is not None, "the built console assets are missing from the package"
    return app


def client(app: ConsoleApp) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console")


def built_names() -> tuple[str, str]:
    """The hashed script and stylesheet index.html links."""
    html = (ASSETS_DIR / "index.html").read_text()
    js = re.search(r'src="/console/(assets/[^"]+\.js)"', html)
    css = re.search(r'href="/console/(assets/[^"]+\.css)"', html)
    assert js and css
    return js.group(1), css.group(1)


async def test_index_and_client_routes_serve_the_app(console: ConsoleApp) -> None:
    async with client(console) as c:
        for path in ("/console", "/console/", "/console/search", "/console/agents/"):
            r = await c.get(path)
            assert r.status_code == 200, path
            assert r.headers["content-type"] == "text/html; charset=utf-8"
            assert r.headers["cache-control"] == "no-cache"
            assert r.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
            assert r.headers["x-content-type-options"] == "nosniff"
            assert '<div id="error-banner"' in r.text
    assert "default-src 'self'" in CONTENT_SECURITY_POLICY
    assert "http" not in CONTENT_SECURITY_POLICY  # no other origin anywhere


async def test_assets_have_types_immutable_caching_and_etags(console: ConsoleApp) -> None:
    js, css = built_names()
    async with client(console) as c:
        r = await c.get(f"/console/{js}")
        assert r.status_code == 200
        assert r.headers["content-type"] == "text/javascript; charset=utf-8"
        assert r.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert r.content == (ASSETS_DIR / js).read_bytes()
        etag = r.headers["etag"]
        again = await c.get(f"/console/{js}", headers={"if-none-match": etag})
        assert again.status_code == 304 and again.content == b""
        r = await c.get(f"/console/{css}")
        assert r.headers["content-type"] == "text/css; charset=utf-8"
        head = await c.head(f"/console/{css}")
        assert head.status_code == 200 and head.content == b""
        assert head.headers["content-length"] == str(len((ASSETS_DIR / css).read_bytes()))
        icon = await c.get("/console/favicon.svg")
        assert icon.headers["content-type"] == "image/svg+xml"


@pytest.mark.parametrize(
    "path",
    [
        "/console/assets/missing.js",
        "/console/assets/",
        "/console/nope.png",
        "/console/../pyproject.toml",
        "/console/../../../../etc/passwd",
        "/console/assets/../index.html",
        "/console/./index.html/",
        "/console/..",
        "/console/..\\..\\etc\\passwd",
        "/console/%2e%2e/%2e%2e/etc/passwd",
        "/console/a\x00b",
    ],
)
async def test_unknown_files_and_traversal_are_404(console: ConsoleApp, path: str) -> None:
    status, found = console.resolve(path)
    assert (status, found) == (404, None), path


async def test_only_get_and_head(console: ConsoleApp) -> None:
    async with client(console) as c:
        for method in ("POST", "PUT", "DELETE", "OPTIONS"):
            r = await c.request(method, "/console/")
            assert r.status_code == 405
            assert r.headers["allow"] == "GET, HEAD"


def test_symlinks_and_bounds(tmp_path: Path) -> None:
    base = tmp_path
    (base / "index.html").write_text("<!doctype html>")
    (base / "secret").symlink_to("/etc/hostname")
    files = load_assets(base)
    assert set(files) == {"index.html"}  # a symlink is never served
    assert isinstance(files["index.html"], StaticFile)
    with pytest.raises(ValueError, match=r"index\.html"):
        ConsoleApp({})


def test_the_switch_mounts_or_not() -> None:
    # Routing only: no procedures are called.
    procedures = Procedures([], cast(ServiceInterceptor, None))
    on = build_http_app(procedures, max_message_bytes=1024, console=True)
    off = build_http_app(procedures, max_message_bytes=1024, console=False)
    assert isinstance(on.routes.resolve("/console/search"), ConsoleApp)
    assert on.routes.resolve("/consoles") is None
    assert off.routes.resolve("/console/") is None
    assert parse_config({"auth": {"mode": "disabled"}}).http.console is True
    assert (
        parse_config({"auth": {"mode": "disabled"}, "http": {"console": False}}).http.console
        is False
    )
    with pytest.raises(ConfigError, match="console"):
        parse_config({"auth": {"mode": "disabled"}, "http": {"console": "sometimes"}})
