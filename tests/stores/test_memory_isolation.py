"""The in-memory store keeps one tenant from slowing or probing another (issue 19):
a lexical search reads only its own tenant's postings, so its cost cannot reveal
another tenant's vocabulary, and heavy lexical work (BM25 over many postings, exact
phrase checks) runs off the event loop, so other requests keep their latency."""

from __future__ import annotations

import asyncio
import random
import sys
import threading
import time

import pytest

from groundwire.domain.query import contains_phrase, parse_lexical
from groundwire.domain.retrieval import LexicalQuery, MetadataFilter, Scope
from groundwire.domain.text import phrase_words
from groundwire.stores.base import ChunkRecord, DocumentRecord, IndexSpec, StagedDocument
from groundwire.stores.memory import MemoryStore
from groundwire.stores.memory.index import Compaction, TenantPart

NAME = "isolation"
SPEC = IndexSpec(NAME, None, None, chunking="chars:size=800")


def _doc(doc_id: str, texts: list[str], tenant: str, dept: str = "hr") -> StagedDocument:
    chunks = [ChunkRecord(f"c{i:05d}", i, 0, len(t), t, "") for i, t in enumerate(texts)]
    record = DocumentRecord(doc_id, f"config:{doc_id}", "h", doc_id, tenant, {"dept": dept})
    return StagedDocument(record, chunks, None)


async def _publish(store: MemoryStore, docs: list[StagedDocument]) -> None:
    await store.ensure_index(SPEC)
    v = await store.begin_version(NAME)
    await store.stage_documents(NAME, v, docs)
    await store.publish_version(NAME, v, SPEC)


def _victim_docs() -> list[StagedDocument]:
    # 200 chunks of tenant acme, a quarter of them holding the probed term.
    texts = [f"{'probe ' if i % 4 == 0 else ''}report number {i} of acme" for i in range(200)]
    return [_doc(f"a{d}", texts[d * 20 : d * 20 + 20], "acme") for d in range(10)]


