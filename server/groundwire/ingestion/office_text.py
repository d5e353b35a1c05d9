"""Office packages and e-books for the loaders: DOCX via python-docx, PPTX via
python-pptx, XLSX via openpyxl in read-only mode, ODT and EPUB with the standard
library's zipfile + ElementTree. Headings, slide titles and sheet names become
Markdown sections, tables `a | b` rows.

Every format is a ZIP package: before a library opens one, `check_package` refuses
it by its declared sizes and entries (Python's zipfile never inflates an entry past
what it declares) and by the elements of its XML parts, counted while inflating in
bounded pieces. Returns the text and title, or a content-free failure reason; never
raises for a bad document."""

from __future__ import annotations

import io
import posixpath
import xml.etree.ElementTree as ElementTree
import zipfile
from collections.abc import Callable
from pathlib import PurePosixPath
from urllib.parse import unquote

from groundwire.domain.operations import DocumentFailureReason
from groundwire.ingestion.html_text import html_to_text

# Office packages: at most this many ZIP entries, and at most this many bytes
# once inflated in total (OOXML text parts compress about 5-20x; a larger ratio
# up to this bound is still read, a zip bomb is not).
MAX_PACKAGE_ENTRIES = 5_000
PACKAGE_EXPANSION = 32
MAX_PACKAGE_BYTES = 128 * 1024 * 1024

# Markup elements (counted as `<`) an office package's XML parts may hold in all: a
# 216 KB DOCX inflating to 76 MB of tiny elements (under the size bound) once took
# python-docx two minutes and 1.25 GB; a 500-page report holds about 300,000.
MAX_PACKAGE_ELEMENTS = 2_000_000
_MARKUP_SUFFIXES = (".xml", ".rels", ".xhtml", ".html", ".htm", ".opf", ".ncx", ".svg")


def check_package(data: bytes, max_bytes: int) -> DocumentFailureReason | None:
    """Refuse a ZIP package that is not one, has too many entries, or inflates
    beyond min(PACKAGE_EXPANSION x max_bytes, MAX_PACKAGE_BYTES) bytes (TOO_LARGE),
    or whose XML parts hold more than MAX_PACKAGE_ELEMENTS elements (TOO_COMPLEX),
    counted while inflating in bounded pieces, before any library parses it."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_PACKAGE_ENTRIES:
                return DocumentFailureReason.TOO_LARGE
            limit = min(PACKAGE_EXPANSION * max_bytes, MAX_PACKAGE_BYTES)
            if sum(i.file_size for i in infos) > limit:
                return DocumentFailureReason.TOO_LARGE
            if _markup_elements(zf, infos) > MAX_PACKAGE_ELEMENTS:
                return DocumentFailureReason.TOO_COMPLEX
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, NotImplementedError):
        return DocumentFailureReason.PARSE_FAILED
    return None


def _markup_elements(zf: zipfile.ZipFile, infos: list[zipfile.ZipInfo]) -> int:
    """Elements in the package's markup parts, counted up to just past the bound
    (zipfile never inflates an entry past its declared size)."""
    total = 0
    for info in infos:
        if not info.filename.lower().endswith(_MARKUP_SUFFIXES):
            continue
        with zf.open(info) as part:
            while piece := part.read(1 << 20):
                total += piece.count(b"<")
                if total > MAX_PACKAGE_ELEMENTS:
                    return total
    return total


class _TextTooLarge(Exception):
    pass


class _TooComplex(Exception):
    """A structure bound of the format was passed (cells, elements, nesting)."""


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


# Cells an XLSX may make the reader produce, counting the empty cells it fills in
# before a row's last cell and one per row it skips: a sheet's declared dimension
# (`A1:XFD1048576`, 17 billion cells) is never trusted, and a crafted sheet with one
# cell in column XFD of each row is refused instead of padded for minutes.
MAX_SHEET_CELLS = 2_000_000


def _xlsx_text(data: bytes, out: _Lines) -> str:
    import openpyxl

    book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    budget = MAX_SHEET_CELLS
    try:
        for sheet in book.worksheets:
            out.section(sheet.title)
            # Forget the declared dimension: rows are then as wide as their last
            # cell, and a gap between rows is one empty row each, not max_column cells.
            reset = getattr(sheet, "reset_dimensions", None)
            if reset is not None:
                reset()
            for row in sheet.iter_rows(values_only=True):
                budget -= max(1, len(row))
                if budget < 0:
                    raise _TooComplex
                out.add("\t".join("" if v is None else str(v) for v in row).strip())
        return str(book.properties.title or "")
    finally:
        book.close()


_ODF_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_ODF_TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
_DC_TITLE = "{http://purl.org/dc/elements/1.1/}title"


def _xml_part(zf: zipfile.ZipFile, name: str) -> ElementTree.Element:
    """One XML part of a package. Entity declarations are refused (no expansion
    bombs); the part's size is already bounded by `check_package`."""
    data = zf.read(name)
    if b"<!ENTITY" in data or b"<!entity" in data:
        raise ValueError("entity declarations are not read")
    return ElementTree.fromstring(data)


