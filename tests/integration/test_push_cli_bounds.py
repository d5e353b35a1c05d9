"""`groundwire push` and the bounds of a push: a file of 1 MiB or more is
streamed alone (UploadDocument), bounded by the index's max_file_bytes, not by a
message; a file over that bound fails with it and the settings that raise it; a
call over the server's chunk bound goes again in halves and a file over it
alone is streamed alone;
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
    assert out, f"no summary on stdout (exit {code}): {err}"
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
    (tmp_path / "huge.pdf").write_bytes(b"%PDF-1.7\n" + b"0" * (12 * 1024 * 1024))
    # Over a message and UpsertDocuments' 1,024 chunks, under max_file_bytes: streamed.
    (tmp_path / "manual.txt").write_text(_text(MAX_PUSH_CHUNKS * 3, "manual"))
    # Two files the server takes one per call, but not both in one call...
    (tmp_path / "half1.txt").write_text(_text(MAX_PUSH_CHUNKS * 2 // 3, "one"))
    (tmp_path / "half2.txt").write_text(_text(MAX_PUSH_CHUNKS * 2 // 3, "two"))
    # ... and one under 1 MiB over a call's chunk bound alone: streamed alone.
    (tmp_path / "book.txt").write_text(_text(MAX_PUSH_CHUNKS * 5 // 4, "book"))
    (tmp_path / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (tmp_path / "note.md").write_text("# Note\n\nSmall.\n")
    code, summary, err = await push(app, str(tmp_path))
    assert code == 1, err
    failures = _failures(summary)
    assert failures.keys() == {"huge.pdf", "photo.png"}
    assert failures["huge.pdf"].startswith("FILE_TOO_LARGE: 12.0 MiB; over the index's")
    assert "max_file_bytes" in failures["huge.pdf"]
    assert failures["photo.png"] == "UNSUPPORTED_FORMAT"  # sent; refused by the server
    assert summary["ingested"] == 5 and summary["files"] == 7
    live = await app.components.catalog.get("docs").store.live_documents("docs")
    assert {"manual.txt", "book.txt"} <= {key.document_id for key in live}


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


async def test_a_streamed_file_shows_its_operation_on_the_progress_bar(
    app: RunningApp, tmp_path: Path
) -> None:
    """Without --json, a file streamed alone shows its operation's phase on the
    progress bar while the server embeds it (WatchIngestion on the id the server
    announces), and the push ends once the server is done."""
    gate = ControlledEmbedder(gated=True)
    app.components.catalog.get("docs").embedder = gate
    big = tmp_path / "big.txt"
    big.write_text(_text(MAX_PUSH_CHUNKS * 2, "big"))  # over 1 MiB: streamed alone
    args = ["push", "docs", str(big), "--address", f"127.0.0.1:{app.port}"]
    out, err = io.StringIO(), io.StringIO()

    def run() -> int:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            return main(args)

    pushing = asyncio.create_task(asyncio.to_thread(run))
    deadline = asyncio.get_running_loop().time() + 60
    while "big.txt: ingesting" not in err.getvalue():  # the embedder holds the push here
        assert not pushing.done(), err.getvalue()
        assert asyncio.get_running_loop().time() < deadline, err.getvalue()
        await asyncio.sleep(0.02)
    gate.release.set()
    assert await pushing == 0, err.getvalue()
    assert out.getvalue().startswith("1 files: 1 ingested, 0 unchanged, 0 failed (")
    assert "big.txt: publishing" in err.getvalue()
