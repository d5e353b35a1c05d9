"""Document loaders: bounded, UTF-8 strict, one per format, each built on a
well-kept library where the format needs one (Markdown stays Markdown so the
section-aware chunker can use its headings; HTML via selectolax; PDF via pypdf;
DOCX via python-docx, PPTX via python-pptx, XLSX via openpyxl in read-only mode,
whose headings, slide titles and sheet names become Markdown sections).

Office files are ZIP packages: before a library opens one, its central directory
is checked (`check_package`) so a zip bomb is refused by its declared sizes, which
Python's zipfile also enforces while inflating (it never returns more than an
entry declares).

A loader never raises for a bad document: it returns a failure with a stable,
content-free reason code, and the run continues with the next document.
"""

from __future__ import annotations

import enum
import io
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from groundwire.domain.chunking import markdown_title
from groundwire.domain.operations import DocumentFailureReason
from groundwire.domain.text import normalize_text
from groundwire.indexes.loaders import Loader as Loader  # re-exported


class DocumentFormat(enum.Enum):
    TEXT = "text"
    MARKDOWN = "markdown"
    HTML = "html"
    PDF = "pdf"
    DOCX = "docx"
    PPTX = "pptx"
    XLSX = "xlsx"


FORMATS_BY_EXTENSION: Mapping[str, DocumentFormat] = {
    ".txt": DocumentFormat.TEXT,
    ".text": DocumentFormat.TEXT,
    ".md": DocumentFormat.MARKDOWN,
    ".markdown": DocumentFormat.MARKDOWN,
    ".html": DocumentFormat.HTML,
    ".htm": DocumentFormat.HTML,
    ".pdf": DocumentFormat.PDF,
    ".docx": DocumentFormat.DOCX,
    ".pptx": DocumentFormat.PPTX,
    ".xlsx": DocumentFormat.XLSX,
}

# Media types (Content-Type of a `url` source) per format.
MEDIA_TYPES: Mapping[str, DocumentFormat] = {
    "text/plain": DocumentFormat.TEXT,
    "text/markdown": DocumentFormat.MARKDOWN,
    "text/x-markdown": DocumentFormat.MARKDOWN,
    "text/html": DocumentFormat.HTML,
    "application/xhtml+xml": DocumentFormat.HTML,
    "application/pdf": DocumentFormat.PDF,
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": (
        DocumentFormat.DOCX
    ),
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": (
        DocumentFormat.PPTX
    ),
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": DocumentFormat.XLSX,
}

# Office packages: at most this many ZIP entries, and at most this many bytes
# once inflated in total (OOXML text parts compress about 5-20x; a larger ratio
# up to this bound is still read, a zip bomb is not).
MAX_PACKAGE_ENTRIES = 5_000
PACKAGE_EXPANSION = 32
MAX_PACKAGE_BYTES = 128 * 1024 * 1024
# Extracted text of an office file: at most this many characters per max_bytes
# byte (the text of a spreadsheet can be longer than its package).
TEXT_EXPANSION = 4


@dataclass(frozen=True, slots=True)
class LoadedDocument:
    """Normalized text of one document with its identity and attribution."""

    document_id: str
    source_id: str
    text: str
    title: str
    format: DocumentFormat
    metadata: Mapping[str, str] = field(default_factory=dict)
    # Stored with the content hash (`sources.stored_hash`): the HTTP validators of
    # a URL document, "" for every other source.
    source_state: str = ""
    # The file extension whose chunking policy applies ("" for the format's first
    # one): a file's own, or a URL document's by its media type.
    extension: str = ""


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


