"""Document loaders: bounded, UTF-8 strict, one per format, each built on a
well-kept library where the format needs one (Markdown stays Markdown so the
section-aware chunker can use its headings; HTML via selectolax; PDF via pypdf;
DOCX via python-docx, PPTX via python-pptx, XLSX via openpyxl in read-only mode,
whose headings, slide titles and sheet names become Markdown sections).

Office packages and e-books are read by office_text.py, PDFs by pdf_text.py, both
in the parser worker processes of parsing.py.

A loader never raises for a bad document: it returns a failure with a stable,
content-free reason code, and the run continues with the next document.
"""

from __future__ import annotations

import enum
import gzip
import io
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from groundwire.domain.anchors import ANCHORS_KEY, encode_anchors
from groundwire.domain.chunking import markdown_title
from groundwire.domain.operations import DocumentFailureReason
from groundwire.domain.pages import PAGE_STARTS_KEY, encode_page_starts
from groundwire.domain.text import normalize_text
from groundwire.indexes.loaders import Loader as Loader  # re-exported
from groundwire.ingestion.html_text import html_to_marked_text, take_anchor_marks
from groundwire.ingestion.office_text import (
    MAX_PACKAGE_ELEMENTS as MAX_PACKAGE_ELEMENTS,  # re-exported
)
from groundwire.ingestion.office_text import MAX_PACKAGE_ENTRIES as MAX_PACKAGE_ENTRIES
from groundwire.ingestion.office_text import MAX_SHEET_CELLS as MAX_SHEET_CELLS
from groundwire.ingestion.office_text import OFFICE_FORMATS, office_text
from groundwire.ingestion.office_text import check_package as check_package
from groundwire.ingestion.pdf_text import pdf_text_pages, take_page_marks


class DocumentFormat(enum.Enum):
    TEXT = "text"
    MARKDOWN = "markdown"
    HTML = "html"
    PDF = "pdf"
    DOCX = "docx"
    PPTX = "pptx"
    XLSX = "xlsx"
    ODT = "odt"
    EPUB = "epub"


# Text-like files read as plain text (`FORMATS` maps a source's `extensions`
# table values to formats).
TEXT_LIKE_EXTENSIONS = (
    ".rst", ".csv", ".tsv", ".json", ".jsonl", ".log", ".yaml", ".yml", ".toml",
    ".ini", ".cfg", ".xml", ".tex", ".org", ".adoc",
)  # fmt: skip
FORMATS: Mapping[str, DocumentFormat] = {f.value: f for f in DocumentFormat}


# In this order, the default of an index's `ingestion.extensions`.
FORMATS_BY_EXTENSION: Mapping[str, DocumentFormat] = {
    ".md": DocumentFormat.MARKDOWN,
    ".markdown": DocumentFormat.MARKDOWN,
    ".txt": DocumentFormat.TEXT,
    ".text": DocumentFormat.TEXT,
    ".html": DocumentFormat.HTML,
    ".htm": DocumentFormat.HTML,
    ".pdf": DocumentFormat.PDF,
    ".docx": DocumentFormat.DOCX,
    ".pptx": DocumentFormat.PPTX,
    ".xlsx": DocumentFormat.XLSX,
    ".odt": DocumentFormat.ODT,
    ".epub": DocumentFormat.EPUB,
    **dict.fromkeys(TEXT_LIKE_EXTENSIONS, DocumentFormat.TEXT),
}

# Each format's first extension above: the chunking policy of a document without
# a file name of its own (inline, pushed, a URL document by its media type).
FIRST_EXTENSIONS: Mapping[DocumentFormat, str] = {
    fmt: ext for ext, fmt in reversed(list(FORMATS_BY_EXTENSION.items()))
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
    "application/vnd.oasis.opendocument.text": DocumentFormat.ODT,
    "application/epub+zip": DocumentFormat.EPUB,
}

# Media types a pushed document may name (UpsertDocuments `media_type`): those
# above plus text-like ones read as plain text.
PUSH_MEDIA_TYPES: Mapping[str, DocumentFormat] = {
    **MEDIA_TYPES,
    "text/csv": DocumentFormat.TEXT,
    "text/tab-separated-values": DocumentFormat.TEXT,
    "text/x-rst": DocumentFormat.TEXT,
    "application/json": DocumentFormat.TEXT,
    "application/x-ndjson": DocumentFormat.TEXT,
    "application/xml": DocumentFormat.TEXT,
    "text/xml": DocumentFormat.TEXT,
    "application/yaml": DocumentFormat.TEXT,
}
# The file extension whose chunking policy a pushed text-like media type takes (as
# a file of that type found by a source would); every other one takes its format's.
_PUSH_EXTENSIONS: Mapping[str, str] = {
    "text/csv": ".csv",
    "text/tab-separated-values": ".tsv",
    "text/x-rst": ".rst",
    "application/json": ".json",
    "application/x-ndjson": ".jsonl",
    "application/xml": ".xml",
    "text/xml": ".xml",
    "application/yaml": ".yaml",
}


