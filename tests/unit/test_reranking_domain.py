"""Reranking domain rules, one test per rule (seed 001 "Reranking", seed 000
"Optional reranking contract")."""

from __future__ import annotations

import dataclasses
import math

import pytest

from groundwire.domain.errors import ErrorKind
from groundwire.domain.reranking import (
    Answerability,
    CandidateJudgement,
    FailurePolicy,
    RerankCandidate,
    RerankedCandidate,
    RerankerError,
    RerankerOutput,
    RerankFailureCode,
    RerankingMetadata,
    RerankOutcome,
    RerankResult,
    aggregate_answerability,
    apply_order,
    keep_order,
    order_by_relevance,
    reranker_failure,
    split_bound,
    threshold_answerability,
    validate_output,
)
from groundwire.domain.retrieval import ChunkHit, Leg, LegRank, RankedResult
from groundwire.domain.scores import Score, ScoreMetric
from groundwire.providers.rerankers.base import (
    failure_for_status,
    output_from_indexed,
    output_from_scores,
)

A = Answerability.ANSWERABLE
N = Answerability.NOT_ANSWERABLE
U = Answerability.UNKNOWN

SECRET = "the patient's diagnosis is confidential"


def cands(n: int = 3) -> list[RerankCandidate]:
    return [RerankCandidate(f"doc-{i}", f"c{i}", f"{SECRET} {i}", i) for i in range(1, n + 1)]


def judge(c: RerankCandidate, relevance: float, answer: Answerability = A) -> CandidateJudgement:
    return CandidateJudgement(c.document_id, c.chunk_id, relevance, answer)


def output(*items: CandidateJudgement, aggregate: Answerability = A) -> RerankerOutput:
    return RerankerOutput(tuple(items), aggregate)


def assert_invalid(candidates: list[RerankCandidate], out: RerankerOutput) -> RerankerError:
    with pytest.raises(RerankerError) as info:
        validate_output(candidates, out)
    err = info.value
    assert err.failure_code is RerankFailureCode.INVALID_RESPONSE
    assert err.kind is ErrorKind.UNAVAILABLE and err.reason == "RERANKER_FAILED"
    # Content-free: no query, content or identity in the message.
    for c in candidates:
        assert c.document_id not in err.message and SECRET not in err.message
    return err


# --- validation: every requested identity exactly once, finite relevance in [0, 1]


def test_response_naming_every_candidate_once_is_accepted() -> None:
    cs = cands()
    verdicts = validate_output(cs, output(judge(cs[2], 0.1), judge(cs[0], 0.9), judge(cs[1], 0.5)))
    assert set(verdicts) == {c.key for c in cs}
    assert verdicts[cs[0].key].relevance == 0.9


def test_unknown_identity_invalidates_the_whole_response() -> None:
    cs = cands()
    stranger = CandidateJudgement("doc-9", "c9", 0.5, A)
    assert_invalid(cs, output(judge(cs[0], 0.9), judge(cs[1], 0.8), judge(cs[2], 0.7), stranger))


def test_unknown_chunk_of_a_known_document_invalidates() -> None:
    cs = cands()
    wrong_chunk = CandidateJudgement(cs[2].document_id, "c-other", 0.5, A)
    assert_invalid(cs, output(judge(cs[0], 0.9), judge(cs[1], 0.8), wrong_chunk))


def test_duplicate_identity_invalidates_the_whole_response() -> None:
    cs = cands()
    assert_invalid(
        cs, output(judge(cs[0], 0.9), judge(cs[1], 0.8), judge(cs[2], 0.7), judge(cs[0], 0.1))
    )


def test_missing_identity_invalidates_the_whole_response() -> None:
    cs = cands()
    err = assert_invalid(cs, output(judge(cs[0], 0.9), judge(cs[1], 0.8)))
    assert "1 of 3" in err.message


def test_empty_response_for_candidates_invalidates() -> None:
    assert_invalid(cands(), output())


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_relevance_invalidates_the_whole_response(value: float) -> None:
    cs = cands()
    assert_invalid(cs, output(judge(cs[0], 0.9), judge(cs[1], value), judge(cs[2], 0.7)))


