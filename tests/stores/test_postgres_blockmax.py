"""PostgreSQL's block postings: block-max pruning returns exactly what reading every
block returns (same chunks, same scores to the bit), and the blocks the publish path
maintains hold exactly the published chunks' term counts, in disjoint ranges of at
most BLOCK_SIZE postings, after a bulk build and after incremental publishes."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import MetadataFilter, Scope
from groundwire.stores.base import DocumentKey, StagedDocument
from groundwire.stores.postgres import PostgresSettings, PostgresStore, open_postgres_store
from groundwire.stores.postgres import blockmax as pg_blockmax
from groundwire.stores.postgres import blocks as pg_blocks
from tests.stores.contract_support import doc, publish, spec

pytestmark = pytest.mark.timeout(300)

_VOCAB = ["the", "of", "and", "to", "in", "is", "it", "for", "rare", "zeta", "omega", "kappa"]


@pytest.fixture
async def pg(postgres_dsn: str) -> AsyncIterator[PostgresStore]:
    store = await open_postgres_store(
        PostgresSettings(dsn=postgres_dsn, data_dir=Path("unused"), pool_max_size=4)
    )
    yield store
    await store.close()


def _corpus(rng: np.random.Generator, n: int, prefix: str) -> list[StagedDocument]:
    p = 1.0 / np.arange(1, len(_VOCAB) + 1)
    p /= p.sum()
    return [
        doc(
            f"{prefix}{d:03d}",
            [
                " ".join(rng.choice(_VOCAB, size=int(rng.integers(1, 60)), p=p))
                for _ in range(int(rng.integers(1, 4)))
            ],
            None,
            tenant="acme" if d % 4 == 0 else "",
            metadata={"dept": f"p{d % 3}"},
        )
        for d in range(n)
    ]


def _check_blocks(dsn: str, name: str, block_size: int) -> None:
    """Decoded blocks == the published chunk rows' term counts; ranges disjoint."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        index_id = conn.execute("SELECT id FROM gw_indexes WHERE name = %s", [name]).fetchone()
        assert index_id is not None
        rows = conn.execute(
            "SELECT tenant, term, last_chunk, first_chunk, n, max_tf, min_dl, chunks, tfs, dls "
            "FROM gw_posting_blocks WHERE index_id = %s ORDER BY tenant, term, last_chunk",
            [index_id[0]],
        ).fetchall()
        chunks = conn.execute(
            "SELECT c.id, c.tenant, c.term_freqs, c.token_count FROM gw_chunks c "
            "WHERE c.index_id = %s AND c.version IN (SELECT version FROM gw_index_versions "
            "WHERE index_id = c.index_id AND state = 'published')",
            [index_id[0]],
        ).fetchall()
    want: Counter[tuple[Any, ...]] = Counter()
    for cid, tenant, freqs, dl in chunks:
        for term, tf in freqs.items():
            want[(tenant, term, cid, int(tf), dl)] += 1
    got: Counter[tuple[Any, ...]] = Counter()
    previous: dict[tuple[str, str], int] = {}
    for tenant, term, last, first, n, max_tf, min_dl, c, t, d in rows:
        b = pg_blocks.decode(first, bytes(c), bytes(t), bytes(d))
        assert 0 < n == len(b.chunks) <= block_size
        assert b.chunks[0] == first and b.chunks[-1] == last
        assert np.all(np.diff(b.chunks) > 0)
        assert previous.get((tenant, term), -1) < first  # disjoint, ascending
        previous[(tenant, term)] = last
        assert max_tf == b.tfs.max() and min_dl == b.dls.min()
        for cid, tf, dl in zip(b.chunks, b.tfs, b.dls, strict=True):
            got[(tenant, term, int(cid), int(tf), int(dl))] += 1
    assert got == want


