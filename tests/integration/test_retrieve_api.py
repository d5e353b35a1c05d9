"""RetrieverService over real gRPC: every mode, score semantics, provenance, and
every kind of bad input one by one with its status, reason and field."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from groundwire_client.v1 import common_pb2, retriever_pb2, retriever_pb2_grpc
from tests.support.errors import rich_error

Q = retriever_pb2.RagQuery
SEMANTIC = retriever_pb2.RETRIEVAL_MODE_SEMANTIC
LEXICAL = retriever_pb2.RETRIEVAL_MODE_LEXICAL
HYBRID = retriever_pb2.RETRIEVAL_MODE_HYBRID


async def call(
    stub: retriever_pb2_grpc.RetrieverServiceAsyncStub, **fields: Any
) -> retriever_pb2.RetrieveResponse:
    fields.setdefault("index_name", "demo")
    return await stub.Retrieve(retriever_pb2.RetrieveRequest(query=Q(**fields)), timeout=10)


@pytest.mark.parametrize(
    ("text", "document"),
    [
        ("POL-HR-014", "policies/parental-leave.md"),
        ("CS1503", "engineering/dotnet-build-errors.md"),
        ("RetrieverFactory.cs", "engineering/dotnet-build-errors.md"),
        ("VPN-E42", "support/vpn-troubleshooting.md"),
        ('"account recovery"', "policies/account-security.md"),
    ],
)
async def test_lexical_finds_identifiers_and_phrases(
    retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub, text: str, document: str
) -> None:
    resp = await call(retriever, text=text, mode=LEXICAL, top_k=5)
    assert resp.results, text
    assert resp.results[0].document_id == document
    top = resp.results[0]
    assert top.score.metric == common_pb2.SCORE_METRIC_BM25
    assert top.score.higher_is_better and not top.score.HasField("relevance")
    assert [p.leg for p in top.provenance] == [common_pb2.RETRIEVAL_LEG_LEXICAL]
    assert resp.diagnostics.applied_mode == LEXICAL
    assert resp.diagnostics.semantic_hits == 0


async def test_semantic_is_default_and_has_relevance(
    retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub,
) -> None:
    resp = await call(retriever, text="how much parental leave do new parents get", top_k=3)
    assert resp.diagnostics.applied_mode == SEMANTIC
    assert resp.diagnostics.lexical_hits == 0 and resp.diagnostics.semantic_hits == 3
    for r in resp.results:
        assert r.score.metric == common_pb2.SCORE_METRIC_COSINE_SIMILARITY
        assert r.score.HasField("relevance")
        assert r.score.relevance == pytest.approx((r.score.raw_score + 1) / 2, abs=1e-6)
    assert [r.rank for r in resp.results] == [1, 2, 3]


async def test_hybrid_rrf_with_leg_provenance(
    retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub,
) -> None:
    resp = await call(retriever, text="POL-HR-014 parental leave", mode=HYBRID, top_k=5)
    assert resp.diagnostics.applied_mode == HYBRID
    k = resp.diagnostics.applied_rrf_k
    assert k == 20  # the configured default
    assert resp.results
    for r in resp.results:
        assert r.score.metric == common_pb2.SCORE_METRIC_RECIPROCAL_RANK_FUSION
        assert not r.score.HasField("relevance")
        expected = sum(1.0 / (k + p.rank) for p in r.provenance)
        assert r.score.raw_score == pytest.approx(expected, rel=1e-9)
        legs = [p.leg for p in r.provenance]
        assert len(set(legs)) == len(legs)
    both = [r for r in resp.results if len(r.provenance) == 2]
    assert both, "the top results should be found by both legs"
    sem = next(p for p in both[0].provenance if p.leg == common_pb2.RETRIEVAL_LEG_SEMANTIC)
    lex = next(p for p in both[0].provenance if p.leg == common_pb2.RETRIEVAL_LEG_LEXICAL)
    assert sem.score.metric == common_pb2.SCORE_METRIC_COSINE_SIMILARITY
    assert lex.score.metric == common_pb2.SCORE_METRIC_BM25


async def test_hybrid_weights_and_k_per_query(
    retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub,
) -> None:
    fusion = retriever_pb2.FusionOptions(
        rrf_k=10, semantic_weight=0.0, lexical_weight=2.0, leg_depth=20
    )
    resp = await call(retriever, text="POL-HR-014", mode=HYBRID, top_k=5, fusion=fusion)
    d = resp.diagnostics
    assert (
        d.applied_rrf_k,
        d.applied_semantic_weight,
        d.applied_lexical_weight,
        d.applied_leg_depth,
    ) == (10, 0.0, 2.0, 20)
    lexical = await call(retriever, text="POL-HR-014", mode=LEXICAL, top_k=5)
    # With the semantic weight at 0, hybrid order is the lexical order.
    assert [r.chunk_id for r in resp.results][:3] == [r.chunk_id for r in lexical.results][:3]


async def test_result_attribution(retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub) -> None:
    resp = await call(retriever, text="POL-HR-014", mode=LEXICAL, top_k=1)
    r = resp.results[0]
    assert r.title == "Parental Leave Policy"
    assert r.span.end > r.span.start
    assert len(r.content) == r.span.end - r.span.start
    assert r.chunk_id.startswith("c")


async def test_lexical_works_without_embedding_model(
    retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub,
) -> None:
    resp = await call(retriever, index_name="lexical-only", text="POL-HR-014", mode=LEXICAL)
    assert [r.document_id for r in resp.results] == ["note-1"]


async def test_tenant_scope_hides_untenanted_documents(
    retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub,
) -> None:
    resp = await call(retriever, text="POL-HR-014", mode=LEXICAL, tenant="acme")
    assert list(resp.results) == []


async def test_metadata_filter_applies(
    retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub,
) -> None:
    flt = common_pb2.MetadataFilter(
        conditions=[common_pb2.MetadataCondition(key="missing", equals="x")]
    )
    resp = await call(retriever, text="POL-HR-014", mode=LEXICAL, filter=flt)
    assert list(resp.results) == []


BAD_INPUT = [
    ({"text": ""}, grpc.StatusCode.INVALID_ARGUMENT, "EMPTY_QUERY", "query.text"),
    ({"text": "   \n\t "}, grpc.StatusCode.INVALID_ARGUMENT, "EMPTY_QUERY", "query.text"),
    ({"text": "x" * 5000}, grpc.StatusCode.INVALID_ARGUMENT, "FIELD_TOO_LONG", "query.text"),
    ({"text": 'a "phrase'}, grpc.StatusCode.INVALID_ARGUMENT, "UNTERMINATED_PHRASE", "query.text"),
    ({"text": "q", "index_name": "nope"}, grpc.StatusCode.NOT_FOUND, "INDEX_NOT_FOUND", None),
    (
        {"text": "q", "index_name": ""},
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_REQUIRED",
        "query.index_name",
    ),
    (
        {"text": "q", "top_k": 0},
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_OUT_OF_RANGE",
        "query.top_k",
    ),
    (
        {"text": "q", "top_k": -3},
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_OUT_OF_RANGE",
        "query.top_k",
    ),
    (
        {"text": "q", "top_k": 101},
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_OUT_OF_RANGE",
        "query.top_k",
    ),
    (
        {"text": "q", "mode": 42},
        grpc.StatusCode.INVALID_ARGUMENT,
        "UNKNOWN_ENUM_VALUE",
        "query.mode",
    ),
    (
        {
            "text": "q",
            "filter": common_pb2.MetadataFilter(conditions=[common_pb2.MetadataCondition(key="k")]),
        },
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_FILTER",
        "query.filter.conditions[0]",
    ),
    (
        {
            "text": "q",
            "filter": common_pb2.MetadataFilter(
                conditions=[common_pb2.MetadataCondition(key="bad key!", equals="v")]
            ),
        },
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_FILTER",
        "query.filter.conditions[0].key",
    ),
    (
        {
            "text": "q",
            "filter": common_pb2.MetadataFilter(
                conditions=[
                    common_pb2.MetadataCondition(key="k", equals="a"),
                    common_pb2.MetadataCondition(key="k", equals="b"),
                ]
            ),
        },
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_FILTER",
        "query.filter.conditions[1].key",
    ),
    (
        {
            "text": "q",
            "mode": HYBRID,
            "fusion": retriever_pb2.FusionOptions(semantic_weight=float("nan")),
        },
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_OUT_OF_RANGE",
        "query.fusion.semantic_weight",
    ),
    (
        {"text": "q", "mode": HYBRID, "fusion": retriever_pb2.FusionOptions(rrf_k=0)},
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_OUT_OF_RANGE",
        "query.fusion.rrf_k",
    ),
    (
        {"text": "q", "index_name": "lexical-only", "mode": SEMANTIC},
        grpc.StatusCode.FAILED_PRECONDITION,
        "EMBEDDING_NOT_CONFIGURED",
        None,
    ),
    (
        {"text": "q", "index_name": "lexical-only", "mode": HYBRID},
        grpc.StatusCode.FAILED_PRECONDITION,
        "EMBEDDING_NOT_CONFIGURED",
        None,
    ),
]


@pytest.mark.parametrize(
    ("fields", "code", "reason", "field"),
    BAD_INPUT,
    ids=[b[2] + str(i) for i, b in enumerate(BAD_INPUT)],
)
async def test_bad_input(
    retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub,
    fields: dict[str, object],
    code: grpc.StatusCode,
    reason: str,
    field: str | None,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call(retriever, **fields)
    err = rich_error(info.value)
    assert err.code == code
    assert err.reason == reason
    assert err.domain == "groundwire.dev"
    if field is not None:
        assert err.fields == [field]
    text = str(fields.get("text", ""))
    if len(text) > 3:
        assert text not in err.message


async def test_non_utf8_request_is_invalid_argument(channel: grpc.aio.Channel) -> None:
    inner = b"\x0a\x04demo" + b"\x12\x03\xff\xfe\xfd"
    raw = b"\x0a" + bytes([len(inner)]) + inner
    call_raw = channel.unary_unary(
        "/groundwire.v1.RetrieverService/Retrieve",
        request_serializer=lambda b: b,
        response_deserializer=lambda b: b,
    )
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call_raw(raw, timeout=5)
    err = rich_error(info.value)
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.reason == "MALFORMED_REQUEST"


async def test_request_id_is_echoed(
    retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub,
) -> None:
    c = retriever.Retrieve(
        retriever_pb2.RetrieveRequest(query=Q(index_name="demo", text="leave", mode=LEXICAL)),
        metadata=(("x-request-id", "test-123"),),
    )
    await c
    assert ("x-request-id", "test-123") in tuple(await c.trailing_metadata())
