"""Lexical search on PostgreSQL: the BM25 query that ranks exactly like the in-memory
store, over the rows tsvector.py encodes.

Ranking. BM25 (`domain.bm25`) over the scope tenant's own statistics (another
tenant's documents never move a tenant's scores): document frequencies per (index,
tenant, term) live in `gw_term_stats` and N / total length per (index, tenant) in
`gw_tenant_stats`, all moved in the publish transaction, so a query reads them from
its own snapshot. Candidates come from `gw_postings`, one row per (published chunk,
term) keyed by (index, tenant, term): a term's postings are an index-only range scan
of the tenant's own rows. A query is two statements whatever its length (statistics,
then one ranking statement with MaxScore pruning; three with phrases), and scores at
most `query.max_terms` distinct terms, the rarest first. A query of common words only
(its terms' postings together past IMPACT_MIN_POSTINGS, no phrase), where MaxScore
prunes nothing, reads the postings best first instead (the index is ordered tf DESC,
dl within a term) in rounds of doubling depth and stops as soon as the rest provably
cannot reach the top k (`_impact_top`): same exact scores, a fraction of the postings
read. Under a metadata filter, a query each of whose terms alone holds more than
IMPACT_MIN_POSTINGS postings takes the same rounds, keeping only the chunks read that
the filter admits (a probe of each one's row), so the threshold is the k-th best in
scope; a filtered query with a rarer term keeps MaxScore, which starts from that
term's short list.

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

from psycopg import sql

from groundwire.domain import bm25
from groundwire.domain.analysis import PLAIN, Analyzer
from groundwire.domain.ordering import rank_hits
from groundwire.domain.query import contains_phrase
from groundwire.domain.retrieval import LexicalQuery, LexicalResult, Scope
from groundwire.domain.scores import Score, ScoreMetric
from groundwire.stores.bounds import PHRASE_MAX_CANDIDATES
from groundwire.stores.postgres.connection import Conn
from groundwire.stores.postgres.scope import HIT_COLUMNS, IndexRow, filters_rows, hit, scope_sql
from groundwire.stores.postgres.tsvector import fits, ts_quote

# -- ranking ------------------------------------------------------------------------

# The threshold seed: the postings of the rarest terms (highest bounds first, while
# fewer than _SEED_POSTINGS have been taken; the rarest term always), ranked by their
# partial score; the best _SEED_ROWS (at least k) chunks are scored fully.
_SEED_POSTINGS = 4096
_SEED_ROWS = 64
# The threshold seed's k-th score is lowered by this relative margin before it prunes, so
# floating-point noise can never make it exceed the true k-th score.
_THETA_MARGIN = 1.0 - 1e-9


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

    def by_bound(self) -> tuple[list[str], list[float], list[float]]:
        """Terms in ascending order of their score bound, each with its weight
        (qtf * idf) and the running sum of bounds up to and including it."""
        weight = {t: self.qtf[t] * w for t, w in self.idf.items()}
        order = sorted(weight, key=lambda t: (weight[t], t))
        cumulative, total = [], 0.0
        for t in order:
            total += bm25.upper_bound(weight[t])
            cumulative.append(total)
        return order, [weight[t] for t in order], cumulative


# What lexical search reads before ranking, from its own snapshot: the scope
# tenant's chunk and token counts (first row, term NULL) and the document
# frequencies of the query terms in that tenant's published chunks.
#
# gw_term_stats counts the chunks whose tsvector holds a lexeme, and the tsvector
# also holds the phrase words, stop words included: a term that is also the
# (stemmed) form of a stop word ("a", "as", "no", "m": pieces of HNF4A, mRNAs, NO,
# or "be" from "beings") is counted there in every chunk where it is only a stop
# word, its idf falls and the two stores rank differently (46 of 300 SciFact claims,
# bench/bench_lexical_agreement.py). Those terms (`_phrase_only_forms`) take their
# document frequency from the postings instead, which hold exactly the chunks having
# the term, as the in-memory store counts it: an index-only count of the term's
# postings, short because such a word is a term only in a few chunks. Every other
# term's lexeme is a term wherever it occurs, so gw_term_stats is exact for it.
_LEXICAL_STATS_SQL = """
    SELECT NULL::text, chunk_count, token_count FROM gw_tenant_stats
    WHERE index_id = %(index_id)s AND tenant = %(tenant)s
    UNION ALL
    SELECT term, df, 0 FROM gw_term_stats
    WHERE index_id = %(index_id)s AND tenant = %(tenant)s AND term = ANY(%(terms)s)
    UNION ALL
    SELECT p.term, count(*), 0 FROM gw_postings p
    WHERE p.index_id = %(index_id)s AND p.tenant = %(tenant)s AND p.term = ANY(%(recount)s)
    GROUP BY p.term
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
    conn: Conn, idx: IndexRow, query: LexicalQuery, k: int, scope: Scope
) -> LexicalResult:
    """The exact BM25 top k in scope (inside `conn`'s snapshot), in a constant number
    of statements whatever the query's length: the statistics, then the ranking (two
    ranking statements with phrases: exact-position chunks, then marked ones)."""
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
    total, tokens, df = 0, 0, {}
    for term, count, length in await cur.fetchall():
        if term is None:
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
    anchor = None
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
    rows = await _top(conn, idx, weights, phrases, anchor, k, scope, query.analyzer)
    hits = [hit(r, Score.of(ScoreMetric.BM25, float(r[8]))) for r in rows]
    return LexicalResult(rank_hits(hits)[:k], len(weights.idf), weights.pruned)


