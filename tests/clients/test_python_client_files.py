"""The Python client sends every file and lets the server decide: a PDF is read by
the server's loader; a type no loader reads is refused BY THE SERVER (its reason in
the push's failures) while the push's other files are written."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fpdf import FPDF

from groundwire.app.config import parse_config
from groundwire_client import GroundwireClient
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(60)


def _pdf(text: str) -> bytes:
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.cell(text=text)
    return bytes(pdf.output())


@pytest.fixture
async def app() -> AsyncIterator[RunningApp]:
    cfg = {
        "auth": {"mode": "disabled"},
        "store": {"kind": "memory"},
        "embedders": {"hash": {"kind": "hashing"}},
        # A 6 MB file of one-chunk lines: past the default per-document chunk bound.
        "indexes": {"docs": {"embedder": "hash", "ingestion": {"max_chunks_per_document": 20000}}},
    }
    async with serving(parse_config(cfg)) as running:
        yield running


async def test_pdf_and_unknown_types_are_sent_and_the_server_decides(
    app: RunningApp, tmp_path: Path
) -> None:
    (tmp_path / "report.pdf").write_bytes(_pdf("TOKCLIENTPDF quarterly report"))
    (tmp_path / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (tmp_path / "data.zzz").write_bytes(b"\x00\x01\x02")
    (tmp_path / "notes.md").write_text("# Notes\n\nTOKCLIENTMD kept.", encoding="utf-8")
    files = [tmp_path / n for n in ("data.zzz", "notes.md", "photo.png", "report.pdf")]
    async with GroundwireClient(f"127.0.0.1:{app.port}") as gw:
        pushed = await gw.push_files("docs", files)
        # Refused by the server, each with its reason; the other files are written.
        assert pushed.failures == {
            "data.zzz": "UNSUPPORTED_FORMAT",
            "photo.png": "UNSUPPORTED_FORMAT",
        }
        assert pushed.upserted == 2 and pushed.published_version >= 1
        found = await gw.retrieve("docs", "TOKCLIENTPDF", mode="lexical", top_k=3)
        assert [r.document_id for r in found.results] == ["report.pdf"]
        found = await gw.retrieve("docs", "TOKCLIENTMD", mode="lexical", top_k=3)
        assert [r.document_id for r in found.results] == ["notes.md"]


# A 6 MB file is chunked and indexed inside the call: on a loaded machine (load 10+ on
# 2 cores) that takes well over the client's default deadline.
UPLOAD_DEADLINE_S = 120.0


@pytest.mark.timeout(300)
async def test_upload_file_streams_a_file_over_a_message(app: RunningApp, tmp_path: Path) -> None:
    """A 6 MB file (over UpsertDocuments' 4 MiB per call) goes in one streamed
    call, async and sync; one over the index's bound is refused before any byte."""
    from groundwire_client import GroundwireError, GroundwireSyncClient, PushResult

    big = tmp_path / "manual.txt"
    lines = [f"Line {i}: TOKUPLOAD{i} of a long manual." for i in range(150_000)]
    big.write_text("\n".join(lines), encoding="utf-8")
    assert big.stat().st_size > 6_000_000
    app.components.catalog.get("docs").max_file_bytes = 8 * 1024 * 1024
    async with GroundwireClient(f"127.0.0.1:{app.port}") as gw:
        pushed = await gw.upload_file("docs", big, timeout=UPLOAD_DEADLINE_S)
        assert (pushed.upserted, pushed.failures) == (1, {}) and pushed.chunks_written > 1024
        found = await gw.retrieve("docs", "TOKUPLOAD149999", mode="lexical", top_k=1)
        assert [r.document_id for r in found.results] == ["manual.txt"]

    def sync_calls() -> tuple[PushResult, GroundwireError]:
        # (the server runs in this process's event loop: the sync client in a thread)
        with GroundwireSyncClient(f"127.0.0.1:{app.port}") as sync:
            again = sync.upload_file("docs", big, timeout=UPLOAD_DEADLINE_S)
            app.components.catalog.get("docs").max_file_bytes = 1024 * 1024
            with pytest.raises(GroundwireError) as refused:
                sync.upload_file("docs", big, document_id="other", timeout=UPLOAD_DEADLINE_S)
        return again, refused.value

    again, refused = await asyncio.to_thread(sync_calls)
    assert (again.upserted, again.unchanged) == (0, 1)
    assert refused.reason == "FILE_TOO_LARGE"


async def test_an_upload_refused_from_its_header_reports_the_refusal_every_time(
    app: RunningApp, tmp_path: Path
) -> None:
    """grpc.aio loses the server's status when the server refuses a stream from
    its header while a part is being written (grpc/grpc#36066: INTERNAL "Internal
    error from Core"; 16 to 44 of these 240 calls in three runs without the client's fix, 8
    at a time); the client reports the server's refusal, whichever, every time."""
    from collections import Counter

    from groundwire_client import GroundwireError

    big = tmp_path / "scan.pdf"
    big.write_bytes(b"%PDF-1.7\n" + b"0" * (12 * 1024 * 1024))
    seen: Counter[str] = Counter()

    async def upload(gw: GroundwireClient, index: str) -> None:
        with pytest.raises(GroundwireError) as refused:
            await gw.upload_file(index, big)
        seen[refused.value.reason] += 1

    async with GroundwireClient(f"127.0.0.1:{app.port}") as gw:
        for _ in range(30):
            await asyncio.gather(*(upload(gw, "docs" if i % 2 else "nope") for i in range(8)))
    assert seen == {"FILE_TOO_LARGE": 120, "INDEX_NOT_FOUND": 120}


def test_upload_requests_send_read_bytes_as_the_file_itself(tmp_path: Path) -> None:
    from groundwire_client import upload_requests
    from groundwire_client._common import UPLOAD_PART_BYTES

    data = bytes(range(256)) * (UPLOAD_PART_BYTES // 256 * 2 + 3)
    path = tmp_path / "big.pdf"
    path.write_bytes(data)
    from_file = list(upload_requests("docs", path, document_id="d"))
    from_bytes = list(upload_requests("docs", path, document_id="d", content=data))
    assert from_file == from_bytes
    header = from_file[0].header
    assert (header.size_bytes, header.media_type) == (len(data), "application/pdf")
    assert [len(r.data) for r in from_file[1:]] == [UPLOAD_PART_BYTES, UPLOAD_PART_BYTES, 768]
    path.unlink()
    with pytest.raises(OSError):
        list(upload_requests("docs", path))
