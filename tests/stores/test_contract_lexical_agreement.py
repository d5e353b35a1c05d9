"""The store contract, lexical agreement: both stores return the same ordered
(document_id, chunk_id) lists with the same scores (bench/bench_lexical_agreement.py
measures it on SciFact). Equal BM25 scores break by document id, then chunk id
(ordinal, domain.ordering), whatever the insertion order; and a term that is also the
stemmed form of a stop word ("a" in HNF4A, "as" in mRNAs) has the document frequency
of the chunks holding it as a term, not of those where it is only a phrase word."""

from __future__ import annotations

import random

import pytest

from groundwire.domain.analysis import ENGLISH
from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import Scope
from groundwire.stores.base import IndexSpec, Store
from tests.stores.contract_support import bm25_approx, doc, publish
from tests.stores.test_contract_lexical import _reference_bm25

# Ids whose ordinal order differs from a natural or case-folding one: upper case
# sorts before lower case, "-" before "_" before letters, "10" before "2".
_TIED_IDS = ["d2", "d10", "D3", "a_b", "a-b", "b", "B", "é", "e"]


async def test_equal_scores_break_by_document_then_chunk_id(store: Store, index_name: str) -> None:
    """Every chunk holds the same text, so every score ties: the order is the ordinal
    (document_id, chunk_id) order on every store, for a top k cutting through the
    tie, whatever order the chunks were staged and published in."""
    s = IndexSpec(index_name, None, None, chunking="chars:size=800")
    text = "zebra crossing"
    ids = list(_TIED_IDS)
    random.Random(7).shuffle(ids)
    first, second = ids[: len(ids) // 2], ids[len(ids) // 2 :]
    # Two publishes, each in a shuffled order, three identical chunks per document.
    await publish(store, index_name, [doc(d, [text] * 3, None) for d in first], s)
    await publish(store, index_name, [doc(d, [text] * 3, None) for d in reversed(second)], s)
    expected = sorted((d, f"c{i:05d}") for d in _TIED_IDS for i in range(3))
    for k in (1, 4, 10, len(expected), 100):
        hits = (await store.search_lexical(index_name, parse_lexical("zebra"), k, Scope())).hits
        assert [(h.document_id, h.chunk_id) for h in hits] == expected[:k]
        assert len({h.score.raw for h in hits}) == 1


# "a" and "as" are stop words (phrase words, never terms, in prose) and index terms
# when they are pieces of an identifier (HNF4A, mRNAs).
_STOP_FORM_TEXTS = {
    "hnf": "HNF4A variants in diabetes",
    "mrna": "mRNAs decay in a cell",
    "prose1": "a cat sat as a dog ran",
    "prose2": "as long as a bird flew",
    "prose3": "a variant of diabetes as seen",
    "other": "unrelated words only",
}


@pytest.mark.parametrize("query", ["HNF4A", "mRNAs", "HNF4A mRNAs diabetes", "variants"])
async def test_stop_word_forms_count_only_where_they_are_terms(
    store: Store, index_name: str, query: str
) -> None:
    s = IndexSpec(index_name, None, None, chunking="chars:size=800", analyzer=ENGLISH)
    docs = [doc(k, [v], None) for k, v in _STOP_FORM_TEXTS.items()]
    await publish(store, index_name, docs, s)
    parsed = parse_lexical(query, analyzer=ENGLISH)
    result = await store.search_lexical(index_name, parsed, 10, Scope())
    expected = _reference_bm25(ENGLISH, _STOP_FORM_TEXTS, query)
    assert {h.document_id: h.score.raw for h in result.hits} == bm25_approx(store, expected, 1e-12)
    ranked = sorted(expected, key=lambda d: (-expected[d], d))
    assert [h.document_id for h in result.hits] == ranked
