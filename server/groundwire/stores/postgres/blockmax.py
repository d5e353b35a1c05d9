"""Exact top-k BM25 over block postings (blocks.py) with block-max pruning.

The terms' block directories cut the chunk-id line into intervals: the boundaries
are every block's last chunk id, of every term, so within one interval each term
has exactly one block that can hold a posting (or none past its last block). An
interval's bound is the sum of those blocks' bounds (weight * BM25 at the block's
largest tf and shortest length): no chunk in it can score more. Intervals are
visited best bound first, in rounds: a round reads the blocks (one statement) of
the next intervals still able to beat the current k-th best score (theta), scores
exactly every chunk of every interval whose blocks are all read (vectorised: one
contribution a posting, summed term by term in query order, the in-memory store's
arithmetic, so scores are bit-identical), and raises theta. The search ends when
no interval left can reach theta: every chunk not scored is provably out. This is
block-max MaxScore over intervals (Ding and Suel 2011; Dimopoulos, Nepomnyachiy
and Suel 2013) rather than block-max WAND: WAND's per-document pivoting is a loop
per posting, which numpy cannot vectorise, while an interval is a whole-block
operation; each round is one round trip for every block it reads.

A filter (metadata, ranges, readers) is a sorted array of the chunk ids it admits
(`FilterCache`, per published version): an interval holding none of them is never
read, a posting outside it never scored. Chunk rows are read only for the final
top k (with ties at the k-th score).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from groundwire.domain import bm25
from groundwire.stores.lru import LRU
from groundwire.stores.postgres import blocks
from groundwire.stores.postgres.connection import Conn

# Intervals the first round reads the unread blocks of (each has at least one);
# each later round takes ROUND_FACTOR times more.
FIRST_ROUND_INTERVALS = 64
ROUND_FACTOR = 2
# After the first round, when more than this share of the intervals can still reach
# the k-th score, the terms are read whole (see top_k).
WHOLE_LIST_SHARE = 0.5
# Bounds are raised by SLACK and theta lowered by MARGIN: floating-point noise
# never turns a chunk that can reach the top k into one that cannot.
SLACK = 1.0 + 1e-9
MARGIN = 1.0 - 1e-9


@dataclass(frozen=True, slots=True)
class Weighted:
    """The scored terms in query order, each with its qtf and idf."""

    terms: list[str]
    qtf: list[float]
    idf: list[float]
    avgdl: float


def contribution(
    q: float,
    w: float,
    tf: npt.NDArray[np.float64],
    dl: npt.NDArray[np.float64],
    avgdl: float,
) -> npt.NDArray[np.float64]:
    """qtf * BM25 term score (domain.bm25's, the stores' shared operation order).
    The qtf product comes last, so a cached term score times qtf is the same float."""
    return q * bm25.term_score(w, tf, dl, avgdl)


@dataclass(slots=True)
class Stats:
    """What one search read (diagnostics and benchmarks)."""

    blocks_total: int = 0
    blocks_read: int = 0
    rounds: int = 0


@dataclass(frozen=True, slots=True)
class WholeList:
    """Every posting of a term, scored: its chunk ids (ascending, as offsets from
    the first: 4 bytes each while the list spans less than 2^32 ids) and BM25 term
    scores at the idf and average length they were computed with (12 bytes a
    posting, against 24 for the decoded ids, tf and length)."""

    first: int
    offsets: npt.NDArray[np.uint32] | npt.NDArray[np.int64]
    weights: npt.NDArray[np.float64]
    idf: float
    avgdl: float

    @staticmethod
    def of(
        chunks: npt.NDArray[np.int64], weights: npt.NDArray[np.float64], idf: float, avgdl: float
    ) -> WholeList:
        first = int(chunks[0]) if len(chunks) else 0
        offsets = chunks - first
        narrow = len(chunks) == 0 or int(offsets[-1]) < 1 << 32
        return WholeList(
            first, offsets.astype(np.uint32) if narrow else offsets, weights, idf, avgdl
        )

    def ids(self, origin: int = 0) -> npt.NDArray[np.int64]:
        """The chunk ids less `origin` (int64)."""
        return self.offsets.astype(np.int64) + (self.first - origin)

    @property
    def nbytes(self) -> int:
        return self.offsets.nbytes + self.weights.nbytes


class LexicalCache:
    """Per store: block directories, filter chunk-id sets and the whole scored lists
    of terms no block of which could be skipped, keyed by the index's
    published version (a publish changes the key, so nothing stale is ever read;
    old entries age out of the LRU)."""

    def __init__(
        self,
        directory_bytes: int = 64 << 20,
        filter_bytes: int = 64 << 20,
        list_bytes: int = 512 << 20,
    ) -> None:
        self.directories = LRU(directory_bytes)
        self.filters = LRU(filter_bytes)
        self.lists = LRU(list_bytes)


async def cached_directories(
    conn: Conn,
    cache: LexicalCache | None,
    index_id: int,
    version: int,
    tenant: str,
    terms: list[str],
) -> dict[str, blocks.Directory]:
    """The terms' directories, from the cache when this version's are there."""
    out: dict[str, blocks.Directory] = {}
    missing: list[str] = []
    for t in terms:
        found = cache.directories.get((index_id, version, tenant, t)) if cache else None
        if found is None:
            missing.append(t)
        else:
            out[t] = found
    if missing:
        read = await blocks.directories(conn, index_id, tenant, missing)
        for t, d in read.items():
            out[t] = d
            if cache is not None:
                cache.directories.put((index_id, version, tenant, t), d, d.nbytes + 200)
    return out


def _block_bounds(q: float, w: float, d: blocks.Directory, avgdl: float) -> npt.NDArray[np.float64]:
    return contribution(q, w, d.max_tf, d.min_dl, avgdl)


@dataclass(frozen=True, slots=True)
class Source:
    """Where a search reads blocks: the index, tenant and published version, and the
    store's cache (whole scored lists of the terms that needed them)."""

    conn: Conn
    index_id: int
    tenant: str
    version: int
    cache: LexicalCache | None = None


