"""Token windows: chunk sizes and overlap counted in the embedding model's tokens.

The character splitter bounds a chunk by characters, which says little about
what the embedding model sees: one character can be several tokens (CJK,
emoji, rare words) and a model truncates whatever exceeds its window. This
splitter counts with the model's own tokenizer, so every chunk it returns fits
the configured token size *as the model will encode it* (task prefix and
special tokens included), and the embedder never truncates one.

The tokenizer is given as a `TokenCounter` (the embedding provider supplies it;
this module does no I/O). Windows prefer the same natural boundaries as the
character splitter (paragraph, line, sentence, clause, word), and offsets index
the original text exactly, so `text[start:end] == chunk.text` always holds.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

# Natural boundaries, best first: paragraph, line, sentence, clause, word (the
# character splitter of domain.chunking prefers the same ones).
BREAKS = ("\n\n", "\n", ". ", "? ", "! ", "; ", ", ", " ")


@runtime_checkable
class TokenCounter(Protocol):
    """The embedding model's tokenizer, as the chunker needs it."""

    @property
    def fingerprint(self) -> str:
        """A short stable digest of everything that changes token counts (the
        vocabulary and normalization, the document task prefix), recorded in the
        chunking descriptor so a different tokenizer re-chunks the index."""
        ...

    @property
    def max_tokens(self) -> int:
        """The most tokens the model encodes before it truncates (special tokens
        included)."""
        ...

    def token_spans(self, text: str) -> Sequence[tuple[int, int]]:
        """Character spans `(start, end)` of the tokens of `text` in order, special
        tokens excluded; spans never overlap and index `text` itself."""
        ...

    def document_tokens(self, text: str) -> int:
        """How many tokens the model is given for `text` embedded as a document:
        the document task prefix and the special tokens included, no truncation."""
        ...


def token_overhead(counter: TokenCounter) -> int:
    """Tokens every chunk pays before its own text: the prefix and special tokens."""
    return counter.document_tokens("")


def trim_span(text: str, start: int, end: int) -> tuple[int, int]:
    """text[start:end] without its leading and trailing whitespace, as offsets."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _natural_break(text: str, floor: int, limit: int, token_ends: Sequence[int]) -> int:
    """The last natural boundary in text[floor:limit] that is also a token
    boundary, else `limit` (itself a token end)."""
    for sep in BREAKS:
        pos = text.rfind(sep, floor, limit)
        if pos == -1:
            continue
        cut = pos + len(sep)
        # Snap back to the last token that ends at or before the boundary, so a
        # tokenizer whose tokens carry their leading space never gets split.
        k = bisect.bisect_right(token_ends, cut)
        if k > 0 and token_ends[k - 1] > floor:
            return token_ends[k - 1]
    return limit


def _fit(
    text: str, a: int, b: int, size: int, counter: TokenCounter, token_ends: Sequence[int]
) -> int:
    """Shrink text[a:b] from the end until the model's own count of it (prefix and
    special tokens included) is at most `size`; returns the new end. Re-encoding
    is what makes the bound exact: a word cut at a window edge can encode to
    more tokens than its share of the whole text did."""
    while True:
        count = counter.document_tokens(text[a:b])
        if count <= size or b - a <= 1:
            return b
        excess = count - size
        k = bisect.bisect_right(token_ends, b)
        first = bisect.bisect_right(token_ends, a)
        # Drop the excess in whole tokens; with fewer whole tokens than that (a
        # pathological run such as one huge unknown token) halve by characters.
        cut = token_ends[k - 1 - excess] if k - first > excess else a + (b - a) // 2
        new_b = trim_span(text, a, cut)[1]
        b = new_b if a < new_b < b else a + max(1, (b - a) // 2)


def split_range_tokens(
    text: str,
    start: int,
    end: int,
    *,
    size: int,
    overlap: int,
    counter: TokenCounter,
) -> list[tuple[int, int]]:
    """Split text[start:end] into windows of at most `size` model tokens each
    (prefix and special tokens included) sharing about `overlap` tokens with the
    previous window; windows are trimmed of surrounding whitespace and
    whitespace-only windows are dropped."""
    budget = size - token_overhead(counter)
    if budget < 1:
        raise ValueError("chunk size leaves no room for text after the model's special tokens")
    spans = [(start + s, start + e) for s, e in counter.token_spans(text[start:end])]
    if not spans:
        return []
    starts = [s for s, _ in spans]
    ends = [e for _, e in spans]
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(spans):
        j = min(len(spans), i + budget)
        pos = starts[i]
        if j == len(spans):
            stop = end
        else:
            floor = starts[i + (j - i) // 2]
            stop = _natural_break(text, floor, ends[j - 1], ends)
        a, b = trim_span(text, pos, stop)
        if b <= a:
            break
        b = _fit(text, a, b, size, counter, ends)
        out.append((a, b))
        # The first token not (wholly) inside this window.
        k = bisect.bisect_right(ends, b)
        if k >= len(spans):
            break
        nxt = max(k - overlap, i + 1) if overlap else max(k, i + 1)
        # Start the next window on a word boundary so no chunk begins mid-word.
        if overlap:
            w = nxt
            while w < k and starts[w] > 0 and not text[starts[w] - 1].isspace():
                w += 1
            if w < k:
                nxt = w
        i = nxt
    return out
