"""Lexical search on PostgreSQL: the BM25 query that ranks exactly like the in-memory
store, over the rows tsvector.py encodes and the block postings blocks.py writes.

Ranking. BM25 (`domain.bm25`) over the scope tenant's own statistics (another
tenant's documents never move a tenant's scores): document frequencies per (index,
tenant, term) live in `gw_term_stats` and N / total length per (index, tenant) in
`gw_tenant_stats`, all moved in the publish transaction, so a query reads them from
its own snapshot. Candidates come from `gw_posting_blocks`, each term's postings in
the tenant's own blocks of at most 128 chunk ids: a query without phrases reads the
terms' block directories and only the blocks whose bound can still beat the k-th
best score (blockmax.py, block-max MaxScore), scores them vectorised, and reads the
chunk rows of the top k alone. It scores at most `query.max_terms` distinct terms,
the rarest first. A filter (metadata, ranges, readers) is the sorted set of chunk
ids it admits in the published version (cached per version, blockmax.LexicalCache),
intersected before scoring; a filter admitting fewer chunks than the blocks the
query would read ranks those chunks from their rows instead. A phrase query takes
its candidates from the postings of its rarest phrase word and checks the phrases
on the chunk rows.

pg_trgm is required (the schema creates the extension) but no trigram index is built
over chunk text: every identifier the in-memory store can find is an exact token here
too, and trigram matching would find substrings the in-memory store does not, making
the two stores rank differently.
"""

from __future__ import annotations

import asyncio
import enum
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import sql

from groundwire.domain import bm25
from groundwire.domain.analysis import PLAIN, Analyzer
from groundwire.domain.ordering import rank_hits
from groundwire.domain.query import contains_phrase
from groundwire.domain.retrieval import LexicalQuery, LexicalResult, Scope
from groundwire.domain.scores import Score, ScoreMetric
from groundwire.stores.bounds import PHRASE_MAX_CANDIDATES
from groundwire.stores.postgres import blockmax, blocks
from groundwire.stores.postgres.admitted import admitted_ids
from groundwire.stores.postgres.connection import Conn
from groundwire.stores.postgres.scope import HIT_COLUMNS, IndexRow, filters_rows, hit, scope_sql
from groundwire.stores.postgres.tsvector import fits, ts_quote

# A filter admitting at most this many chunks per block the query would read
# ranks them from their rows (one heap read each) instead of reading blocks.
ROWS_PER_BLOCK = 1.0


@dataclass(frozen=True, slots=True)
class _TermWeights:
    """BM25 weights of the scored query terms against one published snapshot."""

    qtf: Mapping[str, float]  # query-term weights (qtf unless feedback set them)
    idf: dict[str, float]  # the scored terms, in query order
    avgdl: float
    pruned: int
    df: dict[str, int]

    @classmethod
    def of(
        cls, query: LexicalQuery, df: Mapping[str, int], total: int, tokens: int
    ) -> _TermWeights:
        terms, pruned = bm25.select_terms(query.terms, df, query.max_terms)
        qtf = query.term_weights()
        idf = {t: bm25.idf(total, df[t]) for t in terms}
        return cls(qtf, idf, bm25.average_length(tokens, total), pruned, {t: df[t] for t in idf})

    def weighted(self) -> blockmax.Weighted:
        terms = list(self.idf)
        return blockmax.Weighted(
            terms, [float(self.qtf[t]) for t in terms], [self.idf[t] for t in terms], self.avgdl
        )


