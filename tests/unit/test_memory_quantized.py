"""The in-memory store's quantized vector scan (issue 27 item 4): a sign-code pass
picks a candidate pool, float32 rescoring orders it. Compared with the plain float32
scan of the same store (the threshold moved out of reach): the same exact scores,
recall@10 >= 0.99 against exact search on clustered data, filters and tenant scope
applied before ranking, deletions and versions honoured."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from groundwire.domain.retrieval import ChunkHit, MetadataFilter, Scope
from groundwire.stores.base import (
    ChunkRecord,
    DistanceMetric,
    DocumentKey,
    DocumentRecord,
    IndexSpec,
    StagedDocument,
)
from groundwire.stores.memory import MemoryStore, quantized, search

DIM = 384
PER_DOC = 10
ROWS = 30_000  # above QUANTIZED_MIN_ROWS, small enough for a unit test
NAME = "q"
RNG_SEED = 11


def _clustered(rng: np.random.Generator, centroids: np.ndarray, n: int) -> np.ndarray:
    c = centroids[rng.integers(len(centroids), size=n)]
    v = c + rng.normal(scale=0.35 / np.sqrt(DIM) * 4, size=(n, DIM)).astype(np.float32)
    out: np.ndarray = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    return out


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(RNG_SEED)
    centroids = rng.normal(size=(256, DIM)).astype(np.float32)
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    return _clustered(rng, centroids, ROWS), _clustered(rng, centroids, 40)


def _docs(matrix: np.ndarray, tenant: str = "", first: int = 0) -> list[StagedDocument]:
    return [
        StagedDocument(
            DocumentRecord(
                f"d{d:06d}",
                f"config:d{d}",
                "h",
                "",
                tenant,
                # team: 100 values, so one of them is 1% of the rows.
                {"team": str(d % 100)},
            ),
            [ChunkRecord(f"c{c:02d}", c, 0, 1, "x") for c in range(PER_DOC)],
            matrix[(d - first) * PER_DOC : (d - first + 1) * PER_DOC],
        )
        for d in range(first, first + len(matrix) // PER_DOC)
    ]


async def _store(
    matrix: np.ndarray,
    metric: DistanceMetric = DistanceMetric.COSINE,
    tenant: str = "",
) -> MemoryStore:
    store = MemoryStore()
    spec = IndexSpec(NAME, "test/clustered:384", DIM, metric, "x")
    await store.ensure_index(spec)
    v = await store.begin_version(NAME)
    await store.stage_documents(NAME, v, _docs(matrix, tenant))
    await store.publish_version(NAME, v, spec)
    return store


def _row(h: ChunkHit) -> int:
    return int(h.document_id[1:]) * PER_DOC + int(h.chunk_id[1:])


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the quantized pass's runs (and the pools it returned)."""
    seen: list[int] = []
    real = quantized.shortlist

    def spy(*args: object, **kwargs: object) -> object:
        pool = real(*args, **kwargs)  # type: ignore[arg-type]
        seen.append(-1 if pool is None else len(pool))
        return pool

    monkeypatch.setattr(quantized, "shortlist", spy)
    yield seen


async def _both(
    store: MemoryStore, q: np.ndarray, k: int, scope: Scope, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[ChunkHit], list[ChunkHit]]:
    """(plain, quantized) results of one search."""
    quant = await store.search_vector(NAME, q, k, scope)
    with monkeypatch.context() as m:
        m.setattr(quantized, "QUANTIZED_MIN_ROWS", 1 << 62)
        plain = await store.search_vector(NAME, q, k, scope)
    return plain, quant


