"""Files are parsed in bounded worker processes (ingestion/parsing.py), and the parsers
themselves refuse structures that would cost unbounded work: each bound here is a
failure with its reason, never a stall of the caller's process.

The jobs that spin, allocate or sleep are module-level functions of this file, run in
a real worker through the pool's own job path (`ParserPool._run`), since no real file
still reaches those bounds once the parsers are fixed."""

from __future__ import annotations

import asyncio
import io
import os
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import docx
import openpyxl
import pytest
from fpdf import FPDF

from groundwire.domain.operations import DocumentFailureReason
from groundwire.ingestion import loaders
from groundwire.ingestion.loaders import (
    MAX_PACKAGE_ELEMENTS,
    MAX_SHEET_CELLS,
    DocumentFormat,
    LoadedDocument,
    LoadFailure,
    check_package,
    load_bytes,
)
from groundwire.ingestion.parsing import ParserLimits, ParserPool
from groundwire.ingestion.pdf_text import join_hyphenated

MB = 1024 * 1024


def _spin(_: str, document_id: str) -> LoadFailure:
    while True:
        pass


def _allocate(_: str, document_id: str) -> LoadFailure:
    hoard = [bytearray(64 * MB) for _ in range(64)]  # 4 GiB, past any test limit
    return LoadFailure(document_id, DocumentFailureReason.EMPTY, *hoard[:0])


def _sleep_and_tell(pid_file: str, document_id: str) -> LoadFailure:
    Path(pid_file).write_text(str(os.getpid()))
    time.sleep(600)
    return LoadFailure(document_id, DocumentFailureReason.EMPTY)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child not yet reaped is a zombie: gone for our purpose.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture
def pool() -> Iterator[ParserPool]:
    p = ParserPool(
        ParserLimits(workers=1, cpu_seconds=1, memory_mib=768, timeout_seconds=30, small_workers=0)
    )
    yield p
    p.close()


