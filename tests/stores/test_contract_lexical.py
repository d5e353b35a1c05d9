"""The store contract, lexical ranking: BM25 statistics per tenant, long and
common-word queries, analyzed indexes, weighted (feedback) query terms and
bulk-loaded postings rank alike on every store (fixtures: conftest.py; helpers:
contract_support.py)."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from groundwire.domain.analysis import ENGLISH, PLAIN, Analyzer
from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import MetadataFilter, Scope
from groundwire.domain.scores import ScoreMetric
from groundwire.stores.base import IndexSpec, StagedDocument, Store
from tests.stores.contract_support import K, bm25_approx, doc, publish, spec


async def test_lexical_statistics_are_per_tenant(store: Store, index_name: str) -> None:
    """BM25's N, document frequencies and average length are the scope tenant's: another
    tenant's documents never move a tenant's scores (a side channel otherwise); the
    metadata filter selects rows without changing the statistics."""
    sp = spec(index_name, dims=None)
    acme = [
        doc("a1", ["probe alpha beta"], None, tenant="acme", metadata={"dept": "hr"}),
        doc("a2", ["gamma delta"], None, tenant="acme", metadata={"dept": "it"}),
        doc("a3", ["probe epsilon zeta eta theta"], None, tenant="acme", metadata={"dept": "it"}),
    ]
    await publish(store, index_name, acme, sp)

    async def scores(flt: MetadataFilter | None = None) -> dict[str, float]:
        scope = Scope("acme", flt or MetadataFilter())
        hits = (await store.search_lexical(index_name, parse_lexical("probe"), 5, scope)).hits
        return {h.document_id: h.score.raw for h in hits}

    before = await scores()
    # Expected over acme's three chunks only: N = 3, df(probe) = 2, avgdl = 10 / 3.
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    k1, b, avgdl = 1.2, 0.75, 10 / 3

    def bm25(dl: int) -> float:
        return idf * (k1 + 1) / (1 + k1 * (1 - b + b * dl / avgdl))

    assert before == bm25_approx(store, {"a1": bm25(3), "a3": bm25(5)}, 1e-6)
    assert await scores(MetadataFilter({"dept": frozenset({"hr"})})) == {"a1": before["a1"]}
    others = [
        doc(f"g{i}", [f"probe {'filler ' * i}"], None, tenant="globex") for i in range(20)
    ] + [doc("u", ["probe probe probe"], None)]
    v = await store.begin_version(index_name)
    await store.stage_documents(index_name, v, others)
    await store.publish_version(index_name, v, sp)
    assert await scores() == before
    v = await store.begin_version(index_name)
    await store.stage_deletions(index_name, v, [K("g3", "globex"), K("u")])
    await store.publish_version(index_name, v, sp)
    assert await scores() == before
    # And acme's own changes do move them.
    v = await store.begin_version(index_name)
    await store.stage_deletions(index_name, v, [K("a2", "acme")])
    await store.publish_version(index_name, v, sp)
    assert (await scores())["a1"] != before["a1"]


async def test_lexical_ranking_is_bm25(store: Store, index_name: str) -> None:
    # A rarer term outweighs a common one, and a shorter chunk outranks a longer one
    # with the same matches (length normalization).
    docs = [
        doc("rare", ["zebra"], None),
        doc("common1", ["apple"], None),
        doc("common2", ["apple pie"], None),
        doc("common3", ["apple juice"], None),
        doc("short", ["apple zebra"], None),
        doc("long", ["apple zebra with many other words around it"], None),
    ]
    await publish(store, index_name, docs, spec(index_name, dims=None))
    hits = (await store.search_lexical(index_name, parse_lexical("apple zebra"), 6, Scope())).hits
    order = [h.document_id for h in hits]
    assert order[0] == "short"
    assert order.index("short") < order.index("long")
    assert order.index("rare") < min(order.index(f"common{i}") for i in (1, 2, 3))
    assert all(h.score.metric is ScoreMetric.BM25 for h in hits)
    assert [h.score.raw for h in hits] == sorted((h.score.raw for h in hits), reverse=True)


async def test_long_queries_score_only_their_rarest_terms(
    store: Store, index_name: str, request: pytest.FixtureRequest
) -> None:
    # 400 distinct words, every one held by the index with its own document
    # frequency (word i is in 400 - i of the 400 chunks): a pasted page of prose.
    words = ["x" + "".join(chr(97 + i // 26**p % 26) for p in (2, 1, 0)) for i in range(400)]
    docs = [
        doc(f"d{c:03d}", [" ".join(words[: 400 - c] if c % 2 else words[c:])], None)
        for c in range(400)
    ]
    await publish(store, index_name, docs, spec(index_name, dims=None))
    text = " ".join(reversed(words))
    full = parse_lexical(text)
    t0 = asyncio.get_running_loop().time()
    found = await store.search_lexical(index_name, full, 10, Scope())
    elapsed = asyncio.get_running_loop().time() - t0
    assert (found.terms_scored, found.terms_pruned) == (32, 368)
    # The same hits as a query of only the 32 rarest words: those were scored.
    from groundwire.domain.bm25 import select_terms

    held = [set(d.chunks[0].text.split()) for d in docs]
    df = {w: sum(w in h for h in held) for w in words}
    kept, pruned = select_terms(full.terms, df, 32)
    assert pruned == 368
    rare = await store.search_lexical(index_name, parse_lexical(" ".join(kept)), 10, Scope())
    assert [(h.key, h.score.raw) for h in found.hits] == [(h.key, h.score.raw) for h in rare.hits]
    assert len(found.hits) == 10
    if request.node.callspec.params.get("store") == "qdrant-client-local":
        pytest.skip(
            "the hits are checked; the time bound is not: qdrant-client's local mode has"
            " no payload indexes, so each of the query's 400 document-frequency counts"
            " scans every point in Python (44 s measured)"
        )
    # Bounded cost whatever the query's length (generous for a loaded CI machine).
    assert elapsed < 2.0
    # Without a limit every term is scored.
    unlimited = await store.search_lexical(
        index_name, parse_lexical(text).__class__(text, full.terms, (), 1000), 10, Scope()
    )
    assert (unlimited.terms_scored, unlimited.terms_pruned) == (400, 0)


async def test_a_phrase_match_is_found_behind_many_near_misses(
    store: Store, index_name: str
) -> None:
    # 100 chunks repeat "alpha" 300 times (past PostgreSQL's 256 positions per word)
    # and hold "beta", but never "alpha beta": they score higher on the phrase words
    # than the one real match, which must still be found, on every store.
    misses = [doc(f"miss{i:02d}", [("alpha " * 300) + "gamma beta"], None) for i in range(100)]
    real = doc("real", ["long preamble " * 20 + "alpha beta"], None)
    await publish(store, index_name, [*misses, real], spec(index_name, dims=None))
    found = await store.search_lexical(index_name, parse_lexical('"alpha beta"'), 5, Scope())
    assert [h.document_id for h in found.hits] == ["real"]


async def test_common_word_queries_rank_exactly_by_bm25(
    store: Store, index_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Queries of common words only, over chunks full of ties (same frequencies, same
    # lengths): PostgreSQL reads block postings best bound first in rounds and stops
    # once no unread block can reach the k-th score (forced here with blocks of two
    # postings and one-block first rounds, so every query takes several rounds); the
    # result must be BM25's exact top k with its tie-breaks, on every store, per tenant.
    from groundwire.domain import bm25
    from groundwire.domain.text import index_tokens
    from groundwire.stores.postgres import blockmax as pg_blockmax
    from groundwire.stores.postgres import blocks as pg_blocks
    from groundwire.stores.postgres import lexical as pg_lexical

    monkeypatch.setattr(pg_blocks, "BLOCK_SIZE", 2)
    monkeypatch.setattr(pg_blockmax, "FIRST_ROUND_INTERVALS", 1)
    monkeypatch.setattr(pg_blockmax, "WHOLE_LIST_SHARE", 1.0)  # rounds only: pruning shows
    read = {"blocks": 0, "rounds": 0, "queries": 0, "held": 0}
    original_top = pg_blockmax.top_k

    async def counted_top(*args: object, **kwargs: object) -> object:
        stats = pg_blockmax.Stats()
        out = await original_top(*args, **{**kwargs, "stats": stats})  # type: ignore[arg-type]
        read["queries"] += 1
        read["rounds"] += stats.rounds
        read["blocks"] += stats.blocks_read
        read["held"] += stats.blocks_total
        return out

    monkeypatch.setattr(pg_blockmax, "top_k", counted_top)
    rng = np.random.default_rng(3)
    vocab = ["the", "of", "and", "to", "in", "is", "it", "for", "on", "was", "rare", "zeta"]
    weights = 1.0 / np.arange(1, len(vocab) + 1)
    weights /= weights.sum()
    docs = []
    for d in range(60):
        tenant = "acme" if d % 3 == 0 else ""
        texts = [
            " ".join(rng.choice(vocab, size=int(rng.integers(1, 40)), p=weights)) for _ in range(3)
        ]
        docs.append(doc(f"d{d:02d}", texts, None, tenant=tenant, metadata={"dept": f"p{d % 4}"}))
    # Tenant "long": a word twice in long chunks scores below it once in a short
    # one, so postings read later (a lower tf) can still beat the ones read first.
    filler = " ".join(["x"] * 100)
    docs.extend(
        doc(f"l{d:02d}", [f"alpha alpha {filler}{' y' * d}"], None, tenant="long") for d in range(8)
    )
    docs.append(doc("short", ["alpha"], None, tenant="long"))
    docs.append(doc("others", ["z"] * 30, None, tenant="long"))  # a short average length
    await publish(store, index_name, docs, spec(index_name, dims=None))

    def expected(
        query: str, tenant: str, k: int, dept: str | None = None
    ) -> list[tuple[str, str, float]]:
        chunks = [
            (d.document.document_id, c.chunk_id, index_tokens(c.text), d.document.metadata)
            for d in docs
            if d.document.tenant == tenant
            for c in d.chunks
        ]
        total = len(chunks)
        avgdl = bm25.average_length(sum(len(t) for _, _, t, _ in chunks), total)
        terms = list(dict.fromkeys(index_tokens(query)))
        df = {t: sum(t in toks for _, _, toks, _ in chunks) for t in terms}
        scored = []
        for doc_id, chunk_id, toks, metadata in chunks:
            if dept is not None and (metadata or {}).get("dept") != dept:
                continue  # a filter selects rows, the statistics stay the tenant's
            score, hit_any = 0.0, False
            for t in terms:
                tf = toks.count(t)
                if tf and df[t]:
                    hit_any = True
                    score += bm25.term_score(bm25.idf(total, df[t]), float(tf), len(toks), avgdl)
            if hit_any:
                scored.append((doc_id, chunk_id, score))
        scored.sort(key=lambda x: (-x[2], x[0], x[1]))
        return scored[:k]

    queries = ["the", "the of", "of and to", "in is it", "and the for", "on was", "to zeta"]
    for tenant in ("", "acme"):
        for query in queries:
            for k in (1, 4, 10):
                result = await store.search_lexical(
                    index_name, parse_lexical(query), k, Scope(tenant)
                )
                got = [(h.document_id, h.chunk_id, h.score.raw) for h in result.hits]
                want = expected(query, tenant, k)
                assert [g[:2] for g in got] == [w[:2] for w in want], (tenant, query, k)
                assert [g[2] for g in got] == bm25_approx(store, [w[2] for w in want], 1e-12)
    if "Postgres" in type(store).__name__:
        # Rounds stop early: fewer blocks read than the lists hold.
        assert read["queries"] == 2 * len(queries) * 3
        assert read["rounds"] > read["queries"]
        assert read["blocks"] < read["held"]
    # A metadata filter (a quarter of the rows): the threshold is the k-th best in
    # scope, and the answer is still the exact filtered top k, through the blocks
    # (the admitted chunk ids intersected before scoring) and through the rows.
    for rows_per_block in (0.0, 1e9):
        monkeypatch.setattr(pg_lexical, "ROWS_PER_BLOCK", rows_per_block)
        for tenant in ("", "acme"):
            for query in queries:
                for k in (1, 4, 10):
                    scope = Scope(tenant, MetadataFilter({"dept": frozenset({"p1"})}))
                    result = await store.search_lexical(index_name, parse_lexical(query), k, scope)
                    got = [(h.document_id, h.chunk_id, h.score.raw) for h in result.hits]
                    want = expected(query, tenant, k, dept="p1")
                    assert [g[:2] for g in got] == [w[:2] for w in want], (tenant, query, k)
                    assert [g[2] for g in got] == bm25_approx(store, [w[2] for w in want], 1e-12)
    for k in (1, 3):
        result = await store.search_lexical(index_name, parse_lexical("alpha"), k, Scope("long"))
        assert [h.document_id for h in result.hits] == ["short", "l00", "l01"][:k]


# -- lexical analysis (domain/analysis.py): both stores index the analyzer's terms -----

_ANALYZED_TEXTS = {
    "plural": "The retention policies of the archive are reviewed every year.",
    "singular": "A retention policy decides how long a record is kept.",
    "ident": "POL-HR-014 sets the policy; IRagRetriever reads RetrieverFactory.cs (CS1503).",
    "running": "Running the indexer runs every night at 2024-01-01 02:00.",
    "art": "This is the state of the arts in retrieval.",
    "noart": "A state art museum opened in the capital.",
}


def _reference_bm25(analyzer: Analyzer, texts: dict[str, str], query: str) -> dict[str, float]:
    """domain.bm25 over the analyzer's terms, in plain Python: what every store must give."""
    from collections import Counter

    from groundwire.domain import bm25

    terms = {k: Counter(analyzer.terms(t)) for k, t in texts.items()}
    n = len(texts)
    avgdl = bm25.average_length(sum(sum(c.values()) for c in terms.values()), n)
    q = parse_lexical(query, analyzer=analyzer).terms
    qtf = Counter(q)
    out: dict[str, float] = {}
    for key, counts in terms.items():
        score, held = 0.0, False
        for t in dict.fromkeys(q):
            if counts[t]:
                held = True
                df = sum(1 for c in terms.values() if c[t])
                dl = float(sum(counts.values()))
                score += qtf[t] * bm25.term_score(bm25.idf(n, df), float(counts[t]), dl, avgdl)
        if held:
            out[key] = score
    return out


