"""DOCX, PPTX and XLSX loaders: fixtures built in the test with the same libraries;
headings, slide titles and sheet names become Markdown sections; a zip bomb or a
package with too many entries is refused by its declared sizes before any library
inflates it; a broken package is PARSE_FAILED, never a crash."""

from __future__ import annotations

import io
import time
import tracemalloc
import zipfile
from pathlib import Path

import docx
import openpyxl
import pptx
import pytest
from pptx.util import Inches

from groundwire.domain.chunking import ChunkPolicy, chunk_text
from groundwire.domain.operations import DocumentFailureReason
from groundwire.ingestion.loaders import (
    MAX_PACKAGE_ENTRIES,
    DocumentFormat,
    LoadedDocument,
    LoadFailure,
    check_package,
    load_bytes,
    load_file,
)

MB = 1024 * 1024


def loaded(result: LoadedDocument | LoadFailure) -> LoadedDocument:
    assert isinstance(result, LoadedDocument), result
    return result


def failed(result: LoadedDocument | LoadFailure) -> DocumentFailureReason:
    assert isinstance(result, LoadFailure), result
    return result.reason


def docx_bytes() -> bytes:
    d = docx.Document()
    d.core_properties.title = "Travel policy"
    d.add_heading("Expenses", 1)
    d.add_paragraph("Meals are reimbursed up to POL-FIN-007 limits.")
    table = d.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "Item"
    table.cell(0, 1).text = "Limit"
    table.cell(1, 0).text = "Hotel"
    table.cell(1, 1).text = "150 EUR"
    d.add_heading("Approvals", 2)
    d.add_paragraph("Managers approve trips longer than three days.")
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def pptx_bytes() -> bytes:
    deck = pptx.Presentation()
    deck.core_properties.title = "Quarterly review"
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Revenue"
    slide.placeholders[1].text_frame.text = "Revenue grew SLIDETOKEN percent."
    slide.notes_slide.notes_text_frame.text = "Speaker note NOTETOKEN."
    second = deck.slides.add_slide(deck.slide_layouts[5])
    second.shapes.title.text = "Headcount"
    shape = second.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(4), Inches(1))
    shape.table.cell(0, 0).text = "Team"
    shape.table.cell(1, 0).text = "Search"
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def xlsx_bytes() -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Prices"
    sheet.append(["sku", "price"])
    sheet.append(["SKU-42", 9.5])
    other = book.create_sheet("Stock")
    other.append(["SKU-42", 17])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def test_docx_keeps_headings_as_sections_and_tables_as_rows() -> None:
    doc = loaded(load_bytes("p.docx", "s", docx_bytes(), DocumentFormat.DOCX, max_bytes=MB))
    assert doc.title == "Travel policy"
    assert doc.format is DocumentFormat.MARKDOWN
    assert "# Expenses" in doc.text and "## Approvals" in doc.text
    assert "POL-FIN-007" in doc.text and "Hotel | 150 EUR" in doc.text
    # Body order: the table sits between the two headings.
    assert doc.text.index("Expenses") < doc.text.index("Hotel") < doc.text.index("Approvals")
    sections = {c.section for c in chunk_text(doc.text, ChunkPolicy(800, 0, True), markdown=True)}
    assert {"Expenses", "Approvals"} <= {s.split(" > ")[-1] for s in sections}


def test_a_long_docx_loads_in_time_linear_in_its_paragraphs() -> None:
    d = docx.Document()
    for i in range(1000):
        if i % 100 == 0:
            d.add_heading(f"Part {i}", 2)
        d.add_paragraph(f"Paragraph {i} of the handbook.")
    out = io.BytesIO()
    d.save(out)
    # CPU time, not wall time: other work on a loaded machine does not count.
    started = time.process_time()
    doc = loaded(load_bytes("long.docx", "s", out.getvalue(), DocumentFormat.DOCX, max_bytes=MB))
    # Resolving each paragraph's style through python-docx took ~5 s here.
    assert time.process_time() - started < 3
    assert doc.text.count("## Part") == 10 and "Paragraph 999" in doc.text


