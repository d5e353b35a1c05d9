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


def pdf_text(data: bytes) -> tuple[str, str] | DocumentFailureReason:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [_pdf_page_text(page) for page in reader.pages]
        meta = reader.metadata
        title = str(meta.title) if meta is not None and meta.title else ""
    except (PyPdfError, ValueError, KeyError, TypeError, OSError):
        return DocumentFailureReason.PARSE_FAILED
    text = "\n\n".join(p.strip() for p in pages if p.strip())
    return join_hyphenated(text), title


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
    if len(runs) < 2 * _MIN_COLUMN_LINES or width <= 0:
        return None
    import numpy as np

    # Runs crossing each candidate gutter in the middle band, all at once.
    splits = np.arange(int(width * 0.3), int(width * 0.7), 2, dtype=np.float64)
    if splits.size == 0:
        return None
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


# A word broken across lines by a hyphen: "manip-\nulation". Group 1 is the text
# before the hyphen back to the previous space (so "state-of-the-" is seen whole).
_LINE_HYPHEN = re.compile(r"(\S*?)([^\W\d_]*)-[ \t]*\n[ \t]*(?=(\w+))")


def join_hyphenated(text: str) -> str:
    """Join words a PDF hyphenated at a line end. A lower-case word part followed
    by a lower-case continuation is one word ("manip- ulation" -> "manipulation",
    "Data- base" -> "Database");
    a compound that already has a hyphen ("state-of-the-" + "art"), an identifier
    ("POL-HR-" + "014") or a capital on either side keeps its hyphen, joined without
    the line break. A pair the document also writes hyphenated elsewhere on one
    line ("well-known") keeps its hyphen too."""

    def join(m: re.Match[str]) -> str:
        lead, word, follow = m.group(1), m.group(2), m.group(3)
        if not lead and not word:
            return m.group(0)  # a dash after a space: not a broken word
        soft = (
            not lead
            and word.isalpha()
            and word[1:].islower()
            and follow[0].isalpha()
            and follow[0].islower()
            and f"{word}-{follow}" not in text
        )
        return f"{lead}{word}" if soft else f"{lead}{word}-"

    return _LINE_HYPHEN.sub(join, text)
