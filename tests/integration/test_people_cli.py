"""The command line for people (`groundwire search / ask / indexes / operations
/ push`) against a running server: readable output, `--json` machine output,
and errors as one clear line with a nonzero exit and no traceback."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from groundwire.app.cli import main
from groundwire.app.config import parse_config
from tests.integration.test_connect import KEYS, config
from tests.support.servers import RunningApp, serving
from tests.support.tls import make_pki

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
async def app() -> AsyncIterator[RunningApp]:
    async with serving(parse_config(config())) as running:
        yield running


class Recorder(io.StringIO):
    """stdout that remembers what had been written at each flush."""

    def __init__(self) -> None:
        super().__init__()
        self.flushed: list[str] = []

    def flush(self) -> None:
        self.flushed.append(self.getvalue())
        super().flush()


LAST_STDOUT: list[Recorder] = []


def _main(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    out, err = Recorder(), io.StringIO()
    LAST_STDOUT[:] = [out]
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return code, out.getvalue(), err.getvalue()


async def gw(app: RunningApp, *argv: str, key: str | None = "admin") -> tuple[int, str, str]:
    """One command, run in a worker thread (the server runs on this loop)."""
    args = [*argv, "--address", f"127.0.0.1:{app.port}"]
    env = {}
    if key is not None:
        env["GW_CLI_KEY"] = KEYS.get(key, key)
        args += ["--api-key-env", "GW_CLI_KEY"]
    return await asyncio.to_thread(_main, args, env)


async def test_search_readable_and_json(app: RunningApp) -> None:
    code, out, err = await gw(
        app, "search", "demo", "POL-HR-014", "--mode", "lexical", "--top-k", "2"
    )
    assert code == 0, err
    assert out.startswith("[1] ") and "\n[2] " in out and "score " in out
    code, out, _ = await gw(
        app, "search", "demo", "POL-HR-014", "--mode", "lexical", "--top-k", "2", "--json"
    )
    assert code == 0
    payload = json.loads(out)
    assert len(payload["results"]) == 2 and payload["results"][0]["rank"] == 1
    # A filter no chunk matches.
    code, out, _ = await gw(
        app, "search", "demo", "leave", "--mode", "lexical", "--filter", "team=nobody"
    )
    assert code == 0 and out == "no results\n"


async def test_ask_streams_then_cites(app: RunningApp) -> None:
    code, out, err = await gw(app, "ask", "assistant", "How many weeks of parental leave?")
    assert code == 0, err
    answer, _, sources = out.partition("\nSources:\n")
    assert answer.strip() and sources.startswith("[")
    # Streamed: the answer was flushed piece by piece, before the citations.
    flushed = [text for text in LAST_STDOUT[0].flushed if text]
    assert len(flushed) >= 2 and "Sources:" not in flushed[0]
    assert answer.startswith(flushed[0]) and len(flushed[0]) < len(answer)
    first = sources.splitlines()[0]
    assert first.split("]")[0].lstrip("[") in answer  # the marker the reader saw
    code, out, _ = await gw(app, "ask", "assistant", "How many weeks of parental leave?", "--json")
    payload = json.loads(out)
    assert code == 0 and payload["citations"][0]["display_number"] == 1
    assert "[1]" in payload["answer_renumbered"]


async def test_indexes_and_operations_tables(app: RunningApp) -> None:
    code, out, err = await gw(app, "indexes")
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split()[:3] == ["NAME", "READY", "VERSION"]
    assert rows[0].split()[:2] == ["demo", "yes"] and rows[1].startswith("pushed")
    code, out, _ = await gw(app, "indexes", "--json")
    assert [i["name"] for i in json.loads(out)["indexes"]] == ["demo", "pushed"]
    # Without `manage`, the descriptions without the state columns.
    code, out, _ = await gw(app, "indexes", key="reader")
    assert code == 0 and "need a key with the manage permission" in out
    code, out, err = await gw(app, "operations", "demo")
    assert code == 0, err
    header, first = out.splitlines()[:2]
    assert header.split()[:3] == ["ID", "STATE", "TRIGGER"]
    assert first.split()[1:3] == ["succeeded", "startup"]
    code, out, _ = await gw(app, "operations", "demo", "--json")
    assert json.loads(out)["operations"][0]["state"] == "OPERATION_STATE_SUCCEEDED"
    # A key with only `ingest` lists the operations it started: none here (the
    # startup run was the server's).
    code, out, err = await gw(app, "operations", "demo", key="acme")
    assert (code, out) == (0, "no operations for demo\n"), err


async def test_push_files_and_directories(app: RunningApp, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.md").write_text("# Quokka policy\n\nQuokkas get two weeks of leave.\n")
    (docs / "sub" / "b.txt").write_text("The quokka handbook, plain text.\n")
    (docs / "image.bin").write_bytes(b"\x00\x01")
    (docs / "empty.txt").write_text("")
    code, out, err = await gw(app, "push", "pushed", str(docs), "--json", key="acme")
    payload = json.loads(out)
    assert code == 1, err  # two files failed
    assert payload["ingested"] == 2 and payload["files"] == 4
    assert {f["document_id"]: f["reason"] for f in payload["failures"]} == {
        "image.bin": "UNSUPPORTED_FORMAT",
        "empty.txt": "EMPTY",
    }
    code, out, _ = await gw(app, "push", "pushed", str(docs / "a.md"), key="acme")
    assert code == 0 and out.startswith("1 files: 0 ingested, 1 unchanged, 0 failed")
    # The key's tenant owns them: acme finds them, the untenanted admin does not.
    code, out, _ = await gw(
        app, "search", "pushed", "quokka", "--mode", "lexical", "--json", key="acme"
    )
    assert {r["document_id"] for r in json.loads(out)["results"]} == {"a.md", "sub/b.txt"}
    code, out, _ = await gw(app, "search", "pushed", "quokka", "--mode", "lexical", key="admin")
    assert out.startswith("no results")


async def test_errors_are_one_line(app: RunningApp) -> None:
    code, out, err = await gw(app, "search", "nope", "leave")
    assert code == 1 and out == ""
    assert err.startswith("error: INDEX_NOT_FOUND: ") and "Traceback" not in err
    code, _, err = await gw(app, "operations", "nope")
    assert code == 1 and err.startswith("error: INDEX_NOT_FOUND")
    code, _, err = await gw(app, "ask", "nobody", "hi", "--json")
    assert code == 1 and json.loads(err)["error"]["reason"] == "AGENT_NOT_FOUND"
    code, _, err = await gw(app, "ask", "assistant", "hi", key="reader")
    assert code == 1 and err.startswith("error: PERMISSION_DENIED")
    code, _, err = await gw(app, "indexes", key="gw_wrong-key-000000000000000000000000")
    assert code == 1 and err.startswith("error: UNAUTHENTICATED")
    code, _, err = await gw(app, "search", "demo", "x", "--filter", "novalue")
    assert code == 2 and "KEY=VALUE" in err
    code, _, err = await gw(app, "push", "pushed", "/nonexistent/file.md")
    assert code == 2 and "no such file" in err


async def test_real_entry_point_unreachable_server() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "groundwire",
        "indexes",
        "--address",
        "127.0.0.1:9",
        "--timeout",
        "3",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1 and out == b""
    assert err.decode().startswith("error: UNAVAILABLE: the server is unreachable")
    assert b"Traceback" not in err


async def test_mutual_tls(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    cfg = config()
    cfg["indexes"] = {"pushed": {"embedder": "hash"}}
    cfg["agents"] = {}
    cfg["server"] = {
        "tls": {
            "cert_file": str(pki.server_cert),
            "key_file": str(pki.server_key),
            "client_ca_file": str(pki.ca_cert),
        }
    }
    async with serving(parse_config(cfg)) as running:
        tls = ["--ca-file", str(pki.ca_cert)]
        mutual = [*tls, "--client-cert", str(pki.client_cert), "--client-key", str(pki.client_key)]
        code, out, err = await gw(running, "indexes", *mutual)
        assert code == 0, err
        assert out.splitlines()[1].startswith("pushed")
        # Without the client certificate the handshake fails; plaintext too.
        code, _, err = await gw(running, "indexes", *tls, "--timeout", "5")
        assert code == 1 and err.startswith("error: UNAVAILABLE")
        code, _, err = await gw(running, "indexes", "--client-cert", str(pki.client_cert))
        assert code == 2 and "go together" in err