@pytest.mark.parametrize("analyzer", [PLAIN, ENGLISH], ids=["unstemmed", "stemmed"])
async def test_analyzed_indexes_rank_by_the_analyzers_terms(
    store: Store, index_name: str, analyzer: Analyzer
) -> None:
    s = IndexSpec(index_name, None, None, chunking="chars:size=800", analyzer=analyzer)
    await publish(store, index_name, [doc(k, [v], None) for k, v in _ANALYZED_TEXTS.items()], s)
    stemmed = analyzer is ENGLISH
    for query in ["retention policies", "policy", "runs", "POL-HR-014 policy", "the archive"]:
        parsed = parse_lexical(query, analyzer=analyzer)
        found = (await store.search_lexical(index_name, parsed, 10, Scope())).hits
        expected = _reference_bm25(analyzer, _ANALYZED_TEXTS, query)
        assert {h.document_id: h.score.raw for h in found} == bm25_approx(store, expected, 1e-9)
    policy = await store.search_lexical(
        index_name, parse_lexical("policies", analyzer=analyzer), 10, Scope()
    )
    # "policies" finds "policy" only when stemming; identifiers are found either way.
    assert {h.document_id for h in policy.hits} == (
        {"plural", "singular", "ident"} if stemmed else {"plural"}
    )
    for ident, expected_doc in [
        ("POL-HR-014", "ident"),
        ("IRagRetriever", "ident"),
        ("RetrieverFactory.cs", "ident"),
        ("CS1503", "ident"),
        ("2024", "running"),
        ("factories", "ident" if stemmed else None),
    ]:
        hits = (
            await store.search_lexical(
                index_name, parse_lexical(ident, analyzer=analyzer), 3, Scope()
            )
        ).hits
        if expected_doc is None:
            assert not hits, ident
        else:
            assert hits and hits[0].document_id == expected_doc, ident
    # A query of stop words alone matches nothing on a stop-word index.
    the = await store.search_lexical(
        index_name, parse_lexical("the of", analyzer=analyzer), 10, Scope()
    )
    assert bool(the.hits) is not stemmed