# What lexical search reads before ranking, from its own snapshot: the published
# version (the caches' key), the scope tenant's chunk and token counts and the
# document frequencies of the query terms in that tenant's published chunks.
#
# gw_term_stats counts the chunks whose tsvector holds a lexeme, and the tsvector
# also holds the phrase words, stop words included: a term that is also the
# (stemmed) form of a stop word ("a", "as", "no", "m": pieces of HNF4A, mRNAs, NO,
# or "be" from "beings") is counted there in every chunk where it is only a stop
# word, its idf falls and the two stores rank differently (46 of 300 SciFact claims,
# bench/bench_lexical_agreement.py). Those terms (`_phrase_only_forms`) take their
# document frequency from the postings instead (the block counts of the term),
# which hold exactly the chunks having the term, as the in-memory store counts it.
# Every other term's lexeme is a term wherever it occurs, so gw_term_stats is exact.
_LEXICAL_STATS_SQL = """
    SELECT 'v'::text, NULL::text, published_version, 0::bigint FROM gw_indexes
    WHERE id = %(index_id)s
    UNION ALL
    SELECT 'n', NULL, chunk_count, token_count FROM gw_tenant_stats
    WHERE index_id = %(index_id)s AND tenant = %(tenant)s
    UNION ALL
    SELECT 'd', term, df, 0 FROM gw_term_stats
    WHERE index_id = %(index_id)s AND tenant = %(tenant)s AND term = ANY(%(terms)s)
    UNION ALL
    SELECT 'd', b.term, sum(b.n), 0 FROM gw_posting_blocks b
    WHERE b.index_id = %(index_id)s AND b.tenant = %(tenant)s AND b.term = ANY(%(recount)s)
    GROUP BY b.term
"""


@functools.lru_cache(maxsize=64)
def _phrase_only_forms(analyzer: Analyzer) -> frozenset[str]:
    """Every lexeme a chunk's tsvector can hold without the chunk having it as a
    term: the phrase-word forms of the analyzer's stop words (a stop word is a phrase
    word, stemmed like the others, but never a term). Any other phrase word of a
    chunk is also one of its terms (domain.analysis.Analyzer.analyze)."""
    forms: set[str] = set()
    for word in analyzer.stop_words:
        forms.update(set(analyzer.phrase_words(word)) - set(analyzer.terms(word)))
    return frozenset(forms)


async def search(
    conn: Conn,
    idx: IndexRow,
    query: LexicalQuery,
    k: int,
    scope: Scope,
    cache: blockmax.LexicalCache | None = None,
    stats: blockmax.Stats | None = None,
) -> LexicalResult:
    """The exact BM25 top k in scope (inside `conn`'s snapshot)."""
    fitting = tuple(t for t in query.terms if fits(t))
    phrases = list(query.phrases)
    if not fitting or any(not fits(w) for p in phrases for w in p):
        return LexicalResult([])  # a word PostgreSQL cannot index cannot be matched
    distinct = list(dict.fromkeys(fitting))
    recount = _phrase_only_forms(query.analyzer)
    cur = await conn.execute(
        _LEXICAL_STATS_SQL,
        {
            "index_id": idx.id,
            "tenant": scope.tenant,
            "terms": [t for t in distinct if t not in recount],
            "recount": [t for t in distinct if t in recount],
        },
    )
    version, total, tokens, df = 0, 0, 0, {}
    for kind, term, count, length in await cur.fetchall():
        if kind == "v":
            version = int(count)
        elif kind == "n":
            total, tokens = int(count), int(length)
        else:
            df[str(term)] = int(count)
    if total <= 0:
        return LexicalResult([])
    weights = _TermWeights.of(
        LexicalQuery(
            query.text,
            fitting,
            query.phrases,
            query.max_terms,
            query.analyzer,
            tuple((t, w) for t, w in query.weights if fits(t)),
        ),
        df,
        total,
        tokens,
    )
    if not weights.idf:
        return LexicalResult([], 0, weights.pruned)
    ctx = _Context(conn, idx, scope, cache, version)
    if phrases:
        # A row matching every phrase holds every phrase word, so the postings of the
        # rarest one are all the candidates there are (none if one is absent). Stop
        # words are phrase words but not terms: they have no postings to look up.
        indexed = set(fitting)
        words = [w for p in phrases for w in p if w in indexed]
        if not words:
            return LexicalResult([], len(weights.idf), weights.pruned)
        anchor = min(words, key=lambda w: (df.get(w, 0), w))
        if df.get(anchor, 0) == 0:
            return LexicalResult([], len(weights.idf), weights.pruned)
        rows = await _phrase_top(ctx, weights, phrases, anchor, k, query.analyzer)
        hits = [hit(r, Score.of(ScoreMetric.BM25, float(r[8]))) for r in rows]
    else:
        hits = await _block_top(ctx, weights, k, stats)
    return LexicalResult(rank_hits(hits)[:k], len(weights.idf), weights.pruned)


@dataclass(frozen=True, slots=True)
class _Context:
    conn: Conn
    idx: IndexRow
    scope: Scope
    cache: blockmax.LexicalCache | None
    version: int  # the published version read by this snapshot


