"""A corpus of hostile files, made in memory at test time (no downloads, no committed
binaries): small files that cost a parser far more than their size, after the red
team's findings of issue 25 (a 720-byte PDF of one 100,000-letter word, a 1.5 KB XLSX
declaring A1:XFD1048576, a 216 KB DOCX inflating to 76 MB, a PDF page 1,000,000 units
wide) and their obvious relatives.

Each case is a `HostileCase`: its name, the media type it is pushed with, its bytes,
the document failure reasons a protected server may answer (any of TOO_COMPLEX,
TOO_LARGE, PARSE_FAILED where the outcome depends on the parser limits) and whether a
fixed parser may read it quickly instead (`may_ingest`: the document is then stored
like any other). Every file holds `CANARY` in its text where it has text, so logs and
errors can be searched for it. Each file is < 4 MiB (one gRPC message) and is made in
well under 2 s; `corpus()` builds them once per process.

PDFs are written by hand as raw PDF syntax with a correct cross-reference table; office
packages start from the libraries' own templates (openpyxl, python-docx, python-pptx)
whose XML parts are then replaced through zipfile; ODT and EPUB are written by hand.
"""

from __future__ import annotations

import functools
import io
import struct
import zipfile
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# Letters only, so it survives every extractor and hyphen joiner as part of a word.
CANARY = "quokkazebrafjord"

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
ODT = "application/vnd.oasis.opendocument.text"
EPUB = "application/epub+zip"
CSV = "text/csv"
MARKDOWN = "text/markdown"
HTML = "text/html"

# Refusals of the whole call (issue 44): a document past the chunks one document may
# make (RESOURCE_EXHAUSTED, DOCUMENT_CHUNKS_EXCEEDED) or one call may write
# (INVALID_ARGUMENT, FIELD_OUT_OF_RANGE).
CHUNKS_REFUSED = "RPC RESOURCE_EXHAUSTED"
RPC_REFUSED = frozenset({CHUNKS_REFUSED, "RPC INVALID_ARGUMENT"})
TOO_COMPLEX = "TOO_COMPLEX"
TOO_LARGE = "TOO_LARGE"
PARSE_FAILED = "PARSE_FAILED"
LIMITS = frozenset({TOO_COMPLEX, TOO_LARGE, PARSE_FAILED})

MAX_CASE_BYTES = 4 * 1024 * 1024 - 64 * 1024  # room for the rest of the message


@dataclass(frozen=True)
class HostileCase:
    name: str
    media_type: str
    data: bytes
    # Failure reasons a protected server may answer for it.
    reasons: frozenset[str]
    # A fixed parser may read it quickly: an OK (stored) outcome is acceptable too.
    may_ingest: bool
    # What it attacks, for reports.
    attack: str


# --------------------------------------------------------------------------- PDF


def _stream(
    data: bytes, extra: bytes = b"", *, flate: bool = True, length: int | None = None
) -> bytes:
    body = zlib.compress(data, 9) if flate else data
    filt = b" /Filter /FlateDecode" if flate else b""
    n = len(body) if length is None else length
    return b"<< /Length %d%s%s >>\nstream\n" % (n, filt, extra) + body + b"\nendstream"