@pytest.mark.parametrize("analyzer", [PLAIN, ENGLISH], ids=["unstemmed", "stemmed"])
async def test_analyzed_phrases_match_the_analyzed_words_in_order(
    store: Store, index_name: str, analyzer: Analyzer
) -> None:
    s = IndexSpec(index_name, None, None, chunking="chars:size=800", analyzer=analyzer)
    await publish(store, index_name, [doc(k, [v], None) for k, v in _ANALYZED_TEXTS.items()], s)
    stemmed = analyzer is ENGLISH

    async def phrase(text: str) -> set[str]:
        q = parse_lexical(text, analyzer=analyzer)
        return {
            h.document_id for h in (await store.search_lexical(index_name, q, 10, Scope())).hits
        }

    # Stop words keep their positions inside a phrase: never "state art".
    assert await phrase('"state of the arts"') == {"art"}
    assert await phrase('"state of the art"') == ({"art"} if stemmed else set())
    assert await phrase('"retention policy"') == (
        {"plural", "singular"} if stemmed else {"singular"}
    )
    assert await phrase('"POL-HR-014 sets"') == {"ident"}
    # A phrase of stop words alone has no term to look up on a stop-word index.
    assert await phrase('"of the"') == (set() if stemmed else {"plural", "art"})


async def test_weighted_query_terms_scale_bm25_alike(store: Store, index_name: str) -> None:
    """Explicit query-term weights (what RM3 feedback sets, domain.feedback) replace
    qtf in the same BM25 arithmetic on every store: each term's contribution is its
    weight times its idf-scaled saturation."""
    from collections import Counter

    from groundwire.domain import bm25
    from groundwire.domain.feedback import expand
    from groundwire.domain.retrieval import FeedbackSettings

    s = IndexSpec(index_name, None, None, chunking="chars:size=800", analyzer=ENGLISH)
    await publish(store, index_name, [doc(k, [v], None) for k, v in _ANALYZED_TEXTS.items()], s)
    query = parse_lexical("retention policies", analyzer=ENGLISH)
    first = await store.search_lexical(index_name, query, 2, Scope())
    expanded = expand(query, first.hits, FeedbackSettings(documents=2, terms=5))
    weights = expanded.term_weights()
    assert set(weights) > set(query.terms)  # the feedback added terms
    found = await store.search_lexical(index_name, expanded, 10, Scope())
    terms = {k: Counter(ENGLISH.terms(t)) for k, t in _ANALYZED_TEXTS.items()}
    n = len(terms)
    avgdl = bm25.average_length(sum(sum(c.values()) for c in terms.values()), n)
    expected: dict[str, float] = {}
    for key, counts in terms.items():
        held = [t for t in weights if counts[t]]
        if held:
            expected[key] = sum(
                weights[t]
                * bm25.term_score(
                    bm25.idf(n, sum(1 for c in terms.values() if c[t])),
                    float(counts[t]),
                    float(sum(counts.values())),
                    avgdl,
                )
                for t in held
            )
    assert {h.document_id: h.score.raw for h in found.hits} == bm25_approx(store, expected, 1e-9)
    assert found.terms_scored == len(weights)