@pytest.mark.parametrize("value", [-0.0001, 1.0001, -1.0, 2.0, 37.5])
def test_out_of_range_relevance_invalidates_the_whole_response(value: float) -> None:
    cs = cands()
    assert_invalid(cs, output(judge(cs[0], 0.9), judge(cs[1], value), judge(cs[2], 0.7)))


def test_relevance_range_is_inclusive() -> None:
    cs = cands(2)
    verdicts = validate_output(cs, output(judge(cs[0], 0.0), judge(cs[1], 1.0)))
    assert [verdicts[c.key].relevance for c in cs] == [0.0, 1.0]


@pytest.mark.parametrize("value", [True, "0.5", None])
def test_non_numeric_relevance_invalidates(value: object) -> None:
    cs = cands(2)
    bad = CandidateJudgement(cs[1].document_id, cs[1].chunk_id, value, A)  # type: ignore[arg-type]
    assert_invalid(cs, output(judge(cs[0], 0.5), bad))


def test_unknown_candidate_answerability_invalidates() -> None:
    cs = cands(2)
    bad = CandidateJudgement(cs[1].document_id, cs[1].chunk_id, 0.5, "ANSWERABLE")  # type: ignore[arg-type]
    assert_invalid(cs, output(judge(cs[0], 0.5), bad))


def test_unknown_aggregate_answerability_invalidates() -> None:
    cs = cands(1)
    assert_invalid(cs, RerankerOutput((judge(cs[0], 0.5),), None))  # type: ignore[arg-type]


# --- ordering: relevance descending; ties by original rank, then ordinal ids


def test_order_is_by_rerank_relevance_descending() -> None:
    cs = cands(4)
    verdicts = validate_output(
        cs, output(judge(cs[0], 0.2), judge(cs[1], 0.9), judge(cs[2], 0.5), judge(cs[3], 0.7))
    )
    ordered = order_by_relevance(cs, verdicts)
    assert [c.document_id for c in ordered] == ["doc-2", "doc-4", "doc-3", "doc-1"]
    assert [c.rerank_rank for c in ordered] == [1, 2, 3, 4]
    assert [c.original_rank for c in ordered] == [2, 4, 3, 1]
    assert [c.rerank_relevance for c in ordered] == [0.9, 0.7, 0.5, 0.2]


def test_equal_relevance_keeps_original_rank_order() -> None:
    cs = [
        RerankCandidate("z", "1", "t", 1),
        RerankCandidate("a", "1", "t", 2),
        RerankCandidate("m", "1", "t", 3),
    ]
    verdicts = validate_output(cs, output(*(judge(c, 0.5) for c in reversed(cs))))
    assert [c.document_id for c in order_by_relevance(cs, verdicts)] == ["z", "a", "m"]


def test_equal_relevance_and_rank_falls_back_to_ordinal_document_id() -> None:
    # Ordinal (code point) order: uppercase sorts before lowercase.
    cs = [
        RerankCandidate("b", "1", "t", 1),
        RerankCandidate("B", "1", "t", 1),
        RerankCandidate("a", "1", "t", 1),
    ]
    verdicts = validate_output(cs, output(*(judge(c, 0.5) for c in cs)))
    assert [c.document_id for c in order_by_relevance(cs, verdicts)] == ["B", "a", "b"]


def test_then_ordinal_chunk_id() -> None:
    cs = [
        RerankCandidate("d", "c10", "t", 1),
        RerankCandidate("d", "c2", "t", 1),
        RerankCandidate("d", "C3", "t", 1),
    ]
    verdicts = validate_output(cs, output(*(judge(c, 0.5) for c in cs)))
    assert [c.chunk_id for c in order_by_relevance(cs, verdicts)] == ["C3", "c10", "c2"]


def test_relevance_outranks_every_tie_breaker() -> None:
    cs = [RerankCandidate("a", "1", "t", 1), RerankCandidate("z", "9", "t", 99)]
    verdicts = validate_output(cs, output(judge(cs[0], 0.5), judge(cs[1], 0.5000001)))
    assert [c.document_id for c in order_by_relevance(cs, verdicts)] == ["z", "a"]


# --- answerability


