"""Which sources an answer cites.

The evidence message numbers its sources 1..N and asks the model to cite them
like `[1]` (see `context_format`). Reading the markers back is a statement of
what the answer claims to cite, not a verification that the cited text
supports it.

Citations are reported in order of first appearance and numbered 1..k in that
order (their display numbers); the answer text itself is never rewritten, since
it was already streamed to the caller as the model wrote it. `renumber_markers`
rewrites the markers for display, on whichever side wants it.

Each citation and context item carries a bounded snippet of its chunk: the
chunk's beginning, at most `[agent_limits] citation_snippet_chars` characters,
cut at a word boundary (`snippet`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

__all__ = [
    "DEFAULT_SNIPPET_CHARS",
    "MAX_SNIPPET_CHARS",
    "Snippet",
    "extract_citations",
    "renumber_markers",
    "snippet",
]

# The default and largest snippet bound, in characters (code points).
DEFAULT_SNIPPET_CHARS = 300
MAX_SNIPPET_CHARS = 4000

# `[3]`, and the list forms models also write: `[1, 2]`, `[1,2, 3]`. ASCII digits
# only, at most 9 of them (longer runs are no source number and never reach int()).
_MARKER = re.compile(r"\[\s*([0-9]{1,9}(?:\s*,\s*[0-9]{1,9})*)\s*\]")


def extract_citations(answer: str, source_count: int) -> list[int]:
    """The distinct source numbers cited in `answer`, in order of first appearance.

    A citation is a bracketed source number, `[n]`, or a bracketed comma-separated
    list of them, `[n, m]`; `[1][2]` cites both. Only numbers in `1..source_count`
    count: `[0]`, out-of-range numbers and anything that is not such a marker
    (`[a]`, `[1-2]`, `[]`) are ignored. With `source_count` below 1 nothing is
    cited.
    """
    if source_count < 1:
        return []
    cited: list[int] = []
    seen: set[int] = set()
    for match in _MARKER.finditer(answer):
        for part in match.group(1).split(","):
            number = int(part)
            if 1 <= number <= source_count and number not in seen:
                seen.add(number)
                cited.append(number)
    return cited


def renumber_markers(answer: str, numbers: Mapping[int, int]) -> str:
    """`answer` with every cited source number inside a marker replaced by
    `numbers[n]` (source number -> display number); numbers absent from the
    mapping, and text that is no marker, are left as they are. `[3, 1]` with
    {3: 1, 1: 2} becomes `[1, 2]`."""

    def one(match: re.Match[str]) -> str:
        parts = [int(p) for p in match.group(1).split(",")]
        return "[" + ", ".join(str(numbers.get(p, p)) for p in parts) + "]"

    return _MARKER.sub(one, answer)


class Snippet(NamedTuple):
    """A bounded beginning of a chunk's text, and whether the text goes on."""

    text: str
    truncated: bool


def snippet(text: str, max_chars: int) -> Snippet:
    """The beginning of `text` (leading whitespace removed), at most `max_chars`
    characters, cut at the last whitespace within the bound so no word is split;
    a single word longer than the bound is cut at the bound. Trailing whitespace
    is dropped. `max_chars` below 1 gives an empty snippet."""
    body = text.lstrip()
    if max_chars < 1:
        return Snippet("", bool(body))
    if len(body) <= max_chars:
        return Snippet(body.rstrip(), False)
    window = body[: max_chars + 1]
    cut = next((i for i in range(max_chars, 0, -1) if window[i].isspace()), 0)
    head = body[:cut] if cut > 0 else body[:max_chars]
    return Snippet(head.rstrip(), True)
