"""The memory store's compiled BM25 top k (stores/memory/_bm25.c) answers what
its numpy path answers: the same rows, the same sums bit for bit, ties included."""

from __future__ import annotations

import numpy as np
import pytest

from groundwire.domain import bm25
from groundwire.stores.memory import search
from groundwire.stores.memory.search import Scoped, _Term, top_rows

try:
    from groundwire.stores.memory import _bm25 as compiled
except ImportError:  # built without a C compiler
    compiled = None  # type: ignore[assignment]

# The comparisons need the compiled code; its absence fails the test below instead.
needs_compiled = pytest.mark.skipif(compiled is None, reason="built without a C compiler")


def test_the_compiled_scorer_is_built() -> None:
    """`make setup` builds it (setup.py); a missing one would silently cost every
    lexical query of the memory store the numpy path's ~30 calls."""
    assert compiled is not None


def numpy_top(
    entries: list[_Term], weights: list[float], scoped: Scoped, k: int
) -> tuple[list[int], list[float]]:
    tenant_rows = scoped.tenant_rows
    dense = np.zeros(len(tenant_rows))
    held = np.zeros(len(tenant_rows), dtype=bool)
    for e, w in zip(entries, weights, strict=True):
        dense[e.positions] += e.contributions if w == 1.0 else w * e.contributions
        held[e.positions] = True
    positions = np.flatnonzero(held)
    matched = tenant_rows[positions]
    candidates = np.flatnonzero(scoped.admits(matched))
    top = top_rows(dense[positions], candidates, k)
    return matched[top].tolist(), dense[positions][top].tolist()


