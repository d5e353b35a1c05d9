"""Document loaders: bounded, UTF-8 strict, one per format, each built on a
well-kept library where the format needs one (Markdown stays Markdown so the
section-aware chunker can use its headings; HTML via selectolax; PDF via pypdf).

A loader never raises for a bad document: it returns a failure with a stable,
content-free reason code, and the run continues with the next document.
"""

from __future__ import annotations

import enum
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from groundwire.domain.chunking import markdown_title
from groundwire.domain.operations import DocumentFailureReason
from groundwire.domain.text import normalize_text


class DocumentFormat(enum.Enum):
    TEXT = "text"
    MARKDOWN = "markdown"
    HTML = "html"
    PDF = "pdf"


FORMATS_BY_EXTENSION: Mapping[str, DocumentFormat] = {
    ".txt": DocumentFormat.TEXT,
    ".text": DocumentFormat.TEXT,
    ".md": DocumentFormat.MARKDOWN,
    ".markdown": DocumentFormat.MARKDOWN,
    ".html": DocumentFormat.HTML,
    ".htm": DocumentFormat.HTML,
    ".pdf": DocumentFormat.PDF,
}


@dataclass(frozen=True, slots=True)
class LoadedDocument:
    """Normalized text of one document with its identity and attribution."""

    document_id: str
    source_id: str
    text: str
    title: str
    format: DocumentFormat
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LoadFailure:
    document_id: str
    reason: DocumentFailureReason


def _decode_text(data: bytes) -> str | DocumentFailureReason:
    if b"\x00" in data[:8192]:
        return DocumentFailureReason.BINARY
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return DocumentFailureReason.NOT_UTF8


def _html_text(data: bytes) -> tuple[str, str] | DocumentFailureReason:
    from selectolax.lexbor import LexborHTMLParser

    decoded = _decode_text(data)
    if isinstance(decoded, DocumentFailureReason):
        return decoded
    tree = LexborHTMLParser(decoded)
    for tag in ("script", "style", "noscript", "template"):
        for node in tree.css(tag):
            node.decompose()
    title_node = tree.css_first("title")
    title = title_node.text(strip=True) if title_node else ""
    body = tree.body or tree.root
    text = body.text(separator="\n", strip=True) if body is not None else ""
    return text, title


def _pdf_text(data: bytes) -> tuple[str, str] | DocumentFailureReason:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
        meta = reader.metadata
        title = str(meta.title) if meta is not None and meta.title else ""
    except (PyPdfError, ValueError, KeyError, TypeError, OSError):
        return DocumentFailureReason.PARSE_FAILED
    return "\n\n".join(p.strip() for p in pages if p.strip()), title


def load_bytes(
    document_id: str,
    source_id: str,
    data: bytes,
    fmt: DocumentFormat,
    *,
    max_bytes: int,
    metadata: Mapping[str, str] | None = None,
    fallback_title: str = "",
) -> LoadedDocument | LoadFailure:
    """Decode, extract and normalize one document."""
    if len(data) > max_bytes:
        return LoadFailure(document_id, DocumentFailureReason.TOO_LARGE)
    title = ""
    if fmt is DocumentFormat.HTML:
        result = _html_text(data)
        if isinstance(result, DocumentFailureReason):
            return LoadFailure(document_id, result)
        raw, title = result
    elif fmt is DocumentFormat.PDF:
        result = _pdf_text(data)
        if isinstance(result, DocumentFailureReason):
            return LoadFailure(document_id, result)
        raw, title = result
    else:
        decoded = _decode_text(data)
        if isinstance(decoded, DocumentFailureReason):
            return LoadFailure(document_id, decoded)
        raw = decoded
    text = normalize_text(raw)
    if not text.strip():
        return LoadFailure(document_id, DocumentFailureReason.EMPTY)
    if fmt is DocumentFormat.MARKDOWN:
        title = markdown_title(text)
    return LoadedDocument(
        document_id,
        source_id,
        text,
        title or fallback_title,
        fmt,
        dict(metadata or {}),
    )


def load_file(
    path: Path, document_id: str, source_id: str, *, max_bytes: int, metadata: Mapping[str, str]
) -> LoadedDocument | LoadFailure:
    """Read a file with a byte bound (never more than max_bytes + 1 bytes are read)."""
    fmt = FORMATS_BY_EXTENSION.get(path.suffix.lower())
    if fmt is None:
        return LoadFailure(document_id, DocumentFailureReason.UNSUPPORTED_FORMAT)
    try:
        with path.open("rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError:
        return LoadFailure(document_id, DocumentFailureReason.UNREADABLE)
    return load_bytes(
        document_id,
        source_id,
        data,
        fmt,
        max_bytes=max_bytes,
        metadata=metadata,
        fallback_title=PurePosixPath(document_id).stem.replace("-", " ").replace("_", " "),
    )
