"""The BM25 rules both stores share."""

from __future__ import annotations

import math

import numpy as np

from groundwire.domain import bm25


def test_idf_is_lucenes_non_negative_form() -> None:
    assert bm25.idf(10, 10) > 0
    assert bm25.idf(10, 1) == math.log(1 + 9.5 / 1.5)


def test_term_score_is_below_its_bound_and_vectorizes() -> None:
    tf = np.array([1.0, 5.0, 1e9])
    dl = np.array([1.0, 100.0, 3.0])
    scores = bm25.term_score(2.0, tf, dl, 10.0)
    assert (scores < bm25.upper_bound(2.0)).all()
    assert scores[0] == bm25.term_score(2.0, 1.0, 1.0, 10.0)


def test_select_terms_keeps_the_rarest_in_query_order() -> None:
    df = {"a": 50, "b": 1, "c": 7, "d": 7, "e": 0}
    kept, pruned = bm25.select_terms(["a", "b", "c", "a", "d", "e", "zz"], df, 2)
    assert (kept, pruned) == (["b", "c"], 2)  # c before d: ties go to the earlier term
    # Terms the scope does not hold are neither scored nor counted as pruned.
    assert bm25.select_terms(["e", "zz", "b"], df, 2) == (["b"], 0)


def test_average_length_of_an_empty_scope_is_one() -> None:
    assert bm25.average_length(0, 0) == 1.0
    assert bm25.average_length(30, 10) == 3.0