async def _top(
    conn: Conn,
    idx: IndexRow,
    weights: _TermWeights,
    phrases: Sequence[tuple[str, ...]],
    anchor: str | None,
    k: int,
    scope: Scope,
    analyzer: Analyzer = PLAIN,
) -> list[tuple[Any, ...]]:
    """The exact top k (by full BM25 over every scored term) among rows in scope
    that contain every phrase (not yet in rank order)."""
    if anchor is None:
        if sum(weights.df.values()) > IMPACT_MIN_POSTINGS and (
            not filters_rows(scope) or min(weights.df.values()) > IMPACT_MIN_POSTINGS
        ):
            # Under a filter every chunk read costs a probe of its row, so the rounds
            # are only for queries without a rarer term for MaxScore to start from.
            return await _impact_top(conn, idx, weights, k, scope)
        return await _fetch(conn, idx, weights, phrases, None, _Part.ALL, k, scope)
    # Both statements read at most PHRASE_MAX_CANDIDATES of the anchor's postings.
    rows = await _fetch(conn, idx, weights, phrases, anchor, _Part.EXACT, k, scope)
    # Chunks past the tsvector position limits matched on "every phrase word
    # present": all of them in scope, checked exactly in a worker thread (their cost
    # is the caller tenant's own data), then ranked with the exact ones.
    loose = await _fetch(conn, idx, weights, phrases, anchor, _Part.LOOSE, k, scope)
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
    conn: Conn,
    idx: IndexRow,
    weights: _TermWeights,
    phrases: Sequence[tuple[str, ...]],
    anchor: str | None,
    part: _Part,
    k: int,
    scope: Scope,
) -> list[tuple[Any, ...]]:
    params: dict[str, Any] = {}
    cur = await conn.execute(
        _lexical_sql(idx, weights, phrases, anchor, part, k, scope, params), params
    )
    return await cur.fetchall()