_HIT_ROWS_SQL = sql.SQL("SELECT {cols}, c.id FROM gw_chunks c WHERE c.id = ANY(%(ids)s)").format(
    cols=HIT_COLUMNS
)


async def _block_top(
    ctx: _Context, weights: _TermWeights, k: int, stats: blockmax.Stats | None
) -> list[Any]:
    """Hits of the exact top k (with ties at the k-th score) by block-max MaxScore
    over the block postings; only the top chunks' rows are read."""
    weighted = weights.weighted()
    dirs = await blockmax.cached_directories(
        ctx.conn, ctx.cache, ctx.idx.id, ctx.version, ctx.scope.tenant, weighted.terms
    )
    allowed = None
    if filters_rows(ctx.scope):
        allowed = await admitted(ctx)
        if len(allowed) <= ROWS_PER_BLOCK * _blocks_holding(dirs, allowed):
            rows = await _fetch(ctx, weights, (), None, _Part.ALL, k, [int(x) for x in allowed])
            return [hit(r, Score.of(ScoreMetric.BM25, float(r[8]))) for r in rows]
    src = blockmax.Source(ctx.conn, ctx.idx.id, ctx.scope.tenant, ctx.version, ctx.cache)
    ids, scores = await blockmax.top_k(src, weighted, dirs, k, allowed=allowed, stats=stats)
    if not len(ids):
        return []
    score_of = dict(zip(ids.tolist(), scores.tolist(), strict=True))
    cur = await ctx.conn.execute(_HIT_ROWS_SQL, {"ids": list(score_of)})
    return [hit(r, Score.of(ScoreMetric.BM25, score_of[int(r[8])])) for r in await cur.fetchall()]


def _blocks_holding(dirs: Mapping[str, blocks.Directory], allowed: npt.NDArray[np.int64]) -> int:
    """How many of the terms' blocks hold at least one admitted chunk."""
    total = 0
    for d in dirs.values():
        hi = np.searchsorted(allowed, d.lasts, side="right")
        lo = np.concatenate(([0], hi[:-1]))
        total += int(np.count_nonzero(hi - lo))
    return total


async def admitted(ctx: _Context) -> npt.NDArray[np.int64]:
    """The sorted chunk ids the scope admits in this snapshot's published version."""
    cache = ctx.cache.filters if ctx.cache is not None else None
    ids = await admitted_ids(ctx.conn, ctx.idx, ctx.scope, ctx.version, cache)
    assert ids is not None  # (no bound asked)
    return ids


async def _phrase_top(
    ctx: _Context,
    weights: _TermWeights,
    phrases: Sequence[tuple[str, ...]],
    anchor: str,
    k: int,
    analyzer: Analyzer = PLAIN,
) -> list[tuple[Any, ...]]:
    """The exact top k among rows in scope that contain every phrase (not yet in
    rank order): the candidates are at most PHRASE_MAX_CANDIDATES of the anchor's
    postings (the highest tf first), checked on their rows."""
    dirs = await blockmax.cached_directories(
        ctx.conn, ctx.cache, ctx.idx.id, ctx.version, ctx.scope.tenant, [anchor]
    )
    d = dirs.get(anchor)
    if d is None:
        return []
    read = await blocks.read_blocks(ctx.conn, ctx.idx.id, ctx.scope.tenant, {anchor: d.lasts})
    candidates = blockmax.anchor_candidates(read[anchor], PHRASE_MAX_CANDIDATES)
    rows = await _fetch(ctx, weights, phrases, anchor, _Part.EXACT, k, candidates)
    # Chunks past the tsvector position limits matched on "every phrase word
    # present": all of them in scope, checked exactly in a worker thread (their cost
    # is the caller tenant's own data), then ranked with the exact ones.
    loose = await _fetch(ctx, weights, phrases, anchor, _Part.LOOSE, k, candidates)
    if loose:
        rows += await asyncio.to_thread(_holding_phrases, loose, phrases, analyzer)
    return rows


def _holding_phrases(
    rows: Sequence[tuple[Any, ...]], phrases: Sequence[tuple[str, ...]], analyzer: Analyzer
) -> list[tuple[Any, ...]]:
    return [
        r
        for r in rows
        if all(contains_phrase(analyzer.phrase_words(str(r[2])), p) for p in phrases)
    ]


