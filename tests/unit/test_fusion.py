"""Reciprocal rank fusion (seed 000: 1 / (60 + rank), one-based, merged by
(document id, chunk id), leg scores kept and never combined), and the min-max
alternative (weighted mean of each leg's min-max normalized scores)."""

from __future__ import annotations

import math

import pytest

from groundwire.domain.fusion import fuse, rrf_contribution, single_leg
from groundwire.domain.retrieval import (
    ChunkHit,
    FusionMethod,
    FusionSettings,
    Leg,
    LegRank,
    LegResults,
    RankedResult,
    RetrievalDiagnostics,
    RetrievalMode,
    RetrievalOutcome,
    ScoredHits,
)
from groundwire.domain.scores import Score, ScoreMetric


def hit(doc: str, chunk: str, metric: ScoreMetric, raw: float) -> ChunkHit:
    return ChunkHit(doc, chunk, "text", 0, 4, "", "", {}, Score.of(metric, raw))


def test_contribution_is_one_over_k_plus_one_based_rank() -> None:
    assert rrf_contribution(1, 60) == pytest.approx(1 / 61)
    assert rrf_contribution(3, 60) == pytest.approx(1 / 63)
    assert rrf_contribution(2, 10, 0.5) == pytest.approx(0.5 / 12)
    with pytest.raises(ValueError):
        rrf_contribution(0, 60)


def test_merge_by_document_and_chunk_and_keep_leg_scores() -> None:
    sem = [
        hit("a", "c1", ScoreMetric.COSINE_SIMILARITY, 0.9),
        hit("b", "c1", ScoreMetric.COSINE_SIMILARITY, 0.8),
    ]
    lex = [hit("b", "c1", ScoreMetric.BM25, 12.0), hit("a", "c2", ScoreMetric.BM25, 7.0)]
    out = fuse([(Leg.SEMANTIC, sem), (Leg.LEXICAL, lex)], FusionSettings(k=60), 10)
    by_key = {(r.hit.document_id, r.hit.chunk_id): r for r in out}
    b = by_key[("b", "c1")]
    assert b.score.raw == pytest.approx(1 / 62 + 1 / 61)
    assert b.score.metric is ScoreMetric.RECIPROCAL_RANK_FUSION and b.score.relevance is None
    assert [(p.leg, p.rank, p.score.metric, p.score.raw) for p in b.provenance] == [
        (Leg.SEMANTIC, 2, ScoreMetric.COSINE_SIMILARITY, 0.8),
        (Leg.LEXICAL, 1, ScoreMetric.BM25, 12.0),
    ]
    assert by_key[("a", "c1")].score.raw == pytest.approx(1 / 61)
    assert by_key[("a", "c2")].score.raw == pytest.approx(1 / 62)
    assert [r.rank for r in out] == [1, 2, 3]
    assert out[0].hit.key == ("b", "c1")


def test_ties_break_by_document_then_chunk() -> None:
    sem = [hit("z", "c1", ScoreMetric.COSINE_SIMILARITY, 0.9)]
    lex = [hit("a", "c9", ScoreMetric.BM25, 3.0)]
    out = fuse([(Leg.SEMANTIC, sem), (Leg.LEXICAL, lex)], FusionSettings(k=60), 10)
    assert [r.hit.document_id for r in out] == ["a", "z"]


def test_weights_and_k() -> None:
    sem = [hit("a", "c", ScoreMetric.COSINE_SIMILARITY, 0.9)]
    lex = [hit("b", "c", ScoreMetric.BM25, 3.0)]
    out = fuse(
        [(Leg.SEMANTIC, sem), (Leg.LEXICAL, lex)],
        FusionSettings(k=1, semantic_weight=1.0, lexical_weight=3.0),
        10,
    )
    assert out[0].hit.document_id == "b"
    assert out[0].score.raw == pytest.approx(3 / 2)
    assert out[1].score.raw == pytest.approx(1 / 2)


def test_top_k_truncates_after_fusion() -> None:
    sem = [hit(f"d{i}", "c", ScoreMetric.COSINE_SIMILARITY, 1 - i / 10) for i in range(5)]
    assert len(fuse([(Leg.SEMANTIC, sem)], FusionSettings(k=60), 2)) == 2


