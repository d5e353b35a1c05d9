"""Which sources an answer cites.

The evidence message numbers its sources 1..N and asks the model to cite them
like `[1]` (see `context_format`). Reading the markers back is a statement of
what the answer claims to cite, not a verification that the cited text
supports it.

Citations are reported in order of first appearance and numbered 1..k in that
order (their display numbers); the answer text itself is never rewritten, since
it was already streamed to the caller as the model wrote it. `renumber_markers`
rewrites the markers for display, on whichever side wants it.

Each context item carries a bounded snippet of its chunk: the chunk's
beginning, at most `[agent_limits] citation_snippet_chars` characters, cut at a
word boundary (`snippet`). A citation's snippet is the cited sentence(s) of its
chunk instead (`cited_passage`, then `passage_snippet`): the chunk sentences
the answer's citing sentences copy verbatim (the offline extractive model copies
them), else for each citing sentence the chunk sentence sharing the most words
with it (stop words aside; ties go to the earlier sentence), else (nothing
shared) the chunk's beginning. The passage runs from the first selected
sentence to the end of the last one, so its span is one range of the document.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from groundwire.domain.analysis import ENGLISH_STOP_WORDS
from groundwire.domain.text import phrase_words

__all__ = [
    "DEFAULT_SNIPPET_CHARS",
    "MAX_SNIPPET_CHARS",
    "Passage",
    "Snippet",
    "cited_passage",
    "citing_statements",
    "extract_citations",
    "passage_snippet",
    "renumber_markers",
    "sentence_spans",
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


# -- sentence grain ------------------------------------------------------------

# A sentence ends at terminal punctuation (with closing quotes or brackets) followed
# by whitespace; in an answer, the citation markers after it belong to it, and a
# marker followed by whitespace also ends the (clause it cites).
_CLOSERS = "\"'’”)"
_CHUNK_SENTENCE_END = re.compile(rf"[.!?…]+[{_CLOSERS}]*(?=\s)")
_ANSWER_SENTENCE_END = re.compile(
    rf"(?:[.!?…]+[{_CLOSERS}]*(?:\s*{_MARKER.pattern})*|(?:\s*{_MARKER.pattern})+)(?=\s|$)"
)
# A marker with the whitespace before it ("per year [1]." reads "per year.").
_MARKER_GAP = re.compile(rf"\s*{_MARKER.pattern}")
# Lines that start a block of their own (so a line break before them ends a
# sentence): Markdown headings, list items, block quotes, table rows, code fences.
_HEADING = re.compile(r"#{1,6}\s")
_BULLET = re.compile(r"(?:[-*+>]\s+|\d{1,3}[.)]\s+)+")
# A chunk sentence copied into the answer counts as copied when it holds at least
# this many words (a one-word "Yes." inside an answer sentence is no evidence).
_MIN_COPIED_WORDS = 3


def _logical_lines(text: str) -> list[tuple[int, int]]:
    """Spans of `text`'s logical lines: hard-wrapped paragraph lines joined (a line
    break inside a paragraph is a space), while blank lines, headings, list items,
    quotes, table rows and code fences start new ones."""
    out: list[tuple[int, int]] = []
    joinable = False
    pos = 0
    for raw in text.split("\n"):
        start, end = pos, pos + len(raw)
        pos = end + 1
        line = raw.strip()
        starts_block = not line or bool(_HEADING.match(line) or _BULLET.match(line))
        starts_block = starts_block or line[0] in "|>`"
        if joinable and not starts_block:
            out[-1] = (out[-1][0], end)
        elif line:
            out.append((start, end))
        joinable = bool(line) and not _HEADING.match(line) and line[0] not in "|`"
    return out


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """The sentences of a chunk's `text` as (start, end) offsets into it, in order:
    logical lines (see `_logical_lines`) split after terminal punctuation, each
    trimmed of whitespace and of a list-item marker. Headings and pieces without a
    word are no sentences."""
    out: list[tuple[int, int]] = []
    for line_start, line_end in _logical_lines(text):
        start, end = _trimmed(text, line_start, line_end)
        if _HEADING.match(text, start):
            continue
        bullet = _BULLET.match(text, start)
        if bullet is not None and bullet.end() < end:
            start = bullet.end()
        piece_start = start
        for m in _CHUNK_SENTENCE_END.finditer(text, start, end):
            out.append(_trimmed(text, piece_start, m.end()))
            piece_start = m.end()
        out.append(_trimmed(text, piece_start, end))
    return [(a, b) for a, b in out if b > a and phrase_words(text[a:b])]


def citing_statements(answer: str, source_number: int) -> list[str]:
    """The statements of `answer` that cite source `source_number`: each sentence (or
    clause ended by a marker) holding a marker naming it, without its markers."""
    out: list[str] = []
    pos = 0
    ends = [m.end() for m in _ANSWER_SENTENCE_END.finditer(answer)]
    for end in [*ends, len(answer)]:
        piece = answer[pos:end]
        pos = end
        numbers = {int(p) for m in _MARKER.finditer(piece) for p in m.group(1).split(",")}
        if source_number in numbers:
            statement = " ".join(_MARKER_GAP.sub("", piece).split())
            if phrase_words(statement):
                out.append(statement)
    return out


def _content_words(text: str) -> set[str]:
    return {w for w in phrase_words(text) if w not in ENGLISH_STOP_WORDS}


def cited_passage(chunk_text: str, statements: Sequence[str]) -> tuple[int, int] | None:
    """The (start, end) offsets in `chunk_text` of the sentence(s) the citing
    `statements` are drawn from, or None when no sentence of the chunk shares a
    word (stop words aside) with any of them.

    The chunk sentences a statement holds verbatim (whitespace and case aside,
    at least three words) are chosen; failing any such copy in any statement, each
    statement chooses the sentence sharing the most distinct content words with it
    (ties: the larger share of the sentence's own words, then the earlier
    sentence). The passage spans the first to the last chosen sentence."""
    spans = sentence_spans(chunk_text)
    if not spans or not statements:
        return None
    folded = [" ".join(s.split()).lower() for s in statements]
    texts = [" ".join(_MARKER_GAP.sub("", chunk_text[a:b]).split()).lower() for a, b in spans]
    chosen = {
        i
        for i, t in enumerate(texts)
        if len(phrase_words(t)) >= _MIN_COPIED_WORDS and any(t in s for s in folded)
    }
    if not chosen:
        words = [_content_words(t) for t in texts]
        for statement in statements:
            wanted = _content_words(statement)
            best: tuple[int, float, int] | None = None
            for i, w in enumerate(words):
                shared = len(wanted & w)
                if shared == 0:
                    continue
                key = (shared, shared / len(w), -i)
                if best is None or key > best:
                    best = key
            if best is not None:
                chosen.add(-best[2])
    if not chosen:
        return None
    return spans[min(chosen)][0], spans[max(chosen)][1]


class Passage(NamedTuple):
    """A citation's snippet and the span of its text within the chunk."""

    text: str
    truncated: bool
    start: int
    end: int


def passage_snippet(chunk_text: str, answer: str, source_number: int, max_chars: int) -> Passage:
    """The snippet of a cited chunk: its cited sentence(s) (`cited_passage` for the
    answer's statements citing `source_number`), else its beginning, bounded like
    `snippet`; `start`/`end` are the snippet text's offsets in `chunk_text`
    (chunk_text[start:end] == text), `truncated` whether the cited sentence(s)
    (or the chunk, for its beginning) go on past it."""
    found = cited_passage(chunk_text, citing_statements(answer, source_number))
    start, end = found if found is not None else _trimmed(chunk_text, 0, len(chunk_text))
    cut = snippet(chunk_text[start:end], max_chars)
    return Passage(cut.text, cut.truncated, start, start + len(cut.text))