def push_format(media_type: str) -> tuple[DocumentFormat, str] | None:
    """The format and the chunking policy's file extension of a pushed document's
    media type (parameters such as "; charset=utf-8" ignored), or None when no
    loader reads it."""
    key = media_type.split(";", 1)[0].strip().lower()
    fmt = PUSH_MEDIA_TYPES.get(key)
    if fmt is None:
        return None
    return fmt, _PUSH_EXTENSIONS.get(key) or FIRST_EXTENSIONS[fmt]


OCTET_STREAM = "application/octet-stream"


def _media_types_by_extension() -> dict[str, str]:
    # Each push media type under the extension whose chunking policy it takes,
    # then every other extension a loader reads under its format's first media type.
    out: dict[str, str] = {}
    for media_type in PUSH_MEDIA_TYPES:
        found = push_format(media_type)
        assert found is not None
        out.setdefault(found[1], media_type)
    by_format: dict[DocumentFormat, str] = {}
    for media_type, fmt in MEDIA_TYPES.items():
        by_format.setdefault(fmt, media_type)
    for ext, fmt in FORMATS_BY_EXTENSION.items():
        out.setdefault(ext, by_format[fmt])
    return out


_MEDIA_TYPE_BY_EXTENSION = _media_types_by_extension()


def file_media_type(file_name: str) -> str:
    """The push media type of a file by its name, from the loaders' own extensions
    (those a directory source reads), else application/octet-stream (which no
    loader reads: the document fails UNSUPPORTED_FORMAT)."""
    return _MEDIA_TYPE_BY_EXTENSION.get(PurePosixPath(file_name).suffix.lower(), OCTET_STREAM)


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


def _html_text(data: bytes) -> tuple[str, str, list[str]] | DocumentFailureReason:
    decoded = _decode_text(data)
    if isinstance(decoded, DocumentFailureReason):
        return decoded
    return html_to_marked_text(decoded)


def load_bytes(
    document_id: str,
    source_id: str,
    data: bytes,
    fmt: DocumentFormat,
    *,
    max_bytes: int,
    metadata: Mapping[str, str] | None = None,
    fallback_title: str = "",
    extension: str = "",
) -> LoadedDocument | LoadFailure:
    """Decode, extract and normalize one document. `extension` names the chunking
    policy that applies (default: the first extension of `fmt`, kept even when an
    office file's text is read as Markdown)."""
    extension = extension or FIRST_EXTENSIONS.get(fmt, "")
    if len(data) > max_bytes:
        return LoadFailure(document_id, DocumentFailureReason.TOO_LARGE)
    title = ""
    page_numbers: list[int] = []
    anchors: list[str] = []
    if fmt is DocumentFormat.HTML:
        marked = _html_text(data)
        if isinstance(marked, DocumentFailureReason):
            return LoadFailure(document_id, marked)
        raw, title, anchors = marked
    elif fmt is DocumentFormat.PDF:
        paged = pdf_text_pages(data, TEXT_EXPANSION * max_bytes)
        if isinstance(paged, DocumentFailureReason):
            return LoadFailure(document_id, paged)
        raw, title, page_numbers = paged
    elif fmt.value in OFFICE_FORMATS:
        result = office_text(data, fmt.value, max_bytes, TEXT_EXPANSION * max_bytes)
        if isinstance(result, DocumentFailureReason):
            return LoadFailure(document_id, result)
        raw, title = result
    else:
        decoded = _decode_text(data)
        if isinstance(decoded, DocumentFailureReason):
            return LoadFailure(document_id, decoded)
        raw = decoded
    text = normalize_text(raw)
    meta = dict(metadata or {})
    if fmt is DocumentFormat.PDF:
        # Page starts are offsets into the normalized text, so the marks are taken
        # out only now; the record goes with the document (domain/pages.py).
        text, page_starts = take_page_marks(text, page_numbers)
        meta.pop(PAGE_STARTS_KEY, None)
        record = encode_page_starts(page_starts)
        if page_starts and record is not None:
            meta[PAGE_STARTS_KEY] = record
    meta.pop(ANCHORS_KEY, None)
    if fmt is DocumentFormat.HTML:
        # The same for the anchors' offsets (domain/anchors.py).
        text, found = take_anchor_marks(text, anchors)
        anchor_record = encode_anchors(found)
        if anchor_record is not None:
            meta[ANCHORS_KEY] = anchor_record
    if not text.strip():
        return LoadFailure(document_id, DocumentFailureReason.EMPTY)
    if fmt is DocumentFormat.MARKDOWN:
        title = markdown_title(text)
    elif fmt.value in OFFICE_FORMATS:
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
        meta,
        extension=extension,
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


# Extensionless files: read as plain text when the first bytes decode as strict
# UTF-8 with at most this share of control characters (other than tab, newline,
# carriage return and form feed).
SNIFF_BYTES = 8192
MAX_CONTROL_RATIO = 0.01


