"""The store contract: the same inputs give the same visible results, ranking
rules and errors on every store. A store that passes this suite can back any index.
The lexical-ranking part (BM25 statistics, common-word queries, analyzers, weighted
terms, bulk-loaded postings) is in test_contract_lexical.py."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import cast

import numpy as np
import pytest

from groundwire.domain.errors import GroundwireError
from groundwire.domain.metadata_ranges import (
    RangeBound,
    RangeCondition,
    RangeKind,
    number_bound,
    parse_timestamp,
)
from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import MetadataFilter, Scope
from groundwire.domain.scores import ScoreMetric
from groundwire.stores.base import (
    CheckpointRecord,
    CheckpointState,
    CheckpointStore,
    ChunkRecord,
    ClaimStatus,
    DistanceMetric,
    DocumentRecord,
    IndexSpec,
    StagedDocument,
    Store,
)
from groundwire.stores.memory.checkpoints import MemoryCheckpointStore
from tests.stores.contract_support import DIM, K, doc, publish, spec, vec


async def test_empty_index_searches_return_nothing(store: Store, index_name: str) -> None:
    state = await store.ensure_index(spec(index_name))
    assert state.published_version == 0
    assert await store.search_vector(index_name, vec(1, 0, 0, 0), 5, Scope()) == []
    assert (
        await store.search_lexical(index_name, parse_lexical("anything"), 5, Scope())
    ).hits == []


async def test_cosine_scores_and_order(store: Store, index_name: str) -> None:
    await publish(
        store,
        index_name,
        [
            doc("a", ["alpha text"], [vec(1, 0, 0, 0)]),
            doc("b", ["beta text"], [vec(0.8, 0.6, 0, 0)]),
            doc("c", ["gamma text"], [vec(0, 0, 1, 0)]),
        ],
    )
    hits = await store.search_vector(index_name, vec(1, 0, 0, 0), 3, Scope())
    assert [h.document_id for h in hits] == ["a", "b", "c"]
    first = hits[0].score
    # Each store reports its own cosine metric; relevance agrees across stores.
    assert first.metric in (ScoreMetric.COSINE_SIMILARITY, ScoreMetric.COSINE_DISTANCE)
    assert first.relevance == pytest.approx(1.0, abs=1e-5)
    assert hits[1].score.relevance == pytest.approx((0.8 + 1) / 2, abs=1e-5)
    assert hits[2].score.relevance == pytest.approx(0.5, abs=1e-5)
    if first.metric is ScoreMetric.COSINE_SIMILARITY:
        assert first.higher_is_better and first.raw == pytest.approx(1.0, abs=1e-5)
    else:
        assert not first.higher_is_better and first.raw == pytest.approx(0.0, abs=1e-5)


async def test_euclidean_and_dot_semantics(store: Store, index_name: str) -> None:
    e_name, d_name = index_name + "e", index_name + "d"
    docs = [doc("a", ["x"], [vec(1, 0, 0, 0)]), doc("b", ["y"], [vec(3, 0, 0, 0)])]
    await publish(store, e_name, docs, spec(e_name, DistanceMetric.EUCLIDEAN))
    hits = await store.search_vector(e_name, vec(1, 0, 0, 0), 2, Scope())
    assert [h.document_id for h in hits] == ["a", "b"]
    assert hits[1].score.metric is ScoreMetric.EUCLIDEAN_DISTANCE
    assert not hits[1].score.higher_is_better
    assert hits[1].score.raw == pytest.approx(2.0, abs=1e-4)
    assert hits[1].score.relevance == pytest.approx(1 / 3, abs=1e-4)
    await publish(store, d_name, docs, spec(d_name, DistanceMetric.DOT))
    hits = await store.search_vector(d_name, vec(1, 0, 0, 0), 2, Scope())
    assert [h.document_id for h in hits] == ["b", "a"]
    assert hits[0].score.metric is ScoreMetric.DOT_PRODUCT
    assert hits[0].score.raw == pytest.approx(3.0, abs=1e-4)
    assert hits[0].score.relevance is None


async def test_equal_scores_tie_break_by_document_then_chunk(store: Store, index_name: str) -> None:
    same = vec(0, 1, 0, 0)
    await publish(
        store,
        index_name,
        [doc("b", ["t1", "t2"], [same, same]), doc("a", ["t3"], [same])],
    )
    hits = await store.search_vector(index_name, same, 3, Scope())
    assert [(h.document_id, h.chunk_id) for h in hits] == [
        ("a", "c00000"),
        ("b", "c00000"),
        ("b", "c00001"),
    ]


async def test_lexical_identifiers_are_findable(store: Store, index_name: str) -> None:
    texts = {
        "hr": "Parental leave is governed by POL-HR-014 which supersedes an older policy.",
        "cs": "Error CS1503 means an argument cannot be converted in RetrieverFactory.cs.",
        "di": "Implement IRagRetriever and register it with dependency injection.",
        "noise": "The cafeteria serves lunch from noon; policy questions go to HR.",
    }
    await publish(
        store,
        index_name,
        [doc(k, [v], None) for k, v in texts.items()],
        spec(index_name, dims=None),
    )
    for query, expected in [
        ("POL-HR-014", "hr"),
        ("CS1503", "cs"),
        ("RetrieverFactory.cs", "cs"),
        ("IRagRetriever", "di"),
        ("iragretriever", "di"),
    ]:
        hits = (await store.search_lexical(index_name, parse_lexical(query), 4, Scope())).hits
        assert hits, query
        assert hits[0].document_id == expected, query
        assert hits[0].score.higher_is_better
        assert hits[0].score.relevance is None
        assert hits[0].score.metric is ScoreMetric.BM25


async def test_exact_phrase_requires_contiguous_words(store: Store, index_name: str) -> None:
    await publish(
        store,
        index_name,
        [
            doc("yes", ["Start account recovery from the portal."], None),
            doc("no", ["Recovery of an account takes two days."], None),
        ],
        spec(index_name, dims=None),
    )
    hits = (
        await store.search_lexical(index_name, parse_lexical('"account recovery"'), 5, Scope())
    ).hits
    assert [h.document_id for h in hits] == ["yes"]
    loose = (
        await store.search_lexical(index_name, parse_lexical("account recovery"), 5, Scope())
    ).hits
    assert {h.document_id for h in loose} == {"yes", "no"}


async def test_tenant_isolation_before_ranking(store: Store, index_name: str) -> None:
    await publish(
        store,
        index_name,
        [
            doc("mine", ["shared words here"], [vec(0, 0, 0, 1)], tenant="acme"),
            doc("theirs", ["shared words here"], [vec(1, 0, 0, 0)], tenant="globex"),
            doc("public", ["shared words here"], [vec(1, 0, 0, 0)]),
        ],
    )
    q = vec(1, 0, 0, 0)
    assert [h.document_id for h in await store.search_vector(index_name, q, 5, Scope("acme"))] == [
        "mine"
    ]
    assert [h.document_id for h in await store.search_vector(index_name, q, 5, Scope())] == [
        "public"
    ]
    assert await store.search_vector(index_name, q, 5, Scope("nobody")) == []
    lex = (await store.search_lexical(index_name, parse_lexical("shared"), 5, Scope("globex"))).hits
    assert [h.document_id for h in lex] == ["theirs"]


async def test_filter_applied_before_ranking_returns_k(store: Store, index_name: str) -> None:
    rng = np.random.default_rng(7)
    docs = []
    for i in range(200):
        v = rng.normal(size=DIM).astype(np.float32)
        docs.append(
            doc(
                f"d{i:03d}",
                [f"common text {i}"],
                [v],
                metadata={"dept": "hr" if i % 10 == 0 else "eng"},
            )
        )
    await publish(store, index_name, docs)
    flt = Scope(filter=MetadataFilter({"dept": frozenset({"hr"})}))
    hits = await store.search_vector(index_name, vec(1, 1, 1, 1), 10, flt)
    assert len(hits) == 10
    assert all(h.metadata["dept"] == "hr" for h in hits)
    lex = (await store.search_lexical(index_name, parse_lexical("common"), 10, flt)).hits
    assert len(lex) == 10 and all(h.metadata["dept"] == "hr" for h in lex)
    multi = Scope(filter=MetadataFilter({"dept": frozenset({"hr", "eng"})}))
    assert len(await store.search_vector(index_name, vec(1, 1, 1, 1), 50, multi)) == 50


async def test_staged_changes_invisible_until_publish(store: Store, index_name: str) -> None:
    await publish(store, index_name, [doc("a", ["old text"], [vec(1, 0, 0, 0)], content_hash="1")])
    v = await store.begin_version(index_name)
    await store.stage_documents(
        index_name,
        v,
        [doc("a", ["new text", "more new"], [vec(1, 0, 0, 0), vec(0, 1, 0, 0)], content_hash="2")],
    )
    hits = (await store.search_lexical(index_name, parse_lexical("text"), 5, Scope())).hits
    assert [h.content for h in hits] == ["old text"]
    await store.publish_version(index_name, v, spec(index_name))
    hits = (await store.search_lexical(index_name, parse_lexical("text new"), 5, Scope())).hits
    assert sorted(h.content for h in hits) == ["more new", "new text"]
    live = await store.live_documents(index_name)
    assert live[K("a")].content_hash == "2"
    state = await store.index_state(index_name)
    assert state.published_version == v and state.chunk_count == 2 and state.document_count == 1


async def test_discard_keeps_previous_version(store: Store, index_name: str) -> None:
    v1 = await publish(store, index_name, [doc("a", ["keep me"], [vec(1, 0, 0, 0)])])
    v2 = await store.begin_version(index_name)
    await store.stage_documents(index_name, v2, [doc("a", ["replacement"], [vec(1, 0, 0, 0)])])
    await store.stage_deletions(index_name, v2, [K("a")])
    await store.discard_version(index_name, v2)
    hits = await store.search_vector(index_name, vec(1, 0, 0, 0), 5, Scope())
    assert [h.content for h in hits] == ["keep me"]
    assert (await store.index_state(index_name)).published_version == v1


async def test_versions_of_different_tenants_publish_in_any_order(
    store: Store, index_name: str
) -> None:
    """Pushes of different tenants stage versions at once and publish in whatever
    order they finish. Every publish moves the published version to a number no
    publish had before (read-your-writes: a reader asking for at least the number a
    publish returned sees it), versions begun at once are distinct, and every
    publish counts (stores/base.py publication_number)."""
    sp = spec(index_name)
    await store.ensure_index(sp)
    begun = await asyncio.gather(*(store.begin_version(index_name) for _ in range(3)))
    assert len(set(begun)) == 3
    old, new, third = sorted(begun)
    for v, tenant in ((old, "ta"), (new, "tb"), (third, "tc")):
        await store.stage_documents(
            index_name,
            v,
            [doc(f"d{tenant}", [f"text of {tenant}"], [vec(1, 0, 0, 0)], tenant=tenant)],
        )
    after_new = (await store.publish_version(index_name, new, sp)).published_version
    after_old = (await store.publish_version(index_name, old, sp)).published_version
    assert after_new >= new
    # The older version's publish is a new published state: a number past the newer.
    assert after_old > after_new
    # Concurrent publishes (the third, and a fourth begun after the others).
    fourth = await store.begin_version(index_name)
    assert fourth > after_old
    await store.stage_documents(
        index_name, fourth, [doc("dtd", ["text of td"], [vec(1, 0, 0, 0)], tenant="td")]
    )
    last = await asyncio.gather(
        store.publish_version(index_name, third, sp), store.publish_version(index_name, fourth, sp)
    )
    numbers = sorted(s.published_version for s in last)
    assert numbers[0] > after_old and numbers[0] != numbers[1]
    state = await store.index_state(index_name)
    assert state.published_version == numbers[1]
    assert (state.document_count, state.chunk_count) == (4, 4)
    for tenant in ("ta", "tb", "tc", "td"):
        hits = await store.search_vector(index_name, vec(1, 0, 0, 0), 5, Scope(tenant))
        assert [h.document_id for h in hits] == [f"d{tenant}"]


async def test_deletions_publish_atomically(store: Store, index_name: str) -> None:
    await publish(
        store,
        index_name,
        [doc("a", ["first"], [vec(1, 0, 0, 0)]), doc("b", ["second"], [vec(0, 1, 0, 0)])],
    )
    v = await store.begin_version(index_name)
    assert await store.stage_deletions(index_name, v, [K("a"), K("missing")]) == 1
    assert len(await store.search_vector(index_name, vec(1, 0, 0, 0), 5, Scope())) == 2
    await store.publish_version(index_name, v, spec(index_name))
    hits = await store.search_vector(index_name, vec(1, 0, 0, 0), 5, Scope())
    assert [h.document_id for h in hits] == ["b"]
    assert set(await store.live_documents(index_name)) == {K("b")}


async def test_dimension_mismatch_rejected_before_writing(store: Store, index_name: str) -> None:
    await publish(store, index_name, [doc("a", ["safe"], [vec(1, 0, 0, 0)])])
    v = await store.begin_version(index_name)
    bad = StagedDocument(
        DocumentRecord("b", "config:b", "h"),
        [ChunkRecord("c00000", 0, 0, 3, "bad")],
        np.ones((1, DIM + 1), np.float32),
    )
    good = doc("c", ["fine"], [vec(0, 1, 0, 0)])
    with pytest.raises(GroundwireError) as err:
        await store.stage_documents(index_name, v, [good, bad])
    assert err.value.reason == "EMBEDDING_MISMATCH"
    await store.publish_version(index_name, v, spec(index_name))
    # Nothing of the rejected batch was written, not even its valid document.
    assert set(await store.live_documents(index_name)) == {K("a")}
    nan = doc("d", ["nan"], [vec(float("nan"), 0, 0, 0)])
    v2 = await store.begin_version(index_name)
    with pytest.raises(GroundwireError):
        await store.stage_documents(index_name, v2, [nan])
    await store.discard_version(index_name, v2)


async def test_readers_never_see_a_gap(store: Store, index_name: str) -> None:
    await publish(store, index_name, [doc("a", ["version zero"], [vec(1, 0, 0, 0)])])
    stop = asyncio.Event()
    seen_empty = 0

    async def reader() -> None:
        nonlocal seen_empty
        while not stop.is_set():
            hits = (
                await store.search_lexical(index_name, parse_lexical("version"), 5, Scope())
            ).hits
            if len(hits) != 1:
                seen_empty += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(reader())
    for i in range(1, 15):
        v = await store.begin_version(index_name)
        await store.stage_documents(
            index_name, v, [doc("a", [f"version {i}"], [vec(1, 0, 0, 0)], content_hash=str(i))]
        )
        await store.publish_version(index_name, v, spec(index_name))
    stop.set()
    await task
    assert seen_empty == 0


async def test_unknown_index_is_not_found(store: Store) -> None:
    with pytest.raises(GroundwireError) as err:
        await store.index_state("does-not-exist")
    assert err.value.reason == "INDEX_NOT_FOUND"


async def test_hit_carries_attribution(store: Store, index_name: str) -> None:
    await publish(
        store,
        index_name,
        [doc("folder/file.md", ["hello world"], [vec(1, 0, 0, 0)], metadata={"k": "v"})],
    )
    (hit,) = await store.search_vector(index_name, vec(1, 0, 0, 0), 1, Scope())
    assert hit.document_id == "folder/file.md"
    assert hit.chunk_id == "c00000"
    assert (hit.start, hit.end) == (0, 11)
    assert hit.title == "Title folder/file.md"
    assert hit.section == "Section"
    assert dict(hit.metadata) == {"k": "v"}


async def test_filter_is_and_over_keys_and_any_of_values(store: Store, index_name: str) -> None:
    docs = [
        doc("hr-en", ["policy text"], [vec(1, 0, 0, 0)], metadata={"dept": "hr", "lang": "en"}),
        doc("hr-de", ["policy text"], [vec(1, 0, 0, 0)], metadata={"dept": "hr", "lang": "de"}),
        doc("it-en", ["policy text"], [vec(1, 0, 0, 0)], metadata={"dept": "it", "lang": "en"}),
        doc("ops-en", ["policy text"], [vec(1, 0, 0, 0)], metadata={"dept": "ops", "lang": "en"}),
        doc("no-lang", ["policy text"], [vec(1, 0, 0, 0)], metadata={"dept": "hr"}),
    ]
    await publish(store, index_name, docs)
    flt = Scope(filter=MetadataFilter({"dept": frozenset({"hr", "it"}), "lang": frozenset({"en"})}))
    expected = {"hr-en", "it-en"}
    assert {
        h.document_id for h in await store.search_vector(index_name, vec(1, 0, 0, 0), 10, flt)
    } == expected
    lex = (await store.search_lexical(index_name, parse_lexical("policy"), 10, flt)).hits
    assert {h.document_id for h in lex} == expected
    none = Scope(filter=MetadataFilter({"dept": frozenset()}))
    assert await store.search_vector(index_name, vec(1, 0, 0, 0), 10, none) == []
    tenant_and_filter = Scope("acme", MetadataFilter({"dept": frozenset({"hr"})}))
    assert (
        await store.search_lexical(index_name, parse_lexical("policy"), 10, tenant_and_filter)
    ).hits == []


async def test_phrases_match_whole_words_only(store: Store, index_name: str) -> None:
    await publish(
        store,
        index_name,
        [
            doc("camel", ["Implement IRagRetriever today."], None),
            doc("words", ["A rag retriever for text."], None),
            doc("both", ["rag and retriever, far apart"], None),
        ],
        spec(index_name, dims=None),
    )
    # Identifier parts are searchable terms ...
    loose = (await store.search_lexical(index_name, parse_lexical("rag"), 5, Scope())).hits
    assert {h.document_id for h in loose} == {"camel", "words", "both"}
    # ... but a phrase is a run of whole words: a camel-case part is not a word.
    one = (await store.search_lexical(index_name, parse_lexical('"rag"'), 5, Scope())).hits
    assert {h.document_id for h in one} == {"words", "both"}
    two = (
        await store.search_lexical(index_name, parse_lexical('"rag retriever"'), 5, Scope())
    ).hits
    assert [h.document_id for h in two] == ["words"]
    # Every phrase must occur; loose terms only rank.
    both = (
        await store.search_lexical(index_name, parse_lexical('"rag" "far apart" text'), 5, Scope())
    ).hits
    assert [h.document_id for h in both] == ["both"]


async def test_connector_identifiers_are_findable(store: Store, index_name: str) -> None:
    texts = {
        "csharp": "Written in C# with async streams.",
        "path": "Config lives in etc/groundwire/server.toml on hosts.",
        "mail": "Write to ops@example.org for access.",
        "kv": "Set mode:strict in the policy file.",
        "other": "Nothing relevant is written here at all.",
    }
    await publish(
        store,
        index_name,
        [doc(k, [v], None) for k, v in texts.items()],
        spec(index_name, dims=None),
    )
    for query, expected in [
        ("C#", "csharp"),
        ("etc/groundwire/server.toml", "path"),
        ("ops@example.org", "mail"),
        ("mode:strict", "kv"),
        ("server.toml", "path"),
    ]:
        hits = (await store.search_lexical(index_name, parse_lexical(query), 5, Scope())).hits
        assert hits and hits[0].document_id == expected, query


async def test_restaging_keeps_the_last_copy_and_cancels_a_staged_deletion(
    store: Store, index_name: str
) -> None:
    await publish(store, index_name, [doc("a", ["first copy"], [vec(1, 0, 0, 0)])])
    v = await store.begin_version(index_name)
    await store.stage_documents(
        index_name, v, [doc("a", ["second copy"], [vec(1, 0, 0, 0)], content_hash="2")]
    )
    await store.stage_documents(
        index_name, v, [doc("a", ["third copy"], [vec(1, 0, 0, 0)], content_hash="3")]
    )
    await store.stage_deletions(index_name, v, [K("a")])
    await store.stage_documents(
        index_name, v, [doc("a", ["fourth copy"], [vec(1, 0, 0, 0)], content_hash="4")]
    )
    await store.publish_version(index_name, v, spec(index_name))
    hits = (await store.search_lexical(index_name, parse_lexical("copy"), 5, Scope())).hits
    assert [h.content for h in hits] == ["fourth copy"]
    assert (await store.live_documents(index_name))[K("a")].content_hash == "4"
    state = await store.index_state(index_name)
    assert (state.document_count, state.chunk_count) == (1, 1)


async def test_document_ids_are_unique_per_tenant(store: Store, index_name: str) -> None:
    """One id used by two tenants names two documents: neither overwrites, deletes or
    reveals the other."""
    await publish(
        store,
        index_name,
        [
            doc("same", ["acme original"], [vec(1, 0, 0, 0)], tenant="acme"),
            doc("same", ["globex original"], [vec(0, 1, 0, 0)], tenant="globex"),
            doc("same", ["untenanted original"], [vec(0, 0, 1, 0)]),
        ],
    )
    state = await store.index_state(index_name)
    assert (state.document_count, state.chunk_count) == (3, 3)
    assert set(await store.live_documents(index_name)) == {
        K("same", "acme"),
        K("same", "globex"),
        K("same"),
    }

    async def contents(tenant: str) -> list[str]:
        hits = (
            await store.search_lexical(index_name, parse_lexical("original"), 5, Scope(tenant))
        ).hits
        return [h.content for h in hits]

    v = await store.begin_version(index_name)
    await store.stage_documents(
        index_name, v, [doc("same", ["acme replaced"], [vec(1, 0, 0, 0)], tenant="acme")]
    )
    await store.publish_version(index_name, v, spec(index_name))
    assert await contents("acme") == []
    assert await contents("globex") == ["globex original"]
    assert await contents("") == ["untenanted original"]
    v = await store.begin_version(index_name)
    assert await store.stage_deletions(index_name, v, [K("same", "globex")]) == 1
    await store.publish_version(index_name, v, spec(index_name))
    assert await contents("globex") == []
    assert await contents("") == ["untenanted original"]
    live = await store.live_documents(
        index_name, [K("same", "acme"), K("same", "globex"), K("absent", "acme")]
    )
    assert list(live) == [K("same", "acme")] and live[K("same", "acme")].tenant == "acme"
    state = await store.index_state(index_name)
    assert (state.document_count, state.chunk_count) == (2, 2)


async def test_half_precision_vector_index_keeps_float32_scores(
    store: Store, index_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A half-precision HNSW graph (pgvector halfvec) finds the neighbours; the ranking
    # and the scores are the float32 ones, exactly as an exact search gives them.
    # (PostgreSQL searches a tenant this small exactly: the threshold is lowered so
    # the tenant gets its own graph.)
    from groundwire.stores.postgres import vectors as pg_vectors

    monkeypatch.setattr(pg_vectors, "EXACT_MAX_CHUNKS", 0)
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(40, DIM)).astype(np.float32)
    half = IndexSpec(
        index_name,
        "test/model:4:l2",
        DIM,
        DistanceMetric.COSINE,
        "chars:size=800",
        half_precision_index=True,
    )
    docs = [doc(f"d{i:02d}", [f"text {i}"], [vectors[i]]) for i in range(40)]
    await publish(store, index_name, docs, half)
    queries = rng.normal(size=(5, DIM)).astype(np.float32)

    async def check() -> None:
        for q in queries:
            hits = await store.search_vector(index_name, q, 5, Scope())
            v64, q64 = vectors.astype(np.float64), q.astype(np.float64)
            sims = v64 @ q64 / (np.linalg.norm(v64, axis=1) * np.linalg.norm(q64))
            want = sorted(range(40), key=lambda i: (1.0 - sims[i], i))[:5]
            assert [h.document_id for h in hits] == [f"d{i:02d}" for i in want]
            # float32 distances: a half-precision score would be off by about 1e-3.
            got = [h.score.raw if h.score.higher_is_better else 1 - h.score.raw for h in hits]
            assert got == pytest.approx([sims[i] for i in want], abs=2e-6)

    await check()
    if "Postgres" in type(store).__name__:
        # The search really runs on the half-precision graph (its name ends in h; the
        # planner is kept off the sequential scan a 40-row table would get), and
        # turning the option off swaps it for a float32 graph.
        from groundwire.stores.postgres.scope import index_row

        async def plan() -> str:
            db = store._db  # type: ignore[attr-defined]
            async with db.conn() as conn, conn.transaction():
                await conn.execute("SET LOCAL enable_seqscan = off")
                idx = await index_row(conn, index_name)
                return await pg_vectors.explain(conn, idx, queries[0], 5, Scope(), 100)

        with_half = await plan()
        assert "halfvec" in with_half and "_4_ch_t" in with_half, with_half
        await store.ensure_index(spec(index_name))
        without = await plan()
        assert "_4_c_t" in without and "_4_ch" not in without, without
        await check()


# Range conditions. Metadata values that are, are nearly, or are not numbers and
# RFC 3339 timestamps; both stores must match exactly the values the domain rules
# admit (the oracle), which the hand-written expectations pin down in turn.
RANGE_NUMBERS = [
    "42", "42.0", "4.2e1", "+42", "-1", ".5", "5.", "0.1", "0.10", "1e999", "-1e-999",
    "1000", "999.9999999999999999999", " 42", "42 ", "4 2", "0x10", "NaN", "Infinity",
    "1e1000", "", "abc", "\u0664\u0662", "42\n", "2024-05-01T00:00:00Z",
]  # fmt: skip
RANGE_TIMESTAMPS = [
    "2024-05-01T00:00:00Z", "2024-05-01T02:00:00+02:00", "2024-04-30T20:00:00-04:00",
    "2024-04-30T23:59:59.999999Z", "2024-04-30T23:59:59.9999999Z", "2024-05-01t00:00:00.000001z",
    "2024-05-01 00:00:00Z", "2024-02-29T12:00:00Z", "2023-02-29T00:00:00Z",
    "2024-04-31T00:00:00Z", "2024-05-01T00:00:60Z", "2024-05-01T24:00:00Z",
    "2024-05-01T00:00:00", "2024-05-01", "0000-01-01T00:00:00Z", "0001-01-01T00:00:00+15:59",
    "2024-05-01T00:00:00+16:00", "1900-02-29T00:00:00Z", "2000-02-29T00:00:00Z",
    "2024-05-01T00:30:00.5+00:30", "42", "9999-12-31T23:59:59-15:59",
]  # fmt: skip


def _range(kind: str, lo: object = None, hi: object = None, lo_inc: bool = False,
           hi_inc: bool = False) -> RangeCondition:  # fmt: skip
    def bound(value: object, inclusive: bool) -> RangeBound | None:
        if value is None:
            return None
        if kind == "n":
            parsed: Decimal | int | None = number_bound(float(str(value)))
        else:
            parsed = parse_timestamp(str(value))
        assert parsed is not None
        return RangeBound(parsed, inclusive)

    return RangeCondition(
        RangeKind.NUMBER if kind == "n" else RangeKind.TIMESTAMP,
        bound(lo, lo_inc),
        bound(hi, hi_inc),
    )


MAY_FIRST = "2024-05-01T00:00:00Z"
RANGE_CASES: list[tuple[str, RangeCondition, set[str] | None]] = [
    ("n", _range("n", lo=42, lo_inc=True), {"42", "42.0", "4.2e1", "+42", "1e999", "1000",
                                           "999.9999999999999999999"}),
    ("n", _range("n", lo=42), {"1e999", "1000", "999.9999999999999999999"}),
    ("n", _range("n", hi=42), {"-1", ".5", "5.", "0.1", "0.10", "-1e-999"}),
    ("n", _range("n", lo=0.1, lo_inc=True, hi=1000), {"42", "42.0", "4.2e1", "+42", ".5", "5.",
                                                    "0.1", "0.10", "999.9999999999999999999"}),
    ("n", _range("n", lo=0.1, hi=1000, hi_inc=True), None),
    ("n", _range("n", lo=-1, hi=0), {"-1e-999"}),
    ("t", _range("t", lo=MAY_FIRST, lo_inc=True), {
        "2024-05-01T00:00:00Z", "2024-05-01T02:00:00+02:00", "2024-04-30T20:00:00-04:00",
        "2024-05-01t00:00:00.000001z", "2024-05-01 00:00:00Z", "9999-12-31T23:59:59-15:59",
        "2024-05-01T00:30:00.5+00:30",
    }),
    ("t", _range("t", lo=MAY_FIRST), {"2024-05-01t00:00:00.000001z",
                                      "9999-12-31T23:59:59-15:59", "2024-05-01T00:30:00.5+00:30"}),
    ("t", _range("t", hi=MAY_FIRST), {
        "2024-04-30T23:59:59.999999Z", "2024-04-30T23:59:59.9999999Z", "2024-02-29T12:00:00Z",
        "0001-01-01T00:00:00+15:59", "2000-02-29T00:00:00Z",
    }),
    ("t", _range("t", lo="2024-04-30T23:59:59.999999Z", lo_inc=True,
                 hi="2024-05-01T00:00:00.000001+00:00", hi_inc=True), None),
    ("t", _range("t", lo="1999-12-31T23:00:00-01:00", hi="2024-03-01T00:00:00+14:00"), None),
]  # fmt: skip


async def test_range_filters_match_the_domain_rules_on_every_leg(
    store: Store, index_name: str
) -> None:
    docs = [
        doc(f"n{i:02d}", ["ranged text"], [vec(1, 0, 0, 0)], metadata={"n": v})
        for i, v in enumerate(RANGE_NUMBERS)
    ] + [
        doc(f"t{i:02d}", ["ranged text"], [vec(1, 0, 0, 0)], metadata={"t": v})
        for i, v in enumerate(RANGE_TIMESTAMPS)
    ]
    await publish(store, index_name, docs)
    values = {f"n{i:02d}": v for i, v in enumerate(RANGE_NUMBERS)} | {
        f"t{i:02d}": v for i, v in enumerate(RANGE_TIMESTAMPS)
    }
    for key, cond, expected_values in RANGE_CASES:
        oracle = {d for d, v in values.items() if d[0] == key and cond.admits(v)}
        if expected_values is not None:
            assert {values[d] for d in oracle} == expected_values, cond
        scope = Scope(filter=MetadataFilter(ranges={key: (cond,)}))
        vector = await store.search_vector(index_name, vec(1, 0, 0, 0), 100, scope)
        assert {h.document_id for h in vector} == oracle, cond
        lex = (await store.search_lexical(index_name, parse_lexical("ranged"), 100, scope)).hits
        assert {h.document_id for h in lex} == oracle, cond
    # A range on a key no document has, and a number range over timestamps (the
    # only number among them, "42", is below it).
    for scope in (
        Scope(filter=MetadataFilter(ranges={"missing": (_range("n", lo=0),)})),
        Scope(filter=MetadataFilter(ranges={"t": (_range("n", lo=100),)})),
    ):
        assert await store.search_vector(index_name, vec(1, 0, 0, 0), 100, scope) == []


async def test_range_filters_combine_with_equality_tenant_and_each_other(
    store: Store, index_name: str
) -> None:
    docs = [
        doc(
            f"d{i:03d}",
            [f"common text {i}"],
            [vec(1, float(i % 7), 0, 1)],
            tenant="acme" if i % 2 else "",
            metadata={
                "year": str(1990 + i % 40),
                "dept": "hr" if i % 3 == 0 else "eng",
                "at": f"2024-01-{1 + i % 28:02d}T12:00:00+01:00",
            },
        )
        for i in range(240)
    ]
    await publish(store, index_name, docs)
    by_id = {d.document.document_id: d.document for d in docs}

    def expect(scope: Scope) -> set[str]:
        return {
            d
            for d, rec in by_id.items()
            if rec.tenant == scope.tenant
            and all(rec.metadata.get(k) in v for k, v in scope.filter.conditions.items())
            and all(
                k in rec.metadata and c.admits(rec.metadata[k])
                for k, conds in scope.filter.ranges.items()
                for c in conds
            )
        }

    scopes = [
        Scope(filter=MetadataFilter(ranges={"year": (_range("n", lo=2015, lo_inc=True),)})),
        Scope(
            "acme",
            MetadataFilter(
                {"dept": frozenset({"hr"})},
                {"year": (_range("n", lo=2000, hi=2010, hi_inc=True),)},
            ),
        ),
        # Two ranges on one key (an agent's configured range and a request's) and a
        # timestamp range on another: all must hold.
        Scope(
            filter=MetadataFilter(
                ranges={
                    "year": (_range("n", lo=1995), _range("n", hi=2025)),
                    "at": (_range("t", lo="2024-01-10T11:00:00Z", lo_inc=True),),
                }
            )
        ),
    ]
    for scope in scopes:
        expected = expect(scope)
        assert expected, scope
        # Applied before ranking: top k are all admitted, and k are returned when
        # at least k exist.
        k = min(10, len(expected))
        hits = await store.search_vector(index_name, vec(1, 1, 1, 1), k, scope)
        assert len(hits) == k and {h.document_id for h in hits} <= expected
        every = await store.search_vector(index_name, vec(1, 1, 1, 1), 240, scope)
        assert {h.document_id for h in every} == expected
        lex = (await store.search_lexical(index_name, parse_lexical("common"), 240, scope)).hits
        assert {h.document_id for h in lex} == expected
        top = (await store.search_lexical(index_name, parse_lexical("common"), k, scope)).hits
        assert len(top) == k and {h.document_id for h in top} <= expected


async def test_range_filters_see_documents_added_later(store: Store, index_name: str) -> None:
    def years(*values: str) -> list[StagedDocument]:
        return [
            doc(f"y{v}", ["yearly text"], [vec(1, 0, 0, 0)], metadata={"year": v}) for v in values
        ]

    scope = Scope(filter=MetadataFilter(ranges={"year": (_range("n", 2001, 2003, True, True),)}))

    async def found() -> set[str]:
        hits = await store.search_vector(index_name, vec(1, 0, 0, 0), 50, scope)
        lex = (await store.search_lexical(index_name, parse_lexical("yearly"), 50, scope)).hits
        assert {h.document_id for h in lex} == {h.document_id for h in hits}
        return {h.document_id for h in hits}

    await publish(store, index_name, years("2000", "2001", "2003", "2005"))
    assert await found() == {"y2001", "y2003"}
    # New values, some inside the range, interleaved with the known ones.
    await publish(store, index_name, years("1999", "2002.5", "2003.0", "2004", "2e3"))
    assert await found() == {"y2001", "y2003", "y2002.5", "y2003.0"}


async def test_has_documents_is_per_tenant_and_published_only(
    store: Store, index_name: str
) -> None:
    await store.ensure_index(spec(index_name))
    assert not await store.has_documents(index_name, "")
    await publish(store, index_name, [doc("a", ["alpha"], [vec(1, 0, 0, 0)], tenant="acme")])
    assert await store.has_documents(index_name, "acme")
    assert not await store.has_documents(index_name, "")
    assert not await store.has_documents(index_name, "globex")
    # Staged documents do not count until published.
    v = await store.begin_version(index_name)
    await store.stage_documents(
        index_name, v, [doc("b", ["beta"], [vec(0, 1, 0, 0)], tenant="globex")]
    )
    assert not await store.has_documents(index_name, "globex")
    await store.publish_version(index_name, v, spec(index_name))
    assert await store.has_documents(index_name, "globex")
    # A tenant whose every document is deleted holds none again.
    v = await store.begin_version(index_name)
    await store.stage_deletions(index_name, v, [K("a", "acme")])
    assert await store.has_documents(index_name, "acme")
    await store.publish_version(index_name, v, spec(index_name))
    assert not await store.has_documents(index_name, "acme")
    assert await store.has_documents(index_name, "globex")


async def test_tenant_counts_are_per_tenant_published_and_match_the_listing(
    store: Store, index_name: str
) -> None:
    await store.ensure_index(spec(index_name))
    assert await store.tenant_counts(index_name, "acme") == (0, 0)
    acme = [
        doc("a1", ["alpha", "beta"], [vec(1, 0, 0, 0), vec(0, 1, 0, 0)], tenant="acme"),
        doc("a2", ["gamma"], [vec(0, 0, 1, 0)], tenant="acme"),
    ]
    await publish(store, index_name, [*acme, doc("g1", ["x"], [vec(0, 0, 0, 1)], tenant="g")])
    assert await store.tenant_counts(index_name, "acme") == (2, 3)
    assert await store.tenant_counts(index_name, "g") == (1, 1)
    assert await store.tenant_counts(index_name, "") == (0, 0)
    # Staged changes do not count until published; then the listing agrees.
    v = await store.begin_version(index_name)
    await store.stage_deletions(index_name, v, [K("a1", "acme")])
    await store.stage_documents(
        index_name, v, [doc("a3", ["d", "e", "f"], [vec(1, 1, 0, 0)] * 3, tenant="acme")]
    )
    assert await store.tenant_counts(index_name, "acme") == (2, 3)
    await store.publish_version(index_name, v, spec(index_name))
    listed = await store.list_documents(index_name, "acme", 100, None)
    assert (
        await store.tenant_counts(index_name, "acme")
        == (
            len(listed),
            sum(d.chunk_count for d in listed),
        )
        == (2, 4)
    )
    assert await store.tenant_counts(index_name, "g") == (1, 1)


async def test_tenant_characters_are_each_chunks_length_summed_per_tenant_published_only(
    store: Store, index_name: str
) -> None:
    await store.ensure_index(spec(index_name))
    assert await store.tenant_characters(index_name, "acme") == 0
    acl = frozenset({"group:hr"})
    await publish(
        store,
        index_name,
        [
            doc("a1", ["alpha", "beta"], [vec(1, 0, 0, 0), vec(0, 1, 0, 0)], tenant="acme"),
            # A document with an access list counts too (the quota is the tenant's).
            doc("a2", ["gamma-delta"], [vec(0, 0, 1, 0)], tenant="acme", acl=acl),
            doc("g1", ["x" * 40], [vec(0, 0, 0, 1)], tenant="g"),
        ],
    )
    assert await store.tenant_characters(index_name, "acme") == 5 + 4 + 11
    assert await store.tenant_characters(index_name, "g") == 40
    assert await store.tenant_characters(index_name, "") == 0
    # Staged changes count once published: a1 replaced by a longer text, a2 deleted.
    v = await store.begin_version(index_name)
    await store.stage_deletions(index_name, v, [K("a2", "acme")])
    await store.stage_documents(
        index_name, v, [doc("a1", ["epsilon", "zeta", "eta"], [vec(1, 1, 0, 0)] * 3, tenant="acme")]
    )
    assert await store.tenant_characters(index_name, "acme") == 20
    await store.publish_version(index_name, v, spec(index_name))
    assert await store.tenant_characters(index_name, "acme") == 7 + 4 + 3
    assert await store.tenant_characters(index_name, "g") == 40


# -- execution checkpoints -------------------------------------------------------


def checkpoints_of(store: Store) -> CheckpointStore:
    """The store's checkpoint table: PostgreSQL's own, or process memory."""
    own = getattr(store, "checkpoints", None)
    return cast(CheckpointStore, own) if own is not None else MemoryCheckpointStore()


def checkpoint(eid: str, tenant: str = "t1", payload: bytes = b"state-1") -> CheckpointRecord:
    return CheckpointRecord(eid, tenant, "agent", CheckpointState.RUNNING, payload)


async def test_checkpoint_claims_are_exclusive_and_tenant_scoped(
    store: Store, index_name: str
) -> None:
    cps = checkpoints_of(store)
    eid = f"{index_name}-x"
    await cps.create_checkpoint(checkpoint(eid), "owner-a", 30, 60)
    # Another tenant's id and an unknown id look the same: missing.
    assert await cps.get_checkpoint(eid, "t2") is None
    assert (await cps.claim_checkpoint(eid, "t2", "owner-b", 30)).status is ClaimStatus.MISSING
    assert (await cps.claim_checkpoint("nope", "t1", "b", 30)).status is ClaimStatus.MISSING
    got = await cps.get_checkpoint(eid, "t1")
    assert got is not None and got.payload == b"state-1" and got.agent_id == "agent"
    # The creator holds the lease: a claim is refused, and only the holder may write.
    assert (await cps.claim_checkpoint(eid, "t1", "owner-b", 30)).status is ClaimStatus.BUSY
    assert not await cps.update_checkpoint(
        eid, "owner-b", CheckpointState.RUNNING, b"x", 60, release=False
    )
    assert not await cps.renew_lease(eid, "owner-b", 30)
    assert await cps.renew_lease(eid, "owner-a", 30)
    assert await cps.update_checkpoint(
        eid, "owner-a", CheckpointState.REQUIRES_ACTION, b"state-2", 60, release=True
    )
    # Released: concurrent claims, exactly one wins.
    claims = await asyncio.gather(
        *(cps.claim_checkpoint(eid, "t1", f"claimer-{i}", 30) for i in range(6))
    )
    won = [c for c in claims if c.status is ClaimStatus.CLAIMED]
    assert len(won) == 1 and all(
        c.status is ClaimStatus.BUSY for c in claims if c.status is not ClaimStatus.CLAIMED
    )
    assert won[0].record is not None and won[0].record.payload == b"state-2"
    assert won[0].record.state is CheckpointState.REQUIRES_ACTION
    # The old owner lost it; the winner completes it; completed rows are never claimed.
    assert not await cps.update_checkpoint(
        eid, "owner-a", CheckpointState.RUNNING, b"x", 60, release=False
    )
    winner = next(f"claimer-{i}" for i, c in enumerate(claims) if c is won[0])
    assert await cps.update_checkpoint(
        eid, winner, CheckpointState.COMPLETED, b"result", 60, release=True
    )
    done = await cps.claim_checkpoint(eid, "t1", "late", 30)
    assert done.status is ClaimStatus.DONE and done.record is not None
    assert done.record.payload == b"result"


async def test_checkpoint_lapsed_lease_and_release_allow_a_claim(
    store: Store, index_name: str
) -> None:
    cps = checkpoints_of(store)
    eid = f"{index_name}-lease"
    await cps.create_checkpoint(checkpoint(eid), "crashed", 0.2, 60)
    assert (await cps.claim_checkpoint(eid, "t1", "b", 30)).status is ClaimStatus.BUSY
    await asyncio.sleep(0.3)  # the holder died: its lease lapses
    assert (await cps.claim_checkpoint(eid, "t1", "b", 30)).status is ClaimStatus.CLAIMED
    await cps.release_checkpoint(eid, "someone-else")  # not the holder: no effect
    assert (await cps.claim_checkpoint(eid, "t1", "c", 30)).status is ClaimStatus.BUSY
    await cps.release_checkpoint(eid, "b")
    assert (await cps.claim_checkpoint(eid, "t1", "c", 30)).status is ClaimStatus.CLAIMED


async def test_checkpoints_expire_and_are_deleted(store: Store, index_name: str) -> None:
    cps = checkpoints_of(store)
    short, other, long = (f"{index_name}-{n}" for n in ("short", "other", "long"))
    await cps.create_checkpoint(checkpoint(short), "a", 30, 0.2)
    await cps.create_checkpoint(checkpoint(other), "a", 30, 0.2)
    await cps.create_checkpoint(checkpoint(long), "a", 30, 60)
    await asyncio.sleep(0.3)
    # Past its retention a row is deleted, and is missing to every call meanwhile.
    assert await cps.delete_expired_checkpoints() >= 2
    assert await cps.get_checkpoint(short, "t1") is None
    assert (await cps.claim_checkpoint(other, "t1", "b", 30)).status is ClaimStatus.MISSING
    assert not await cps.update_checkpoint(
        other, "a", CheckpointState.RUNNING, b"x", 60, release=False
    )
    assert await cps.get_checkpoint(long, "t1") is not None


async def test_document_listing_is_per_tenant_paged_and_content_free(
    store: Store, index_name: str
) -> None:
    """Documents are listed per tenant in id order after a cursor, with their size,
    chunk count, the version that wrote them and when; staged ones are not listed
    until published, deleted ones no longer are."""
    import time

    before = time.time() - 5
    v1 = await publish(
        store,
        index_name,
        [
            doc(
                "b", ["alpha beta", "gamma"], [vec(1, 0, 0, 0), vec(0, 1, 0, 0)], content_hash="hb"
            ),
            doc("a", ["one"], [vec(1, 0, 0, 0)], metadata={"team": "hr"}),
            doc("c", ["x"], [vec(1, 0, 0, 0)]),
            doc("b", ["other tenant"], [vec(1, 0, 0, 0)], tenant="acme"),
        ],
    )
    listed = await store.list_documents(index_name, "", 2, None)
    assert [d.document_id for d in listed] == ["a", "b"]
    b = listed[1]
    assert (b.source_id, b.content_hash, b.title, b.tenant) == ("config:b", "hb", "Title b", "")
    # "alpha beta" is 0-10, "gamma" 11-16: the size is the end of the last chunk.
    assert (b.chunk_count, b.characters, b.version) == (2, 16, v1)
    assert before <= b.ingested_at <= time.time() + 5
    assert listed[0].metadata == {"team": "hr"}
    assert [d.document_id for d in await store.list_documents(index_name, "", 2, "b")] == ["c"]
    assert [d.document_id for d in await store.list_documents(index_name, "acme", 10, None)] == [
        "b"
    ]
    assert await store.list_documents(index_name, "globex", 10, None) == []
    got = await store.get_document(index_name, "acme", "b")
    assert got is not None and (got.tenant, got.characters) == ("acme", 12)
    assert await store.get_document(index_name, "globex", "b") is None

    v2 = await store.begin_version(index_name)
    await store.stage_documents(
        index_name, v2, [doc("a", ["replaced text"], [vec(1, 0, 0, 0)], content_hash="new")]
    )
    await store.stage_deletions(index_name, v2, [K("c")])
    staged = await store.get_document(index_name, "", "a")
    assert staged is not None and staged.version == v1
    await store.publish_version(index_name, v2, spec(index_name))
    a = await store.get_document(index_name, "", "a")
    assert a is not None and (a.version, a.content_hash, a.characters) == (v2, "new", 13)
    assert await store.get_document(index_name, "", "c") is None
    assert [d.document_id for d in await store.list_documents(index_name, "", 10, None)] == [
        "a",
        "b",
    ]
    with pytest.raises(GroundwireError):
        await store.list_documents("missing-index", "", 10, None)


async def test_document_chunks_are_the_published_ones_in_order(
    store: Store, index_name: str
) -> None:
    await publish(
        store,
        index_name,
        [
            doc("d", ["first part", "second part", "third"], [vec(1, 0, 0, 0)] * 3),
            doc("d", ["acme copy"], [vec(1, 0, 0, 0)], tenant="acme"),
        ],
    )
    chunks = await store.document_chunks(index_name, "", "d", 10)
    assert [(c.ordinal, c.text, c.start, c.end, c.section) for c in chunks] == [
        (0, "first part", 0, 10, "Section"),
        (1, "second part", 11, 22, "Section"),
        (2, "third", 23, 28, "Section"),
    ]
    assert [c.text for c in await store.document_chunks(index_name, "", "d", 2)] == [
        "first part",
        "second part",
    ]
    assert [c.text for c in await store.document_chunks(index_name, "acme", "d", 10)] == [
        "acme copy"
    ]
    v = await store.begin_version(index_name)
    await store.stage_documents(index_name, v, [doc("d", ["staged"], [vec(1, 0, 0, 0)])])
    assert len(await store.document_chunks(index_name, "", "d", 10)) == 3
    await store.publish_version(index_name, v, spec(index_name))
    assert [c.text for c in await store.document_chunks(index_name, "", "d", 10)] == ["staged"]
    assert await store.document_chunks(index_name, "globex", "d", 10) == []
