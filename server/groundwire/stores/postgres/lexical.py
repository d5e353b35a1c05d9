"""Lexical search on PostgreSQL: the tsvector encoding written with every chunk and
the BM25 query that ranks exactly like the in-memory store.

Encoding. Rows are tokenized at write time in Python with the same identifier-aware
tokenizer as the in-memory store (`index_tokens`: POL-HR-014 is indexed whole and as
pol / hr / 014, IRagRetriever as iragretriever / i / rag / retriever), and stored as
an explicit tsvector (the `simple`-configuration equivalent: no stemming, no stop
words) with a GIN index, plus per-term frequencies and the token count. Phrase words
(alphanumeric runs) carry their word positions with weight A, so a quoted phrase is
the tsquery `'account':A <-> 'recovery':A` and matches exactly the contiguous runs the
in-memory store matches; tokens that are not phrase words carry a weight-D
placeholder so a one-word phrase cannot match a camel-case sub-part.

Ranking. BM25 (`domain.bm25`) over the scope tenant's own statistics (another
tenant's documents never move a tenant's scores): document frequencies per (index,
tenant, term) live in `gw_term_stats` and N / total length per (index, tenant) in
`gw_tenant_stats`, all moved in the publish transaction, so a query reads them from
its own snapshot.

pg_trgm is required (the schema creates the extension) but no trigram index is built
over chunk text: every identifier the in-memory store can find is an exact token here
too, and trigram matching would find substrings the in-memory store does not, making
the two stores rank differently.

Limits of the tsvector encoding: a lexeme is at most 2,047 bytes (longer tokens are
not indexed and cannot be searched for), and positions stop at 16,383 words with at
most 256 per word; a chunk beyond those is marked and its phrase matches are verified
in Python, so phrase results stay exact.
"""

from __future__ import annotations

import json
import struct
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql
from psycopg.abc import Buffer
from psycopg.adapt import Dumper
from psycopg.pq import Format

from groundwire.domain import bm25
from groundwire.domain.ordering import rank_hits
from groundwire.domain.query import contains_phrase
from groundwire.domain.retrieval import ChunkHit, LexicalQuery, Scope
from groundwire.domain.scores import Score, ScoreMetric
from groundwire.domain.text import index_tokens, phrase_words
from groundwire.stores.postgres.connection import Conn
from groundwire.stores.postgres.scope import HIT_COLUMNS, IndexRow, hit, scope_sql

# tsvector limits (PostgreSQL's MAXSTRLEN, MAXENTRYPOS - 1 and MAXNUMPOS).
_MAX_LEXEME_BYTES = 2047
_MAX_POSITION = 16383
_MAX_POSITIONS_PER_LEXEME = 256
_WEIGHT_A = 3 << 14
_TSVECTOR_OID = 3614
_MAX_PHRASE_RETRIES = 16


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


def encode_lexical(text: str) -> LexicalRow:
    """Tokenize `text` like the in-memory store and encode the binary tsvector
    (tsvectorrecv's format: count, then per sorted lexeme its bytes, NUL, and its
    positions). Phrase words get their 1-based word positions with weight A; other
    tokens get one weight-D placeholder position."""
    counts = Counter(index_tokens(text))
    words = phrase_words(text)
    exact = len(words) <= _MAX_POSITION
    positions: dict[str, list[int]] = {}
    for i, word in enumerate(words[:_MAX_POSITION], start=1):
        at = positions.setdefault(word, [])
        if len(at) < _MAX_POSITIONS_PER_LEXEME:
            at.append(i | _WEIGHT_A)
        else:
            exact = False
    entries: list[tuple[bytes, list[int] | None]] = []
    term_freqs: dict[str, int] = {}
    for term in counts.keys() | positions.keys():
        raw = term.encode()
        if len(raw) > _MAX_LEXEME_BYTES:
            continue
        if term in counts:
            term_freqs[term] = counts[term]
        entries.append((raw, positions.get(term)))
    entries.sort(key=lambda e: e[0])
    out = bytearray(struct.pack("!i", len(entries)))
    for raw, where in entries:
        out += raw
        out += b"\0"
        if where:
            out += struct.pack(f"!H{len(where)}H", len(where), *where)
        else:
            out += b"\x00\x01\x00\x01"  # one position: 1, weight D
    return LexicalRow(
        bytes(out), json.dumps(term_freqs, ensure_ascii=False), sum(counts.values()), exact
    )