def looks_like_text(data: bytes) -> DocumentFailureReason | None:
    """None when `data` reads as UTF-8 text, else BINARY or NOT_UTF8."""
    head = data[:SNIFF_BYTES]
    if b"\x00" in head:
        return DocumentFailureReason.BINARY
    try:
        # A multi-byte character may be cut at the sniff bound.
        sample = head.decode("utf-8") if len(data) <= SNIFF_BYTES else _decode_prefix(head)
    except UnicodeDecodeError:
        return DocumentFailureReason.NOT_UTF8
    controls = sum(1 for ch in sample if ord(ch) < 32 and ch not in "\t\n\r\f")
    if sample and controls / len(sample) > MAX_CONTROL_RATIO:
        return DocumentFailureReason.BINARY
    return None


def _decode_prefix(head: bytes) -> str:
    for cut in range(4):
        try:
            return head[: len(head) - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    raise UnicodeDecodeError("utf-8", head, 0, len(head), "not UTF-8")


# A gzip-compressed file of any format a source reads ("notes.md.gz", "report.pdf.gz"):
# read as the format of the extension before ".gz", after inflating it no further
# than max_file_bytes (a bomb is refused as TOO_LARGE once the bound is passed,
# whatever it declares).
GZIP_EXTENSION = ".gz"


def content_suffix(path: Path | PurePosixPath) -> str:
    """The extension whose format and chunking policy apply: a compressed file's
    inner one ("a.md.gz" -> ".md"), else its own."""
    suffix = path.suffix.lower()
    if suffix == GZIP_EXTENSION:
        return PurePosixPath(path.stem).suffix.lower()
    return suffix


def _inflate(raw: bytes, max_bytes: int) -> bytes | DocumentFailureReason:
    """A gzip stream's content, never inflating more than max_bytes + 1 bytes."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as stream:
            data = stream.read(max_bytes + 1)
    except (OSError, EOFError, zlib.error):
        return DocumentFailureReason.PARSE_FAILED
    if len(data) > max_bytes:
        return DocumentFailureReason.TOO_LARGE
    return data


def load_file(
    path: Path,
    document_id: str,
    source_id: str,
    *,
    max_bytes: int,
    metadata: Mapping[str, str],
    loaders: Mapping[str, Loader] | None = None,
    formats: Mapping[str, DocumentFormat | None] | None = None,
) -> LoadedDocument | LoadFailure:
    """Read a file with a byte bound (never more than max_bytes + 1 bytes are read).
    `formats` maps the extensions its source reads to a built-in format (None: a
    plug-in loader's, from `loaders`); default: every built-in extension. A file
    without an extension is read as plain text when its content is UTF-8 text."""
    suffix = path.suffix.lower()
    table: Mapping[str, DocumentFormat | None] = (
        FORMATS_BY_EXTENSION if formats is None else formats
    )
    if suffix == GZIP_EXTENSION and (formats is None or suffix in formats):
        return _load_gzip(path, document_id, source_id, max_bytes, metadata, table)
    plugin = (loaders or {}).get(suffix) if suffix in table or formats is None else None
    fmt = table.get(suffix)
    if fmt is None and plugin is None and suffix:
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
    if fmt is None:
        # No extension: text by content, else a type no loader reads.
        if len(data) > max_bytes:
            return LoadFailure(document_id, DocumentFailureReason.TOO_LARGE)
        if looks_like_text(data) is not None:
            return LoadFailure(document_id, DocumentFailureReason.UNSUPPORTED_FORMAT)
        fmt = DocumentFormat.TEXT
    return load_bytes(
        document_id,
        source_id,
        data,
        fmt,
        max_bytes=max_bytes,
        metadata=metadata,
        fallback_title=fallback_title,
    )


def _load_gzip(
    path: Path,
    document_id: str,
    source_id: str,
    max_bytes: int,
    metadata: Mapping[str, str],
    table: Mapping[str, DocumentFormat | None],
) -> LoadedDocument | LoadFailure:
    """A ".gz" file: its inner extension must be one the source reads with a
    built-in loader (or none: text by content); compressed and inflated sizes are
    both bounded by max_bytes."""
    inner = content_suffix(path)
    fmt = table.get(inner) if inner else DocumentFormat.TEXT
    if fmt is None:
        return LoadFailure(document_id, DocumentFailureReason.UNSUPPORTED_FORMAT)
    try:
        with path.open("rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError:
        return LoadFailure(document_id, DocumentFailureReason.UNREADABLE)
    if len(raw) > max_bytes:
        return LoadFailure(document_id, DocumentFailureReason.TOO_LARGE)
    data = _inflate(raw, max_bytes)
    if data is DocumentFailureReason.PARSE_FAILED and not inner:
        # Not a gzip stream, and no extension says what it should hold ("archive.gz"
        # of another compressor): a file no loader reads, like a binary README.
        return LoadFailure(document_id, DocumentFailureReason.UNSUPPORTED_FORMAT)
    if isinstance(data, DocumentFailureReason):
        return LoadFailure(document_id, data)
    if not inner and looks_like_text(data) is not None:
        return LoadFailure(document_id, DocumentFailureReason.UNSUPPORTED_FORMAT)
    stem = PurePosixPath(PurePosixPath(document_id).stem).stem
    return load_bytes(
        document_id,
        source_id,
        data,
        fmt,
        max_bytes=max_bytes,
        metadata=metadata,
        fallback_title=stem.replace("-", " ").replace("_", " "),
        extension=inner,
    )