def test_pptx_reads_titles_bodies_tables_and_notes() -> None:
    doc = loaded(load_bytes("d.pptx", "s", pptx_bytes(), DocumentFormat.PPTX, max_bytes=MB))
    assert doc.title == "Quarterly review"
    assert "## Revenue" in doc.text and "## Headcount" in doc.text
    assert "SLIDETOKEN" in doc.text and "NOTETOKEN" in doc.text and "Team" in doc.text


def test_xlsx_reads_every_sheet_in_read_only_mode() -> None:
    doc = loaded(load_bytes("b.xlsx", "s", xlsx_bytes(), DocumentFormat.XLSX, max_bytes=MB))
    assert "## Prices" in doc.text and "## Stock" in doc.text
    assert "SKU-42\t9.5" in doc.text and "SKU-42\t17" in doc.text
    assert doc.title == "Prices"  # no document title: the first section


def test_files_are_found_by_extension(tmp_path: Path) -> None:
    for name, data in (
        ("a.docx", docx_bytes()),
        ("b.pptx", pptx_bytes()),
        ("c.xlsx", xlsx_bytes()),
    ):
        (tmp_path / name).write_bytes(data)
        doc = loaded(load_file(tmp_path / name, name, "s", max_bytes=MB, metadata={"k": "v"}))
        assert doc.metadata == {"k": "v"} and doc.text


def bomb(entry: str, inflated: int) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        with zf.open(entry, "w") as fh:
            chunk = b"\0" * MB
            for _ in range(inflated // MB):
                fh.write(chunk)
    return out.getvalue()


def test_a_zip_bomb_is_refused_by_its_declared_size_without_inflating() -> None:
    data = bomb("word/document.xml", 64 * MB)  # ~64 KB on disk, 64 MiB inflated
    assert len(data) < 200_000
    tracemalloc.start()
    started = time.process_time()  # CPU time: other work on the machine does not count
    try:
        reason = failed(
            load_bytes("b.docx", "s", data, DocumentFormat.DOCX, max_bytes=len(data) + 1)
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert reason is DocumentFailureReason.TOO_LARGE
    assert peak < 8 * MB and time.process_time() - started < 2


def test_a_package_with_too_many_entries_is_refused() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        for i in range(MAX_PACKAGE_ENTRIES + 1):
            zf.writestr(f"x/{i}", b"")
    assert check_package(out.getvalue(), MB) is DocumentFailureReason.TOO_LARGE


def test_extracted_text_is_bounded() -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    for i in range(3000):
        sheet.append([f"row {i} " + "word " * 20])
    out = io.BytesIO()
    book.save(out)
    data = out.getvalue()
    # The package fits max_bytes, its text does not fit 4 x max_bytes.
    assert (
        failed(load_bytes("big.xlsx", "s", data, DocumentFormat.XLSX, max_bytes=len(data) + 1))
        is DocumentFailureReason.TOO_LARGE
    )


@pytest.mark.parametrize("fmt", [DocumentFormat.DOCX, DocumentFormat.PPTX, DocumentFormat.XLSX])
def test_broken_packages_fail_cleanly(fmt: DocumentFormat) -> None:
    assert failed(load_bytes("x", "s", b"PK\x03\x04garbage", fmt, max_bytes=MB)) is (
        DocumentFailureReason.PARSE_FAILED
    )
    # A valid ZIP that is not this kind of document.
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("hello.txt", "hi")
    assert failed(load_bytes("x", "s", out.getvalue(), fmt, max_bytes=MB)) is (
        DocumentFailureReason.PARSE_FAILED
    )
    # Another office format under this one's name.
    other = docx_bytes() if fmt is not DocumentFormat.DOCX else xlsx_bytes()
    assert failed(load_bytes("x", "s", other, fmt, max_bytes=MB)) is (
        DocumentFailureReason.PARSE_FAILED
    )
