"""Loaders: bounded, strict UTF-8, one per format, failures as stable codes."""

from __future__ import annotations

from pathlib import Path

from groundwire.domain.operations import DocumentFailureReason
from groundwire.ingestion.loaders import (
    DocumentFormat,
    LoadedDocument,
    LoadFailure,
    load_bytes,
    load_file,
)
from tests.support.pdfs import assemble_pdf


def failed(result: LoadedDocument | LoadFailure) -> LoadFailure:
    assert isinstance(result, LoadFailure), result
    return result


def minimal_pdf(text: str) -> bytes:
    """A one-page PDF with one line of text (hand-assembled, valid xref)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    return assemble_pdf(objects)


def test_pdf_text_is_extracted() -> None:
    doc = load_bytes(
        "a.pdf",
        "s",
        minimal_pdf("Expense policy POL-FIN-007"),
        DocumentFormat.PDF,
        max_bytes=100_000,
    )
    assert isinstance(doc, LoadedDocument)
    assert "POL-FIN-007" in doc.text


def test_corrupt_pdf_is_parse_failed() -> None:
    res = load_bytes("a.pdf", "s", b"%PDF-1.4 garbage", DocumentFormat.PDF, max_bytes=1000)
    assert isinstance(res, LoadFailure) and res.reason in (
        DocumentFailureReason.PARSE_FAILED,
        DocumentFailureReason.EMPTY,
    )


def test_html_drops_scripts_and_keeps_title() -> None:
    html = b"<html><head><title>Page</title><style>p{}</style></head><body><p>Visible</p><script>secret()</script></body></html>"
    doc = load_bytes("p.html", "s", html, DocumentFormat.HTML, max_bytes=10_000)
    assert isinstance(doc, LoadedDocument)
    assert doc.title == "Page" and "Visible" in doc.text and "secret" not in doc.text


def test_markdown_title_and_normalization() -> None:
    doc = load_bytes(
        "m.md", "s", b"\xef\xbb\xbf# Hello\r\n\r\nBody", DocumentFormat.MARKDOWN, max_bytes=100
    )
    assert isinstance(doc, LoadedDocument)
    assert doc.title == "Hello" and doc.text == "# Hello\n\nBody"


def test_failures() -> None:
    assert (
        failed(load_bytes("a", "s", b"x" * 11, DocumentFormat.TEXT, max_bytes=10)).reason
        is DocumentFailureReason.TOO_LARGE
    )
    assert (
        failed(load_bytes("a", "s", b"\xff\xfe", DocumentFormat.TEXT, max_bytes=10)).reason
        is DocumentFailureReason.NOT_UTF8
    )
    assert (
        failed(load_bytes("a", "s", b"a\x00b", DocumentFormat.TEXT, max_bytes=10)).reason
        is DocumentFailureReason.BINARY
    )
    assert (
        failed(load_bytes("a", "s", b" \n ", DocumentFormat.TEXT, max_bytes=10)).reason
        is DocumentFailureReason.EMPTY
    )


def test_file_read_is_bounded_and_unknown_extension(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_bytes(b"y" * 1_000_000)
    res = load_file(big, "big.txt", "s", max_bytes=100, metadata={})
    assert isinstance(res, LoadFailure) and res.reason is DocumentFailureReason.TOO_LARGE
    odd = tmp_path / "x.gz"
    odd.write_bytes(b"PK")
    assert (
        failed(load_file(odd, "x.gz", "s", max_bytes=100, metadata={})).reason
        is DocumentFailureReason.UNSUPPORTED_FORMAT
    )
    assert (
        failed(load_file(tmp_path / "missing.txt", "m", "s", max_bytes=100, metadata={})).reason
        is DocumentFailureReason.UNREADABLE
    )


def test_an_uploaded_files_media_type_comes_from_the_loaders_own_extensions() -> None:
    from groundwire.ingestion.loaders import (
        FORMATS_BY_EXTENSION,
        OCTET_STREAM,
        file_media_type,
        push_format,
    )

    # Every extension a directory source reads maps to a media type a push reads,
    # in the same format.
    for ext, fmt in FORMATS_BY_EXTENSION.items():
        found = push_format(file_media_type(f"report{ext.upper()}"))
        assert found is not None and found[0] is fmt, ext
    assert file_media_type("a/b/notes.md") == "text/markdown"
    assert file_media_type("slides.pptx").endswith("presentationml.presentation")
    assert push_format(file_media_type("data.csv")) == (push_format("text/csv") or (None, ""))
    # Nothing else is guessed (no host mimetypes): no loader reads these.
    for name in ("photo.png", "archive.tar", "README", "x.md.gz"):
        assert file_media_type(name) == OCTET_STREAM
