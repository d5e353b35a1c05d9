"""The tsvector encoding written with every chunk on PostgreSQL (lexical.py ranks
over it).

Encoding. Rows are tokenized at write time in Python with the same identifier-aware
tokenizer as the in-memory store (`index_tokens`: POL-HR-014 is indexed whole and as
pol / hr / 014, IRagRetriever as iragretriever / i / rag / retriever), and stored as
an explicit tsvector (the `simple`-configuration equivalent: no stemming, no stop
words, matched against a candidate's own row, never searched through), plus per-term
frequencies and the token count. Phrase words
(alphanumeric runs) carry their word positions with weight A, so a quoted phrase is
the tsquery `'account':A <-> 'recovery':A` and matches exactly the contiguous runs the
in-memory store matches; tokens that are not phrase words carry a weight-D
placeholder so a one-word phrase cannot match a camel-case sub-part.

Limits of the tsvector encoding: a lexeme is at most 2,047 bytes (longer tokens are
not indexed and cannot be searched for), and positions stop at 16,383 words with at
most 256 per word; a chunk beyond those is marked, and a phrase query fetches every
marked candidate holding the phrase words and verifies it in a worker thread, so
phrase results stay exact.
"""

from __future__ import annotations

import json
import struct
from collections import Counter
from dataclasses import dataclass
from typing import Any

from psycopg.abc import Buffer
from psycopg.adapt import Dumper
from psycopg.pq import Format

from groundwire.domain.analysis import PLAIN, Analyzer
from groundwire.stores.postgres.connection import Conn

# tsvector limits (PostgreSQL's MAXSTRLEN, MAXENTRYPOS - 1 and MAXNUMPOS).
_MAX_LEXEME_BYTES = 2047
_MAX_POSITION = 16383
_MAX_POSITIONS_PER_LEXEME = 256
_WEIGHT_A = 3 << 14
_TSVECTOR_OID = 3614


# -- encoding -----------------------------------------------------------------------


class _TsvectorBinaryDumper(Dumper):
    """Passes an already encoded binary tsvector (see `encode_lexical`) to COPY."""

    format = Format.BINARY
    oid = _TSVECTOR_OID

    def dump(self, obj: Any) -> Buffer | None:
        return bytes(obj)


class EncodedTsvector(bytes):
    """A binary tsvector, sent as such by the dumper `register_types` installs."""


def register_types(conn: Conn) -> None:
    """Let `conn` send EncodedTsvector values in binary COPY."""
    conn.adapters.register_dumper(EncodedTsvector, _TsvectorBinaryDumper)


@dataclass(frozen=True, slots=True)
class LexicalRow:
    """What a chunk's text contributes to lexical search."""

    lex: bytes
    term_freqs: str  # JSON object: term -> frequency
    token_count: int
    phrase_exact: bool


def encode_lexical(text: str, analyzer: Analyzer = PLAIN) -> LexicalRow:
    """Analyze `text` like the in-memory store (the index's analyzer) and encode the
    binary tsvector (tsvectorrecv's format: count, then per sorted lexeme its bytes,
    NUL, and its positions). Phrase words (stop words included) get their 1-based
    word positions with weight A; other terms get one weight-D placeholder position.
    Only terms count in `term_freqs` (and so in the postings and statistics)."""
    analyzed = analyzer.analyze(text)
    counts = Counter(analyzed.terms)
    words = analyzed.words
    exact = len(words) <= _MAX_POSITION
    # Word i (1-based) is stored as i | weight A, which is i + _WEIGHT_A below 2**14.
    positions: dict[str, list[int]] = {}
    for at, word in enumerate(words[:_MAX_POSITION], start=_WEIGHT_A + 1):
        held = positions.get(word)
        if held is None:
            positions[word] = [at]
        else:
            held.append(at)
    term_freqs: dict[str, int] = {}
    out = [b""]
    entries = 0
    # UTF-8 preserves code point order, so sorting the strings sorts their bytes.
    for term in sorted(counts.keys() | positions.keys()):
        raw = term.encode()
        if len(raw) > _MAX_LEXEME_BYTES:
            continue
        entries += 1
        count = counts.get(term)
        if count is not None:
            term_freqs[term] = count
        where = positions.get(term)
        if where:
            if len(where) > _MAX_POSITIONS_PER_LEXEME:
                where = where[:_MAX_POSITIONS_PER_LEXEME]
                exact = False
            out.append(raw + b"\0" + struct.pack(f"!H{len(where)}H", len(where), *where))
        else:
            out.append(raw + b"\0\x00\x01\x00\x01")  # one position: 1, weight D
    out[0] = struct.pack("!i", entries)
    return LexicalRow(
        b"".join(out), json.dumps(term_freqs, ensure_ascii=False), len(analyzed.terms), exact
    )


def ts_quote(term: str) -> str:
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def fits(term: str) -> bool:
    return len(term.encode()) <= _MAX_LEXEME_BYTES
