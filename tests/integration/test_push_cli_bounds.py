"""`groundwire push` and the bounds of a push: a file over what one call carries
is not sent and fails with the bound and the way to ingest it; a call over the
server's chunk bound goes again in halves and only the file over it alone fails;
a call whose deadline passes fails its files (the server published nothing of it)
and the push goes on; every file type is sent (the server decides)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from groundwire.app.cli import main
from groundwire.app.config import parse_config
from groundwire.ingestion.push import MAX_PUSH_CHUNKS
from tests.support.embedders import ControlledEmbedder
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def app() -> AsyncIterator[RunningApp]:
    cfg = {
        "auth": {"mode": "disabled"},
        "store": {"kind": "memory"},
        "embedders": {"hash": {"kind": "hashing"}},
        "indexes": {"docs": {"embedder": "hash"}},
    }
    async with serving(parse_config(cfg)) as running:
        yield running


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


async def push(app: RunningApp, *argv: str) -> tuple[int, dict[str, object], str]:
    args = ["push", "docs", *argv, "--json", "--address", f"127.0.0.1:{app.port}"]
    code, out, err = await asyncio.to_thread(_run, args)
    return code, json.loads(out), err


def _failures(summary: dict[str, object]) -> dict[str, str]:
    failures = summary["failures"]
    assert isinstance(failures, list)
    return {f["document_id"]: f["reason"] for f in failures}


def _text(paragraphs: int, tag: str) -> str:
    return "\n\n".join(
        f"{tag} paragraph {i}: " + "words of a long report that fill the chunks " * 16
        for i in range(paragraphs)
    )


async def test_files_over_the_bounds_fail_alone_with_the_way_out(
    app: RunningApp, tmp_path: Path
) -> None:
    (tmp_path / "huge.pdf").write_bytes(b"%PDF-1.7\n" + b"0" * (5 * 1024 * 1024))
    # Two files the server takes one per call, but not both in one call...
    (tmp_path / "half1.txt").write_text(_text(MAX_PUSH_CHUNKS * 2 // 3, "one"))
    (tmp_path / "half2.txt").write_text(_text(MAX_PUSH_CHUNKS * 2 // 3, "two"))
    # ... and one over the bound alone, sent with them.
    (tmp_path / "book.txt").write_text(_text(MAX_PUSH_CHUNKS * 2, "book"))
    (tmp_path / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (tmp_path / "note.md").write_text("# Note\n\nSmall.\n")
    code, summary, err = await push(app, str(tmp_path))
    assert code == 1, err
    failures = _failures(summary)
    assert failures.keys() == {"huge.pdf", "book.txt", "photo.png"}
    assert failures["huge.pdf"].startswith("TOO_LARGE: 5.0 MiB; a push carries at most 4 MiB")
    assert "groundwire ingest" in failures["huge.pdf"]
    assert failures["book.txt"].startswith("TOO_LARGE: a push may write at most")
    assert "groundwire ingest" in failures["book.txt"]
    assert failures["photo.png"] == "UNSUPPORTED_FORMAT"  # sent; refused by the server
    assert summary["ingested"] == 3 and summary["files"] == 6


async def test_a_call_past_its_deadline_fails_its_files_and_publishes_nothing(
    app: RunningApp, tmp_path: Path
) -> None:
    handle = app.components.catalog.get("docs")
    before = (await handle.store.index_state("docs")).published_version
    slow = ControlledEmbedder(delay=60)
    handle.embedder = slow
    (tmp_path / "late.md").write_text("# Late\n\nEmbedded too slowly.\n")
    code, summary, err = await push(app, str(tmp_path / "late.md"), "--timeout", "1")
    assert code == 1, err
    assert _failures(summary) == {"late.md": "DEADLINE_EXCEEDED"}
    assert summary["published_version"] == 0
    assert (await handle.store.index_state("docs")).published_version == before
    assert await handle.store.live_documents("docs") == {}
    deadline = asyncio.get_running_loop().time() + 20
    while slow.cancelled != 1:  # the server's work stopped
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.02)