def _odf_inline(element: ElementTree.Element) -> str:
    """The text of an ODF paragraph: spans and links inline, <text:s/> a space,
    tabs and line breaks as such; notes and annotations left out."""
    parts = [element.text or ""]
    for child in element:
        tag = child.tag
        if tag == f"{_ODF_TEXT}s":
            parts.append(" " * int(child.get(f"{_ODF_TEXT}c", "1") or 1))
        elif tag == f"{_ODF_TEXT}tab":
            parts.append("\t")
        elif tag == f"{_ODF_TEXT}line-break":
            parts.append("\n")
        elif tag not in (
            f"{_ODF_TEXT}note",
            "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}annotation",
        ):
            parts.append(_odf_inline(child))
        parts.append(child.tail or "")
    return "".join(parts)


def _odf_blocks(element: ElementTree.Element, out: _Lines) -> None:
    for child in element:
        tag = child.tag
        if tag == f"{_ODF_TEXT}h":
            level = child.get(f"{_ODF_TEXT}outline-level", "1")
            out.section(_odf_inline(child), min(6, int(level)) if level.isdigit() else 1)
        elif tag == f"{_ODF_TEXT}p":
            out.add(_odf_inline(child))
        elif tag == f"{_ODF_TABLE}table-row":
            cells = child.findall(f"{_ODF_TABLE}table-cell")
            out.add(" | ".join(" ".join(_odf_inline(p) for p in c).strip() for c in cells))
        else:
            _odf_blocks(child, out)


def _odt_text(data: bytes, out: _Lines) -> str:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        _odf_blocks(_xml_part(zf, "content.xml"), out)
        if "meta.xml" in zf.namelist():
            title = _xml_part(zf, "meta.xml").find(f".//{_DC_TITLE}")
            return (title.text or "") if title is not None else ""
    return ""


_CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}"
_OPF = "{http://www.idpf.org/2007/opf}"


def _epub_text(data: bytes, out: _Lines) -> str:
    """The spine's XHTML documents in reading order, each through the HTML
    extractor; the title from the package document's dc:title."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        rootfile = _xml_part(zf, "META-INF/container.xml").find(f".//{_CONTAINER}rootfile")
        if rootfile is None or not rootfile.get("full-path"):
            raise ValueError("no package document")
        opf_path = str(rootfile.get("full-path"))
        opf = _xml_part(zf, opf_path)
        base = PurePosixPath(opf_path).parent
        names = set(zf.namelist())
        manifest = {item.get("id"): item.get("href", "") for item in opf.iter(f"{_OPF}item")}
        for ref in opf.iter(f"{_OPF}itemref"):
            href = manifest.get(ref.get("idref"))
            if not href:
                continue
            # hrefs are relative URLs: percent-encoded, possibly with "../".
            name = posixpath.normpath(posixpath.join(str(base), unquote(href.split("#")[0])))
            if name not in names:
                continue  # a spine entry the package lacks: the rest is still read
            raw = zf.read(name)
            if b"\x00" in raw[:8192]:
                raise ValueError("a chapter is binary")
            chapter, _ = html_to_text(raw.decode("utf-8"))  # UnicodeDecodeError: a ValueError
            for block in chapter.split("\n\n"):
                out.add(block)
        title = opf.find(f".//{_DC_TITLE}")
        return (title.text or "") if title is not None else ""


# The readers by format name (`DocumentFormat.value` of the loaders).
_READERS: dict[str, Callable[[bytes, _Lines], str]] = {
    "docx": _docx_text,
    "pptx": _pptx_text,
    "xlsx": _xlsx_text,
    "odt": _odt_text,
    "epub": _epub_text,
}
OFFICE_FORMATS = frozenset(_READERS)


def office_text(
    data: bytes, fmt: str, max_bytes: int, max_chars: int
) -> tuple[str, str] | DocumentFailureReason:
    """The text (Markdown: headings, slide titles and sheet names as sections) and
    title of an office package or e-book of format `fmt` (one of OFFICE_FORMATS),
    refused before parsing when `check_package` refuses it, TOO_LARGE past
    `max_chars` characters of text."""
    refused = check_package(data, max_bytes)
    if refused is not None:
        return refused
    out = _Lines(max_chars)
    try:
        title = _READERS[fmt](data, out)
    except _TextTooLarge:
        return DocumentFailureReason.TOO_LARGE
    except (_TooComplex, RecursionError):
        return DocumentFailureReason.TOO_COMPLEX
    except MemoryError:
        return DocumentFailureReason.TOO_LARGE
    # The libraries raise their own errors, lxml's, zipfile's and KeyError for a
    # missing part: any of them means the package is not a readable document.
    except Exception:
        return DocumentFailureReason.PARSE_FAILED
    return out.text(), title
