"""Anchors of an HTML document (element ids), as character offsets.

The HTML loader records, in the document metadata under ANCHORS_KEY (reserved: a
loader sets it, so the anchors travel with the document to every store without a
schema of their own), where the text of each element with an `id` begins in the
document's normalized text: "0:intro,1532:install,3001:faq%3A1" reads "the
element `intro` starts at offset 0, `install` at 1532, `faq:1` at 3001" (ids are
percent-encoded). A citation names the nearest anchor at or before the text it
cites (`anchor_at`), so a reader can open `page.html#install`.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from urllib.parse import quote, unquote

__all__ = [
    "ANCHORS_KEY",
    "MAX_ANCHORS_CHARS",
    "MAX_ANCHOR_CHARS",
    "anchor_at",
    "encode_anchors",
    "parse_anchors",
]

ANCHORS_KEY = "html.anchors"
# The longest record kept (as the pages' record: a metadata value is indexed whole);
# anchors past it are left out, the first ones kept.
MAX_ANCHORS_CHARS = 16_000
# Longer ids are not recorded (no link a reader would follow).
MAX_ANCHOR_CHARS = 200


def encode_anchors(anchors: Sequence[tuple[int, str]]) -> str | None:
    """`[(offset, id), ...]` (offsets non-decreasing) as the metadata value: the
    first anchors that fit in MAX_ANCHORS_CHARS; None when there are none."""
    parts: list[str] = []
    size = 0
    for offset, anchor in anchors:
        if not anchor or len(anchor) > MAX_ANCHOR_CHARS:
            continue
        part = f"{offset}:{quote(anchor, safe='')}"
        size += len(part) + (1 if parts else 0)
        if size > MAX_ANCHORS_CHARS:
            break
        parts.append(part)
    return ",".join(parts) or None


def parse_anchors(value: str) -> list[tuple[int, str]]:
    """The `(offset, id)` pairs of a metadata value; [] unless it is well formed
    (offsets non-decreasing, ids non-empty)."""
    out: list[tuple[int, str]] = []
    for part in value.split(",") if value else ():
        offset_text, sep, encoded = part.partition(":")
        if not sep or not offset_text.isdigit() or not encoded:
            return []
        offset = int(offset_text)
        if out and offset < out[-1][0]:
            return []
        out.append((offset, unquote(encoded)))
    return out


def anchor_at(metadata: Mapping[str, str], offset: int) -> str | None:
    """The id of the last anchor at or before `offset` in a document with this
    metadata (the innermost when several start there), or None."""
    anchors = parse_anchors(metadata.get(ANCHORS_KEY, ""))
    i = bisect.bisect_right([o for o, _ in anchors], offset)
    return anchors[i - 1][1] if i else None
