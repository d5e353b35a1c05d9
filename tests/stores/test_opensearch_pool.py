"""Small tenants sharing their index's pool on OpenSearch (stores/opensearch/pool.py):
one physical index for every pooled tenant, whatever their number; each tenant's
scores its own, equal to the memory store's (exact BM25 with the tenant's statistics,
exact vector search); a version past the bound moving its tenant to an index of its
own; superseded and discarded versions leaving nothing behind in the pool. The
contract suite runs whole on the pooled layout too (`opensearch-pooled`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

from groundwire.domain.access import ALL_READERS
from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import Scope
from groundwire.stores.base import StagedDocument
from groundwire.stores.memory import MemoryStore
from groundwire.stores.opensearch import OpenSearchStore, open_opensearch_store
from tests.stores.conftest import opensearch_test_settings
from tests.stores.contract_support import doc, publish, vec

pytestmark = pytest.mark.timeout(600)

TENANTS = 30
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


def tenant_docs(t: int, version: int = 1) -> list[Any]:
    """A tenant's documents: its own mix of the words (so each tenant's statistics
    differ), a word only it holds, and vectors of its own."""
    out = []
    for d in range(3 + t % 4):
        words = [WORDS[(t + d + i) % len(WORDS)] for i in range(1 + (t * d) % 5)]
        text = " ".join([*words, f"only{t}", "alpha" * (1 + d % 2)])
        out.append(
            doc(
                f"d{d}",
                [text, f"{text} v{version}"],
                [vec(1, t, d, version), vec(t, 1, version, d)],
                tenant=f"t{t:02d}",
            )
        )
    return out


async def physical_indexes(store: OpenSearchStore, name: str) -> list[str]:
    rows = await store._client.cat.indices(
        index=f"{store._settings.index_prefix}{name}.*", format="json", h="index"
    )
    return sorted(r["index"] for r in rows)


async def pool_records(store: OpenSearchStore, name: str) -> int:
    pools = [p for p in await physical_indexes(store, name) if ".pool-" in p]
    if not pools:
        return 0
    await store._client.indices.refresh(index=pools[0])
    found = await store._client.count(index=pools[0])
    return int(found["count"])


@pytest.fixture
async def pooled(opensearch_url: str) -> AsyncIterator[OpenSearchStore]:
    store = await open_opensearch_store(
        opensearch_test_settings(opensearch_url, shared_tenant_chunks=40)
    )
    yield store
    await store.close()


async def wait_until(check: Any, timeout_s: float = 60.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.2)


async def test_many_tenants_share_one_index_with_their_own_scores(
    pooled: OpenSearchStore, index_name: str
) -> None:
    memory = MemoryStore()
    docs = [d for t in range(TENANTS) for d in tenant_docs(t)]
    for store in (pooled, memory):
        await publish(store, index_name, docs)
    indexes = await physical_indexes(pooled, index_name)
    assert len(indexes) == 1 and ".pool-" in indexes[0], indexes
    for t in (0, 7, TENANTS - 1):
        scope = Scope(f"t{t:02d}", readers=ALL_READERS)
        for text in ("alpha", f"only{t} beta", "gamma delta epsilon", f"only{t + 1}"):
            query = parse_lexical(text)
            got = (await pooled.search_lexical(index_name, query, 5, scope)).hits
            want = (await memory.search_lexical(index_name, query, 5, scope)).hits
            assert [(h.document_id, h.chunk_id) for h in got] == [
                (h.document_id, h.chunk_id) for h in want
            ]
            # The tenant's own statistics, to float32's precision (Lucene's scores).
            assert [h.score.raw for h in got] == pytest.approx(
                [h.score.raw for h in want], rel=1e-6
            )
        for q in (vec(1, t, 0, 1), vec(0, 1, 1, 0)):
            got_v = await pooled.search_vector(index_name, q, 4, scope)
            want_v = await memory.search_vector(index_name, q, 4, scope)
            assert [(h.document_id, h.chunk_id) for h in got_v] == [
                (h.document_id, h.chunk_id) for h in want_v
            ]
    # Counts and listings are the tenant's alone.
    assert await pooled.tenant_counts(index_name, "t03", ALL_READERS) == (
        len(tenant_docs(3)),
        2 * len(tenant_docs(3)),
    )
    listed = await pooled.list_documents(index_name, "t05", 100, None, ALL_READERS)
    assert [d.document_id for d in listed] == [d.document.document_id for d in tenant_docs(5)]
    await memory.close()


async def test_a_new_version_replaces_the_slot_and_its_records_go(
    pooled: OpenSearchStore, index_name: str
) -> None:
    await publish(pooled, index_name, tenant_docs(1) + tenant_docs(2))
    before = await pool_records(pooled, index_name)
    # Version 2 changes one document of t01; the others are copied into the new slot.
    changed = doc("d0", ["kappa lambda"], [vec(0, 0, 0, 1)], tenant="t01")
    await publish(pooled, index_name, [changed])
    scope = Scope("t01", readers=ALL_READERS)
    listed = await pooled.list_documents(index_name, "t01", 100, None, ALL_READERS)
    assert [d.document_id for d in listed] == [d.document.document_id for d in tenant_docs(1)]
    hits = (await pooled.search_lexical(index_name, parse_lexical("kappa"), 5, scope)).hits
    assert [h.document_id for h in hits] == ["d0"]
    # The superseded slot is deleted after the grace period: one copy of each record
    # (d0 now has one chunk where it had two).
    await wait_until(lambda: _equals(pool_records(pooled, index_name), before - 1))


async def _equals(value: Any, expected: int) -> bool:
    return bool(await value == expected)


async def test_a_tenant_past_the_bound_gets_an_index_of_its_own(
    pooled: OpenSearchStore, index_name: str
) -> None:
    small = tenant_docs(4)
    await publish(pooled, index_name, small)
    big = [
        doc(f"b{i}", [f"big text {i}"] * 3, [vec(1, i, 0, 0)] * 3, tenant="t04") for i in range(14)
    ]
    await publish(pooled, index_name, big)  # 6 + 42 chunks > 40
    indexes = await physical_indexes(pooled, index_name)
    own = [p for p in indexes if ".pool-" not in p]
    assert len(own) == 1 and own[0].endswith("-v2"), indexes
    scope = Scope("t04", readers=ALL_READERS)
    assert (await pooled.tenant_counts(index_name, "t04", ALL_READERS))[0] == len(small) + 14
    hits = (await pooled.search_lexical(index_name, parse_lexical("big"), 3, scope)).hits
    assert len(hits) == 3
    # Its pool records go after the grace period; a later small version stays on its own.
    await wait_until(lambda: _equals(pool_records(pooled, index_name), 0))
    await publish(pooled, index_name, [doc("b0", ["tiny"], [vec(0, 1, 0, 0)], tenant="t04")])
    assert any(p.endswith("-v3") for p in await physical_indexes(pooled, index_name))
    assert await pool_records(pooled, index_name) == 0


async def test_a_discarded_version_leaves_nothing_in_the_pool(
    pooled: OpenSearchStore, index_name: str
) -> None:
    await publish(pooled, index_name, tenant_docs(6))
    before = await pool_records(pooled, index_name)
    version = await pooled.begin_version(index_name)
    await pooled.stage_documents(index_name, version, tenant_docs(6, 2) + tenant_docs(8, 2))
    await pooled.discard_version(index_name, version)
    assert await pool_records(pooled, index_name) == before
    scope = Scope("t06", readers=ALL_READERS)
    hits = await pooled.search_vector(index_name, vec(1, 6, 0, 1), 2, scope)
    assert (hits[0].document_id, hits[0].chunk_id) == ("d0", "c00000")
    assert await pooled.tenant_counts(index_name, "t06", ALL_READERS) == (5, 10)
    assert await pooled.tenant_counts(index_name, "t08", ALL_READERS) == (0, 0)


async def test_a_reader_searching_across_a_publish_sees_one_version(
    pooled: OpenSearchStore, index_name: str
) -> None:
    """Searches running while versions publish answer from one version each: the
    filter names the version the tenant's facts were read for, and a search whose
    alias moved meanwhile is repeated on the new facts (vectors.TenantSizes.guarded)."""
    await publish(pooled, index_name, [doc("d", ["word v1"], [vec(1, 0, 0, 0)], tenant="t")])
    scope = Scope("t", readers=ALL_READERS)
    seen: set[str] = set()
    stop = asyncio.Event()

    async def reader() -> None:
        while not stop.is_set():
            hits = (await pooled.search_lexical(index_name, parse_lexical("word"), 5, scope)).hits
            assert len(hits) == 1, hits
            seen.add(hits[0].content)

    task = asyncio.create_task(reader())
    for v in range(2, 6):
        await publish(pooled, index_name, [doc("d", [f"word v{v}"], [vec(1, 0, 0, v)], tenant="t")])
    stop.set()
    await task
    hits = (await pooled.search_lexical(index_name, parse_lexical("word"), 5, scope)).hits
    assert [h.content for h in hits] == ["word v5"]
    assert len(seen) >= 2  # the reader ran across the publishes


async def test_a_tenant_without_chunks_learns_nothing_of_the_pool(
    pooled: OpenSearchStore, index_name: str
) -> None:
    """A tenant whose documents hold no chunk has no statistics of its own: its lexical
    search scores no term, whatever other tenants of the pool hold (the pool's term
    statistics are never read for a tenant)."""
    empty = doc("empty", [], None, tenant="t99")
    empty = StagedDocument(empty.document, [], np.zeros((0, 4), dtype=np.float32))
    await publish(pooled, index_name, [*tenant_docs(1), empty])
    assert await pooled.tenant_counts(index_name, "t99", ALL_READERS) == (1, 0)
    found = await pooled.search_lexical(
        index_name, parse_lexical("alpha only1"), 5, Scope("t99", readers=ALL_READERS)
    )
    assert (found.hits, found.terms_scored, found.terms_pruned) == ([], 0, 0)