async def test_block_max_is_exact_and_blocks_stay_maintained(
    pg: PostgresStore, postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_blocks, "BLOCK_SIZE", 4)
    monkeypatch.setattr(pg_blockmax, "FIRST_ROUND_INTERVALS", 2)
    name = "blockmax_exact"
    rng = np.random.default_rng(45)
    docs = _corpus(rng, 120, "d")
    await publish(pg, name, docs, spec(name, dims=None))
    _check_blocks(postgres_dsn, name, 4)
    pruned = {"read": 0, "held": 0}
    original = pg_blockmax.top_k

    async def exhaustive(*args: Any, **kwargs: Any) -> Any:
        return await original(*args, **{**kwargs, "prune": False})

    async def measured(*args: Any, **kwargs: Any) -> Any:
        stats = pg_blockmax.Stats()
        out = await original(*args, **{**kwargs, "stats": stats})
        pruned["read"] += stats.blocks_read
        pruned["held"] += stats.blocks_total
        return out

    queries = ["the", "the of", "and to in", "rare the", "zeta omega kappa", "it is for the of"]
    scopes = [
        Scope(""),
        Scope("acme"),
        Scope("", MetadataFilter({"dept": frozenset({"p1"})})),
        Scope("acme", MetadataFilter({"dept": frozenset({"p0", "p2"})})),
    ]

    async def compare() -> None:
        for scope in scopes:
            for q in queries:
                for k in (1, 3, 10, 50):
                    monkeypatch.setattr(pg_blockmax, "top_k", measured)
                    fast = await pg.search_lexical(name, parse_lexical(q), k, scope)
                    monkeypatch.setattr(pg_blockmax, "top_k", exhaustive)
                    slow = await pg.search_lexical(name, parse_lexical(q), k, scope)
                    assert [(h.key, h.chunk_id, h.score.raw) for h in fast.hits] == [
                        (h.key, h.chunk_id, h.score.raw) for h in slow.hits
                    ], (scope, q, k)
                    assert len(fast.hits) == min(k, len(slow.hits))

    monkeypatch.setattr(pg_blockmax, "WHOLE_LIST_SHARE", 1.0)  # rounds only
    await compare()
    assert pruned["read"] < pruned["held"]  # some blocks were skipped
    # Rounds that give up on skipping read whole lists, kept scored per version; a
    # query whose terms are all there is answered in one pass over them.
    monkeypatch.setattr(pg_blockmax, "WHOLE_LIST_SHARE", 0.0)
    one_pass = pg_blockmax._top_of_all
    passes: list[int] = []

    def counted(*args: Any) -> Any:
        passes.append(1)
        return one_pass(*args)

    monkeypatch.setattr(pg_blockmax, "_top_of_all", counted)
    await compare()
    assert passes
    # Incremental publishes: replace a third, delete some, add new documents.
    for step in range(3):
        v = await pg.begin_version(name)
        await pg.stage_documents(
            name, v, _corpus(rng, 40, "d")[step::3] + _corpus(rng, 15, f"n{step}")
        )
        await pg.stage_deletions(
            name,
            v,
            [DocumentKey("" if i % 4 else "acme", f"d{i:03d}") for i in range(step, 120, 11)],
        )
        await pg.publish_version(name, v, spec(name, dims=None))
        _check_blocks(postgres_dsn, name, 4)
    # Small appends land in their terms' last blocks when they fit (no decoding).
    for i in range(4):
        await publish(pg, name, [doc(f"a{i}", ["rare zeta"], None)], spec(name, dims=None))
        _check_blocks(postgres_dsn, name, 4)
    await compare()  # the cached whole lists of the earlier version are not used


@pytest.mark.parametrize("collide", [False, True])
async def test_the_bulk_build_is_exact_whatever_its_hash(
    pg: PostgresStore, postgres_dsn: str, monkeypatch: pytest.MonkeyPatch, collide: bool
) -> None:
    """The bulk build keys its sort on a hash of (tenant, term). With a hash that
    puts every term of a tenant in one bucket (collisions everywhere) the blocks are
    still exactly the chunks' term counts: the colliding build is refused and the
    string-keyed one runs; with the real hash the fast build does it."""
    monkeypatch.setattr(pg_blocks, "BLOCK_SIZE", 4)
    if collide:
        monkeypatch.setattr(pg_blocks, "BULK_HASH", "hashtextextended(c.tenant, 0)")
    used: list[bool] = []
    original = pg_blocks.build_bulk

    async def recorded(*args: Any) -> bool:
        used.append(await original(*args))
        return used[-1]

    monkeypatch.setattr(pg_blocks, "build_bulk", recorded)
    name = f"bulk_hash_{collide}"
    await publish(pg, name, _corpus(np.random.default_rng(7), 80, "d"), spec(name, dims=None))
    assert used == [not collide]
    _check_blocks(postgres_dsn, name, 4)


# A dense id range, a sparse one, and one past 2^32 ids (the cached offsets in int64).
@pytest.mark.parametrize("spread", [1, 10_000, 3_000_000])
def test_one_pass_over_whole_lists_sums_as_the_rounds_do(spread: int) -> None:
    """Terms read whole are scored in one pass (`_top_of_all`); each chunk's score is
    the float `_sum_in_query_order` gives, the admitted filter and the k-th score's
    ties as in the rounds."""
    rng = np.random.default_rng(3)
    parts = []
    for n in (400, 250, 30):
        ids = np.sort(rng.choice(2_000, size=n, replace=False)).astype(np.int64) * spread
        parts.append((ids, np.round(rng.random(n) * 4, 1)))  # rounded: ties at the k-th
    terms = [0, 2, 3]
    union = np.unique(np.concatenate([ch for ch, _ in parts]))
    allowed = np.unique(
        np.concatenate([rng.choice(union, size=len(union) // 2, replace=False), union[:3] + 1])
    ).astype(np.int64)
    chunk = np.concatenate([ch for ch, _ in parts])
    term_of = np.concatenate(
        [np.full(len(ch), i, np.int64) for (ch, _), i in zip(parts, terms, strict=True)]
    )
    ref_ids, ref_scores = pg_blockmax._sum_in_query_order(
        chunk, term_of, np.concatenate([c for _, c in parts]), 4
    )
    for admitted in (None, allowed):
        ids, scores = ref_ids, ref_scores
        if admitted is not None:
            ok = np.isin(ids, admitted)
            ids, scores = ids[ok], scores[ok]
        for k in (1, 10, 5_000):
            want = sorted(
                zip(ids.tolist(), scores.tolist(), strict=True), key=lambda x: (-x[1], x[0])
            )
            if len(want) > k:
                want = [x for x in want if x[1] >= want[k - 1][1]]
            lists = [(pg_blockmax.WholeList.of(ch, c, 1.0, 1.0), c) for ch, c in parts]
            got_ids, got_scores = pg_blockmax._top_of_all(lists, terms, 4, k, admitted)
            got = sorted(
                zip(got_ids.tolist(), got_scores.tolist(), strict=True), key=lambda x: (-x[1], x[0])
            )
            assert got == want, (spread, k, admitted is None)