async def test_recall_and_exact_scores(
    data: tuple[np.ndarray, np.ndarray], calls: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix, queries = data
    store = await _store(matrix)
    k = 10
    found = total = 0
    for q in queries:
        plain, quant = await _both(store, q, k, Scope(), monkeypatch)
        assert len(quant) == k
        truth = {int(i) for i in np.argpartition(-(matrix @ q), k)[:k]}
        found += len(truth & {_row(h) for h in quant})
        total += k
        # Every hit's score is the plain scan's, bit for bit.
        plain_scores = {_row(h): h.score.raw for h in plain}
        for h in quant:
            if _row(h) in plain_scores:
                assert h.score.raw == plain_scores[_row(h)]
        # Exact order whenever the true top k are in the pool.
        if {_row(h) for h in plain} == {_row(h) for h in quant}:
            assert [h.key for h in plain] == [h.key for h in quant]
    assert found / total >= 0.99
    pools = [p for p in calls if p >= 0]
    assert len(pools) == len(queries)  # the quantized path was taken every time
    assert all(p < ROWS // 4 for p in pools)


async def test_scores_match_float32_dot(data: tuple[np.ndarray, np.ndarray]) -> None:
    matrix, queries = data
    store = await _store(matrix, DistanceMetric.DOT)
    q = queries[0]
    hits = await store.search_vector(NAME, q, 10, Scope())
    for h in hits:
        expected = float((matrix[_row(h) : _row(h) + 1] @ q)[0])
        assert abs(h.score.raw - expected) < 1e-6


def test_row_scores_do_not_depend_on_the_call(data: tuple[np.ndarray, np.ndarray]) -> None:
    """A row's dot product is the same bit for bit whether the plain scan reads it
    in place (one sgemv over a consecutive range, any length) or a pool gathers it
    (padded groups): the identity the quantized path's exact scores rest on."""
    matrix, queries = data
    q = queries[0]
    rng = np.random.default_rng(3)
    for length in (1, 3, 31, 33, 1000, 1027, 4097, 20_001, ROWS):
        start = int(rng.integers(0, ROWS - length + 1))
        rows = np.arange(start, start + length, dtype=np.int64)
        in_place = search._scope_dots(matrix, rows, q)
        pool = np.sort(rng.choice(ROWS, size=min(length, 2000), replace=False)).astype(np.int64)
        pool = np.union1d(pool, rows[[0, -1]])  # the range's ends, gathered among others
        gathered = dict(
            zip(pool.tolist(), search._scope_dots(matrix, pool, q).tolist(), strict=True)
        )
        for row in (int(rows[0]), int(rows[-1])):
            assert in_place[row - start] == gathered[row]
        both = np.intersect1d(rows, pool)
        assert np.array_equal(
            in_place[both - start], np.array([gathered[r] for r in both.tolist()], dtype=np.float32)
        )


async def test_filter_applied_before_ranking(
    data: tuple[np.ndarray, np.ndarray], calls: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 1% filter still returns k hits when k rows match; a 40% filter (above the
    threshold, so the pass runs over the filtered rows only) returns the filtered
    exact top k."""
    matrix, queries = data
    store = await _store(matrix)
    rare = Scope("", MetadataFilter({"team": frozenset({"7"})}))
    docs = np.arange(ROWS) // PER_DOC
    matching = np.flatnonzero(docs % 100 == 7)
    k = len(matching)  # 1% of the rows: all of them must come back
    hits = await store.search_vector(NAME, queries[0], k, rare)
    assert sorted(_row(h) for h in hits) == matching.tolist()

    wide_values = frozenset(str(t) for t in range(40))
    wide = Scope("", MetadataFilter({"team": wide_values}))
    keep = docs % 100 < 40
    calls.clear()
    for q in queries[:10]:
        plain, quant = await _both(store, q, 10, wide, monkeypatch)
        assert all(keep[_row(h)] for h in quant)
        truth = np.argpartition(-np.where(keep, matrix @ q, -np.inf), 10)[:10]
        assert len({int(i) for i in truth} & {_row(h) for h in quant}) >= 9
        assert [h.key for h in quant][:5] == [h.key for h in plain][:5]
    assert any(p >= 0 for p in calls)


async def test_tenant_scope(
    data: tuple[np.ndarray, np.ndarray], calls: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two tenants' rows interleaved in one matrix: each search sees its own only,
    and the pass runs over the tenant's rows (gathered, not consecutive)."""
    matrix, queries = data
    store = MemoryStore()
    spec = IndexSpec(NAME, "test/clustered:384", DIM, DistanceMetric.COSINE, "x")
    await store.ensure_index(spec)
    v = await store.begin_version(NAME)
    docs = _docs(matrix)
    for d, doc in enumerate(docs):
        tenant = "acme" if d % 2 == 0 else "globex"
        record = doc.document
        docs[d] = StagedDocument(
            DocumentRecord(record.document_id, record.source_id, "h", "", tenant, record.metadata),
            doc.chunks,
            doc.embeddings,
        )
    await store.stage_documents(NAME, v, docs)
    await store.publish_version(NAME, v, spec)
    acme_rows = (np.arange(ROWS) // PER_DOC) % 2 == 0
    for q in queries[:10]:
        plain, quant = await _both(store, q, 10, Scope("acme"), monkeypatch)
        assert all(acme_rows[_row(h)] for h in quant)
        truth = np.argpartition(-np.where(acme_rows, matrix @ q, -np.inf), 10)[:10]
        assert len({int(i) for i in truth} & {_row(h) for h in quant}) >= 9
        assert [(h.key, h.score.raw) for h in quant][:5] == [(h.key, h.score.raw) for h in plain][
            :5
        ]
    assert any(p >= 0 for p in calls)  # 15k rows in acme's scope: the pass ran


async def test_deletions_and_versions(
    data: tuple[np.ndarray, np.ndarray], calls: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deleted documents disappear, replaced ones show their new vectors, and a
    staged but unpublished version is invisible, on the quantized path as on the
    plain one (also after a compaction renumbers the rows)."""
    matrix, queries = data
    store = await _store(matrix)
    spec = IndexSpec(NAME, "test/clustered:384", DIM, DistanceMetric.COSINE, "x")
    q = queries[0]
    top = await store.search_vector(NAME, q, 10, Scope())
    gone = top[0].document_id
    # Replace the second hit's document by far-away vectors; delete the first's.
    second = next(h.document_id for h in top if h.document_id != gone)
    v = await store.begin_version(NAME)
    await store.stage_deletions(NAME, v, [DocumentKey("", gone)])
    d = int(second[1:])
    far = -np.repeat(q[None, :], PER_DOC, axis=0)
    await store.stage_documents(NAME, v, _docs(far, first=d))
    # An unpublished version holding the query itself must stay invisible.
    hidden = await store.begin_version(NAME)
    await store.stage_documents(
        NAME, hidden, _docs(np.repeat(q[None, :], PER_DOC, axis=0), first=ROWS // PER_DOC)
    )
    await store.publish_version(NAME, v, spec)
    plain, quant = await _both(store, q, 10, Scope(), monkeypatch)
    ids = [h.document_id for h in quant]
    assert gone not in ids and second not in ids
    assert f"d{ROWS // PER_DOC:06d}" not in ids
    assert [(h.key, h.score.raw) for h in quant] == [(h.key, h.score.raw) for h in plain]

    # Delete over half the rows: the publish compacts (rows renumbered, codes gathered).
    v = await store.begin_version(NAME)
    await store.stage_deletions(
        NAME, v, [DocumentKey("", f"d{i:06d}") for i in range(0, ROWS // PER_DOC, 3)]
    )
    await store.stage_deletions(
        NAME, v, [DocumentKey("", f"d{i:06d}") for i in range(1, ROWS // PER_DOC, 3)]
    )
    await store.publish_version(NAME, v, spec)
    calls.clear()
    for q in queries[:5]:
        plain, quant = await _both(store, q, 10, Scope(), monkeypatch)
        assert all(int(h.document_id[1:]) % 3 == 2 for h in quant)
        assert [(h.key, h.score.raw) for h in quant] == [(h.key, h.score.raw) for h in plain]
    assert any(p >= 0 for p in calls)


def test_codes_follow_growth_and_center() -> None:
    """Codes appended row by row equal codes built at once, against the center
    estimated when the matrix last grew; Hamming distance counts differing bits."""
    rng = np.random.default_rng(3)
    m = rng.normal(size=(500, 100)).astype(np.float32) + 0.5
    whole = quantized.encode(m, 500)
    assert whole.bytes_per_row == 16  # 100 bits in two 64-bit words
    parts = quantized.empty_codes(100, 500, whole.center)
    for lo in range(0, 500, 7):
        quantized.write_codes(parts, m, lo, min(500, lo + 7))
    assert np.array_equal(parts.bits, whole.bits)
    # Growth past SETTLED_ROWS copies the codes, center and verdict.
    bigger = np.zeros((800, 100), dtype=np.float32)
    bigger[:500] = m
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(quantized, "SETTLED_ROWS", 400)
        kept = quantized.grown(whole, bigger, 500)
    assert kept.bits.shape == (2, 800) and np.array_equal(kept.bits[:, :500], whole.bits)
    assert kept.center is whole.center and kept.trusted == whole.trusted
    q = rng.normal(size=100).astype(np.float32)
    qcode = quantized.query_code(q, whole.center)
    unit = m / np.linalg.norm(m, axis=1, keepdims=True)
    qunit = q / np.linalg.norm(q)
    expected = ((unit > whole.center) != (qunit > whole.center)).sum(axis=1)
    assert np.array_equal(quantized.hamming(whole.bits, qcode), expected)


async def test_non_unit_dot_vectors_use_plain_path(
    data: tuple[np.ndarray, np.ndarray], calls: list[int]
) -> None:
    """DOT ranking with vectors of different norms is not the angle the codes
    approximate: the plain scan runs."""
    matrix, queries = data
    scaled = matrix * np.linspace(0.5, 2.0, ROWS, dtype=np.float32)[:, None]
    store = await _store(scaled, DistanceMetric.DOT)
    q = queries[0]
    hits = await store.search_vector(NAME, q, 10, Scope())
    truth = np.argsort(-(scaled @ q))[:10]
    assert [_row(h) for h in hits] == truth.tolist()
    assert calls == []


async def test_unstructured_data_fails_calibration(calls: list[int]) -> None:
    """Random unit vectors have no neighbourhoods the codes could find (a pool of 1%
    holds ~60% of the true top 10): calibration rejects the codes, every search is
    the plain scan, and the results are the exact top 10."""
    rng = np.random.default_rng(5)
    matrix = rng.normal(size=(ROWS, DIM)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    assert not quantized.encode(matrix, ROWS).trusted
    store = await _store(matrix)
    q = matrix[123] + 0.1 * rng.normal(size=DIM).astype(np.float32)
    hits = await store.search_vector(NAME, q, 10, Scope())
    scores = (matrix @ q) / np.linalg.norm(q)
    assert [_row(h) for h in hits] == np.argsort(-scores)[:10].tolist()
    assert calls == [-1]  # the pass was asked and declined


def test_clustered_data_passes_calibration(data: tuple[np.ndarray, np.ndarray]) -> None:
    matrix, _ = data
    assert quantized.encode(matrix, ROWS).trusted
    assert quantized.calibrate(matrix, quantized.encode(matrix, ROWS).bits, ROWS) >= 0.98