# MaxScore's pruning, as common table expressions ahead of `cand` (see _lexical_sql):
# q holds the scored terms in ascending order of their bound, with the running sum
# of bounds (cum).
_PRUNING_CTES = """
    q AS MATERIALIZED (
        SELECT * FROM unnest(%(terms)s::text[], %(weights)s::float8[],
                             %(cumulative)s::float8[], %(dfs)s::bigint[]) AS q(term, w, cum, df)
    ),
    seed_terms AS MATERIALIZED (
        SELECT term, w FROM (
            SELECT term, w, sum(df) OVER (ORDER BY cum DESC) - df AS before FROM q
        ) x WHERE before < %(seed_postings)s
    ),
    seed AS MATERIALIZED (
        SELECT p.chunk FROM seed_terms t JOIN gw_postings p
            ON p.index_id = %(index_id)s AND p.tenant = %(tenant)s AND p.term = t.term
        {seed_filter}
        GROUP BY p.chunk
        ORDER BY sum(t.w * p.tf * %(k1p1)s
                      / (p.tf + %(k1)s * (%(one_minus_b)s + %(b)s * p.dl / %(avgdl)s))) DESC,
                 p.chunk
        LIMIT %(seed_rows)s
    ),
    seed_top AS MATERIALIZED (
        SELECT 0.0 + {score} AS score
        FROM seed JOIN gw_chunks c ON c.id = seed.chunk
        CROSS JOIN LATERAL (SELECT {freq_cols} OFFSET 0) f
        WHERE {scope}
        ORDER BY score DESC LIMIT %(k)s
    ),
    theta AS MATERIALIZED (
        SELECT CASE WHEN count(*) < %(k)s THEN -1.0 ELSE min(score) * %(margin)s END AS v
        FROM seed_top
    ),
    bounds AS MATERIALIZED (
        SELECT coalesce(max(q.cum) FILTER (WHERE q.cum <= t.v), 0.0) AS rest, t.v
        FROM q, theta t GROUP BY t.v
    ),
"""

# Candidates without phrases: rows holding an essential term whose partial score
# (from the postings alone) plus every non-essential bound can still pass theta.
_ESSENTIAL_CANDIDATES = """
    SELECT p.chunk FROM q JOIN gw_postings p
        ON p.index_id = %(index_id)s AND p.tenant = %(tenant)s AND p.term = q.term
    WHERE q.cum > (SELECT v FROM bounds)
    GROUP BY p.chunk
    HAVING sum(q.w * p.tf * %(k1p1)s
               / (p.tf + %(k1)s * (%(one_minus_b)s + %(b)s * p.dl / %(avgdl)s)))
           + (SELECT rest FROM bounds) > (SELECT v FROM bounds)
"""

# Candidates with phrases: every row that can match holds the rarest phrase word;
# at most PHRASE_MAX_CANDIDATES of its postings (the highest term frequencies: an
# index-only scan of the impact order) are verified, whatever the word's df.
_ANCHOR_CANDIDATES = """
    SELECT p.chunk FROM gw_postings p
    WHERE p.index_id = %(index_id)s AND p.tenant = %(tenant)s AND p.term = %(anchor)s
    ORDER BY p.tf DESC, p.dl, p.chunk
    LIMIT %(phrase_candidates)s
"""