def _pdf(objects: Sequence[bytes]) -> bytes:
    """A PDF of these objects (object 1 is the catalog), with a correct xref table."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


_HELVETICA = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def _one_page_pdf(
    content: bytes,
    *,
    mediabox: tuple[int, int] = (612, 792),
    font: bytes = _HELVETICA,
    page_extra: bytes = b"",
    more: Sequence[bytes] = (),
) -> bytes:
    """Catalog 1, pages 2, page 3, font 4, content 5, then `more` from object 6."""
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] "
        b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R %s>>"
        % (mediabox[0], mediabox[1], page_extra)
    )
    return _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            page,
            font,
            _stream(content),
            *more,
        ]
    )


def _text_content(lines: Sequence[str], size: int = 10) -> bytes:
    """One text object: each line a Tj, then a move to the next line."""
    body = b"".join(b"(%s) Tj T*\n" % line.encode("ascii") for line in lines)
    return b"BT /F1 %d Tf %d TL 72 760 Td\n" % (size, size + 2) + body + b"ET"


def _words(n: int, seed: int = 7) -> list[str]:
    """n distinct lower-case pseudo-words (deterministic)."""
    syllables = ["ka", "lo", "mi", "ne", "ro", "ta", "vi", "su", "pe", "da", "go", "ri"]
    out: list[str] = []
    state = seed
    while len(out) < n:
        state = (state * 1103515245 + 12345) & 0x7FFFFFFF
        k = 2 + state % 3
        word = ""
        for _ in range(k):
            state = (state * 1103515245 + 12345) & 0x7FFFFFFF
            word += syllables[state % len(syllables)]
        out.append(word + str(len(out)).translate(str.maketrans("0123456789", "abcdefghij")))
    return out


def pdf_long_word() -> bytes:
    """One 100,000-letter word (the hyphen-join regex was cubic in word length)."""
    word = CANARY + "a" * (100_000 - len(CANARY))
    return _one_page_pdf(b"BT /F1 12 Tf 72 700 Td (%s) Tj ET" % word.encode())


def pdf_hyphenated_lines() -> bytes:
    """10,000 lines, each ending in a word broken by a hyphen."""
    words = _words(10_000)
    lines = [
        f"{CANARY} {w[:3]}-" if i == 0 else f"{w[3:]} lorem {w[:3]}-" for i, w in enumerate(words)
    ]
    return _one_page_pdf(_text_content(lines))


def pdf_wide_page() -> bytes:
    """A page 1,000,000 units wide with 2,000 prose runs (column detection was sized
    by the page width: 824 MB)."""
    runs = []
    for i in range(2000):
        x = (i * 499) % 999_000
        y = 50 + (i * 13) % 700
        text = (
            f"{CANARY} lorem ipsum dolor sit amet {i}"
            if i == 0
            else f"lorem ipsum dolor sit amet {i}"
        )
        runs.append(b"1 0 0 1 %d %d Tm (%s) Tj\n" % (x, y, text.encode()))
    content = b"BT /F1 10 Tf\n" + b"".join(runs) + b"ET"
    return _one_page_pdf(content, mediabox=(1_000_000, 792))


def pdf_page_tree_deep(depth: int = 10_000) -> bytes:
    """A page tree 10,000 /Pages nodes deep, one page at the bottom."""
    # 1 catalog, 2 font, 3 content, 4 .. 4+depth-1 Pages nodes, then the page.
    first = 4
    page = first + depth
    objects = [
        b"<< /Type /Catalog /Pages 4 0 R >>",
        _HELVETICA,
        _stream(_text_content([f"{CANARY} at the bottom of the tree"])),
    ]
    for level in range(depth):
        number = first + level
        parent = b"/Parent %d 0 R " % (number - 1) if level else b""
        objects.append(b"<< /Type /Pages %s/Kids [%d 0 R] /Count 1 >>" % (parent, number + 1))
    objects.append(
        b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 2 0 R >> >> /Contents 3 0 R >>" % (page - 1)
    )
    return _pdf(objects)


def pdf_page_tree_wide(pages: int = 10_000) -> bytes:
    """10,000 pages under one /Pages node, all drawing one shared content stream of
    200 runs (a small file, a large text)."""
    first = 5
    kids = b" ".join(b"%d 0 R" % (first + i) for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
        _HELVETICA,
        _stream(_text_content([f"{CANARY} line {i} lorem ipsum dolor" for i in range(200)])),
    ]
    objects += [
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>"
    ] * pages
    return _pdf(objects)


def pdf_nested_arrays(depth: int = 100_000) -> bytes:
    """A page dictionary holding an array nested 100,000 levels deep."""
    nested = b"/GwNested " + b"[" * depth + b"1" + b"]" * depth + b" "
    return _one_page_pdf(_text_content([f"{CANARY} nested arrays"]), page_extra=nested)


def pdf_nested_dicts(depth: int = 100_000) -> bytes:
    """A page dictionary holding a dictionary nested 100,000 levels deep."""
    nested = b"/GwNested " + b"<</A " * depth + b"1" + b">>" * depth + b" "
    return _one_page_pdf(_text_content([f"{CANARY} nested dictionaries"]), page_extra=nested)


def pdf_flate_content() -> bytes:
    """A content stream of ~70 KB inflating 1000x, to ~70 MB of text operators (just
    under pypdf's 75 MB inflate limit, so the operators are parsed)."""
    ops = b"(ab) Tj " * (70_000_000 // 8)
    content = b"BT /F1 10 Tf 72 700 Td (%s) Tj " % CANARY.encode() + ops + b"ET"
    return _one_page_pdf(content)


def _type1_font() -> tuple[bytes, bytes]:
    """A Type1 font without /Encoding whose descriptor embeds `font_file` (object 6):
    pypdf reads the embedded program for the encoding."""
    font = (
        b"<< /Type /Font /Subtype /Type1 /BaseFont /GwHostile /FirstChar 32 /LastChar 126 "
        b"/FontDescriptor 7 0 R >>"
    )
    descriptor = (
        b"<< /Type /FontDescriptor /FontName /GwHostile /Flags 32 /FontBBox [0 0 1000 1000] "
        b"/ItalicAngle 0 /Ascent 800 /Descent -200 /CapHeight 700 /StemV 80 /FontFile 6 0 R >>"
    )
    return font, descriptor


def pdf_font_huge() -> bytes:
    """An embedded Type1 font program of ~70 KB inflating to ~70 MB of encoding lines."""
    program = b"%!PS-AdobeFont-1.0: GwHostile\n/Encoding 256 array\n" + (
        b"dup 65 /A put\n" * (70_000_000 // 14)
    )
    font, descriptor = _type1_font()
    stream = _stream(program, b" /Length1 %d /Length2 0 /Length3 0" % len(program))
    return _one_page_pdf(
        _text_content([f"{CANARY} huge font"]), font=font, more=[stream, descriptor]
    )


def pdf_font_invalid() -> bytes:
    """An embedded font stream declaring 2 GB, whose bytes are not a deflate stream."""
    junk = bytes((i * 131 + 7) & 0xFF for i in range(200_000))
    stream = b"<< /Length 2147483647 /Filter /FlateDecode /Length1 2147483647 >>\nstream\n"
    stream += junk + b"\nendstream"
    font, descriptor = _type1_font()
    return _one_page_pdf(
        _text_content([f"{CANARY} invalid font"]), font=font, more=[stream, descriptor]
    )


# ----------------------------------------------------------------- ZIP packages


def _zip(parts: Sequence[tuple[str, bytes]], *, stored: Sequence[str] = ("mimetype",)) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in parts:
            if name in stored:
                zf.writestr(name, data, compress_type=zipfile.ZIP_STORED)
            else:
                zf.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    return buf.getvalue()


def _repack(package: bytes, replace: dict[str, bytes]) -> bytes:
    """The package with some parts' bytes replaced (order and other parts kept)."""
    with zipfile.ZipFile(io.BytesIO(package)) as zf:
        parts = [(i.filename, replace.get(i.filename, zf.read(i))) for i in zf.infolist()]
    return _zip(parts)


def _part(package: bytes, name: str) -> bytes:
    with zipfile.ZipFile(io.BytesIO(package)) as zf:
        return zf.read(name)


@functools.cache
def _docx_template() -> bytes:
    import docx

    document = docx.Document()
    document.add_paragraph("GWPLACEHOLDER")
    buf = io.BytesIO()
    document.save(buf)
    return buf.getvalue()


@functools.cache
def _pptx_template() -> bytes:
    import pptx
    from pptx.util import Inches

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    title = slide.shapes.title
    if title is not None:
        title.text = "Hostile"
    box = slide.shapes.add_textbox(Inches(1), Inches(2), Inches(6), Inches(3))
    box.text_frame.text = "GWPLACEHOLDER"
    buf = io.BytesIO()
    deck.save(buf)
    return buf.getvalue()


@functools.cache
def _xlsx_template() -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet["A1"] = "GWPLACEHOLDER"
    buf = io.BytesIO()
    book.save(buf)
    return buf.getvalue()


def _docx_with(body_xml: bytes) -> bytes:
    """The template DOCX with its placeholder paragraph replaced by `body_xml`."""
    template = _docx_template()
    document = _part(template, "word/document.xml")
    start = document.rindex(b"<w:p>", 0, document.index(b"GWPLACEHOLDER"))
    end = document.index(b"</w:p>", start) + len(b"</w:p>")
    return _repack(template, {"word/document.xml": document[:start] + body_xml + document[end:]})


def _w_p(text: str) -> bytes:
    return b"<w:p><w:r><w:t>%s</w:t></w:r></w:p>" % text.encode()


def docx_inflated() -> bytes:
    """document.xml inflating to ~76 MB of tiny paragraphs (under the 128 MiB package
    cap): >120 s and 1.25 GB each on the old code."""
    tiny = b"<w:p><w:r><w:t>a</w:t></w:r></w:p>"
    return _docx_with(_w_p(CANARY) + tiny * (76_000_000 // len(tiny)))


def docx_deep_sdt(depth: int = 100_000) -> bytes:
    """100,000 nested content controls (<w:sdt><w:sdtContent>) around one paragraph."""
    return _docx_with(
        b"<w:sdt><w:sdtContent>" * depth + _w_p(CANARY) + b"</w:sdtContent></w:sdt>" * depth
    )


def docx_billion_laughs() -> bytes:
    """document.xml with a DOCTYPE of nested entities (10^9 expansions)."""
    template = _docx_template()
    document = _part(template, "word/document.xml")
    head = b"<?xml version='1.0' encoding='UTF-8' standalone='yes'?>\n" + _laughs_dtd(b"w:document")
    body = document[document.index(b"<w:document") :].replace(
        b"GWPLACEHOLDER", CANARY.encode() + b"&lol9;"
    )
    return _repack(template, {"word/document.xml": head + body})


def _pptx_with(runs_xml: bytes) -> bytes:
    """The template PPTX with its placeholder run replaced by `runs_xml` (runs of one
    paragraph of a text box)."""
    template = _pptx_template()
    slide = _part(template, "ppt/slides/slide1.xml")
    start = slide.rindex(b"<a:r>", 0, slide.index(b"GWPLACEHOLDER"))
    end = slide.index(b"</a:r>", start) + len(b"</a:r>")
    return _repack(template, {"ppt/slides/slide1.xml": slide[:start] + runs_xml + slide[end:]})


def _a_r(text: str) -> bytes:
    return b"<a:r><a:t>%s</a:t></a:r>" % text.encode()


def pptx_huge_slide() -> bytes:
    """A slide whose text box holds ~70 MB of one-letter runs."""
    tiny = b"<a:r><a:t>a</a:t></a:r>"
    return _pptx_with(_a_r(CANARY) + tiny * (70_000_000 // len(tiny)))


def pptx_deep_slide(depth: int = 100_000) -> bytes:
    """A run nested in 100,000 levels of (ignorable) extension elements."""
    open_ = b'<gw:x xmlns:gw="urn:groundwire:hostile">' + b"<gw:x>" * (depth - 1)
    return _pptx_with(open_ + _a_r(CANARY) + b"</gw:x>" * depth)


_XLSX_MAIN = b'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'


def _xlsx_with(sheet_xml: bytes) -> bytes:
    return _repack(_xlsx_template(), {"xl/worksheets/sheet1.xml": sheet_xml})


def _cell(ref: str, text: str) -> bytes:
    return b'<c r="%s" t="inlineStr"><is><t>%s</t></is></c>' % (ref.encode(), text.encode())


def xlsx_dimension() -> bytes:
    """Dimension A1:XFD1048576, cells only in rows 1 and 1,048,576 (openpyxl's
    read-only mode fills the gap: ~13 min of CPU)."""
    return _xlsx_with(
        b"<?xml version='1.0' encoding='UTF-8' standalone='yes'?>\n<worksheet %s>"
        b'<dimension ref="A1:XFD1048576"/><sheetData>'
        b'<row r="1">%s</row><row r="1048576">%s</row>'
        b"</sheetData></worksheet>" % (_XLSX_MAIN, _cell("A1", CANARY), _cell("XFD1048576", "last"))
    )


def xlsx_column_xfd(rows: int = 20_000) -> bytes:
    """One cell in each of rows 1..20,000, all in the last column (XFD): every row
    read is 16,384 cells wide."""
    body = b"".join(
        b'<row r="%d"><c r="XFD%d"><v>%d</v></c></row>' % (r, r, r) for r in range(2, rows + 1)
    )
    return _xlsx_with(
        b"<?xml version='1.0' encoding='UTF-8' standalone='yes'?>\n<worksheet %s><sheetData>"
        b'<row r="1">%s</row>%s</sheetData></worksheet>' % (_XLSX_MAIN, _cell("XFD1", CANARY), body)
    )


_ODF_NS = (
    b'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    b'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2"'
)
_ODT_MANIFEST = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b'<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" '
    b'manifest:version="1.2"><manifest:file-entry manifest:full-path="/" '
    b'manifest:media-type="application/vnd.oasis.opendocument.text"/>'
    b'<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
    b"</manifest:manifest>"
)


def _odt(content_xml: bytes) -> bytes:
    return _zip(
        [
            ("mimetype", ODT.encode()),
            ("META-INF/manifest.xml", _ODT_MANIFEST),
            ("content.xml", content_xml),
        ]
    )


def _odt_body(body: bytes, prolog: bytes = b'<?xml version="1.0" encoding="UTF-8"?>\n') -> bytes:
    return (
        prolog
        + b"<office:document-content %s><office:body><office:text>" % _ODF_NS
        + body
        + b"</office:text></office:body></office:document-content>"
    )


def odt_huge_content() -> bytes:
    """content.xml inflating to ~76 MB of one-letter paragraphs."""
    tiny = b"<text:p>a</text:p>"
    return _odt(
        _odt_body(b"<text:p>%s</text:p>" % CANARY.encode() + tiny * (76_000_000 // len(tiny)))
    )


def odt_deep_content(depth: int = 100_000) -> bytes:
    """A paragraph inside 100,000 nested sections (the block walk recurses)."""
    return _odt(
        _odt_body(
            b"<text:section>" * depth
            + b"<text:p>%s</text:p>" % CANARY.encode()
            + b"</text:section>" * depth
        )
    )


def _laughs_dtd(root: bytes) -> bytes:
    entities = [b'<!ENTITY lol0 "lol">']
    entities += [b'<!ENTITY lol%d "%s">' % (i, b"&lol%d;" % (i - 1) * 10) for i in range(1, 10)]
    return b"<!DOCTYPE %s [\n%s\n]>\n" % (root, b"\n".join(entities))


def odt_billion_laughs() -> bytes:
    """content.xml declaring nested entities: 10^9 expansions of "lol"."""
    prolog = b'<?xml version="1.0" encoding="UTF-8"?>\n' + _laughs_dtd(b"office:document-content")
    return _odt(_odt_body(b"<text:p>%s &lol9;</text:p>" % CANARY.encode(), prolog))


def odt_billion_laughs_utf16() -> bytes:
    """The same in UTF-16, where the bytes "<!ENTITY" never occur: a byte search for
    entity declarations misses it, the XML parser does not."""
    prolog = b'<?xml version="1.0" encoding="UTF-16"?>\n' + _laughs_dtd(b"office:document-content")
    xml = _odt_body(b"<text:p>%s &lol9;</text:p>" % CANARY.encode(), prolog)
    return _odt(xml.decode("utf-8").encode("utf-16"))


_CONTAINER_XML = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b'<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
    b'<rootfiles><rootfile full-path="OEBPS/content.opf" '
    b'media-type="application/oebps-package+xml"/></rootfiles></container>'
)
_OPF = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b'<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">'
    b'<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">gw</dc:identifier>'
    b"<dc:title>Hostile</dc:title><dc:language>en</dc:language></metadata>"
    b'<manifest><item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/></manifest>'
    b'<spine><itemref idref="c1"/></spine></package>'
)


def _epub(chapter_body: bytes) -> bytes:
    chapter = (
        b'<?xml version="1.0" encoding="UTF-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml">'
        b"<head><title>c1</title></head><body>" + chapter_body + b"</body></html>"
    )
    return _zip(
        [
            ("mimetype", EPUB.encode()),
            ("META-INF/container.xml", _CONTAINER_XML),
            ("OEBPS/content.opf", _OPF),
            ("OEBPS/c1.xhtml", chapter),
        ]
    )


def epub_huge_chapter() -> bytes:
    """A chapter inflating to ~76 MB of one-letter paragraphs."""
    tiny = b"<p>a</p>"
    return _epub(b"<p>%s</p>" % CANARY.encode() + tiny * (76_000_000 // len(tiny)))


def epub_deep_chapter(depth: int = 100_000) -> bytes:
    """A paragraph inside 100,000 nested <div>s."""
    return _epub(b"<div>" * depth + b"<p>%s</p>" % CANARY.encode() + b"</div>" * depth)


def _lie_about_size(package: bytes, name: str, declared: int) -> bytes:
    """The package with `name`'s uncompressed size declared as `declared` in both its
    local header and its central directory entry (the data and CRC unchanged)."""
    out = bytearray(package)
    with zipfile.ZipFile(io.BytesIO(package)) as zf:
        local = zf.getinfo(name).header_offset
    struct.pack_into("<I", out, local + 22, declared)
    at = out.find(b"PK\x01\x02")
    while at >= 0:
        name_len = struct.unpack_from("<H", out, at + 28)[0]
        if bytes(out[at + 46 : at + 46 + name_len]) == name.encode():
            struct.pack_into("<I", out, at + 24, declared)
            return bytes(out)
        at = out.find(b"PK\x01\x02", at + 46)
    raise AssertionError(f"{name} not in the central directory")


def zip_declared_small() -> bytes:
    """A DOCX whose document.xml declares 4 KiB but inflates to ~60 MB (the package
    check reads declared sizes; zipfile stops at the declared size and fails the CRC)."""
    tiny = b"<w:p><w:r><w:t>a</w:t></w:r></w:p>"
    package = _docx_with(_w_p(CANARY) + tiny * (60_000_000 // len(tiny)))
    return _lie_about_size(package, "word/document.xml", 4096)


# ------------------------------------------------------------ text (issue 44)


def csv_wide_header(columns: int = 380_000) -> bytes:
    """The red team's CSV scaled to one message: a header of 380,000 columns and one
    row (theirs: 1,000,000 columns, 8.9 MB, 12,699 chunks and 1.4 GiB of server RSS
    on the memory store); thousands of chunks from one small file."""
    header = ",".join([CANARY, *(f"c{i}" for i in range(1, columns))])
    return (header + "\n" + ",".join("1" for _ in range(columns)) + "\n").encode()


def md_huge_heading() -> bytes:
    """A Markdown heading of 1,000,000 characters: the title and every chunk's section."""
    return ("# " + "h" * 1_000_000 + "\n\n" + CANARY + " body.\n").encode()


def html_huge_title() -> bytes:
    """An HTML <title> of 1,000,000 characters (a 1 MB title made a 3 MB answer)."""
    return (
        "<html><head><title>"
        + "t" * 1_000_000
        + "</title></head><body><p>"
        + CANARY
        + "</p></body></html>"
    ).encode()


# ----------------------------------------------------------------------- corpus

_ANY = LIMITS
_BUILDERS: Sequence[tuple[str, str, Callable[[], bytes], frozenset[str], bool, str]] = (
    ("pdf-long-word", PDF, pdf_long_word, _ANY, True, "one 100,000-letter word"),
    ("pdf-hyphenated-lines", PDF, pdf_hyphenated_lines, _ANY, True, "10,000 hyphenated line ends"),
    ("pdf-wide-page", PDF, pdf_wide_page, _ANY, True, "MediaBox 1,000,000 wide, 2,000 runs"),
    ("pdf-page-tree-deep", PDF, pdf_page_tree_deep, _ANY, True, "page tree 10,000 deep"),
    ("pdf-page-tree-wide", PDF, pdf_page_tree_wide, _ANY, True, "10,000 pages x 200 runs"),
    ("pdf-nested-arrays", PDF, pdf_nested_arrays, _ANY, True, "array nested 100,000 deep"),
    ("pdf-nested-dicts", PDF, pdf_nested_dicts, _ANY, True, "dictionary nested 100,000 deep"),
    ("pdf-flate-content", PDF, pdf_flate_content, _ANY, True, "content stream inflating 1000x"),
    ("pdf-font-huge", PDF, pdf_font_huge, _ANY, True, "font program inflating 1000x"),
    ("pdf-font-invalid", PDF, pdf_font_invalid, _ANY, True, "font stream: 2 GB declared, junk"),
    ("xlsx-dimension", XLSX, xlsx_dimension, _ANY, True, "A1:XFD1048576, rows 1 and 1048576"),
    ("xlsx-column-xfd", XLSX, xlsx_column_xfd, _ANY, True, "rows 1..20,000 at column XFD"),
    ("docx-inflated", DOCX, docx_inflated, _ANY, True, "document.xml inflating to 76 MB"),
    ("docx-deep-sdt", DOCX, docx_deep_sdt, _ANY, True, "100,000 nested w:sdt"),
    ("docx-billion-laughs", DOCX, docx_billion_laughs, _ANY, True, "entity expansion 10^9"),
    ("pptx-huge-slide", PPTX, pptx_huge_slide, _ANY, True, "slide inflating to 70 MB of runs"),
    ("pptx-deep-slide", PPTX, pptx_deep_slide, _ANY, True, "a run 100,000 elements deep"),
    ("odt-huge-content", ODT, odt_huge_content, _ANY, True, "content.xml inflating to 76 MB"),
    ("odt-deep-content", ODT, odt_deep_content, _ANY, True, "100,000 nested sections"),
    ("odt-billion-laughs", ODT, odt_billion_laughs, _ANY, False, "entity expansion 10^9"),
    (
        "odt-billion-laughs-utf16",
        ODT,
        odt_billion_laughs_utf16,
        _ANY,
        False,
        "entity expansion 10^9, UTF-16",
    ),
    ("epub-huge-chapter", EPUB, epub_huge_chapter, _ANY, True, "chapter inflating to 76 MB"),
    ("epub-deep-chapter", EPUB, epub_deep_chapter, _ANY, True, "100,000 nested div"),
    (
        "csv-wide-header",
        CSV,
        csv_wide_header,
        frozenset({CHUNKS_REFUSED}),
        False,
        "a header of 380,000 columns: thousands of chunks",
    ),
    (
        "md-huge-heading",
        MARKDOWN,
        md_huge_heading,
        _ANY | RPC_REFUSED,
        True,
        "a heading of 1,000,000 chars",
    ),
    ("html-huge-title", HTML, html_huge_title, _ANY, True, "a <title> of 1,000,000 chars"),
    (
        "zip-declared-small",
        DOCX,
        zip_declared_small,
        frozenset({TOO_LARGE, PARSE_FAILED, TOO_COMPLEX}),
        False,
        "entry declares 4 KiB, inflates to 60 MB",
    ),
)

NAMES: tuple[str, ...] = tuple(b[0] for b in _BUILDERS)


@functools.cache
def case(name: str) -> HostileCase:
    for case_name, media_type, build, reasons, may_ingest, attack in _BUILDERS:
        if case_name == name:
            data = build()
            if len(data) > MAX_CASE_BYTES:
                raise AssertionError(f"{name}: {len(data)} bytes, over one message")
            return HostileCase(name, media_type, data, reasons, may_ingest, attack)
    raise KeyError(name)


def corpus() -> list[HostileCase]:
    """Every case (built once per process)."""
    return [case(name) for name in NAMES]


# Text-like cases are read and chunked in the serving process (no parser library): four
# callers pushing them concurrently hold the interpreter for seconds on a loaded 2-core
# machine (health checks up to 2 s, one past 5 s of ~90). Known, not yet fixed (issue 44's
# report: move large text reads to the parser workers); the concurrent attacks leave them
# out, each is still pushed alone (test a).
IN_PROCESS = frozenset({"csv-wide-header", "md-huge-heading"})


def attack_corpus() -> list[HostileCase]:
    """The cases the concurrent attacks push: every one but IN_PROCESS."""
    return [c for c in corpus() if c.name not in IN_PROCESS]
