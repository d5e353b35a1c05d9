"""The documented maxima of what travels with every chunk: a document's title, a
chunk's section and the document's metadata.

Each is copied into every chunk a document makes and into every result and citation
that shows it, so an unbounded one multiplies: a 1 MB title on a document of three
matching chunks made a 3 MB answer. The rules, alike on every path:

- a caller's own fields (a push's title and metadata) past their bound are refused
  (INVALID_ARGUMENT, FIELD_OUT_OF_RANGE, naming the field);
- an operator's configured metadata past its bound is a configuration error (the
  server does not start or reload with it);
- what is extracted from a document's content (the title a loader found, the
  Markdown headings a section is made of) is the file's, not anyone's request: it is
  cut at its bound, at a character boundary, and the document is stored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

MAX_TITLE_CHARS = 512
MAX_SECTION_CHARS = 512
MAX_METADATA_ENTRIES = 32
MAX_METADATA_VALUE_BYTES = 256
METADATA_KEY = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


def bounded(text: str, max_chars: int) -> str:
    """`text` cut to at most `max_chars` characters (trailing space dropped)."""
    return text if len(text) <= max_chars else text[:max_chars].rstrip()


def title_problem(title: str) -> str | None:
    """Why a caller's title is refused (None: it is within its bound)."""
    if len(title) > MAX_TITLE_CHARS:
        return f"title is at most {MAX_TITLE_CHARS} characters"
    return None


def metadata_problem(metadata: Mapping[str, str]) -> str | None:
    """Why metadata is refused (None: every entry is within its bounds)."""
    if len(metadata) > MAX_METADATA_ENTRIES:
        return f"at most {MAX_METADATA_ENTRIES} metadata entries"
    for key, value in metadata.items():
        if not METADATA_KEY.match(key) or len(value.encode()) > MAX_METADATA_VALUE_BYTES:
            return (
                "metadata keys are 1-128 chars of [A-Za-z0-9_.:-], values at most "
                f"{MAX_METADATA_VALUE_BYTES} bytes"
            )
    return None