def _lexical_sql(
    idx: IndexRow,
    weights: _TermWeights,
    phrases: Sequence[tuple[str, ...]],
    anchor: str | None,
    part: _Part,
    k: int,
    scope: Scope,
    params: dict[str, Any],
) -> sql.Composed:
    """One statement: exact top-k BM25 with MaxScore pruning (Turtle and Flood 1995).

    1. seed: the postings of the rarest terms (short lists, read from the index
       alone), the chunks with the best partial scores among them scored fully; the
       k-th best of those is a score some k rows in scope really reach, so the final
       k-th best score (theta) is at least it.
    2. The terms whose score bounds, summed from the lowest, stay at or below theta
       are non-essential: a row holding only them scores below theta (the bounds are
       strict), so only the postings of the other, essential (rarer), terms are
       read, and a row whose essential partial score plus every non-essential bound
       cannot pass theta is dropped before its chunk is read.
    3. The survivors are scored fully (every term, in query order, with the in-memory
       store's arithmetic) and the top k returned.

    With phrases, the candidates are the postings of the rarest phrase word (`anchor`)
    instead: every row that can match holds it. Every posting read is the scope
    tenant's own (an index-only range scan of the primary key), so another tenant's
    data changes neither the result nor the cost."""
    order, w, cumulative = weights.by_bound()
    columns, score = _full_score(idx, weights, k, scope, params)
    phrase_ok: sql.Composable = sql.SQL("true")
    pruning: sql.Composable = sql.SQL("")
    limit: sql.Composable = sql.SQL("LIMIT %(k)s")
    if anchor is not None:
        params["anchor"] = anchor
        params["phrase_candidates"] = PHRASE_MAX_CANDIDATES
        if part is _Part.EXACT:
            params["phrase"] = " & ".join(
                "(" + " <-> ".join(ts_quote(w) + ":A" for w in p) + ")" for p in phrases
            )
            phrase_ok = sql.SQL("c.phrase_exact AND c.lex @@ %(phrase)s::tsquery")
        else:
            params["words"] = " & ".join(ts_quote(w) for p in phrases for w in p)
            phrase_ok = sql.SQL("NOT c.phrase_exact AND c.lex @@ %(words)s::tsquery")
            limit = sql.SQL("")
        # A row scores only through the scored terms (like the in-memory store,
        # which ranks rows holding at least one of them).
        phrase_ok = sql.SQL("{} AND ({}) > 0").format(phrase_ok, score)
        candidates = sql.SQL(_ANCHOR_CANDIDATES)
    else:
        params.update(
            terms=order,
            weights=w,
            cumulative=cumulative,
            dfs=[weights.df[t] for t in order],
            seed_postings=_SEED_POSTINGS,
            seed_rows=max(_SEED_ROWS, k),
            margin=_THETA_MARGIN,
        )
        # With a metadata filter the seed keeps only rows the filter admits, so a
        # selective filter still yields a threshold (else every posting is read).
        seed_filter: sql.Composable = sql.SQL("")
        if filters_rows(scope):
            seed_filter = sql.SQL("JOIN gw_chunks c ON c.id = p.chunk AND {}").format(
                scope_sql(scope, params)
            )
        pruning = sql.SQL(_PRUNING_CTES).format(
            score=score,
            freq_cols=columns,
            scope=scope_sql(scope, params),
            seed_filter=seed_filter,
        )
        candidates = sql.SQL(_ESSENTIAL_CANDIDATES)
    # OFFSET 0 keeps the frequencies a separate subquery, so each is read from the
    # row once rather than once per reference in the score expression.
    return sql.SQL(
        """
        WITH {pruning}
        cand AS MATERIALIZED ({candidates})
        SELECT {cols}, top.score, top.phrase_exact, top.id
        FROM (
            SELECT c.id, c.phrase_exact, c.document_id, c.chunk_id, 0.0 + {score} AS score
            FROM cand JOIN gw_chunks c ON c.id = cand.chunk
            CROSS JOIN LATERAL (SELECT {freq_cols} OFFSET 0) f
            WHERE {scope} AND {phrase_ok}
            ORDER BY score DESC, c.document_id, c.chunk_id
            {limit}
        ) top JOIN gw_chunks c ON c.id = top.id
        """
    ).format(
        pruning=pruning,
        candidates=candidates,
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


# -- impact-ordered early termination -------------------------------------------------

# Queries whose scored terms hold more postings than this together (common words
# only, where MaxScore's threshold prunes nothing and every posting would be scored)
# read the postings in impact order instead and stop early (`_impact_top`).
IMPACT_MIN_POSTINGS = 20_000
# Postings read per term in the first round; each further round reads this factor
# more (a round re-reads from the start: the work of all rounds is at most
# factor/(factor-1) times the last one).
IMPACT_FIRST_DEPTH = 1024
IMPACT_DEPTH_FACTOR = 2
# A term whose weight (or, after a round, whose unread bound) is below 1/this of the
# largest is not read deeper in that round: its bound is small beside the others'.
# Infinite (every term read to the same depth) by default: a share of 4 measured 8%
# less server CPU per common-word query at 100k chunks but 38% more at 300k
# (bench_million.py --impact-share).
IMPACT_LIGHT_SHARE: float = float("inf")
# A round also ends the search only when at most this many chunks may still reach
# the top k: each is then scored fully from its row (a heap read), which costs more
# than reading postings deeper.
IMPACT_MAX_CANDIDATES = 512
# Under a metadata filter each chunk read costs a probe of its row (about 10 us at 1M),
# repeated every round: a round that would read more postings than this (all terms
# together) is not run, MaxScore answers instead. At 1M with a 10% filter, 12
# common-word queries (bench/bench_lexical_paths.py): without this bound p50 1.0 s but
# one query 8 rounds and 8.4 s (MaxScore: 3.4 s and 5.4 s); with it p50 1.3 s, max
# 6.0 s, 2.3 s of server CPU a query (MaxScore in the same sitting: 3.3 s, 6.6 s, 3.7 s).
IMPACT_FILTERED_MAX_POSTINGS = 65_536

# One term's BM25 contribution per unit of weight, from a posting's tf and dl
# (domain.bm25.term_score's arithmetic).
_G = "({tf} * %(k1p1)s / ({tf} + %(k1)s * (%(one_minus_b)s + %(b)s * {dl} / %(avgdl)s)))"

# One round of the threshold algorithm over impact-ordered postings (Fagin, Lotem and
# Naor 2001; "no random access" bounds, then random access for the survivors), each
# term's postings read best first in the index order (tf DESC, dl, chunk) down to its
# own depth (%(d<i>)s; a term of little weight may be read to depth 0): a posting read
# later has a lower tf, or the same tf and a dl at least as long.
# q: per term, its weight and the exact maximum of its contribution over every
#   posting past its depth: w * max(g(tf, dl) of the first one not read (probe; the
#   rest of its tf level has dl at least as long), g(tf, dl) of the first posting of
#   each lower tf level (levels: one index probe per distinct lower tf, a skip scan:
#   the shortest chunk of that level)); 0 when the list ends within the depth;
# partial: per chunk read and in scope (the filter checked once per chunk), its exact
#   contribution from the terms it was read under (lo, a lower bound of its score)
#   and the bounds of those terms (seen);
# theta: the k-th best lo, a score k chunks in scope reach at least (margin: float
#   noise);
# cand: the chunks whose lo plus the bounds of the terms they were not read under can
#   still pass theta; every other chunk, read or not (at most the sum of the bounds),
#   scores below theta, so the top k is among cand;
# status: the round decides (every list ended, or the unread bound is below theta and
#   cand is small); only then are the candidates scored fully and the top k returned,
#   otherwise one row whose last column holds every term's bound, theta and the
#   number of candidates asks for a deeper round (_next_depths).
_IMPACT_TERM_PROBE = """
    SELECT {i}::integer AS ord, %(t{i})s::text AS term, %(iw{i})s::float8 AS w, l.tf, l.dl
    FROM (SELECT 1) one LEFT JOIN LATERAL (
        SELECT p.tf, p.dl FROM gw_postings p
        WHERE p.index_id = %(index_id)s AND p.tenant = %(tenant)s AND p.term = %(t{i})s
        ORDER BY p.tf DESC, p.dl, p.chunk
        OFFSET %(d{i})s LIMIT 1
    ) l ON true
"""
_IMPACT_TERM_HEAD = """
    SELECT p.chunk, %(iw{i})s::float8 * {g_head} AS lo, (SELECT bound FROM q WHERE ord = {i}) AS b
    FROM (
        SELECT p.chunk, p.tf, p.dl FROM gw_postings p
        WHERE p.index_id = %(index_id)s AND p.tenant = %(tenant)s AND p.term = %(t{i})s
        ORDER BY p.tf DESC, p.dl, p.chunk
        LIMIT %(d{i})s
    ) p
"""
_IMPACT_SQL = """
    WITH RECURSIVE probe AS MATERIALIZED ({probes}),
    levels AS (
        SELECT x.ord, x.term, n.tf, n.dl FROM probe x CROSS JOIN LATERAL (
            SELECT p.tf, p.dl FROM gw_postings p
            WHERE p.index_id = %(index_id)s AND p.tenant = %(tenant)s AND p.term = x.term
              AND p.tf < x.tf
            ORDER BY p.tf DESC, p.dl, p.chunk LIMIT 1
        ) n
        UNION ALL
        SELECT x.ord, x.term, n.tf, n.dl FROM levels x CROSS JOIN LATERAL (
            SELECT p.tf, p.dl FROM gw_postings p
            WHERE p.index_id = %(index_id)s AND p.tenant = %(tenant)s AND p.term = x.term
              AND p.tf < x.tf
            ORDER BY p.tf DESC, p.dl, p.chunk LIMIT 1
        ) n
    ),
    q AS MATERIALIZED (
        SELECT x.ord, CASE WHEN x.tf IS NULL THEN 0.0 ELSE x.w * greatest(
            {g_probe},
            (SELECT max({g_level}) FROM levels l WHERE l.ord = x.ord)) END AS bound
        FROM probe x
    ),
    partial AS MATERIALIZED (
        SELECT x.* FROM (
            SELECT h.chunk, sum(h.lo) AS lo, sum(h.b) AS seen FROM ({heads}) h
            GROUP BY h.chunk
        ) x {in_scope}
    ),
    theta AS MATERIALIZED (
        SELECT CASE WHEN count(*) < %(k)s THEN -1.0 ELSE min(lo) * %(margin)s END AS v
        FROM (SELECT lo FROM partial ORDER BY lo DESC LIMIT %(k)s) x
    ),
    unread AS MATERIALIZED (SELECT sum(bound) AS v FROM q),
    cand AS MATERIALIZED (
        SELECT p.chunk FROM partial p, theta t, unread u
        WHERE p.lo + (u.v - p.seen) * %(slack)s > t.v
    ),
    status AS MATERIALIZED (
        SELECT u.v = 0.0
               OR (u.v * %(slack)s < t.v AND (SELECT count(*) FROM cand) <= %(max_cand)s)
               AS ok
        FROM theta t, unread u
    )
    SELECT {cols}, top.score, top.phrase_exact, top.id, NULL::float8[]
    FROM (
        SELECT c.id, c.phrase_exact, c.document_id, c.chunk_id, 0.0 + {score} AS score
        FROM cand JOIN gw_chunks c ON c.id = cand.chunk
        CROSS JOIN LATERAL (SELECT {freq_cols} OFFSET 0) f
        WHERE (SELECT ok FROM status) AND {scope}
        ORDER BY score DESC, c.document_id, c.chunk_id
        LIMIT %(k)s
    ) top JOIN gw_chunks c ON c.id = top.id
    UNION ALL
    SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           ARRAY(SELECT bound FROM q ORDER BY ord)
           || ARRAY[(SELECT v FROM theta), (SELECT count(*) FROM cand)::float8]
    WHERE NOT (SELECT ok FROM status)
"""


def _impact_sql(
    idx: IndexRow, weights: _TermWeights, k: int, scope: Scope, params: dict[str, Any]
) -> sql.Composed:
    columns, score = _full_score(idx, weights, k, scope, params)
    for i, t in enumerate(weights.idf):  # _full_score's order: t<i> is the i-th term
        params[f"iw{i}"] = weights.qtf[t] * weights.idf[t]
    params.update(
        margin=_THETA_MARGIN,
        # Bounds are raised by the margin, theta lowered by it: float noise never
        # turns a chunk that can reach the top k into one that cannot.
        slack=2.0 - _THETA_MARGIN,
        max_cand=IMPACT_MAX_CANDIDATES,
    )
    g_head = sql.SQL(_G.format(tf="p.tf", dl="p.dl"))
    n = len(weights.idf)
    # Postings are the tenant's own: only a metadata filter needs the chunk's row,
    # one primary-key probe per distinct chunk read (about 10 us each at 1M, most of
    # a filtered round's time, by EXPLAIN ANALYZE). OFFSET 0 keeps it a correlated
    # probe whatever the planner estimates (at 1M the timings were the same without it).
    in_scope: sql.Composable = sql.SQL("")
    if filters_rows(scope):
        in_scope = sql.SQL(
            "WHERE EXISTS (SELECT 1 FROM gw_chunks c WHERE c.id = x.chunk AND {} OFFSET 0)"
        ).format(scope_sql(scope, params))
    probes = sql.SQL(" UNION ALL ").join(
        sql.SQL(_IMPACT_TERM_PROBE.replace("{i}", str(i))) for i in range(n)
    )
    heads = sql.SQL(" UNION ALL ").join(
        sql.SQL(_IMPACT_TERM_HEAD.replace("{i}", str(i))).format(g_head=g_head) for i in range(n)
    )
    return sql.SQL(_IMPACT_SQL).format(
        probes=probes,
        g_probe=sql.SQL(_G.format(tf="x.tf", dl="x.dl")),
        g_level=sql.SQL(_G.format(tf="l.tf", dl="l.dl")),
        heads=heads,
        in_scope=in_scope,
        cols=HIT_COLUMNS,
        score=score,
        freq_cols=columns,
        scope=scope_sql(scope, params),
    )


def _first_depths(weights: _TermWeights) -> list[int]:
    """Round one reads the terms that weigh at least 1/IMPACT_LIGHT_SHARE of the
    heaviest to IMPACT_FIRST_DEPTH; the others only give their bound (depth 0)."""
    w = [weights.qtf[t] * weights.idf[t] for t in weights.idf]
    top = max(w)
    return [IMPACT_FIRST_DEPTH if x * IMPACT_LIGHT_SHARE >= top else 0 for x in w]


def _next_depths(depths: list[int], longest: list[int], bounds: Sequence[float]) -> list[int]:
    """Deepen the terms whose unread bound is at least 1/IMPACT_LIGHT_SHARE of the
    largest (the ones keeping the round from deciding); a term read to depth 0
    starts at IMPACT_FIRST_DEPTH, the others read IMPACT_DEPTH_FACTOR times deeper.
    A list read to its end has bound 0 and stays."""
    top = max(bounds)
    out = list(depths)
    for i, (d, b) in enumerate(zip(depths, bounds, strict=True)):
        if b > 0.0 and b * IMPACT_LIGHT_SHARE >= top and d < longest[i]:
            out[i] = min(longest[i], IMPACT_FIRST_DEPTH if d == 0 else d * IMPACT_DEPTH_FACTOR)
    if out == depths:  # cannot happen while a bound is positive; read everything
        out = list(longest)
    return out


async def _impact_top(
    conn: Conn, idx: IndexRow, weights: _TermWeights, k: int, scope: Scope
) -> list[tuple[Any, ...]]:
    """The exact top k (in scope) of a query without phrases, reading each term's
    postings best first (the postings index is ordered tf DESC, dl within a term) in
    rounds of growing depth, each term to its own depth (the heavy terms deeper),
    until a round proves the top k (see _IMPACT_SQL). The depths only grow and every
    round that does not decide deepens a term whose list has not ended, so the last
    possible round reads every posting: the result is always exact. Under a filter,
    a round past IMPACT_FILTERED_MAX_POSTINGS hands the query to MaxScore (exact too)."""
    params: dict[str, Any] = {}
    query = _impact_sql(idx, weights, k, scope, params)
    longest = [weights.df[t] for t in weights.idf]
    depths = [min(d, n) for d, n in zip(_first_depths(weights), longest, strict=True)]
    while True:
        for i, d in enumerate(depths):
            params[f"d{i}"] = d
        cur = await conn.execute(query, params)
        rows = await cur.fetchall()
        if not rows or rows[0][10] is not None:
            return [r[:11] for r in rows]
        info = rows[0][11]
        depths = _next_depths(depths, longest, [float(b) for b in info[: len(depths)]])
        if filters_rows(scope) and sum(depths) > IMPACT_FILTERED_MAX_POSTINGS:
            return await _fetch(conn, idx, weights, (), None, _Part.ALL, k, scope)