def case(seed: int) -> tuple[list[_Term], list[float], Scoped]:
    rng = np.random.default_rng(seed)
    index_rows = int(rng.integers(20, 3000))
    tenant_rows = np.sort(rng.choice(index_rows, int(rng.integers(10, index_rows)), replace=False))
    n = int(rng.integers(index_rows // 2, index_rows + 1))
    live = rng.random(index_rows + 5) > (0.2 if seed % 2 else 0.0)
    entries = []
    for _ in range(int(rng.integers(1, 8))):
        size = int(rng.integers(1, len(tenant_rows) + 1))
        positions = np.sort(rng.choice(len(tenant_rows), size, replace=False)).astype(np.int64)
        positions = positions[tenant_rows[positions] < n]
        tf = rng.integers(1, 4, len(positions)).astype(np.float64)
        dl = rng.integers(5, 50, len(positions)).astype(np.float64)
        # Few distinct values: many exact ties at the k-th.
        contributions = bm25.term_score(1.5 if seed % 3 else 2.0, tf, dl, 20.0)
        entries.append(_Term(positions, positions, positions, contributions, len(positions)))
    weights = [float(w) for w in rng.choice([1.0, 1.0, 0.5, 1 / 3, 0.0], len(entries))]
    scoped = Scoped(n, live, tenant_rows.astype(np.int64), [])
    return entries, weights, scoped


@needs_compiled
@pytest.mark.parametrize("seed", range(60))
@pytest.mark.parametrize("k", [1, 10, 100])
def test_same_rows_and_bit_identical_sums(seed: int, k: int) -> None:
    entries, weights, scoped = case(seed)
    want_rows, want = numpy_top(entries, weights, scoped, k)
    got_rows, got = compiled.top_k(
        tuple(e.positions for e in entries),
        tuple(search._weighted(e, w) for e, w in zip(entries, weights, strict=True)),
        scoped.tenant_rows,
        scoped.live,
        scoped.n,
        k,
    )
    # Best first, equal sums by position (the store then orders them by document).
    order = sorted(range(len(want)), key=lambda i: (-want[i], want_rows[i]))
    assert got_rows == [want_rows[i] for i in order]
    assert np.array(got).tobytes() == np.array([want[i] for i in order]).tobytes()


@needs_compiled
def test_bad_arguments_are_refused_not_read() -> None:
    rows = np.arange(10, dtype=np.int64)
    live = np.ones(10, dtype=bool)
    c = np.ones(3)
    with pytest.raises(ValueError, match="outside the tenant"):
        compiled.top_k((np.array([0, 5, 10]),), (c,), rows, live, 10, 5)
    with pytest.raises(ValueError, match="outside the tenant"):
        compiled.top_k((np.array([-1, 5, 9]),), (c,), rows, live, 10, 5)
    with pytest.raises(ValueError, match="outside the live"):
        compiled.top_k((np.array([1]),), (np.ones(1),), rows, live[:1], 10, 5)
    with pytest.raises(ValueError, match="differ in length"):
        compiled.top_k((np.array([1, 2]),), (c,), rows, live, 10, 5)
    with pytest.raises(ValueError, match="one contributions array"):
        compiled.top_k((np.array([1]),), (), rows, live, 10, 5)
    with pytest.raises(TypeError):
        compiled.top_k((np.array([1], dtype=np.int32),), (np.ones(1),), rows, live, 10, 5)
    with pytest.raises(TypeError):
        compiled.top_k((np.array([1]),), (np.ones(1, dtype=np.float32),), rows, live, 10, 5)
    with pytest.raises(ValueError, match="k must be"):
        compiled.top_k((np.array([1]),), (np.ones(1),), rows, live, 10, 0)
    assert compiled.top_k((), (), rows, live, 10, 3) == ([], [])


@needs_compiled
def test_a_refused_call_leaves_no_sums_behind() -> None:
    """The scratch is per thread and kept between calls: a call refused midway
    (positions 0 and 5 added before 10 is refused) must not leave them in it."""
    rows = np.arange(10, dtype=np.int64)
    live = np.ones(10, dtype=bool)
    with pytest.raises(ValueError):
        compiled.top_k((np.array([0, 5, 10]),), (np.full(3, 7.0),), rows, live, 10, 5)
    assert compiled.top_k((np.array([0, 5]),), (np.array([1.0, 2.0]),), rows, live, 10, 5) == (
        [5, 0],
        [2.0, 1.0],
    )


@needs_compiled
def test_a_larger_tenant_grows_the_scratch() -> None:
    for size in (10, 100_000, 50):
        rows = np.arange(size, dtype=np.int64)
        live = np.ones(size, dtype=bool)
        got = compiled.top_k((np.array([size - 1]),), (np.array([3.0]),), rows, live, size, 1)
        assert got == ([size - 1], [3.0])


@needs_compiled
async def test_the_store_answers_alike_with_and_without_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whole memory-store searches (deleted documents, repeated and weighted query
    terms, ties, k below and above the matches): the compiled path and the numpy
    path give the same hits, scores and order."""
    from groundwire.domain.query import parse_lexical
    from groundwire.domain.retrieval import Scope
    from groundwire.stores.base import DocumentKey
    from groundwire.stores.memory import MemoryStore
    from tests.stores.contract_support import doc, publish, spec

    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(40)]
    docs = [
        doc(
            f"d{i:03d}",
            [" ".join(rng.choice(words, int(rng.integers(3, 30)))) for _ in range(3)],
            None,
        )
        for i in range(120)
    ]
    store = MemoryStore()
    await publish(store, "kb", docs, spec("kb", dims=None))
    # A second version deletes two documents; a third is staged, not published
    # (its rows exist but no search may read them).
    v = await store.begin_version("kb")
    await store.stage_deletions("kb", v, [DocumentKey("", "d005"), DocumentKey("", "d017")])
    await store.publish_version("kb", v, spec("kb", dims=None))
    staged = await store.begin_version("kb")
    await store.stage_documents("kb", staged, [doc("new", [" ".join(words)], None)])
    queries = [" ".join(rng.choice(words, int(rng.integers(1, 6)))) for _ in range(60)]

    async def answers() -> list[list[tuple[str, str, float]]]:
        out = []
        for q in queries:
            for k in (1, 5, 500):
                result = await store.search_lexical("kb", parse_lexical(q), k, Scope())
                out.append([(h.document_id, h.chunk_id, h.score.raw) for h in result.hits])
        return out

    with_compiled = await answers()
    monkeypatch.setattr(search, "_compiled", None)
    assert await answers() == with_compiled
    assert any(len(a) > 1 for a in with_compiled)
    found = {d for a in with_compiled for d, _, _ in a}
    assert not found & {"d005", "d017", "new"}