def _pdf(lines: list[str], width: float | None = None) -> bytes:
    pdf = FPDF(format=(width, 842.0) if width else "A4", unit="pt")
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    for line in lines:
        pdf.cell(0, 14, line, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


async def test_a_job_past_its_cpu_budget_is_too_complex_and_the_pool_goes_on(
    pool: ParserPool,
) -> None:
    failure = await pool._run(_spin, ("", "spin.pdf"), "spin.pdf")
    assert failure == LoadFailure("spin.pdf", DocumentFailureReason.TOO_COMPLEX)
    # The killed worker was replaced: a real file still parses.
    data = _pdf(["The pool survives a killed worker."])
    doc = await pool.load_bytes("ok.pdf", "s", data, DocumentFormat.PDF, max_bytes=MB)
    assert isinstance(doc, LoadedDocument) and "survives" in doc.text


async def test_a_job_past_its_memory_limit_is_too_large() -> None:
    # CPU enough to touch the memory even on a loaded machine: the memory bound fails it.
    pool = ParserPool(
        ParserLimits(
            workers=1, cpu_seconds=60, memory_mib=768, timeout_seconds=120, small_workers=0
        )
    )
    try:
        failure = await pool._run(_allocate, ("", "big.docx"), "big.docx")
        assert failure == LoadFailure("big.docx", DocumentFailureReason.TOO_LARGE)
    finally:
        pool.close()


async def test_a_job_past_its_wall_clock_bound_is_killed() -> None:
    pool = ParserPool(
        ParserLimits(workers=1, cpu_seconds=60, memory_mib=768, timeout_seconds=1, small_workers=0)
    )
    try:
        failure = await pool._run(_sleep_and_tell, ("/dev/null", "slow.pdf"), "slow.pdf")
        assert failure == LoadFailure("slow.pdf", DocumentFailureReason.TOO_COMPLEX)
    finally:
        pool.close()


async def test_a_cancelled_caller_kills_its_worker(pool: ParserPool, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    task = asyncio.ensure_future(pool._run(_sleep_and_tell, (str(pid_file), "c.pdf"), "c.pdf"))
    for _ in range(600):  # the worker starts the job (up to 60 s on a loaded machine)
        if pid_file.exists() and pid_file.read_text():
            break
        await asyncio.sleep(0.1)
    pid = int(pid_file.read_text())
    assert _alive(pid)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(300):
        if not _alive(pid):
            break
        await asyncio.sleep(0.1)
    assert not _alive(pid)


async def test_close_stops_a_running_parse_without_waiting_for_it(tmp_path: Path) -> None:
    pool = ParserPool(
        ParserLimits(
            workers=1, cpu_seconds=600, memory_mib=768, timeout_seconds=600, small_workers=0
        )
    )
    pid_file = tmp_path / "pid"
    task = asyncio.ensure_future(pool._run(_sleep_and_tell, (str(pid_file), "s.pdf"), "s.pdf"))
    for _ in range(600):
        if pid_file.exists() and pid_file.read_text():
            break
        await asyncio.sleep(0.1)
    pid = int(pid_file.read_text())
    started = time.monotonic()
    await asyncio.to_thread(pool.close)
    assert time.monotonic() - started < 60  # the job would sleep 600 s
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert not _alive(pid)


async def test_pool_results_equal_in_process_ones(pool: ParserPool) -> None:
    data = _pdf(["Robust data manip-", "ulation needs care."])
    in_process = load_bytes("p.pdf", "s", data, DocumentFormat.PDF, max_bytes=MB)
    pooled = await pool.load_bytes("p.pdf", "s", data, DocumentFormat.PDF, max_bytes=MB)
    assert pooled == in_process
    assert isinstance(pooled, LoadedDocument) and "manipulation" in pooled.text


def test_hyphen_join_is_linear_in_a_crafted_word() -> None:
    # The old regex was cubic: 1,000 letters cost 5.1 s of CPU, 2,000 cost 43 s; a
    # million here would have taken years. Generous bound: a loaded machine passes.
    word = "a" * 1_000_000
    started = time.process_time()
    assert join_hyphenated(f"{word}-\n{word}") == word + word
    assert join_hyphenated(f"x {word}-\n{word}") == f"x {word}{word}"
    assert time.process_time() - started < 20


def test_a_page_a_million_units_wide_is_read_with_bounded_column_detection() -> None:
    import tracemalloc

    lines = [f"line {i} of prose long enough to count as a run" for i in range(40)]
    data = _pdf(lines, width=1_000_000.0)
    tracemalloc.start()
    try:
        doc = load_bytes("wide.pdf", "s", data, DocumentFormat.PDF, max_bytes=MB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(doc, LoadedDocument) and "line 39" in doc.text
    assert peak < 64 * MB, peak  # was 824 MB: a crossing matrix sized by the width


def _xlsx(cells: dict[str, str]) -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    for ref, value in cells.items():
        sheet[ref] = value
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def test_a_spreadsheet_declaring_every_cell_is_read_by_its_cells() -> None:
    # Dimension A1:XFD1048576 (17 billion cells): the old reader padded every row to
    # column XFD, about 13 minutes of CPU for a 1.5 KB file.
    data = _xlsx({"A1": "first", "XFD1048576": "last"})
    started = time.process_time()
    doc = load_bytes("d.xlsx", "s", data, DocumentFormat.XLSX, max_bytes=MB)
    assert isinstance(doc, LoadedDocument), doc
    assert "first" in doc.text and "last" in doc.text
    assert time.process_time() - started < 60


def test_a_spreadsheet_with_too_many_cells_is_too_complex() -> None:
    rows = MAX_SHEET_CELLS // 16_384 + 2  # each row padded to its cell in column XFD
    data = _xlsx({f"XFD{r}": "x" for r in range(1, rows + 1)})
    result = load_bytes("c.xlsx", "s", data, DocumentFormat.XLSX, max_bytes=MB)
    assert result == LoadFailure("c.xlsx", DocumentFailureReason.TOO_COMPLEX)


def _inflated_docx(elements: int) -> bytes:
    """A valid DOCX whose body holds `elements` empty runs (tiny, highly compressible)."""
    base = io.BytesIO()
    docx.Document().save(base)
    src = zipfile.ZipFile(io.BytesIO(base.getvalue()))
    body = b"<w:p>" + b"<w:r/>" * elements + b"</w:p>"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == "word/document.xml":
                data = data.replace(b"<w:body>", b"<w:body>" + body, 1)
            dst.writestr(info.filename, data)
    return out.getvalue()


def test_a_package_of_too_many_elements_is_refused_before_parsing() -> None:
    data = _inflated_docx(MAX_PACKAGE_ELEMENTS + 1)
    assert len(data) < 2 * MB  # small to send, millions of elements inflated
    assert check_package(data, 10 * MB) is DocumentFailureReason.TOO_COMPLEX
    started = time.process_time()
    result = load_bytes("bomb.docx", "s", data, DocumentFormat.DOCX, max_bytes=10 * MB)
    assert result == LoadFailure("bomb.docx", DocumentFailureReason.TOO_COMPLEX)
    assert time.process_time() - started < 30  # counted while inflating, never parsed
    # Under the bound, the same shape is an ordinary document.
    assert check_package(_inflated_docx(1000), 10 * MB) is None


def test_deep_nesting_in_an_odt_is_too_complex_not_a_crash() -> None:
    depth = 50_000
    ns = 'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"'
    body = "<text:span>" * depth + "deep" + "</text:span>" * depth
    content = f'<?xml version="1.0"?><doc {ns}><text:p>{body}</text:p></doc>'
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        z.writestr("content.xml", content)
    result = load_bytes("deep.odt", "s", out.getvalue(), DocumentFormat.ODT, max_bytes=MB)
    assert result == LoadFailure("deep.odt", DocumentFailureReason.TOO_COMPLEX)
    assert 2 * depth <= loaders.MAX_PACKAGE_ELEMENTS  # refused by nesting, not by count


def _record(log_file: str, document_id: str) -> LoadFailure:
    """Append the job's id to `log_file`; a job named "*hold*" first waits (up to
    60 s) for `log_file`.go to exist."""
    if "hold" in document_id:
        with open(log_file, "a") as fh:
            fh.write("started\n")
        go = Path(log_file + ".go")
        for _ in range(600):
            if go.exists():
                break
            time.sleep(0.1)
    with open(log_file, "a") as fh:
        fh.write(document_id + "\n")
    return LoadFailure(document_id, DocumentFailureReason.EMPTY)


async def test_workers_go_round_robin_among_tenants_not_first_come(
    pool: ParserPool, tmp_path: Path
) -> None:
    from groundwire.stores import request_scope

    log = tmp_path / "order"

    def job(tenant: str, document_id: str) -> asyncio.Future[LoadedDocument | LoadFailure]:
        async def run() -> LoadedDocument | LoadFailure:
            with request_scope.bind(tenant, None):
                return await pool._run(_record, (str(log), document_id), document_id)

        return asyncio.ensure_future(run())

    first = job("noisy", "noisy-hold")
    for _ in range(600):
        if log.exists() and "started" in log.read_text():
            break
        await asyncio.sleep(0.1)
    queued = [job("noisy", f"noisy-{i}") for i in range(3)]
    await asyncio.sleep(0)  # the noisy tenant's files queue first
    other = job("quiet", "quiet-1")
    await asyncio.sleep(0)
    await asyncio.to_thread(Path(str(log) + ".go").touch)
    await asyncio.gather(first, *queued, other)
    order = [line for line in log.read_text().split() if line != "started"]
    # The quiet tenant's file runs next, not after the noisy tenant's queue (first
    # come, first served would run it last).
    assert order[:2] == ["noisy-hold", "quiet-1"], order
    assert sorted(order[2:]) == ["noisy-0", "noisy-1", "noisy-2"]


def _gz(tmp_path: Path, name: str, data: bytes) -> Path:
    import gzip

    path = tmp_path / name
    path.write_bytes(gzip.compress(data))
    return path


def test_a_gzip_file_is_read_as_its_inner_format(tmp_path: Path) -> None:
    from groundwire.ingestion.loaders import content_suffix, load_file

    path = _gz(tmp_path, "leave-policy.md.gz", b"# Leave policy\n\nParental leave is 16 weeks.\n")
    doc = load_file(path, "leave-policy.md.gz", "s", max_bytes=MB, metadata={})
    assert isinstance(doc, LoadedDocument), doc
    assert doc.format is DocumentFormat.MARKDOWN and doc.title == "Leave policy"
    assert "16 weeks" in doc.text and doc.extension == ".md"
    assert content_suffix(path) == ".md"
    # Without an inner extension: text by content, like an extensionless file.
    readme = load_file(
        _gz(tmp_path, "README.gz", b"plain words"), "README.gz", "s", max_bytes=MB, metadata={}
    )
    assert isinstance(readme, LoadedDocument) and readme.text == "plain words"


def test_a_gzip_bomb_is_refused_without_inflating_it(tmp_path: Path) -> None:
    import tracemalloc

    from groundwire.ingestion.loaders import load_file

    path = _gz(tmp_path, "bomb.txt.gz", b"\0" * (256 * MB))  # ~250 KB compressed
    assert path.stat().st_size < MB
    tracemalloc.start()
    try:
        result = load_file(path, "bomb.txt.gz", "s", max_bytes=MB, metadata={})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result == LoadFailure("bomb.txt.gz", DocumentFailureReason.TOO_LARGE)
    assert peak < 16 * MB, peak  # inflated no further than the bound


def test_a_broken_or_unreadable_gzip_fails_with_its_reason(tmp_path: Path) -> None:
    from groundwire.ingestion.loaders import load_file

    broken = tmp_path / "broken.md.gz"
    broken.write_bytes(b"\x1f\x8b\x08\x00 not deflate at all")
    assert load_file(broken, "b", "s", max_bytes=MB, metadata={}) == LoadFailure(
        "b", DocumentFailureReason.PARSE_FAILED
    )
    # An inner extension the source does not read is skipped like the bare file.
    odd = _gz(tmp_path, "data.bin.gz", b"\x00\x01")
    assert load_file(odd, "o", "s", max_bytes=MB, metadata={}) == LoadFailure(
        "o", DocumentFailureReason.UNSUPPORTED_FORMAT
    )
    only_md = {".md": DocumentFormat.MARKDOWN}
    listed = _gz(tmp_path, "r.md.gz", b"# T\n\nx")
    assert load_file(listed, "r", "s", max_bytes=MB, metadata={}, formats=only_md) == LoadFailure(
        "r", DocumentFailureReason.UNSUPPORTED_FORMAT
    )