def _neighbour_docs(chunks: int) -> list[StagedDocument]:
    # Another tenant holding the probed term in every one of its chunks.
    per_doc = 100
    return [
        _doc(f"g{d}", [f"probe probe neighbour text {d} {i}" for i in range(per_doc)], "globex")
        for d in range(chunks // per_doc)
    ]


async def _probe(
    store: MemoryStore, query: LexicalQuery, scope: Scope
) -> tuple[list[tuple[object, float]], int]:
    before = store.lexical_entries_read
    found = await store.search_lexical(NAME, query, 10, scope)
    hits: list[tuple[object, float]] = [(h.key, h.score.raw) for h in found.hits]
    return hits, store.lexical_entries_read - before


@pytest.mark.parametrize(
    "flt",
    [MetadataFilter(), MetadataFilter({"dept": frozenset({"hr"})})],
    ids=["unfiltered", "filtered"],
)
async def test_lexical_cost_does_not_depend_on_another_tenants_vocabulary(
    flt: MetadataFilter,
) -> None:
    alone, crowded = MemoryStore(), MemoryStore()
    await _publish(alone, _victim_docs())
    await _publish(crowded, _victim_docs() + _neighbour_docs(14_400))
    scope = Scope("acme", flt)
    for text in ("probe", "probe report", '"probe report"', "absent"):
        query = parse_lexical(text)
        hits_alone, work_alone = await _probe(alone, query, scope)
        hits_crowded, work_crowded = await _probe(crowded, query, scope)
        assert hits_crowded == hits_alone
        # The work is the caller tenant's own: identical whether or not globex holds
        # the term in 14,400 chunks (before: every tenant's postings were read).
        assert work_crowded == work_alone, text
        assert work_alone <= 2 * 200 + 200 + 200  # its rows, postings, filter, candidates
    # A tenant's own data does move its cost: the measure is not a constant.
    _, probe_work = await _probe(alone, parse_lexical("probe"), Scope("acme"))
    _, absent_work = await _probe(alone, parse_lexical("absent"), Scope("acme"))
    assert probe_work > absent_work

    # And the wall clock agrees (best of many runs; a generous bound for a loaded
    # machine: before the fix the crowded search took several times as long).
    async def best(store: MemoryStore) -> float:
        query, runs = parse_lexical("probe"), []
        for _ in range(30):
            t0 = time.perf_counter()
            await store.search_lexical(NAME, query, 10, scope)
            runs.append(time.perf_counter() - t0)
        return min(runs)

    quiet, loud = await best(alone), await best(crowded)
    assert loud < 1.6 * quiet + 50e-6, (quiet, loud)


def _phrase_attack() -> tuple[list[StagedDocument], LexicalQuery]:
    """18,000 chunks of one repeated word after a rarer one, and a query of phrases
    that every chunk nearly matches: all the words are held by every chunk, so each
    chunk is a candidate, every phrase but the last matches, and the last (the rare
    word after the repeated ones) never does."""
    words = "stop " + " ".join(["echo"] * 12)
    docs = [_doc(f"d{d}", [words] * 200, "acme") for d in range(90)]
    phrases = [" ".join(["echo"] * j) for j in range(2, 12)] + ["echo " * 6 + "stop"]
    return docs, parse_lexical(" ".join(f'"{p}"' for p in phrases))


async def test_crafted_phrase_query_does_not_block_the_event_loop() -> None:
    store = MemoryStore()
    docs, query = _phrase_attack()
    await _publish(store, docs)
    scope = Scope("acme")
    await store.search_lexical(NAME, query, 10, scope)  # warm the posting arrays

    lag = 0.0
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal lag, ticks
        loop = asyncio.get_running_loop()
        while not done.is_set():
            t0 = loop.time()
            await asyncio.sleep(0)
            lag = max(lag, loop.time() - t0)
            ticks += 1

    # As `groundwire serve` does: the loop gets the GIL back from workers within 1 ms.
    switch = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    try:
        tick = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        t0 = time.perf_counter()
        found = await store.search_lexical(NAME, query, 10, scope)
        duration = time.perf_counter() - t0
        done.set()
        await tick
    finally:
        sys.setswitchinterval(switch)
    assert found.hits == []
    # Run on the loop, an unbounded query would stall the ticker for its whole duration
    # (one tick); off the loop the ticker keeps running throughout. Since a phrase is
    # verified over at most 1,000 candidates (stores/bounds.py) the query itself is
    # short, so what is asserted is that the loop never waits for more than half of it
    # or 50 ms, whichever is longer (on a loaded machine a few ms are scheduling).
    assert ticks >= 1 and lag < max(duration / 2, 0.05), (ticks, lag, duration)


async def test_phrase_matching_agrees_with_the_word_run_rule() -> None:
    # The store's narrowed substring check selects exactly the chunks in which each
    # phrase is a contiguous run of words (domain.query.contains_phrase), on a
    # corpus large enough to take the worker-pool path.
    rng = random.Random(19)
    vocab = ["ab", "ab-cd", "cd", "Ef", "efGh", "gh", "x1"]
    texts = [" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 12))) for _ in range(600)]
    store = MemoryStore()
    await _publish(store, [_doc(f"p{d}", texts[d * 60 : d * 60 + 60], "acme") for d in range(10)])
    for _ in range(40):
        phrases = [
            " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 3)))
            for _ in range(rng.randint(1, 2))
        ]
        query = parse_lexical(" ".join(f'"{p}"' for p in phrases))
        found = await store.search_lexical(NAME, query, 1000, Scope("acme"))
        want = {
            (f"p{i // 60}", f"c{i % 60:05d}")
            for i, t in enumerate(texts)
            if all(contains_phrase(phrase_words(t), p) for p in query.phrases)
        }
        assert {h.key for h in found.hits} == want, phrases


async def test_compaction_rebuilds_postings_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A tenant re-upserting its own documents leaves dead rows; once they outnumber
    # the live ones the index is compacted. Results stay exact, and the rebuild of
    # every tenant's postings (proportional to the whole index) runs in a worker.
    store = MemoryStore()
    words = [f"w{i}" for i in range(80)]
    await _publish(store, [_doc("victim", ["probe " + " ".join(words)], "acme")])
    docs = [_doc(f"d{d}", [" ".join(words)] * 100, "globex") for d in range(40)]
    await _publish(store, docs)  # 4,000 chunks
    await _publish(store, docs)  # replaced: 4,000 dead rows, not yet more than the live
    idx = store._get(NAME)
    before = await store.search_lexical(NAME, parse_lexical("probe w7"), 5, Scope("acme"))
    assert idx.n > 8000

    threads: list[str] = []
    build = Compaction.build_parts

    def recording(plan: Compaction) -> dict[str, TenantPart]:
        threads.append(threading.current_thread().name)
        return build(plan)

    monkeypatch.setattr(Compaction, "build_parts", recording)
    await _publish(store, docs)  # 8,000 dead rows of 12,001: compaction
    assert idx.n < 4100  # compacted: the dead rows are gone
    assert len(threads) == 1 and threads[0] != threading.main_thread().name
    after = await store.search_lexical(NAME, parse_lexical("probe w7"), 5, Scope("acme"))
    assert [(h.key, h.score.raw) for h in after.hits] == [(h.key, h.score.raw) for h in before.hits]
    crowd = await store.search_lexical(NAME, parse_lexical("w7"), 500, Scope("globex"))
    assert len(crowd.hits) == 500


async def test_a_compaction_planned_before_a_write_is_abandoned() -> None:
    store = MemoryStore()
    await _publish(store, [_doc("a", ["alpha"], "acme")])
    idx = store._get(NAME)
    plan = idx.compaction()
    await _publish(store, [_doc("b", ["beta"], "acme")])  # the index moved on
    assert not idx.apply(plan, plan.build_parts())
    found = await store.search_lexical(NAME, parse_lexical("beta"), 5, Scope("acme"))
    assert [h.document_id for h in found.hits] == ["b"]