def _cached_list(src: Source, term: str, idf: float, avgdl: float) -> WholeList | None:
    if src.cache is None:
        return None
    found: WholeList | None = src.cache.lists.get((src.index_id, src.version, src.tenant, term))
    if found is None or found.idf != idf or found.avgdl != avgdl:
        return None
    return found


async def _whole_lists(
    src: Source, terms: list[str], idf: list[float], avgdl: float
) -> list[WholeList]:
    """Every posting of `terms`, scored: from the cache, else one range scan each
    (cached)."""
    out = [_cached_list(src, t, w, avgdl) for t, w in zip(terms, idf, strict=True)]
    missing = [t for t, found in zip(terms, out, strict=True) if found is None]
    read = await blocks.read_lists(src.conn, src.index_id, src.tenant, missing)
    for n, (t, w) in enumerate(zip(terms, idf, strict=True)):
        if out[n] is not None:
            continue
        b = read[t]
        scored = WholeList.of(b.chunks, bm25.term_score(w, b.tfs, b.dls, avgdl), w, avgdl)
        out[n] = scored
        if src.cache is not None:
            key = (src.index_id, src.version, src.tenant, t)
            src.cache.lists.put(key, scored, scored.nbytes + 200)
    return [x for x in out if x is not None]


class _Pool:
    """Postings read and not yet scored: chunk id, term (query order), contribution."""

    def __init__(self) -> None:
        self.parts: list[
            tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]
        ] = []

    def add(self, chunks: npt.NDArray[np.int64], term: int, c: npt.NDArray[np.float64]) -> None:
        self.parts.append((chunks, np.full(len(chunks), term, dtype=np.int64), c))

    def take(
        self,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        if not self.parts:
            return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64)
        out = (
            np.concatenate([p[0] for p in self.parts]),
            np.concatenate([p[1] for p in self.parts]),
            np.concatenate([p[2] for p in self.parts]),
        )
        self.parts = []
        return out