def test_candidate_at_the_threshold_is_answerable() -> None:
    assert threshold_answerability(0.5, 0.5) is A
    assert threshold_answerability(0.4999, 0.5) is N
    assert threshold_answerability(1.0, 1.0) is A
    assert threshold_answerability(0.0, 0.0) is A


def test_aggregate_is_answerable_when_any_candidate_is() -> None:
    cs = cands(3)
    assert aggregate_answerability([judge(cs[0], 0.1, N), judge(cs[1], 0.9, A)]) is A
    assert aggregate_answerability([judge(cs[0], 0.1, U), judge(cs[1], 0.9, A)]) is A


def test_aggregate_is_not_answerable_when_every_candidate_was_judged_and_none_passes() -> None:
    cs = cands(2)
    assert aggregate_answerability([judge(cs[0], 0.1, N), judge(cs[1], 0.2, N)]) is N


def test_aggregate_is_unknown_without_judgements_or_with_unknowns_and_no_pass() -> None:
    cs = cands(2)
    assert aggregate_answerability([]) is U
    assert aggregate_answerability([judge(cs[0], 0.1, N), judge(cs[1], 0.2, U)]) is U


# --- bound, fallback order, identity-preserving reorder


def test_only_the_first_maximum_candidates_are_sent_and_the_rest_keep_order() -> None:
    cs = cands(7)
    sent, rest = split_bound(cs, 5)
    assert [c.original_rank for c in sent] == [1, 2, 3, 4, 5]
    assert [c.original_rank for c in rest] == [6, 7]
    assert split_bound(cs, 10) == (tuple(cs), ())
    with pytest.raises(ValueError):
        split_bound(cs, 0)


def test_fallback_order_is_the_exact_original_order_without_relevance() -> None:
    cs = [RerankCandidate(f"d{i}", "c", "t", rank) for i, rank in enumerate([3, 7, 8, 20])]
    kept = keep_order(cs)
    assert [(c.document_id, c.original_rank, c.rerank_rank) for c in kept] == [
        ("d0", 3, 1),
        ("d1", 7, 2),
        ("d2", 8, 3),
        ("d3", 20, 4),
    ]
    assert all(c.rerank_relevance is None and c.answerability is U for c in kept)


def _ranked(doc: str, rank: int) -> RankedResult:
    score = Score.of(ScoreMetric.COSINE_SIMILARITY, 0.25 * rank)
    hit = ChunkHit(doc, "c", "text", 0, 4, "", "", {}, score)
    return RankedResult(hit, rank, score, (LegRank(Leg.SEMANTIC, rank, score),))


def test_reordering_never_modifies_retrieval_scores_or_provenance() -> None:
    items = [_ranked("a", 1), _ranked("b", 2), _ranked("c", 3)]
    cs = [RerankCandidate(r.hit.document_id, r.hit.chunk_id, r.hit.content, r.rank) for r in items]
    verdicts = validate_output(cs, output(judge(cs[0], 0.1), judge(cs[1], 0.2), judge(cs[2], 0.9)))
    order = tuple(order_by_relevance(cs, verdicts))
    result = RerankResult(order, _metadata(order))

    reordered = apply_order(items, lambda r: r.hit.key, result)

    assert [r.hit.document_id for r in reordered] == ["c", "b", "a"]
    # The very same objects, with the same scores, ranks and provenance.
    assert all(any(r is i for i in items) for r in reordered)
    assert [r.rank for r in reordered] == [3, 2, 1]


def test_reordering_rejects_items_that_do_not_match_the_result() -> None:
    items = [_ranked("a", 1), _ranked("b", 2)]
    order = tuple(keep_order([RerankCandidate("a", "c", "t", 1)]))
    with pytest.raises(ValueError):
        apply_order(items, lambda r: r.hit.key, RerankResult(order, _metadata(order)))


def _metadata(order: tuple[RerankedCandidate, ...]) -> RerankingMetadata:
    return RerankingMetadata(
        requested=True,
        ran=True,
        candidate_count=len(order),
        duration_seconds=0.0,
        outcome=RerankOutcome.SUCCEEDED,
        failure_policy=FailurePolicy.USE_ORIGINAL_ORDER,
        answerability=A,
        timed_out=False,
        failure_code=None,
        candidates=order,
    )