class _Part(enum.Enum):
    """Which rows a ranking statement returns."""

    ALL = "all"  # no phrases: the top k
    EXACT = "exact"  # phrases, chunks whose positions are exact: the top k
    LOOSE = "loose"  # phrases, chunks past the position limits: every candidate


async def _fetch(
    ctx: _Context,
    weights: _TermWeights,
    phrases: Sequence[tuple[str, ...]],
    anchor: str | None,
    part: _Part,
    k: int,
    candidates: list[int],
) -> list[tuple[Any, ...]]:
    params: dict[str, Any] = {"cands": candidates}
    cur = await ctx.conn.execute(
        _rows_sql(ctx.idx, weights, phrases, anchor, part, k, ctx.scope, params), params
    )
    return await cur.fetchall()


def _rows_sql(
    idx: IndexRow,
    weights: _TermWeights,
    phrases: Sequence[tuple[str, ...]],
    anchor: str | None,
    part: _Part,
    k: int,
    scope: Scope,
    params: dict[str, Any],
) -> sql.Composed:
    """One statement ranking the candidate chunk ids (%(cands)s) from their rows:
    the scope checked on each, every scored term's BM25 from its term counts, and
    with phrases the phrase check (exact positions, or every phrase word present
    for chunks past the tsvector limits)."""
    columns, score = _full_score(idx, weights, k, scope, params)
    phrase_ok: sql.Composable = sql.SQL("true")
    limit: sql.Composable = sql.SQL("LIMIT %(k)s")
    if anchor is not None:
        if part is _Part.EXACT:
            params["phrase"] = " & ".join(
                "(" + " <-> ".join(ts_quote(w) + ":A" for w in p) + ")" for p in phrases
            )
            phrase_ok = sql.SQL("c.phrase_exact AND c.lex @@ %(phrase)s::tsquery")
        else:
            params["words"] = " & ".join(ts_quote(w) for p in phrases for w in p)
            phrase_ok = sql.SQL("NOT c.phrase_exact AND c.lex @@ %(words)s::tsquery")
            limit = sql.SQL("")
    # A row scores only through the scored terms (like the in-memory store, which
    # ranks rows holding at least one of them).
    phrase_ok = sql.SQL("{} AND ({}) > 0").format(phrase_ok, score)
    # OFFSET 0 keeps the frequencies a separate subquery, so each is read from the
    # row once rather than once per reference in the score expression.
    return sql.SQL(
        """
        SELECT {cols}, top.score, top.phrase_exact, top.id
        FROM (
            SELECT c.id, c.phrase_exact, c.document_id, c.chunk_id, 0.0 + {score} AS score
            FROM unnest(%(cands)s::bigint[]) AS cand(chunk)
            JOIN gw_chunks c ON c.id = cand.chunk
            CROSS JOIN LATERAL (SELECT {freq_cols} OFFSET 0) f
            WHERE c.index_id = %(index_id)s AND {scope} AND {phrase_ok}
            ORDER BY score DESC, c.document_id, c.chunk_id
            {limit}
        ) top JOIN gw_chunks c ON c.id = top.id
        """
    ).format(
        limit=limit,
        scope=scope_sql(scope, params),
        phrase_ok=phrase_ok,
        freq_cols=columns,
        score=score,
        cols=HIT_COLUMNS,
    )


def _full_score(
    idx: IndexRow, weights: _TermWeights, k: int, scope: Scope, params: dict[str, Any]
) -> tuple[sql.Composable, sql.Composable]:
    """The frequency columns read from a candidate's row (`c.term_freqs`, as `f`)
    and its full BM25 score over every scored term, in query order, with the
    in-memory store's arithmetic; binds the parameters both share."""
    params.update(
        index_id=idx.id,
        tenant=scope.tenant,
        avgdl=weights.avgdl,
        k1=bm25.K1,
        k1p1=bm25.K1 + 1.0,
        b=bm25.B,
        one_minus_b=1.0 - bm25.B,
        k=k,
    )
    freq_cols: list[sql.Composable] = []
    contribs: list[sql.Composable] = []
    for i, term in enumerate(weights.idf):
        params[f"t{i}"] = term
        params[f"w{i}"] = weights.idf[term]
        params[f"q{i}"] = float(weights.qtf[term])
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
    return sql.SQL(", ").join(freq_cols), sql.SQL(" + ").join(contribs)