def _ts_quote(term: str) -> str:
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def _fits(term: str) -> bool:
    return len(term.encode()) <= _MAX_LEXEME_BYTES


# -- ranking ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _TermWeights:
    """BM25 term weights of one query against one published snapshot."""

    qtf: Counter[str]
    idf: dict[str, float]  # query order; terms absent from the index are dropped
    by_bound: list[str]  # ascending upper bound of a term's contribution to a score
    bound: dict[str, float]
    avgdl: float

    @classmethod
    def of(cls, qtf: Counter[str], df: Mapping[str, int], total: int, tokens: int) -> _TermWeights:
        idf = {t: bm25.idf(total, df[t]) for t in qtf if df.get(t, 0) > 0}
        bound = {t: qtf[t] * bm25.upper_bound(w) for t, w in idf.items()}
        avgdl = bm25.average_length(tokens, total)
        return cls(qtf, idf, sorted(bound, key=lambda t: (bound[t], t)), bound, avgdl)

    def essential(self, threshold: float) -> list[str]:
        """Terms a row must hold to possibly score above `threshold`: all but the
        longest run of low-bound terms whose bounds sum to at most it."""
        total = 0.0
        for i, term in enumerate(self.by_bound):
            total += self.bound[term]
            if total > threshold:
                return self.by_bound[i:]
        return []


# What lexical search reads before ranking, from its own snapshot: the scope
# tenant's chunk and token counts (first row, term NULL) and the document
# frequencies of the query terms in that tenant's published chunks.
_LEXICAL_STATS_SQL = """
    SELECT NULL::text, chunk_count, token_count FROM gw_tenant_stats
    WHERE index_id = %(index_id)s AND tenant = %(tenant)s
    UNION ALL
    SELECT term, df, 0 FROM gw_term_stats
    WHERE index_id = %(index_id)s AND tenant = %(tenant)s AND term = ANY(%(terms)s)
"""


async def search(
    conn: Conn, idx: IndexRow, query: LexicalQuery, k: int, scope: Scope
) -> list[ChunkHit]:
    """The exact BM25 top k in scope (inside `conn`'s snapshot).

    Scoring does not touch every row that holds a common query word: rows are scored
    only if they hold an "essential" term, where the non-essential terms are the
    longest run of lowest-impact terms whose summed score bounds cannot reach the
    k-th best score already found (MaxScore, Turtle and Flood 1995)."""
    qtf = Counter(t for t in query.terms if _fits(t))
    phrases = list(query.phrases)
    if not qtf or any(not _fits(w) for p in phrases for w in p):
        return []  # a word PostgreSQL cannot index cannot be matched
    cur = await conn.execute(
        _LEXICAL_STATS_SQL, {"index_id": idx.id, "tenant": scope.tenant, "terms": list(qtf)}
    )
    total, tokens, df = 0, 0, {}
    for term, count, length in await cur.fetchall():
        if term is None:
            total, tokens = int(count), int(length)
        else:
            df[str(term)] = int(count)
    if total <= 0:
        return []
    terms = _TermWeights.of(qtf, df, total, tokens)
    if not terms.idf:
        return []
    # Start from the rarest term alone and widen one term at a time until k rows
    # give a threshold.
    essential = terms.by_bound[-1:]
    while True:
        rows = await _top(conn, idx, terms, essential, phrases, k, scope)
        if len(rows) < k:
            if len(essential) == len(terms.by_bound):
                break
            essential = terms.by_bound[-len(essential) - 1 :]
            continue
        # The k-th best score (the join may return the k rows in any order).
        needed = terms.essential(min(float(r[8]) for r in rows))
        if len(needed) <= len(essential):  # both are suffixes of by_bound
            break
        essential = needed
    hits = [hit(r, Score.of(ScoreMetric.BM25, float(r[8]))) for r in rows]
    return rank_hits(hits)[:k]


