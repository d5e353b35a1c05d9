"""Pages of a paginated document (PDF), as character offsets.

The PDF loader records where each page's text starts in the document's normalized
text, in the document metadata under PAGE_STARTS_KEY (reserved: a loader sets it,
so the pages travel with the document to every store without a schema of their
own): "1:0,2:1532,4:3001" reads "page 1 starts at offset 0, page 2 at 1532, page
4 at 3001" (page 3 had no text). A chunk's or a snippet's span maps to the pages
it starts and ends on (`page_range`).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence

__all__ = [
    "MAX_PAGE_STARTS_CHARS",
    "PAGE_STARTS_KEY",
    "encode_page_starts",
    "page_range",
    "parse_page_starts",
]

PAGE_STARTS_KEY = "pdf.page_starts"
# The longest record kept (about 1,400 pages): metadata values are indexed whole
# (OpenSearch keeps each as one keyword, at most 32,766 bytes), so a longer
# document records no pages at all rather than a value a store refuses.
MAX_PAGE_STARTS_CHARS = 16_000


def encode_page_starts(starts: Sequence[tuple[int, int]]) -> str | None:
    """`[(page, offset), ...]` (pages and offsets increasing) as the metadata value;
    None when it would exceed MAX_PAGE_STARTS_CHARS."""
    value = ",".join(f"{page}:{offset}" for page, offset in starts)
    return value if len(value) <= MAX_PAGE_STARTS_CHARS else None


def parse_page_starts(value: str) -> list[tuple[int, int]]:
    """The `(page, offset)` pairs of a metadata value; [] unless it is well formed
    (pages >= 1 and strictly increasing, offsets >= 0 and non-decreasing, the
    first page starting at offset 0)."""
    out: list[tuple[int, int]] = []
    for part in value.split(",") if value else ():
        page_text, sep, offset_text = part.partition(":")
        if not sep or not page_text.isdigit() or not offset_text.isdigit():
            return []
        page, offset = int(page_text), int(offset_text)
        if page < 1 or (out and (page <= out[-1][0] or offset < out[-1][1])):
            return []
        out.append((page, offset))
    if out and out[0][1] != 0:
        return []
    return out


def page_range(metadata: Mapping[str, str], start: int, end: int) -> tuple[int, int] | None:
    """The first and last page of the span [start, end) of a document with this
    metadata, or None when the document records no pages."""
    starts = parse_page_starts(metadata.get(PAGE_STARTS_KEY, ""))
    if not starts:
        return None
    offsets = [offset for _, offset in starts]

    def page_at(offset: int) -> int:
        return starts[max(0, bisect.bisect_right(offsets, offset) - 1)][0]

    return page_at(start), page_at(max(start, end - 1))