# --- metadata allowlist and failure codes


def test_stage_metadata_is_exactly_the_seed_allowlist() -> None:
    assert [f.name for f in dataclasses.fields(RerankingMetadata)] == [
        "requested",
        "ran",
        "candidate_count",
        "duration_seconds",
        "outcome",
        "failure_policy",
        "answerability",
        "timed_out",
        "failure_code",
        "candidates",
    ]


def test_candidate_metadata_is_exactly_the_seed_allowlist() -> None:
    assert [f.name for f in dataclasses.fields(RerankedCandidate)] == [
        "document_id",
        "chunk_id",
        "original_rank",
        "rerank_rank",
        "rerank_relevance",
        "answerability",
    ]


def test_only_non_empty_requested_attempts_are_eligible() -> None:
    order = tuple(keep_order(cands(2)))
    assert _metadata(order).eligible
    assert not dataclasses.replace(_metadata(()), candidate_count=0).eligible
    assert not dataclasses.replace(_metadata(order), requested=False).eligible


def test_failure_codes_are_stable_names() -> None:
    assert {c.value for c in RerankFailureCode} == {
        "RerankerTimeout",
        "RerankerUnavailable",
        "RerankerRateLimited",
        "RerankerRejected",
        "RerankerInvalidResponse",
        "RerankerFailed",
    }


def test_timeouts_are_classified_separately() -> None:
    timeout = reranker_failure(RerankFailureCode.TIMEOUT, "timed out")
    assert timeout.timed_out and timeout.kind is ErrorKind.DEADLINE_EXCEEDED
    assert timeout.reason == "RERANKER_TIMEOUT"
    assert timeout.metadata == {"failure_code": "RerankerTimeout"}
    other = reranker_failure(RerankFailureCode.UNAVAILABLE, "down")
    assert not other.timed_out and other.kind is ErrorKind.UNAVAILABLE
    assert other.reason == "RERANKER_FAILED"


# --- adapter parsing helpers (index-based protocols)


def test_indexed_items_map_to_candidate_identities_with_threshold_answerability() -> None:
    cs = cands(3)
    out = output_from_indexed(cs, [(2, 0.9), (0, 0.5), (1, 0.49)], 0.5)
    assert [(j.document_id, j.relevance, j.answerability) for j in out.judgements] == [
        ("doc-3", 0.9, A),
        ("doc-1", 0.5, A),
        ("doc-2", 0.49, N),
    ]
    assert out.answerability is A
    assert output_from_indexed(cs, [(0, 0.1), (1, 0.2), (2, 0.3)], 0.5).answerability is N


@pytest.mark.parametrize("index", [None, "0", 1.0, True, -1, 3])
def test_an_index_that_is_not_a_valid_position_invalidates(index: object) -> None:
    with pytest.raises(RerankerError) as info:
        output_from_indexed(cands(3), [(0, 0.1), (1, 0.2), (index, 0.3)], 0.5)
    assert info.value.failure_code is RerankFailureCode.INVALID_RESPONSE


def test_a_duplicate_index_becomes_a_duplicate_identity_that_validation_rejects() -> None:
    cs = cands(3)
    out = output_from_indexed(cs, [(0, 0.1), (1, 0.2), (1, 0.3)], 0.5)
    assert_invalid(cs, out)


def test_score_count_must_match_candidate_count() -> None:
    with pytest.raises(RerankerError):
        output_from_scores(cands(3), [0.1, 0.2], 0.5)


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (429, RerankFailureCode.RATE_LIMITED),
        (500, RerankFailureCode.UNAVAILABLE),
        (503, RerankFailureCode.UNAVAILABLE),
        (400, RerankFailureCode.REJECTED),
        (401, RerankFailureCode.REJECTED),
        (200, RerankFailureCode.INVALID_RESPONSE),
        (None, RerankFailureCode.FAILED),
    ],
)
def test_http_statuses_map_to_stable_failure_codes(
    status: int | None, code: RerankFailureCode
) -> None:
    assert failure_for_status(status).failure_code is code
