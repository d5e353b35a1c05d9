"""`groundwire reload` and `groundwire ingest` take the connection options every
client command shares (app/client_options.py): against a server that requires
mutual TLS they connect with --ca-file/--client-cert/--client-key and an API key
from --api-key-env; a plaintext attempt fails with one clear line and exit 2, and
an unusable combination of options is refused before any connection."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from groundwire.app.cli import main
from groundwire.app.config import load_config
from groundwire.app.lifecycle import RunningApp, start_app
from groundwire.domain.auth import generate_key, hash_key
from tests.support.reload_probe import config, write
from tests.support.tls import Pki, make_pki

pytestmark = pytest.mark.timeout(60)
KEY = generate_key()
KEY_ENV = "GW_ADMIN_CLI_TLS_KEY"


def _main(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    os.environ[KEY_ENV] = KEY
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        os.environ.pop(KEY_ENV, None)
    return code, out.getvalue(), err.getvalue()


async def gw(app: RunningApp, *argv: str) -> tuple[int, str, str]:
    """One command in a worker thread (the server runs on this loop)."""
    args = [*argv, "--address", f"127.0.0.1:{app.port}", "--api-key-env", KEY_ENV]
    return await asyncio.to_thread(_main, args)


def tls_config(pki: Pki, variant: int) -> dict[str, object]:
    tls = {
        "cert_file": str(pki.server_cert),
        "key_file": str(pki.server_key),
        "client_ca_file": str(pki.ca_cert),
    }
    return config(
        variant,
        docs=2,
        auth={"keys": [{"id": "ops", "hash": hash_key(KEY), "permissions": ["manage", "ingest"]}]},
        server={"tls": tls},
    )


@pytest.fixture
async def tls_app(tmp_path: Path) -> AsyncIterator[tuple[RunningApp, Pki, Path]]:
    pki = make_pki(tmp_path)
    path = tmp_path / "groundwire.toml"
    write(path, tls_config(pki, 1))
    app = await start_app(load_config(path), "127.0.0.1:0", config_path=path)
    try:
        await app.wait_ready()
        yield app, pki, path
    finally:
        await app.stop(0)


async def test_reload_and_ingest_connect_with_mutual_tls(
    tls_app: tuple[RunningApp, Pki, Path],
) -> None:
    app, pki, path = tls_app
    mutual = [
        "--ca-file",
        str(pki.ca_cert),
        "--client-cert",
        str(pki.client_cert),
        "--client-key",
        str(pki.client_key),
    ]
    write(path, tls_config(pki, 2))
    code, out, err = await gw(app, "reload", *mutual)
    assert code == 0, err
    assert "configuration applied: generation 2" in out
    code, out, err = await gw(app, "reload", "--validate-only", *mutual)
    assert code == 0 and "valid (nothing applied)" in out, err

    code, out, err = await gw(app, "ingest", "docs", *mutual)
    assert code == 0, err
    assert out.startswith("SUCCEEDED") and "2 unchanged" in out


async def test_without_tls_or_with_half_a_client_pair_they_fail_cleanly(
    tls_app: tuple[RunningApp, Pki, Path],
) -> None:
    app, pki, _ = tls_app
    for command in (["reload"], ["ingest", "docs"]):
        # Plaintext to a TLS port, then TLS without the client certificate.
        code, _, err = await gw(app, *command, "--timeout", "5")
        assert code == 2 and err.startswith("error: UNAVAILABLE"), err
        code, _, err = await gw(app, *command, "--ca-file", str(pki.ca_cert), "--timeout", "5")
        assert code == 2 and err.startswith("error: UNAVAILABLE"), err
        code, _, err = await gw(app, *command, "--client-cert", str(pki.client_cert))
        assert code == 2 and "--client-cert and --client-key go together" in err, err
        assert "Traceback" not in err


async def test_server_name_is_the_certificate_name_checked(
    tls_app: tuple[RunningApp, Pki, Path],
) -> None:
    # The test certificate names localhost and 127.0.0.1: a name it does not carry
    # fails the handshake, one it carries passes (and --server-name implies TLS).
    app, pki, _ = tls_app
    mutual = [
        "--ca-file",
        str(pki.ca_cert),
        "--client-cert",
        str(pki.client_cert),
        "--client-key",
        str(pki.client_key),
    ]
    code, _, err = await gw(
        app, "ingest", "docs", *mutual, "--server-name", "other.example", "--timeout", "5"
    )
    assert code == 2 and err.startswith("error: UNAVAILABLE"), err
    code, out, err = await gw(app, "ingest", "docs", *mutual, "--server-name", "localhost")
    assert code == 0 and out.startswith("SUCCEEDED"), err
    code, _, err = await gw(app, "reload", "--server-name", "bad name")
    assert code == 2 and "--server-name: not a host name" in err