def check_package(data: bytes, max_bytes: int) -> DocumentFailureReason | None:
    """Refuse a ZIP package that is not one, has too many entries, or inflates
    beyond min(PACKAGE_EXPANSION x max_bytes, MAX_PACKAGE_BYTES) bytes."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, ValueError, OSError):
        return DocumentFailureReason.PARSE_FAILED
    if len(infos) > MAX_PACKAGE_ENTRIES:
        return DocumentFailureReason.TOO_LARGE
    limit = min(PACKAGE_EXPANSION * max_bytes, MAX_PACKAGE_BYTES)
    if sum(i.file_size for i in infos) > limit:
        return DocumentFailureReason.TOO_LARGE
    return None


class _TextTooLarge(Exception):
    pass


class _Lines:
    """Collects extracted lines, refusing more than `limit` characters."""

    def __init__(self, limit: int) -> None:
        self.lines: list[str] = []
        self._left = limit

    def add(self, line: str) -> None:
        line = line.strip()
        if not line:
            return
        self._left -= len(line) + 1
        if self._left < 0:
            raise _TextTooLarge
        self.lines.append(line)

    def section(self, heading: str, level: int = 2) -> None:
        heading = " ".join(heading.split())
        if heading:
            self.add(f"{'#' * level} {heading}")

    def text(self) -> str:
        return "\n\n".join(self.lines)


def _docx_text(data: bytes, out: _Lines) -> str:
    import docx
    from docx.table import Table

    document = docx.Document(io.BytesIO(data))
    # Style names by id, read once: `Paragraph.style` scans every style of the
    # document for each paragraph (about 5 ms each, 10 s for a 2,000-paragraph file).
    names = {s.style_id: s.name or "" for s in document.styles}
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            for row in block.rows:
                out.add(" | ".join(c.text.strip() for c in row.cells))
            continue
        style = names.get(block._p.style or "", "")
        level = style.removeprefix("Heading ").strip()
        if style == "Title":
            out.section(block.text, 1)
        elif style.startswith("Heading ") and level.isdigit() and 1 <= int(level) <= 6:
            out.section(block.text, int(level))
        else:
            out.add(block.text)
    return document.core_properties.title or ""


def _pptx_text(data: bytes, out: _Lines) -> str:
    import pptx

    deck = pptx.Presentation(io.BytesIO(data))
    for number, slide in enumerate(deck.slides, start=1):
        title_shape = slide.shapes.title
        title = title_shape.text_frame.text if title_shape is not None else ""
        out.section(title or f"Slide {number}")
        for shape in slide.shapes:
            if shape is title_shape:
                continue
            if shape.has_text_frame:
                for paragraph in shape.text_frame.paragraphs:
                    out.add("".join(run.text for run in paragraph.runs))
            if shape.has_table:
                for row in shape.table.rows:
                    out.add(" | ".join(c.text.strip() for c in row.cells))
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            out.add(slide.notes_slide.notes_text_frame.text)
    return deck.core_properties.title or ""


def _xlsx_text(data: bytes, out: _Lines) -> str:
    import openpyxl

    book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        for sheet in book.worksheets:
            out.section(sheet.title)
            for row in sheet.iter_rows(values_only=True):
                out.add("\t".join("" if v is None else str(v) for v in row).strip())
        return str(book.properties.title or "")
    finally:
        book.close()


_OFFICE = {
    DocumentFormat.DOCX: _docx_text,
    DocumentFormat.PPTX: _pptx_text,
    DocumentFormat.XLSX: _xlsx_text,
}


def _office_text(
    data: bytes, fmt: DocumentFormat, max_bytes: int
) -> tuple[str, str] | DocumentFailureReason:
    refused = check_package(data, max_bytes)
    if refused is not None:
        return refused
    out = _Lines(TEXT_EXPANSION * max_bytes)
    try:
        title = _OFFICE[fmt](data, out)
    except _TextTooLarge:
        return DocumentFailureReason.TOO_LARGE
    # The libraries raise their own errors, lxml's, zipfile's and KeyError for a
    # missing part: any of them means the package is not a readable document.
    except Exception:
        return DocumentFailureReason.PARSE_FAILED
    return out.text(), title


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
    elif fmt in _OFFICE:
        result = _office_text(data, fmt, max_bytes)
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
    elif fmt in _OFFICE:
        # The extracted text is Markdown (headings, slide titles, sheet names), so
        # the section-aware chunker splits it like a Markdown file.
        title = title.strip() or markdown_title(text)
        fmt = DocumentFormat.MARKDOWN
    return LoadedDocument(
        document_id,
        source_id,
        text,
        title or fallback_title,
        fmt,
        dict(metadata or {}),
    )


def load_with_plugin(
    loader: Loader,
    document_id: str,
    source_id: str,
    data: bytes,
    *,
    max_bytes: int,
    metadata: Mapping[str, str],
    fallback_title: str,
) -> LoadedDocument | LoadFailure:
    """A plug-in loader's text, normalized and bounded like a built-in one's."""
    if len(data) > max_bytes:
        return LoadFailure(document_id, DocumentFailureReason.TOO_LARGE)
    try:
        raw, title = loader.load(data)
    # The plug-in is someone else's code: whatever it raises, this document failed
    # and the run goes on.
    except Exception:
        return LoadFailure(document_id, DocumentFailureReason.PARSE_FAILED)
    if not isinstance(raw, str) or not isinstance(title, str):
        return LoadFailure(document_id, DocumentFailureReason.PARSE_FAILED)
    if len(raw) > TEXT_EXPANSION * max_bytes:
        return LoadFailure(document_id, DocumentFailureReason.TOO_LARGE)
    text = normalize_text(raw)
    if not text.strip():
        return LoadFailure(document_id, DocumentFailureReason.EMPTY)
    fmt = DocumentFormat.MARKDOWN if loader.markdown else DocumentFormat.TEXT
    if not title.strip() and fmt is DocumentFormat.MARKDOWN:
        title = markdown_title(text)
    return LoadedDocument(
        document_id, source_id, text, title.strip() or fallback_title, fmt, dict(metadata)
    )


def load_file(
    path: Path,
    document_id: str,
    source_id: str,
    *,
    max_bytes: int,
    metadata: Mapping[str, str],
    loaders: Mapping[str, Loader] | None = None,
) -> LoadedDocument | LoadFailure:
    """Read a file with a byte bound (never more than max_bytes + 1 bytes are read);
    `loaders` maps extensions to plug-in loaders, which take precedence."""
    suffix = path.suffix.lower()
    plugin = (loaders or {}).get(suffix)
    fmt = FORMATS_BY_EXTENSION.get(suffix)
    if fmt is None and plugin is None:
        return LoadFailure(document_id, DocumentFailureReason.UNSUPPORTED_FORMAT)
    try:
        with path.open("rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError:
        return LoadFailure(document_id, DocumentFailureReason.UNREADABLE)
    fallback_title = PurePosixPath(document_id).stem.replace("-", " ").replace("_", " ")
    if plugin is not None:
        return load_with_plugin(
            plugin,
            document_id,
            source_id,
            data,
            max_bytes=max_bytes,
            metadata=metadata,
            fallback_title=fallback_title,
        )
    assert fmt is not None
    return load_bytes(
        document_id,
        source_id,
        data,
        fmt,
        max_bytes=max_bytes,
        metadata=metadata,
        fallback_title=fallback_title,
    )