def test_single_leg_keeps_leg_score() -> None:
    lex = [hit("a", "c", ScoreMetric.BM25, 4.0), hit("b", "c", ScoreMetric.BM25, 2.0)]
    out = single_leg(Leg.LEXICAL, lex, 1)
    assert len(out) == 1 and out[0].score.raw == 4.0 and out[0].provenance[0].rank == 1


def test_single_leg_results_are_the_tuple_they_stand_for() -> None:
    """LegResults builds each result when read: the same values, in the same order,
    as the tuple of RankedResults it stands for, and it behaves as that tuple."""
    lex = [hit(d, "c", ScoreMetric.BM25, s) for d, s in (("a", 4.0), ("b", 2.0), ("c", 1.0))]
    out = single_leg(Leg.LEXICAL, lex, 10)
    want = tuple(
        RankedResult(h, i, h.score, (LegRank(Leg.LEXICAL, i, h.score),))
        for i, h in enumerate(lex, start=1)
    )
    assert isinstance(out, LegResults)
    assert tuple(out) == want and list(out) == list(want)
    assert out == want and want == out
    # Hashed as the tuple: here not at all (a hit's metadata is a dict).
    for value in (want, out):
        with pytest.raises(TypeError, match="unhashable"):
            hash(value)
    assert out == single_leg(Leg.LEXICAL, lex, 10)
    assert out != single_leg(Leg.SEMANTIC, lex, 10) and out != want[:2]
    assert out != list(want)  # as a tuple is not equal to a list
    assert len(out) == 3 and out[0] == want[0] and out[-1] == want[2] and out[-3] == want[0]
    assert out[1:] == want[1:] and out[::-1] == want[::-1] and out[5:] == ()
    for bad in (3, -4):
        with pytest.raises(IndexError):
            out[bad]
    assert want[1] in out and out.index(want[2]) == 2 and out.count(want[0]) == 1
    # Immutable: the hits given are copied.
    lex.append(hit("d", "c", ScoreMetric.BM25, 0.5))
    assert len(out) == 3
    assert single_leg(Leg.LEXICAL, [], 10) == ()
    # An outcome holding it compares with one holding the tuple.
    diag = RetrievalDiagnostics(RetrievalMode.LEXICAL, 10)
    assert RetrievalOutcome(out, diag) == RetrievalOutcome(want, diag)


def test_scored_hits_are_the_hits_they_stand_for() -> None:
    """ScoredHits builds each hit from a record and its raw score when read: the
    hits Score.of would score, and it behaves as the list of them."""
    records = [hit(d, "c", ScoreMetric.BM25, 0.0) for d in "abc"]  # (a hit has a record's fields)
    raws = [4.0, 2.0, 2.0]
    out = ScoredHits(records, raws, ScoreMetric.BM25)
    want = [
        ChunkHit(r.document_id, r.chunk_id, r.content, r.start, r.end, r.title, r.section,
                 r.metadata, Score.of(ScoreMetric.BM25, raw))
        for r, raw in zip(records, raws, strict=True)
    ]  # fmt: skip
    assert list(out) == want and out == want and want == out and out == tuple(want)
    assert len(out) == 3 and out[0] == want[0] and out[-1] == want[2]
    assert isinstance(out[1:], ScoredHits) and out[1:] == want[1:] and out[5:] == []
    assert out == ScoredHits(records, raws, ScoreMetric.BM25)
    assert out != ScoredHits(records, [4.0, 2.0, 1.0], ScoreMetric.BM25)
    assert out != ScoredHits(records, raws, ScoreMetric.DOT_PRODUCT) and out != want[:2]
    with pytest.raises(IndexError):
        out[3]
    with pytest.raises(TypeError, match="unhashable"):
        hash(out)
    with pytest.raises(ValueError, match="one score a record"):
        ScoredHits(records, raws[:2], ScoreMetric.BM25)
    # A metric whose scores have a relevance needs Score.of's per value: plain hits.
    with pytest.raises(ValueError, match="relevance"):
        ScoredHits(records, raws, ScoreMetric.COSINE_SIMILARITY)
    # As one leg's results: kept, and equal to the results of the hits themselves.
    ranked = single_leg(Leg.LEXICAL, out, 2)
    assert isinstance(ranked.hits, ScoredHits) and len(ranked) == 2
    assert ranked == single_leg(Leg.LEXICAL, want, 2) == tuple(single_leg(Leg.LEXICAL, want, 2))


