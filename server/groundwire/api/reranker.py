"""RerankerService: proto <-> domain, nothing else.

The metadata conversions here (`reranking_metadata_to_proto` and friends) are
shared with the agent results, which carry the same RerankingMetadata message.
"""

from __future__ import annotations

from typing import Literal

import grpc

from groundwire.api.convert import duration, note_profile, profile_to_proto
from groundwire.domain.profile import RetrievalProfile
from groundwire.domain.reranking import (
    Answerability,
    FailurePolicy,
    RerankedCandidate,
    RerankingMetadata,
    RerankOutcome,
    RerankResult,
)
from groundwire.reranking.requests import UNRECOGNIZED, CandidateInput, build_rerank_call
from groundwire.reranking.service import RerankingService
from groundwire_client.v1 import reranker_pb2, reranker_pb2_grpc

__all__ = [
    "RerankerServicer",
    "answerability_to_proto",
    "failure_policy_from_proto",
    "outcome_to_proto",
    "reranked_candidate_to_proto",
    "reranking_metadata_to_proto",
]

_OUTCOMES = {
    RerankOutcome.SUCCEEDED: reranker_pb2.RERANK_OUTCOME_SUCCEEDED,
    RerankOutcome.FALLBACK: reranker_pb2.RERANK_OUTCOME_FALLBACK,
    RerankOutcome.FAILED: reranker_pb2.RERANK_OUTCOME_FAILED,
    RerankOutcome.SKIPPED: reranker_pb2.RERANK_OUTCOME_SKIPPED,
}
_POLICIES_OUT = {
    FailurePolicy.FAIL: reranker_pb2.RERANK_FAILURE_POLICY_FAIL,
    FailurePolicy.USE_ORIGINAL_ORDER: reranker_pb2.RERANK_FAILURE_POLICY_USE_ORIGINAL_ORDER,
}
_POLICIES_IN: dict[int, FailurePolicy | None] = {
    reranker_pb2.RERANK_FAILURE_POLICY_UNSPECIFIED: None,
    reranker_pb2.RERANK_FAILURE_POLICY_FAIL: FailurePolicy.FAIL,
    reranker_pb2.RERANK_FAILURE_POLICY_USE_ORIGINAL_ORDER: FailurePolicy.USE_ORIGINAL_ORDER,
}
_ANSWERABILITY = {
    Answerability.ANSWERABLE: reranker_pb2.ANSWERABILITY_ANSWERABLE,
    Answerability.NOT_ANSWERABLE: reranker_pb2.ANSWERABILITY_NOT_ANSWERABLE,
    Answerability.UNKNOWN: reranker_pb2.ANSWERABILITY_UNKNOWN,
}


def failure_policy_from_proto(
    value: int,
) -> FailurePolicy | Literal["UNRECOGNIZED"] | None:
    """None for UNSPECIFIED (the server default), UNRECOGNIZED for unknown values."""
    return _POLICIES_IN.get(value, UNRECOGNIZED)


def answerability_to_proto(value: Answerability) -> reranker_pb2.Answerability.ValueType:
    return _ANSWERABILITY[value]


def outcome_to_proto(value: RerankOutcome) -> reranker_pb2.RerankOutcome.ValueType:
    return _OUTCOMES[value]


def reranked_candidate_to_proto(c: RerankedCandidate) -> reranker_pb2.RerankedCandidate:
    msg = reranker_pb2.RerankedCandidate(
        document_id=c.document_id,
        chunk_id=c.chunk_id,
        original_rank=c.original_rank,
        rerank_rank=c.rerank_rank,
        answerability=answerability_to_proto(c.answerability),
    )
    if c.rerank_relevance is not None:
        msg.rerank_relevance = c.rerank_relevance
    return msg


def reranking_metadata_to_proto(m: RerankingMetadata) -> reranker_pb2.RerankingMetadata:
    return reranker_pb2.RerankingMetadata(
        requested=m.requested,
        ran=m.ran,
        candidate_count=m.candidate_count,
        duration=duration(m.duration_seconds),
        outcome=outcome_to_proto(m.outcome),
        failure_policy=_POLICIES_OUT[m.failure_policy],
        answerability=answerability_to_proto(m.answerability),
        timed_out=m.timed_out,
        failure_code=m.failure_code.value if m.failure_code is not None else "",
        candidates=[reranked_candidate_to_proto(c) for c in m.candidates],
    )


def result_to_proto(
    result: RerankResult, profile: RetrievalProfile | None = None
) -> reranker_pb2.RerankResponse:
    msg = reranker_pb2.RerankResponse(
        results=[reranked_candidate_to_proto(c) for c in result.order],
        reranking=reranking_metadata_to_proto(result.metadata),
    )
    if profile is not None:
        msg.profile.CopyFrom(profile_to_proto(profile))
    return msg


class RerankerServicer(reranker_pb2_grpc.RerankerServiceServicer):
    def __init__(self, service: RerankingService) -> None:
        self._service = service

    async def Rerank(
        self,
        request: reranker_pb2.RerankRequest,
        context: grpc.aio.ServicerContext[reranker_pb2.RerankRequest, reranker_pb2.RerankResponse],
    ) -> reranker_pb2.RerankResponse:
        call = build_rerank_call(
            query=request.query,
            candidates=[
                CandidateInput(c.document_id, c.chunk_id, c.content, c.original_rank)
                for c in request.candidates
            ],
            reranker=request.reranker,
            failure_policy=failure_policy_from_proto(request.failure_policy),
            timeout_seconds=(
                request.timeout.ToNanoseconds() / 1e9 if request.HasField("timeout") else None
            ),
            maximum_candidates=(
                request.maximum_candidates if request.HasField("maximum_candidates") else None
            ),
            limits=self._service.limits,
            defaults=self._service.defaults,
            known_rerankers=self._service.names,
        )
        profile = note_profile(self._service.profile(call))
        return result_to_proto(await self._service.rerank(call), profile)
