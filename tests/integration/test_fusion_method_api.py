"""FusionOptions.method over real gRPC: min-max fusion per query (score metric,
weighted mean of normalized leg scores, diagnostics), RRF by default, and an unknown
method is INVALID_ARGUMENT naming the field."""

from __future__ import annotations

import grpc
import pytest

from groundwire_client.v1 import common_pb2, retriever_pb2, retriever_pb2_grpc
from tests.support.errors import rich_error

HYBRID = retriever_pb2.RETRIEVAL_MODE_HYBRID


async def hybrid(
    stub: retriever_pb2_grpc.RetrieverServiceAsyncStub, fusion: retriever_pb2.FusionOptions
) -> retriever_pb2.RetrieveResponse:
    query = retriever_pb2.RagQuery(
        index_name="demo", text="POL-HR-014 parental leave", mode=HYBRID, top_k=5, fusion=fusion
    )
    return await stub.Retrieve(retriever_pb2.RetrieveRequest(query=query), timeout=10)


async def test_min_max_fusion_per_query(
    retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub,
) -> None:
    default = await hybrid(retriever, retriever_pb2.FusionOptions())
    assert default.diagnostics.applied_fusion_method == retriever_pb2.FUSION_METHOD_RRF
    assert default.results[0].score.metric == common_pb2.SCORE_METRIC_RECIPROCAL_RANK_FUSION
    resp = await hybrid(
        retriever,
        retriever_pb2.FusionOptions(method=retriever_pb2.FUSION_METHOD_MIN_MAX, leg_depth=20),
    )
    d = resp.diagnostics
    assert d.applied_fusion_method == retriever_pb2.FUSION_METHOD_MIN_MAX
    assert d.applied_leg_depth == 20
    assert resp.results
    for r in resp.results:
        assert r.score.metric == common_pb2.SCORE_METRIC_MIN_MAX_FUSION
        assert r.score.higher_is_better and not r.score.HasField("relevance")
        assert 0.0 <= r.score.raw_score <= 1.0
    # The best result of a leg scores 1 in it: the top result is at least 1/2.
    assert resp.results[0].score.raw_score >= 0.5
    scores = [r.score.raw_score for r in resp.results]
    assert scores == sorted(scores, reverse=True)


async def test_unknown_fusion_method(
    retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await hybrid(retriever, retriever_pb2.FusionOptions(method=99))  # type: ignore[arg-type]
    err = rich_error(info.value)
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.reason == "UNKNOWN_ENUM_VALUE"
    assert err.fields == ["query.fusion.method"]
