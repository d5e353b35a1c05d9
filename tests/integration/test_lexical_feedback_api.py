"""RM3 pseudo-relevance feedback over real gRPC (RagQuery.lexical_feedback): the
lexical and hybrid legs expand the query, the diagnostics count what it added, an
original-query weight of 1 ranks as without feedback, and bad settings are
INVALID_ARGUMENT naming the field."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from groundwire_client.v1 import retriever_pb2, retriever_pb2_grpc
from tests.support.errors import rich_error

LEXICAL = retriever_pb2.RETRIEVAL_MODE_LEXICAL
HYBRID = retriever_pb2.RETRIEVAL_MODE_HYBRID
TEXT = "parental leave"


async def call(
    stub: retriever_pb2_grpc.RetrieverServiceAsyncStub, **fields: Any
) -> retriever_pb2.RetrieveResponse:
    fields.setdefault("index_name", "demo")
    fields.setdefault("text", TEXT)
    query = retriever_pb2.RagQuery(**fields)
    return await stub.Retrieve(retriever_pb2.RetrieveRequest(query=query), timeout=10)


async def test_feedback_expands_the_lexical_and_hybrid_legs(
    retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub,
) -> None:
    plain = await call(retriever, mode=LEXICAL, top_k=100)
    assert len(plain.results) < 100
    assert plain.diagnostics.feedback_terms == 0 and plain.diagnostics.feedback_documents == 0
    fb = retriever_pb2.LexicalFeedback(documents=3, terms=10)
    expanded = await call(retriever, mode=LEXICAL, top_k=100, lexical_feedback=fb)
    d = expanded.diagnostics
    assert 1 <= d.feedback_documents <= 3
    assert d.feedback_terms >= 1
    # The expansion terms are scored too, and they reach chunks the query's own
    # words do not: the expanded run finds more.
    assert d.lexical_terms_scored > plain.diagnostics.lexical_terms_scored
    assert len(expanded.results) > len(plain.results)
    assert expanded.results[0].document_id == plain.results[0].document_id
    hybrid = await call(retriever, mode=HYBRID, top_k=5, lexical_feedback=fb)
    assert hybrid.diagnostics.feedback_terms == d.feedback_terms
    assert hybrid.diagnostics.applied_mode == HYBRID


async def test_original_weight_one_ranks_as_without_feedback(
    retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub,
) -> None:
    plain = await call(retriever, mode=LEXICAL, top_k=10)
    fb = retriever_pb2.LexicalFeedback(original_query_weight=1.0)
    same = await call(retriever, mode=LEXICAL, top_k=10, lexical_feedback=fb)
    assert same.diagnostics.feedback_terms == 0 and same.diagnostics.feedback_documents >= 1
    assert [r.chunk_id for r in same.results] == [r.chunk_id for r in plain.results]
    assert [r.score.raw_score for r in same.results] == pytest.approx(
        [r.score.raw_score for r in plain.results], rel=1e-12
    )


@pytest.mark.parametrize(
    ("feedback", "field"),
    [
        (retriever_pb2.LexicalFeedback(documents=0), "query.lexical_feedback.documents"),
        (retriever_pb2.LexicalFeedback(terms=101), "query.lexical_feedback.terms"),
        (
            retriever_pb2.LexicalFeedback(original_query_weight=float("nan")),
            "query.lexical_feedback.original_query_weight",
        ),
    ],
)
async def test_bad_feedback_settings(
    retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub,
    feedback: retriever_pb2.LexicalFeedback,
    field: str,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call(retriever, mode=LEXICAL, lexical_feedback=feedback)
    err = rich_error(info.value)
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.reason == "FIELD_OUT_OF_RANGE"
    assert err.fields == [field]