# -- min-max fusion (FusionMethod.MIN_MAX) ------------------------------------------


def test_min_max_normalizes_each_leg_in_its_own_direction() -> None:
    from groundwire.domain.fusion import min_max_normalized

    bm25 = [hit(d, "c", ScoreMetric.BM25, s) for d, s in (("a", 9.0), ("b", 5.0), ("c", 1.0))]
    assert min_max_normalized(bm25) == pytest.approx([1.0, 0.5, 0.0])
    # A distance's smallest value is the best.
    dist = [hit(d, "c", ScoreMetric.COSINE_DISTANCE, s) for d, s in (("a", 0.2), ("b", 0.6))]
    assert min_max_normalized(dist) == pytest.approx([1.0, 0.0])
    same = [hit(d, "c", ScoreMetric.BM25, 2.0) for d in "ab"]
    assert min_max_normalized(same) == [1.0, 1.0]
    broken = [hit("a", "c", ScoreMetric.BM25, 3.0), hit("b", "c", ScoreMetric.BM25, math.nan)]
    assert min_max_normalized(broken) == [1.0, 0.0]
    assert min_max_normalized([]) == []


def test_min_max_is_the_weighted_mean_of_normalized_leg_scores() -> None:
    sem = [
        hit("a", "c1", ScoreMetric.COSINE_SIMILARITY, 0.9),
        hit("b", "c1", ScoreMetric.COSINE_SIMILARITY, 0.7),
        hit("c", "c1", ScoreMetric.COSINE_SIMILARITY, 0.5),
    ]
    lex = [hit("c", "c1", ScoreMetric.BM25, 12.0), hit("b", "c1", ScoreMetric.BM25, 2.0)]
    settings = FusionSettings(
        k=60, semantic_weight=1.0, lexical_weight=3.0, method=FusionMethod.MIN_MAX
    )
    out = fuse([(Leg.SEMANTIC, sem), (Leg.LEXICAL, lex)], settings, 10)
    score = {r.hit.document_id: r.score.raw for r in out}
    # semantic a 1, b 0.5, c 0; lexical c 1, b 0 (absent a: 0); weights 1/4 and 3/4.
    assert score == pytest.approx({"a": 0.25, "b": 0.125, "c": 0.75})
    assert [r.hit.document_id for r in out] == ["c", "a", "b"]
    top = out[0]
    assert top.score.metric is ScoreMetric.MIN_MAX_FUSION and top.score.relevance is None
    assert [(p.leg, p.rank, p.score.raw) for p in top.provenance] == [
        (Leg.SEMANTIC, 3, 0.5),
        (Leg.LEXICAL, 1, 12.0),
    ]


def test_min_max_scores_differ_from_rrf_where_score_gaps_matter() -> None:
    # The lexical leg's first result is far ahead of its second; RRF only sees ranks.
    sem = [
        hit("a", "c", ScoreMetric.COSINE_SIMILARITY, 0.80),
        hit("b", "c", ScoreMetric.COSINE_SIMILARITY, 0.79),
        hit("z", "c", ScoreMetric.COSINE_SIMILARITY, 0.10),
    ]
    lex = [
        hit("b", "c", ScoreMetric.BM25, 30.0),
        hit("a", "c", ScoreMetric.BM25, 2.0),
        hit("y", "c", ScoreMetric.BM25, 1.0),
    ]
    legs = [(Leg.SEMANTIC, sem), (Leg.LEXICAL, lex)]
    rrf = fuse(legs, FusionSettings(k=20), 2)
    mm = fuse(legs, FusionSettings(method=FusionMethod.MIN_MAX), 2)
    # RRF: a and b tie on 1/21 + 1/22, broken by document id; min-max: b clearly first.
    assert [r.hit.document_id for r in rrf] == ["a", "b"]
    assert [r.hit.document_id for r in mm] == ["b", "a"]
