"""Deterministic chunking with stable ids and character offsets.

Two splitters: a character splitter with overlap that prefers natural
boundaries, and a token splitter (domain.token_chunking) that counts size and
overlap in the embedding model's tokens; either can run inside a
Markdown-section-aware pass that never lets a chunk straddle two sections and
records each chunk's heading path. A `Chunker` picks the policy per file
extension. Offsets index the normalized document text, so
`text[start:end] == chunk.text` always holds.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from markdown_it import MarkdownIt

from groundwire.domain.token_chunking import BREAKS, TokenCounter, split_range_tokens, trim_span


class ChunkUnit(enum.Enum):
    """What a policy's size and overlap count."""

    CHARACTERS = "characters"
    TOKENS = "tokens"


@dataclass(frozen=True, slots=True)
class ChunkPolicy:
    """Chunk size and overlap, in characters or in the embedding model's tokens;
    `markdown_sections` enables the section-aware pass for Markdown documents."""

    size: int = 800
    overlap: int = 100
    markdown_sections: bool = True
    unit: ChunkUnit = ChunkUnit.CHARACTERS

    def __post_init__(self) -> None:
        if self.size < 16:
            raise ValueError(f"chunk size must be at least 16 {self.unit.value}")
        if not 0 <= self.overlap < self.size // 2 + 1:
            raise ValueError("chunk overlap must be in [0, size/2]")

    def descriptor(self) -> str:
        """A stable description, stored with the index so a policy change forces a rebuild."""
        md = "md" if self.markdown_sections else "plain"
        unit = "chars" if self.unit is ChunkUnit.CHARACTERS else "tokens"
        return f"{unit}:size={self.size},overlap={self.overlap},{md}"


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


def _find_break(text: str, start: int, limit: int, size: int) -> int:
    """End offset for a window starting at `start`: the last natural boundary in the
    second half of the window, else the hard limit."""
    if limit >= len(text):
        return len(text)
    floor = start + size // 2
    for sep in BREAKS:
        pos = text.rfind(sep, floor, limit)
        if pos != -1:
            return pos + len(sep)
    return limit


def split_range(text: str, start: int, end: int, policy: ChunkPolicy) -> list[tuple[int, int]]:
    """Split text[start:end] into windows of at most policy.size characters with
    about policy.overlap characters shared between neighbours; whitespace-only
    windows are dropped and windows are trimmed of surrounding whitespace."""
    spans: list[tuple[int, int]] = []
    pos = start
    while pos < end:
        limit = min(end, pos + policy.size)
        stop = _find_break(text[:end], pos, limit, policy.size)
        a, b = trim_span(text, pos, stop)
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


def chunk_text(
    text: str,
    policy: ChunkPolicy,
    *,
    markdown: bool,
    tokenizer: TokenCounter | None = None,
) -> list[Chunk]:
    """Chunk normalized `text`. Markdown documents are split per section first when
    the policy asks for it; a section holding nothing but its heading is skipped (its
    title still appears in the paths of its subsections). A token policy needs the
    embedding model's `tokenizer`."""
    if policy.unit is ChunkUnit.TOKENS and tokenizer is None:
        raise ValueError("a token chunking policy needs the embedding model's tokenizer")
    if markdown and policy.markdown_sections:
        sections = markdown_sections(text)
    else:
        sections = [_Section(0, len(text), "")]
    chunks: list[Chunk] = []
    for section in sections:
        if _HEADING_ONLY.match(text[section.start : section.end]):
            continue
        if policy.unit is ChunkUnit.TOKENS:
            assert tokenizer is not None
            spans = split_range_tokens(
                text,
                section.start,
                section.end,
                size=policy.size,
                overlap=policy.overlap,
                counter=tokenizer,
            )
        else:
            spans = split_range(text, section.start, section.end, policy)
        for a, b in spans:
            body = text[a:b]
            ordinal = len(chunks)
            chunks.append(Chunk(_chunk_id(ordinal, a, b, body), ordinal, a, b, body, section.path))
    return chunks


def normalize_extension(extension: str) -> str:
    """`.MD`, `md` -> `.md`: how per-extension policies are keyed."""
    ext = extension.strip().lower()
    return ext if ext.startswith(".") else f".{ext}"


@dataclass(frozen=True, slots=True)
class Chunker:
    """An index's chunking: a default policy, optional policies per file
    extension, and the embedding model's tokenizer when any policy counts tokens."""

    default: ChunkPolicy = field(default_factory=ChunkPolicy)
    by_extension: Mapping[str, ChunkPolicy] = field(default_factory=dict)
    tokenizer: TokenCounter | None = None

    def __post_init__(self) -> None:
        for ext in self.by_extension:
            if ext != normalize_extension(ext) or len(ext) < 2:
                raise ValueError(f"extension {ext!r} must be lower case with a leading dot")
        if self.tokenizer is None and any(p.unit is ChunkUnit.TOKENS for p in self.policies()):
            raise ValueError("a token chunking policy needs the embedding model's tokenizer")

    def policies(self) -> list[ChunkPolicy]:
        """The default policy, then the per-extension ones in extension order."""
        return [self.default, *(self.by_extension[e] for e in sorted(self.by_extension))]

    def policy_for(self, extension: str) -> ChunkPolicy:
        """The policy of documents with this file extension (the default if none)."""
        return self.by_extension.get(normalize_extension(extension), self.default)

    def chunk(self, text: str, extension: str, *, markdown: bool) -> list[Chunk]:
        """Chunk `text` by the policy of its extension."""
        return chunk_text(
            text, self.policy_for(extension), markdown=markdown, tokenizer=self.tokenizer
        )

    def descriptor(self) -> str:
        """Everything that changes chunks, stored with the index so that any change
        (a policy, an extension's policy, the tokenizer) forces a rebuild. A
        character-only chunker without per-extension policies keeps the
        descriptor it always had, so upgrading re-ingests nothing."""
        parts = [self.default.descriptor()]
        for ext in sorted(self.by_extension):
            parts.append(f"{ext}={self.by_extension[ext].descriptor()}")
        if self.tokenizer is not None and any(p.unit is ChunkUnit.TOKENS for p in self.policies()):
            parts.append(f"tokenizer={self.tokenizer.fingerprint}")
        return ";".join(parts)
