"""PDF text for the loaders (pypdf): pages in reading order (two-column pages
detected from the runs' geometry, a left column before the right one) and words
hyphenated at a line end joined back. Returns the text and the PDF's title, or a
content-free failure reason; never raises for a bad document."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

from groundwire.domain.operations import DocumentFailureReason

# Pages a PDF may have (a page tree of millions of empty pages is a few KB).
MAX_PDF_PAGES = 10_000


# Marks where a page's text starts in the joined text (after the first page), until
# the loader has normalized the text and turns the marks into offsets
# (`take_page_marks`). A Unicode noncharacter: no text uses it, and any a PDF
# holds is dropped before the pages are joined.
PAGE_MARK = "\ufdd0"


def pdf_text(data: bytes, max_chars: int | None = None) -> tuple[str, str] | DocumentFailureReason:
    """The PDF's text and title. TOO_COMPLEX past MAX_PDF_PAGES pages, TOO_LARGE past
    `max_chars` characters of text (checked page by page, so extraction stops there)."""
    result = pdf_text_pages(data, max_chars)
    if isinstance(result, DocumentFailureReason):
        return result
    text, title, _ = result
    return text.replace(PAGE_MARK, ""), title


def pdf_text_pages(
    data: bytes, max_chars: int | None = None
) -> tuple[str, str, list[int]] | DocumentFailureReason:
    """Like `pdf_text`, with the start of every page's text after the first marked
    by PAGE_MARK, and the one-based numbers of the pages with text, in order (pages
    without text have no mark). Limits and failures are `pdf_text`'s."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if len(reader.pages) > MAX_PDF_PAGES:
            return DocumentFailureReason.TOO_COMPLEX
        pages: list[str] = []
        left = max_chars
        for page in reader.pages:
            pages.append(_pdf_page_text(page))
            if left is not None:
                left -= len(pages[-1])
                if left < 0:
                    return DocumentFailureReason.TOO_LARGE
        meta = reader.metadata
        title = str(meta.title) if meta is not None and meta.title else ""
    except (PyPdfError, ValueError, KeyError, TypeError, OSError):
        return DocumentFailureReason.PARSE_FAILED
    kept = [(n, p.replace(PAGE_MARK, "").strip()) for n, p in enumerate(pages, start=1)]
    kept = [(n, p) for n, p in kept if p]
    # A page break is a blank line, which a hyphen at a page's end never joins across.
    text = ("\n\n" + PAGE_MARK).join(p for _, p in kept)
    return join_hyphenated(text), title, [n for n, _ in kept]


def take_page_marks(text: str, numbers: list[int]) -> tuple[str, list[tuple[int, int]]]:
    """`text` without its PAGE_MARKs, and `(page, offset)` of each page's start in
    it: `numbers[0]` at 0, `numbers[k]` where the k-th mark was. Marks beyond
    `numbers` are dropped."""
    parts = text.split(PAGE_MARK)
    starts: list[tuple[int, int]] = []
    offset = 0
    for k, part in enumerate(parts):
        if k < len(numbers):
            starts.append((numbers[k], offset))
        offset += len(part)
    return "".join(parts), starts


@dataclass(frozen=True, slots=True)
class _Run:
    """A text run drawn on a PDF page: its start, estimated end and baseline."""

    x0: float
    x1: float
    y: float
    text: str


# Column detection: a page is two columns when a vertical gutter in the middle
# band of the page is crossed by at most this share of the runs, and each side
# holds at least this many lines of prose-length runs (a two-cell table is not
# two columns).
_GUTTER_CROSSING = 0.05
_MIN_COLUMN_LINES = 6
_MIN_COLUMN_RUN_CHARS = 20
# Column detection's own cost is bounded whatever the page declares: at most this
# many candidate gutters (evenly spaced over the middle band, however wide the page:
# a page 1,000,000 units wide once sized the crossing matrix at 824 MB) and pages with
# more runs than this keep pypdf's order.
_MAX_GUTTERS = 256
_MAX_COLUMN_RUNS = 20_000
# Average glyph advance of a Latin text font, in ems (an estimate: pypdf gives a
# run's start and font size, not its width).
_EM_ADVANCE = 0.5


def _pdf_page_text(page: Any) -> str:
    """A page's text in reading order: pypdf's (content stream order) unless the
    page is laid out in two columns, then the left column top to bottom, then the
    right one (runs spanning both, such as a title above them, first)."""
    runs: list[_Run] = []

    def visit(text: str, cm: list[float], tm: list[float], font: object, size: float) -> None:
        if not text.strip():
            return
        x = tm[4] * cm[0] + tm[5] * cm[2] + cm[4]
        y = tm[4] * cm[1] + tm[5] * cm[3] + cm[5]
        scale = abs(tm[0] * cm[0]) or 1.0
        width = len(text.rstrip("\n")) * size * scale * _EM_ADVANCE
        runs.append(_Run(x, x + width, y, text.strip()))

    text = page.extract_text(visitor_text=visit) or ""
    try:
        ordered = _two_columns(runs, float(page.mediabox.width))
    # Column detection is an improvement over pypdf's order, never a reason to
    # lose the page: any surprise in the geometry falls back to pypdf's text.
    except (ArithmeticError, ValueError, TypeError, IndexError):
        return text
    return text if ordered is None else ordered


