"""RM3 pseudo-relevance feedback (domain.feedback): the relevance model over the
feedback chunks' analyzed terms, its interpolation with the query, and the settings'
validation (domain and request)."""

from __future__ import annotations

import pytest

from groundwire.domain.analysis import ENGLISH
from groundwire.domain.errors import GroundwireError
from groundwire.domain.feedback import expand, relevance_model
from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import ChunkHit, FeedbackSettings, LexicalQuery
from groundwire.domain.scores import Score, ScoreMetric
from groundwire.retrieval.requests import FeedbackInput, build_feedback


def hit(doc: str, text: str, score: float) -> ChunkHit:
    return ChunkHit(doc, "c1", text, 0, len(text), "", "", {}, Score.of(ScoreMetric.BM25, score))


def test_term_weights_are_the_query_term_counts_unless_set() -> None:
    q = parse_lexical("wing wing flutter")
    assert q.term_weights() == {"wing": 2.0, "flutter": 1.0}
    weighted = LexicalQuery("x", ("a", "b"), (), weights=(("a", 0.25), ("b", 3.0)))
    assert weighted.term_weights() == {"a": 0.25, "b": 3.0}


def test_relevance_model_weighs_chunks_by_score_and_terms_by_frequency() -> None:
    q = parse_lexical("wing")
    # p(d|q) = 3/4 and 1/4; p(w|d) = tf / |d|.
    feedback = [hit("a", "wing wing flutter flutter", 3.0), hit("b", "wing shock", 1.0)]
    rm = relevance_model(q, feedback, terms=10)
    assert rm == pytest.approx(
        {"wing": 0.75 * 0.5 + 0.25 * 0.5, "flutter": 0.75 * 0.5, "shock": 0.25 * 0.5}
    )
    assert sum(rm.values()) == pytest.approx(1.0)


def test_relevance_model_keeps_the_most_probable_terms_renormalized() -> None:
    q = parse_lexical("wing")
    rm = relevance_model(q, [hit("a", "wing wing wing flutter flutter shock", 1.0)], terms=2)
    assert rm == pytest.approx({"wing": 0.6, "flutter": 0.4})
    # Ties go to the smaller term, so the cut is deterministic.
    assert list(relevance_model(q, [hit("a", "d c b a", 1.0)], terms=2)) == ["a", "b"]


def test_relevance_model_uses_the_index_analyzer() -> None:
    q = parse_lexical("wings", analyzer=ENGLISH)
    rm = relevance_model(q, [hit("a", "The wings of the aircraft", 1.0)], terms=10)
    # Stemmed, stop words gone: only terms the index can hold.
    assert set(rm) == {"wing", "aircraft"}


def test_all_zero_scores_weigh_the_chunks_equally() -> None:
    q = parse_lexical("wing")
    rm = relevance_model(q, [hit("a", "x", 0.0), hit("b", "y", 0.0)], terms=10)
    assert rm == pytest.approx({"x": 0.5, "y": 0.5})


def test_expansion_interpolates_the_query_and_the_relevance_model() -> None:
    q = parse_lexical("wing flutter")
    feedback = [hit("a", "wing shock", 1.0)]
    out = expand(q, feedback, FeedbackSettings(documents=10, terms=10, original_weight=0.5))
    # p(w|q) = 1/2 each; rm = {wing: 1/2, shock: 1/2}; scaled by |q| = 2.
    assert out.terms == ("wing", "flutter", "shock")
    assert out.term_weights() == pytest.approx({"wing": 1.0, "flutter": 0.5, "shock": 0.5})
    assert out.phrases == q.phrases and out.analyzer is q.analyzer


def test_original_weight_one_is_the_query_as_written() -> None:
    q = parse_lexical('wing wing "flutter speed"')
    out = expand(q, [hit("a", "shock wave", 2.0)], FeedbackSettings(original_weight=1.0))
    assert out.terms == ("wing", "flutter", "speed")
    assert out.term_weights() == pytest.approx(q.term_weights())
    assert out.phrases == (("flutter", "speed"),)


def test_original_weight_zero_ranks_with_the_relevance_model_only() -> None:
    q = parse_lexical("wing")
    out = expand(q, [hit("a", "shock wave", 1.0)], FeedbackSettings(original_weight=0.0))
    assert out.term_weights() == pytest.approx({"shock": 0.5, "wave": 0.5})


def test_only_the_first_documents_are_read() -> None:
    q = parse_lexical("wing")
    feedback = [hit("a", "wing shock", 1.0), hit("b", "wing delta", 1.0)]
    out = expand(q, feedback, FeedbackSettings(documents=1))
    assert "delta" not in out.terms and "shock" in out.terms


def test_nothing_to_expand_returns_the_query() -> None:
    q = parse_lexical("wing")
    assert expand(q, [], FeedbackSettings()) is q
    empty = parse_lexical("the of", analyzer=ENGLISH)
    assert expand(empty, [hit("a", "wing", 1.0)], FeedbackSettings()) is empty


@pytest.mark.parametrize(
    "kwargs",
    [{"documents": 0}, {"terms": 101}, {"original_weight": 1.5}, {"original_weight": float("nan")}],
)
def test_settings_are_bounded(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        FeedbackSettings(**kwargs)  # type: ignore[arg-type]


def test_request_defaults_are_anserinis() -> None:
    assert build_feedback(FeedbackInput(), "query.lexical_feedback") == FeedbackSettings(
        10, 10, 0.5
    )


@pytest.mark.parametrize(
    ("given", "field"),
    [
        (FeedbackInput(documents=0), "query.lexical_feedback.documents"),
        (FeedbackInput(documents=101), "query.lexical_feedback.documents"),
        (FeedbackInput(terms=0), "query.lexical_feedback.terms"),
        (FeedbackInput(original_weight=-0.1), "query.lexical_feedback.original_query_weight"),
        (
            FeedbackInput(original_weight=float("inf")),
            "query.lexical_feedback.original_query_weight",
        ),
    ],
)
def test_request_names_the_offending_field(given: FeedbackInput, field: str) -> None:
    with pytest.raises(GroundwireError) as info:
        build_feedback(given, "query.lexical_feedback")
    assert info.value.reason == "FIELD_OUT_OF_RANGE"
    assert [v.field for v in info.value.violations] == [field]
