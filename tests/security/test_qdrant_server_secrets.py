"""A Qdrant server that refuses or cannot be reached never makes groundwire repeat
its API key, its URL or what the server said.

The store's API key is a canary (by reference, from the environment); the server
is a loopback stand-in answering every request with 401 and a body echoing the
canary and the request's own `api-key` header, or a port nothing listens on.
Opening the store fails STORE_UNAVAILABLE with a stable, content-free message, and
neither the error nor any log record (root at DEBUG) holds the key, the server's
words or the URL. Over https, `ca_file` is the trust the server's certificate is
checked against."""

from __future__ import annotations

import logging
import socket
import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from groundwire.app.config import parse_config
from groundwire.app.store_factories import qdrant_server_settings, qdrant_settings
from groundwire.domain.errors import GroundwireError
from groundwire.stores.qdrant import open_qdrant_server_store
from tests.support.tls import make_pki
from tests.support.web_standin import Page, WebStandIn

pytestmark = pytest.mark.timeout(120)

KEY_ENV = "GW_TEST_QDRANT_SECRET_KEY"
API_KEY = f"qdrant-key-canary-{uuid.uuid4().hex}"
CANARY = f"CANARY-qdrant-{uuid.uuid4().hex}"


def refusing(server: WebStandIn) -> Page:
    _, headers = server.requests[-1]
    body = f'{{"status": {{"error": "{CANARY} {headers.get("api-key", "")}"}}}}'
    return Page(body.encode(), "application/json", 401, headers={"x-canary": CANARY})


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[WebStandIn]:
    monkeypatch.setenv(KEY_ENV, API_KEY)
    with WebStandIn() as standin:
        yield standin


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def open_on(url: str, caplog: pytest.LogCaptureFixture) -> tuple[GroundwireError, str, str]:
    """The error opening the store on `url`, its text, and every log record's."""
    cfg = parse_config(
        {
            "auth": {"mode": "disabled"},
            "stores": {
                "vectors": {
                    "kind": "qdrant",
                    "url": url,
                    "api_key": {"env": KEY_ENV},
                    "request_timeout_ms": 5_000,
                }
            },
        }
    )
    caplog.set_level(logging.DEBUG)
    with pytest.raises(GroundwireError) as err:
        await open_qdrant_server_store(
            qdrant_settings(cfg, "vectors"), qdrant_server_settings(cfg, "vectors")
        )
    logged = caplog.text + "".join(str(r.__dict__) for r in caplog.records)
    return err.value, str(err.value) + repr(err.value) + str(err.value.metadata), logged


async def test_a_refusing_server_gets_no_echo(
    server: WebStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    server.pages["/collections"] = refusing
    url = server.url("")
    error, said, logged = await open_on(url, caplog)
    assert error.reason == "STORE_UNAVAILABLE"
    # Positive control: the stand-in was asked, with the canary key.
    assert any(h.get("api-key") == API_KEY for _, h in server.requests)
    for secret in (API_KEY, CANARY, "127.0.0.1"):
        assert secret not in said
    # Nor the HTTP library's own traces (response headers at DEBUG, URLs at INFO).
    for secret in (API_KEY, CANARY, "127.0.0.1"):
        assert secret not in logged


async def test_an_unreachable_server_is_store_unavailable_without_its_url(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, API_KEY)
    url = f"http://127.0.0.1:{closed_port()}"
    error, said, logged = await open_on(url, caplog)
    assert error.reason == "STORE_UNAVAILABLE"
    for secret in (API_KEY, "127.0.0.1"):
        assert secret not in said + logged


def collections_page(server: WebStandIn) -> Page:
    return Page(b'{"result": {"collections": []}, "status": "ok", "time": 0}', "application/json")


async def test_https_verifies_the_server_against_the_ca_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """With `ca_file` the store opens on an https server whose certificate that CA
    signed; without it the certificate is not trusted and the store does not open."""
    monkeypatch.setenv(KEY_ENV, API_KEY)
    pki = make_pki(tmp_path)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki.server_cert, pki.server_key)
    with WebStandIn(tls=ctx) as server:
        server.pages["/collections"] = collections_page
        url = server.url("", host="localhost").rstrip("/")
        section = {"kind": "qdrant", "url": url, "api_key": {"env": KEY_ENV}}
        trusted = parse_config(
            {
                "auth": {"mode": "disabled"},
                "stores": {"vectors": {**section, "ca_file": str(pki.ca_cert)}},
            }
        )
        store = await open_qdrant_server_store(
            qdrant_settings(trusted, "vectors"), qdrant_server_settings(trusted, "vectors")
        )
        await store.close()
        assert any(h.get("api-key") == API_KEY for _, h in server.requests)
        asked = len(server.requests)
        error, said, logged = await open_on(url, caplog)
        assert error.reason == "STORE_UNAVAILABLE"
        assert len(server.requests) == asked  # the key never went to an untrusted server
        assert API_KEY not in said + logged