def _bm25_top(
    docs: list[StagedDocument], query: str, tenant: str, k: int
) -> list[tuple[str, str, float]]:
    """The exact BM25 top k over the tenant's chunks of `docs` (plain analysis)."""
    from groundwire.domain import bm25
    from groundwire.domain.text import index_tokens

    chunks = [
        (d.document.document_id, c.chunk_id, index_tokens(c.text))
        for d in docs
        if d.document.tenant == tenant
        for c in d.chunks
    ]
    total = len(chunks)
    avgdl = bm25.average_length(sum(len(t) for *_, t in chunks), total)
    terms = list(dict.fromkeys(index_tokens(query)))
    df = {t: sum(t in toks for *_, toks in chunks) for t in terms}
    scored = []
    for doc_id, chunk_id, toks in chunks:
        score, hit_any = 0.0, False
        for t in terms:
            tf = toks.count(t)
            if tf and df[t]:
                hit_any = True
                score += bm25.term_score(bm25.idf(total, df[t]), float(tf), len(toks), avgdl)
        if hit_any:
            scored.append((doc_id, chunk_id, score))
    scored.sort(key=lambda x: (-x[2], x[0], x[1]))
    return scored[:k]


async def test_bulk_loaded_postings_rank_exactly_and_stay_maintained(
    store: Store, index_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A first publish builds PostgreSQL's block postings in one statement; searches
    # over it rank by exact BM25, and later publishes rewrite the blocks they touch
    # (replaced and deleted documents lose their postings, blocks split and shrink;
    # blocks of three postings here, so every list is many blocks long).
    from groundwire.stores.postgres import blockmax as pg_blockmax
    from groundwire.stores.postgres import blocks as pg_blocks

    monkeypatch.setattr(pg_blocks, "BLOCK_SIZE", 3)
    monkeypatch.setattr(pg_blockmax, "FIRST_ROUND_INTERVALS", 2)
    calls = {"bulk": 0, "incremental": 0}
    bulk, incremental = pg_blocks.build_bulk, pg_blocks.update_incremental

    async def counted_bulk(*args: object) -> None:
        calls["bulk"] += 1
        await bulk(*args)  # type: ignore[arg-type]

    async def counted_incremental(*args: object) -> None:
        calls["incremental"] += 1
        await incremental(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(pg_blocks, "build_bulk", counted_bulk)
    monkeypatch.setattr(pg_blocks, "update_incremental", counted_incremental)
    rng = np.random.default_rng(11)
    vocab = ["the", "of", "and", "to", "in", "is", "rare", "zeta", "POL-HR-014", "alpha"]
    weights = 1.0 / np.arange(1, len(vocab) + 1)
    weights /= weights.sum()

    def corpus(n: int, salt: str) -> list[StagedDocument]:
        return [
            doc(
                f"d{d:02d}",
                [
                    " ".join(rng.choice(vocab, size=int(rng.integers(1, 30)), p=weights)) + salt
                    for _ in range(2)
                ],
                None,
                tenant="acme" if d % 3 == 0 else "",
            )
            for d in range(n)
        ]

    docs = corpus(40, "")
    await publish(store, index_name, docs, spec(index_name, dims=None))
    queries = ["the", "the of and", "rare", "zeta alpha", "pol-hr-014", "in is the to"]

    async def check(current: list[StagedDocument]) -> None:
        for tenant in ("", "acme"):
            for query in queries:
                for k in (1, 5):
                    result = await store.search_lexical(
                        index_name, parse_lexical(query), k, Scope(tenant)
                    )
                    got = [(h.document_id, h.chunk_id, h.score.raw) for h in result.hits]
                    want = _bm25_top(current, query, tenant, k)
                    assert [g[:2] for g in got] == [w[:2] for w in want], (tenant, query, k)
                    assert [g[2] for g in got] == bm25_approx(store, [w[2] for w in want], 1e-12)

    await check(docs)
    # A second version replaces ten documents and deletes two: row by row.
    replaced = corpus(10, " omega")
    v = await store.begin_version(index_name)
    await store.stage_documents(index_name, v, replaced)
    await store.stage_deletions(index_name, v, [K("d20"), K("d21", "acme")])
    await store.publish_version(index_name, v, spec(index_name, dims=None))
    current = {(d.document.tenant, d.document.document_id): d for d in docs}
    current.update({(d.document.tenant, d.document.document_id): d for d in replaced})
    current.pop(("", "d20"), None)
    current.pop(("acme", "d21"), None)
    queries.append("omega the")
    await check(list(current.values()))
    if "Postgres" in type(store).__name__:
        assert calls == {"bulk": 1, "incremental": 1}
