"""Reciprocal rank fusion (seed 000: 1 / (60 + rank), one-based, merged by
(document id, chunk id), leg scores kept and never combined)."""

from __future__ import annotations

import pytest

from groundwire.domain.fusion import fuse, rrf_contribution, single_leg
from groundwire.domain.retrieval import ChunkHit, FusionSettings, Leg
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
