"""Deterministic chunking with stable ids and character offsets.

Two policies: a character splitter with overlap that prefers natural boundaries,
and a Markdown-section-aware splitter that never lets a chunk straddle two
sections and records each chunk's heading path. Offsets index the normalized
document text, so `text[start:end] == chunk.text` always holds.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from markdown_it import MarkdownIt


@dataclass(frozen=True, slots=True)
class ChunkPolicy:
    """Chunk size and overlap in characters; `markdown_sections` enables the
    section-aware splitter for Markdown documents."""

    size: int = 800
    overlap: int = 100
    markdown_sections: bool = True

    def __post_init__(self) -> None:
        if self.size < 16:
            raise ValueError("chunk size must be at least 16 characters")
        if not 0 <= self.overlap < self.size // 2 + 1:
            raise ValueError("chunk overlap must be in [0, size/2]")

    def descriptor(self) -> str:
        """A stable description, stored with the index so a policy change forces a rebuild."""
        md = "md" if self.markdown_sections else "plain"
        return f"chars:size={self.size},overlap={self.overlap},{md}"


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk of a document."""

    chunk_id: str
    ordinal: int
    start: int
    end: int
    text: str
    section: str


@dataclass(frozen=True, slots=True)
class _Section:
    start: int
    end: int
    path: str


_BREAKS = ("\n\n", "\n", ". ", "? ", "! ", "; ", ", ", " ")


def _find_break(text: str, start: int, limit: int, size: int) -> int:
    """End offset for a window starting at `start`: the last natural boundary in the
    second half of the window, else the hard limit."""
    if limit >= len(text):
        return len(text)
    floor = start + size // 2
    for sep in _BREAKS:
        pos = text.rfind(sep, floor, limit)
        if pos != -1:
            return pos + len(sep)
    return limit


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def split_range(text: str, start: int, end: int, policy: ChunkPolicy) -> list[tuple[int, int]]:
    """Split text[start:end] into windows of at most policy.size characters with
    about policy.overlap characters shared between neighbours; whitespace-only
    windows are dropped and windows are trimmed of surrounding whitespace."""
    spans: list[tuple[int, int]] = []
    pos = start
    while pos < end:
        limit = min(end, pos + policy.size)
        stop = _find_break(text[:end], pos, limit, policy.size)
        a, b = _trim(text, pos, stop)
        if b > a:
            spans.append((a, b))
        if stop >= end:
            break
        nxt = max(stop - policy.overlap, pos + 1)
        # Start the next window on a word boundary so no chunk begins mid-word.
        if policy.overlap and nxt < stop:
            space = text.find(" ", nxt, stop)
            if space != -1:
                nxt = space + 1
        pos = nxt
    return spans


_md = MarkdownIt("commonmark")


def markdown_sections(text: str) -> list[_Section]:
    """Sections of a Markdown document, split at ATX and setext headings (code
    fences are respected because the CommonMark parser decides what a heading is)."""
    tokens = _md.parse(text)
    line_offsets = [0]
    for line in text.split("\n"):
        line_offsets.append(line_offsets[-1] + len(line) + 1)
    headings: list[tuple[int, int, str]] = []  # (char offset, level, title)
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.map is not None:
            level = int(tok.tag[1])
            title = tokens[i + 1].content.strip() if i + 1 < len(tokens) else ""
            headings.append((line_offsets[tok.map[0]], level, title))
    if not headings:
        return [_Section(0, len(text), "")]
    sections: list[_Section] = []
    if headings[0][0] > 0:
        sections.append(_Section(0, headings[0][0], ""))
    stack: list[tuple[int, str]] = []
    for idx, (offset, level, title) in enumerate(headings):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        end = headings[idx + 1][0] if idx + 1 < len(headings) else len(text)
        sections.append(_Section(offset, end, " > ".join(t for _, t in stack if t)))
    return sections


def markdown_title(text: str) -> str:
    """The first level-1 heading of a Markdown document, else the first heading."""
    best = ""
    tokens = _md.parse(text)
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and i + 1 < len(tokens):
            title = tokens[i + 1].content.strip()
            if tok.tag == "h1":
                return title
            best = best or title
    return best


def _chunk_id(ordinal: int, start: int, end: int, text: str) -> str:
    digest = hashlib.blake2b(f"{start}:{end}:{text}".encode(), digest_size=4).hexdigest()
    return f"c{ordinal:05d}-{digest}"


_HEADING_ONLY = re.compile(r"^\s*(#{1,6}[^\n]*|[^\n]+\n[=-]+)\s*$")


def chunk_text(text: str, policy: ChunkPolicy, *, markdown: bool) -> list[Chunk]:
    """Chunk normalized `text`. Markdown documents are split per section first when
    the policy asks for it; a section holding nothing but its heading is skipped (its
    title still appears in the paths of its subsections)."""
    if markdown and policy.markdown_sections:
        sections = markdown_sections(text)
    else:
        sections = [_Section(0, len(text), "")]
    chunks: list[Chunk] = []
    for section in sections:
        if _HEADING_ONLY.match(text[section.start : section.end]):
            continue
        for a, b in split_range(text, section.start, section.end, policy):
            body = text[a:b]
            ordinal = len(chunks)
            chunks.append(Chunk(_chunk_id(ordinal, a, b, body), ordinal, a, b, body, section.path))
    return chunks