async def top_k(
    src: Source,
    weighted: Weighted,
    dirs: dict[str, blocks.Directory],
    k: int,
    allowed: npt.NDArray[np.int64] | None = None,
    stats: Stats | None = None,
    prune: bool = True,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """The chunk ids scoring at least the k-th best score (all ties kept) and their
    exact scores, among chunks holding a scored term (and in `allowed`, sorted,
    when given). `prune=False` reads every block (the exhaustive reference).

    When a round leaves more than WHOLE_LIST_SHARE of the intervals able to reach
    the k-th score (head words over flat frequencies: no block can be skipped), the
    remaining terms are read whole, one range scan each, and kept scored in the
    store's cache for this version: the next query over them reads nothing."""
    stats = stats if stats is not None else Stats()
    present = [i for i, t in enumerate(weighted.terms) if t in dirs]
    empty = (np.empty(0, np.int64), np.empty(0, np.float64))
    if not present:
        return empty
    n_terms = len(weighted.terms)
    qv = np.array(weighted.qtf, dtype=np.float64)
    wv = np.array(weighted.idf, dtype=np.float64)
    bounds_ = np.unique(np.concatenate([dirs[weighted.terms[i]].lasts for i in present]))
    n_int = len(bounds_)
    stats.blocks_total = sum(len(dirs[weighted.terms[i]].lasts) for i in present)
    # blk[i, j]: term i's block covering interval j (-1: none); ub[j]: its bound.
    blk = np.full((n_terms, n_int), -1, dtype=np.int64)
    ub = np.zeros(n_int, dtype=np.float64)
    for i in present:
        d = dirs[weighted.terms[i]]
        j = np.searchsorted(d.lasts, bounds_, side="left")
        valid = j < len(d.lasts)
        blk[i] = np.where(valid, j, -1)
        b = _block_bounds(qv[i], wv[i], d, weighted.avgdl)
        ub += np.where(valid, b[np.minimum(j, len(d.lasts) - 1)], 0.0)
    if allowed is not None:
        # Intervals holding no admitted chunk cannot contribute.
        hi = np.searchsorted(allowed, bounds_, side="right")
        lo = np.concatenate(([0], hi[:-1]))
        ub[hi - lo == 0] = 0.0
    done = ub <= 0.0
    loaded = {i: np.zeros(len(dirs[weighted.terms[i]].lasts), bool) for i in present}
    order = np.argsort(-ub, kind="stable")
    pool = _Pool()

    async def read_whole(terms: list[int]) -> None:
        lists = await _whole_lists(
            src, [weighted.terms[i] for i in terms], [weighted.idf[i] for i in terms], avgdl
        )
        chunk, term_of, c = pool.take()
        keep = ~np.isin(term_of, terms)
        pool.parts.append((chunk[keep], term_of[keep], c[keep]))
        for i, got in zip(terms, lists, strict=True):
            stats.blocks_read += int(np.count_nonzero(~loaded[i]))
            loaded[i][:] = True
            pool.add(got.ids(), i, qv[i] * got.weights)

    avgdl = weighted.avgdl
    # Whole lists already scored cost nothing to use.
    found = {i: _cached_list(src, weighted.terms[i], weighted.idf[i], avgdl) for i in present}
    cached = [i for i, got in found.items() if got is not None]
    if prune and len(cached) == len(present):
        # Every term is there whole (head words, the query seen before): one pass
        # over the postings, no interval to bound.
        stats.blocks_read = stats.blocks_total
        stats.rounds = 1
        parts = [(got, qv[i] * got.weights) for i, got in found.items() if got is not None]
        return _top_of_all(parts, present, n_terms, k, allowed)
    if cached:
        await read_whole(cached)
    best_ids = np.empty(0, np.int64)
    best_scores = np.empty(0, np.float64)
    theta = -np.inf
    budget = FIRST_ROUND_INTERVALS
    while True:
        live = order[~done[order]]
        if prune:
            live = live[ub[live] * SLACK >= theta]
        if len(live) == 0:
            break
        stats.rounds += 1
        if prune and stats.rounds > 1 and len(live) > WHOLE_LIST_SHARE * n_int:
            await read_whole([i for i in present if not loaded[i].all()])
        else:
            # The unread blocks of the next intervals (each has at least one).
            take = live[:budget] if prune else live
            budget *= ROUND_FACTOR
            wanted: dict[int, npt.NDArray[np.int64]] = {}
            for i in present:
                bi = np.unique(blk[i, take])
                bi = bi[bi >= 0]
                bi = bi[~loaded[i][bi]]
                if len(bi):
                    wanted[i] = bi
            stats.blocks_read += sum(len(v) for v in wanted.values())
            read = await blocks.read_blocks(
                src.conn,
                src.index_id,
                src.tenant,
                {weighted.terms[i]: dirs[weighted.terms[i]].lasts[bi] for i, bi in wanted.items()},
            )
            for i, bi in wanted.items():
                got = read[weighted.terms[i]]
                loaded[i][bi] = True
                pool.add(
                    got.chunks, i, contribution(qv[i], wv[i], got.tfs, got.dls, weighted.avgdl)
                )
        complete = ~done
        for i in present:
            complete &= (blk[i] < 0) | loaded[i][np.maximum(blk[i], 0)]
        if not complete.any():
            continue
        chunk, term_of, c = pool.take()
        interval = np.searchsorted(bounds_, chunk, side="left")
        now = complete[interval]
        done |= complete
        keep = ~done[interval]  # a posting of a pruned or empty interval is dropped too
        pool.parts.append((chunk[keep], term_of[keep], c[keep]))
        chunk, term_of, c = chunk[now], term_of[now], c[now]
        if allowed is not None and len(chunk):
            ok = _admitted(allowed, chunk)
            chunk, term_of, c = chunk[ok], term_of[ok], c[ok]
        if not len(chunk):
            continue
        ids, scores = _sum_in_query_order(chunk, term_of, c, n_terms)
        best_ids, best_scores, kth = _best(
            np.concatenate([best_ids, ids]), np.concatenate([best_scores, scores]), k
        )
        if kth is not None:
            theta = kth * MARGIN
    return best_ids, best_scores


def _admitted(allowed: npt.NDArray[np.int64], ids: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Which of `ids` the sorted `allowed` holds."""
    pos = np.searchsorted(allowed, ids)
    ok: npt.NDArray[np.bool_] = (pos < len(allowed)) & (
        allowed[np.minimum(pos, len(allowed) - 1)] == ids
    )
    return ok


def _best(
    ids: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], k: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], float | None]:
    """The chunks scoring at least the k-th best score (its ties kept) and that
    score; all of them and None while there are fewer than k."""
    if len(scores) < k:
        return ids, scores, None
    kth = float(np.partition(scores, len(scores) - k)[len(scores) - k])
    keep = scores >= kth
    return ids[keep], scores[keep], kth


def _top_of_all(
    parts: list[tuple[WholeList, npt.NDArray[np.float64]]],
    terms: list[int],
    n_terms: int,
    k: int,
    allowed: npt.NDArray[np.int64] | None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """`top_k`'s answer from every posting of every term (their lists and
    contributions, in query order): each chunk's sum as `_sum_in_query_order` adds
    it, kept when admitted, then the k best with their ties."""
    held_lists = [wl for wl, _ in parts if len(wl.offsets)]
    if not held_lists:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    total = sum(len(wl.offsets) for wl in held_lists)
    lo = min(wl.first for wl in held_lists)
    span = max(wl.first + int(wl.offsets[-1]) for wl in held_lists) - lo + 1
    if span <= 4 * total + 4096:
        ids, scores = _dense_sum(((wl.ids(lo), c) for wl, c in parts), lo, span)
    else:
        ids, scores = _sum_in_query_order(
            np.concatenate([wl.ids() for wl, _ in parts]),
            np.concatenate(
                [np.full(len(c), i, np.int64) for (_, c), i in zip(parts, terms, strict=True)]
            ),
            np.concatenate([c for _, c in parts]),
            n_terms,
        )
    if allowed is not None and len(ids):
        ok = _admitted(allowed, ids)
        ids, scores = ids[ok], scores[ok]
    ids, scores, _ = _best(ids, scores, k)
    return ids, scores


def _sum_in_query_order(
    chunk: npt.NDArray[np.int64],
    term_of: npt.NDArray[np.int64],
    c: npt.NDArray[np.float64],
    n_terms: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Each chunk's score: 0.0 plus its contributions term by term in query order
    (a term missing from a chunk adds nothing, as + 0.0 would), so the float sums
    are the stores' own. A term has at most one posting per chunk. Dense arrays over
    the id range when it is compact (no sort), else a sort by chunk id."""
    lo = int(chunk.min())
    span = int(chunk.max()) - lo + 1
    if span <= 4 * len(chunk) + 4096:
        by_term = ((chunk[sel] - lo, c[sel]) for sel in (term_of == i for i in range(n_terms)))
        return _dense_sum(by_term, lo, span)
    ids, inv = np.unique(chunk, return_inverse=True)
    matrix = np.zeros((len(ids), n_terms), dtype=np.float64)
    matrix[inv, term_of] = c
    scores = np.zeros(len(ids), dtype=np.float64)
    for i in range(n_terms):
        scores = scores + matrix[:, i]
    return ids, scores


def _dense_sum(
    by_term: Iterator[tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]], lo: int, span: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Each chunk's sum over its terms' contributions, added term by term in the
    order given (positions from `lo`, within `span`; one posting a term a chunk):
    the chunk ids holding one and their sums, ascending."""
    dense = np.zeros(span, dtype=np.float64)
    held = np.zeros(span, dtype=bool)
    for at, c in by_term:
        dense[at] += c
        held[at] = True
    at = np.flatnonzero(held)
    return at + lo, dense[at]


def anchor_candidates(block: blocks.Block, limit: int) -> list[int]:
    """A phrase's candidates: at most `limit` of its rarest word's postings, the
    highest tf first, then the shortest chunk, then the lowest id."""
    order = np.lexsort((block.chunks, block.dls, -block.tfs))[:limit]
    return [int(x) for x in block.chunks[order]]
