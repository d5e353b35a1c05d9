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

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from groundwire.domain import bm25
from groundwire.stores.postgres import blocks
from groundwire.stores.postgres.connection import Conn

# Blocks read by the first round; each later round reads ROUND_FACTOR times more.
FIRST_ROUND_BLOCKS = 64
ROUND_FACTOR = 2
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
    q: npt.NDArray[np.float64] | float,
    w: npt.NDArray[np.float64] | float,
    tf: npt.NDArray[np.float64],
    dl: npt.NDArray[np.float64],
    avgdl: float,
) -> npt.NDArray[np.float64]:
    """qtf * BM25 term score, with the exact operation order the stores share."""
    k1, b = bm25.K1, bm25.B
    return q * (w * tf * (k1 + 1.0) / (tf + k1 * ((1.0 - b) + b * dl / avgdl)))


@dataclass(slots=True)
class Stats:
    """What one search read (diagnostics and benchmarks)."""

    blocks_total: int = 0
    blocks_read: int = 0
    rounds: int = 0


class LRU:
    """A small thread-safe LRU bounded by a cost (bytes, entries)."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._used = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            self._items.move_to_end(key)
            return found[0]

    def put(self, key: Hashable, value: Any, cost: int) -> None:
        if cost > self._capacity:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._used -= old[1]
            self._items[key] = (value, cost)
            self._used += cost
            while self._used > self._capacity:
                _, (_, c) = self._items.popitem(last=False)
                self._used -= c


class LexicalCache:
    """Per store: block directories and filter chunk-id sets, keyed by the index's
    published version (a publish changes the key, so nothing stale is ever read;
    old entries age out of the LRU)."""

    def __init__(self, directory_bytes: int = 64 << 20, filter_bytes: int = 64 << 20) -> None:
        self.directories = LRU(directory_bytes)
        self.filters = LRU(filter_bytes)


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


async def top_k(
    conn: Conn,
    index_id: int,
    tenant: str,
    weighted: Weighted,
    dirs: dict[str, blocks.Directory],
    k: int,
    allowed: npt.NDArray[np.int64] | None = None,
    stats: Stats | None = None,
    prune: bool = True,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """The chunk ids scoring at least the k-th best score (all ties kept) and their
    exact scores, among chunks holding a scored term (and in `allowed`, sorted,
    when given). `prune=False` reads every block (the exhaustive reference)."""
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
    loaded = [np.zeros(len(dirs[t].lasts), bool) if t in dirs else None for t in weighted.terms]
    order = np.argsort(-ub, kind="stable")
    # Postings read but not yet scored (their interval not complete).
    pool_chunk: list[npt.NDArray[np.int64]] = []
    pool_term: list[npt.NDArray[np.int64]] = []
    pool_c: list[npt.NDArray[np.float64]] = []
    best_ids = np.empty(0, np.int64)
    best_scores = np.empty(0, np.float64)
    theta = -np.inf
    budget = FIRST_ROUND_BLOCKS
    while True:
        live = order[~done[order]]
        if prune:
            live = live[ub[live] * SLACK >= theta]
        if len(live) == 0:
            break
        # The next intervals' unread blocks, up to the round's budget.
        wanted: list[tuple[int, int]] = []
        seen: set[tuple[int, int]] = set()
        for j in live.tolist():
            for i in present:
                bi = int(blk[i, j])
                lw = loaded[i]
                if bi >= 0 and lw is not None and not lw[bi] and (i, bi) not in seen:
                    seen.add((i, bi))
                    wanted.append((i, bi))
            if len(wanted) >= budget and prune:
                break
        budget *= ROUND_FACTOR
        stats.rounds += 1
        stats.blocks_read += len(wanted)
        read = await blocks.read_blocks(
            conn,
            index_id,
            tenant,
            [(weighted.terms[i], int(dirs[weighted.terms[i]].lasts[bi])) for i, bi in wanted],
        )
        for i, bi in wanted:
            term = weighted.terms[i]
            got = read[(term, int(dirs[term].lasts[bi]))]
            lw = loaded[i]
            assert lw is not None
            lw[bi] = True
            pool_chunk.append(got.chunks)
            pool_term.append(np.full(len(got.chunks), i, dtype=np.int64))
            pool_c.append(contribution(qv[i], wv[i], got.tfs, got.dls, weighted.avgdl))
        complete = ~done
        for i in present:
            lw = loaded[i]
            assert lw is not None
            complete &= (blk[i] < 0) | lw[np.maximum(blk[i], 0)]
        if not complete.any():
            continue
        chunk = np.concatenate(pool_chunk)
        term_of = np.concatenate(pool_term)
        c = np.concatenate(pool_c)
        interval = np.searchsorted(bounds_, chunk, side="left")
        now = complete[interval]
        done |= complete
        keep = ~done[interval]  # a posting of a pruned or empty interval is dropped too
        pool_chunk, pool_term, pool_c = [chunk[keep]], [term_of[keep]], [c[keep]]
        chunk, term_of, c = chunk[now], term_of[now], c[now]
        if allowed is not None and len(chunk):
            pos = np.searchsorted(allowed, chunk)
            ok = (pos < len(allowed)) & (allowed[np.minimum(pos, len(allowed) - 1)] == chunk)
            chunk, term_of, c = chunk[ok], term_of[ok], c[ok]
        if not len(chunk):
            continue
        ids, inv = np.unique(chunk, return_inverse=True)
        matrix = np.zeros((len(ids), n_terms), dtype=np.float64)
        matrix[inv, term_of] = c
        scores = np.zeros(len(ids), dtype=np.float64)
        for i in range(n_terms):  # term by term, in query order
            scores = scores + matrix[:, i]
        best_ids = np.concatenate([best_ids, ids])
        best_scores = np.concatenate([best_scores, scores])
        if len(best_scores) >= k:
            kth = float(np.partition(best_scores, len(best_scores) - k)[len(best_scores) - k])
            keep_best = best_scores >= kth
            best_ids, best_scores = best_ids[keep_best], best_scores[keep_best]
            theta = kth * MARGIN
    return best_ids, best_scores


def anchor_candidates(block_list: Sequence[blocks.Block], limit: int) -> list[int]:
    """A phrase's candidates: at most `limit` of its rarest word's postings, the
    highest tf first, then the shortest chunk, then the lowest id."""
    if not block_list:
        return []
    ids = np.concatenate([b.chunks for b in block_list])
    tfs = np.concatenate([b.tfs for b in block_list])
    dls = np.concatenate([b.dls for b in block_list])
    order = np.lexsort((ids, dls, -tfs))[:limit]
    return [int(x) for x in ids[order]]