async def _top(
    conn: Conn,
    idx: IndexRow,
    terms: _TermWeights,
    essential: Sequence[str],
    phrases: Sequence[tuple[str, ...]],
    k: int,
    scope: Scope,
) -> list[tuple[Any, ...]]:
    """The exact top k (by full BM25 over every query term) among rows in scope
    that hold an essential term and contain every phrase."""
    rejected: list[int] = []
    for _ in range(_MAX_PHRASE_RETRIES):
        params: dict[str, Any] = {}
        statement = _lexical_sql(idx, terms, essential, phrases, k, scope, rejected, params)
        cur = await conn.execute(statement, params)
        rows = await cur.fetchall()
        # Rows past the tsvector position limits matched on "all phrase words
        # present"; check their phrases exactly and search again without failures.
        bad = [
            int(r[10])
            for r in rows
            if not r[9] and not all(contains_phrase(phrase_words(str(r[2])), p) for p in phrases)
        ]
        if not bad:
            return rows
        rejected.extend(bad)
    return [r for r in rows if r[9] or int(r[10]) not in set(rejected)]


def _lexical_sql(
    idx: IndexRow,
    terms: _TermWeights,
    essential: Sequence[str],
    phrases: Sequence[tuple[str, ...]],
    k: int,
    scope: Scope,
    rejected: Sequence[int],
    params: dict[str, Any],
) -> sql.Composed:
    params.update(
        index_id=idx.id,
        staging=idx.staging,
        any=" | ".join(_ts_quote(t) for t in essential),
        avgdl=terms.avgdl,
        k1=bm25.K1,
        k1p1=bm25.K1 + 1.0,
        b=bm25.B,
        one_minus_b=1.0 - bm25.B,
        k=k,
        rejected=list(rejected),
    )
    freq_cols: list[sql.Composable] = []
    contribs: list[sql.Composable] = []
    for i, term in enumerate(terms.idf):
        params[f"t{i}"] = term
        params[f"w{i}"] = terms.idf[term]
        params[f"q{i}"] = float(terms.qtf[term])
        f = sql.Identifier(f"f{i}")
        freq_cols.append(
            sql.SQL("coalesce((c.term_freqs ->> {t})::float8, 0) AS {f}").format(
                t=sql.Placeholder(f"t{i}"), f=f
            )
        )
        # domain.bm25.term_score's arithmetic, term by term in query order.
        contribs.append(
            sql.SQL(
                "(CASE WHEN f.{f} > 0 THEN {q} * ({w} * f.{f} * %(k1p1)s"
                " / (f.{f} + %(k1)s * (%(one_minus_b)s + %(b)s * c.token_count / %(avgdl)s)))"
                " ELSE 0 END)"
            ).format(f=f, q=sql.Placeholder(f"q{i}"), w=sql.Placeholder(f"w{i}"))
        )
    phrase_ok: sql.Composable = sql.SQL("true")
    if phrases:
        params["phrase"] = " & ".join(
            "(" + " <-> ".join(_ts_quote(w) + ":A" for w in p) + ")" for p in phrases
        )
        params["words"] = " & ".join(_ts_quote(w) for p in phrases for w in p)
        phrase_ok = sql.SQL(
            "CASE WHEN c.phrase_exact THEN c.lex @@ %(phrase)s::tsquery "
            "ELSE c.lex @@ %(words)s::tsquery END"
        )
    # OFFSET 0 keeps the frequencies a separate subquery, so each is read from the
    # row once rather than once per reference in the score expression.
    return sql.SQL(
        """
        SELECT {cols}, top.score, top.phrase_exact, top.id
        FROM (
            SELECT c.id, c.phrase_exact, c.document_id, c.chunk_id, 0.0 + {score} AS score
            FROM gw_chunks c
            CROSS JOIN LATERAL (SELECT {freq_cols} OFFSET 0) f
            WHERE c.index_id = %(index_id)s AND c.lex @@ %(any)s::tsquery
              AND c.version <> ALL(%(staging)s::bigint[])
              AND {scope} AND {phrase_ok} AND c.id <> ALL(%(rejected)s::bigint[])
            ORDER BY score DESC, c.document_id, c.chunk_id
            LIMIT %(k)s
        ) top JOIN gw_chunks c ON c.id = top.id
        """
    ).format(
        scope=scope_sql(scope, params),
        phrase_ok=phrase_ok,
        freq_cols=sql.SQL(", ").join(freq_cols),
        score=sql.SQL(" + ").join(contribs),
        cols=HIT_COLUMNS,
    )