def _two_columns(runs: list[_Run], width: float) -> str | None:
    if not 2 * _MIN_COLUMN_LINES <= len(runs) <= _MAX_COLUMN_RUNS or not 0 < width < 1e9:
        return None
    import numpy as np

    # Runs crossing each candidate gutter in the middle band, all at once: every 2
    # units on a page of usual size, at most _MAX_GUTTERS candidates on any page.
    band = width * 0.4
    count = min(_MAX_GUTTERS, int(band // 2))
    if count < 1:
        return None
    splits = np.linspace(width * 0.3, width * 0.7, count, endpoint=False, dtype=np.float64)
    x0 = np.fromiter((r.x0 for r in runs), np.float64, len(runs))[:, None]
    x1 = np.fromiter((r.x1 for r in runs), np.float64, len(runs))[:, None]
    crossings = ((x0 < splits) & (splits < x1)).sum(axis=0)
    best = int(np.argmin(crossings))
    crossing, split = int(crossings[best]), float(splits[best])
    if crossing > _GUTTER_CROSSING * len(runs):
        return None
    left = [r for r in runs if r.x1 <= split]
    right = [r for r in runs if r.x0 >= split]
    for side in (left, right):
        lines = {round(r.y) for r in side if len(r.text) >= _MIN_COLUMN_RUN_CHARS}
        if len(lines) < _MIN_COLUMN_LINES:
            return None
    top = max(r.y for r in left + right)
    spanning = [r for r in runs if r.x0 < split < r.x1]
    above = [r for r in spanning if r.y > top]
    below = [r for r in spanning if r.y <= top]
    return "\n".join(_lines(above) + _lines(left) + _lines(right) + _lines(below))


def _lines(runs: list[_Run]) -> list[str]:
    """Runs grouped into lines by baseline (top of the page first), left to right."""
    by_line: dict[int, list[_Run]] = {}
    for r in runs:
        by_line.setdefault(round(r.y), []).append(r)
    return [
        " ".join(r.text for r in sorted(by_line[y], key=lambda r: r.x0))
        for y in sorted(by_line, reverse=True)
    ]


# A hyphen at a line end, followed by a word on the next line.
_LINE_BREAK_HYPHEN = re.compile(r"-[ \t]*\n[ \t]*(?=\w)")
_WORD = re.compile(r"\w+")
# Every "letters-word" pair written on one line, overlapping ("state-of-the-art"
# gives state-of, of-the, the-art): a word starts where no letter precedes it, so each
# letter is looked at a bounded number of times.
_ONE_LINE_PAIR = re.compile(r"(?<![^\W\d_])(?=([^\W\d_]+)-(\w+))")


def join_hyphenated(text: str) -> str:
    """Join words a PDF hyphenated at a line end. A lower-case word part followed
    by a lower-case continuation is one word ("manip- ulation" -> "manipulation",
    "Data- base" -> "Database");
    a compound that already has a hyphen ("state-of-the-" + "art"), an identifier
    ("POL-HR-" + "014") or a capital on either side keeps its hyphen, joined without
    the line break. A pair the document also writes hyphenated elsewhere on one
    line ("well-known") keeps its hyphen too.

    One pass, linear in the text: each break looks back only to the previous one
    (the text between two breaks is read once), never re-scans the document (a
    crafted PDF made of one 100,000-letter word cost a cubic regex minutes of CPU)."""
    out: list[str] = []
    pos = 0
    pairs: set[tuple[str, str]] | None = None
    for m in _LINE_BREAK_HYPHEN.finditer(text):
        hyphen = m.start()
        segment = text[pos:hyphen]
        # The hyphenated token: the non-space run before the hyphen ("" after a
        # space: a dash, not a broken word, stays as it is).
        token = segment.split()[-1] if segment and not segment[-1].isspace() else ""
        if not token:
            out.append(text[pos : m.end()])
            pos = m.end()
            continue
        # Its word part: the letters at its end; the rest ("state-of-the-" before
        # "the", "POL-HR-014") is the lead.
        cut = len(token)
        while cut > 0 and token[cut - 1].isalpha():
            cut -= 1
        lead, word = token[:cut], token[cut:]
        follow_match = _WORD.match(text, m.end())
        follow = follow_match.group(0) if follow_match is not None else ""
        soft = (
            not lead
            and bool(word)
            and word[1:].islower()
            and follow[:1].isalpha()
            and follow[:1].islower()
        )
        if soft:
            if pairs is None:
                pairs = {(a, b) for a, b in _ONE_LINE_PAIR.findall(text)}
            soft = (word, follow) not in pairs
        out.append(text[pos:hyphen])
        if not soft:
            out.append("-")
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)
