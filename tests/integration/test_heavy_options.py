"""Heavy options are costed before they run: each over its bound is refused on the
gRPC API with INVALID_ARGUMENT, its stable reason (one of groundwire.v1.ErrorReason:
INVALID_FILTER, FIELD_OUT_OF_RANGE) and field, before any store work, on the memory
store and on PostgreSQL; the largest accepted request still runs. Messages name the
bound, never the query, document text or a path."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from groundwire.ingestion.push import MAX_PUSH_CHUNKS
from groundwire.retrieval.requests import MAX_FEEDBACK_PRODUCT, MAX_FILTER_VALUES
from groundwire.stores.bounds import PHRASE_MAX_CANDIDATES
from groundwire_client.v1 import (
    common_pb2,
    ingestion_pb2,
    ingestion_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
)
from tests.conftest import handbook_config
from tests.support.errors import rich_error
from tests.support.servers import serving

LEXICAL = retriever_pb2.RETRIEVAL_MODE_LEXICAL
HYBRID = retriever_pb2.RETRIEVAL_MODE_HYBRID
DSN_ENV = "GW_HEAVY_OPTIONS_DSN"
SECRET_WORD = "zanzibarquux"


class Stubs:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.retriever = retriever_pb2_grpc.RetrieverServiceStub(channel)
        self.ingest = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)


@pytest.fixture(params=["memory", "postgres"])
async def stubs(request: pytest.FixtureRequest) -> AsyncIterator[Stubs]:
    overrides: dict[str, object] = {}
    if request.param == "postgres":
        os.environ[DSN_ENV] = request.getfixturevalue("fresh_database")
        overrides["store"] = {"kind": "postgres", "dsn": {"env": DSN_ENV}, "pool_max_size": 4}
    async with (
        serving(handbook_config(**overrides)) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        yield Stubs(channel)


async def retrieve(stubs: Stubs, **fields: Any) -> retriever_pb2.RetrieveResponse:
    fields.setdefault("index_name", "demo")
    fields.setdefault("text", f"parental leave {SECRET_WORD}")
    return await stubs.retriever.Retrieve(
        retriever_pb2.RetrieveRequest(query=retriever_pb2.RagQuery(**fields)), timeout=30
    )


async def refused(stubs: Stubs, reason: str, field: str, **fields: Any) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await retrieve(stubs, **fields)
    err = rich_error(caught.value)
    assert (err.code, err.reason, err.fields) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        reason,
        [field],
    ), err
    assert SECRET_WORD not in err.message
    return err.message


def any_of(keys: int, values: int) -> common_pb2.MetadataFilter:
    return common_pb2.MetadataFilter(
        conditions=[
            common_pb2.MetadataCondition(
                key=f"k{i}", any_of=common_pb2.StringList(values=[f"v{j}" for j in range(values)])
            )
            for i in range(keys)
        ]
    )


async def test_a_filter_is_bounded_in_values_across_its_keys(stubs: Stubs) -> None:
    assert MAX_FILTER_VALUES == 256
    message = await refused(
        stubs, "INVALID_FILTER", "query.filter", mode=LEXICAL, filter=any_of(32, 100)
    )
    assert "256" in message
    await refused(stubs, "INVALID_FILTER", "query.filter", mode=LEXICAL, filter=any_of(3, 86))
    # At the bound: runs (and matches nothing: no document has these keys).
    resp = await retrieve(stubs, mode=LEXICAL, filter=any_of(32, 8))
    assert list(resp.results) == []


async def test_rm3_is_bounded_in_documents_times_terms(stubs: Stubs) -> None:
    assert MAX_FEEDBACK_PRODUCT == 1000
    await refused(
        stubs,
        "FIELD_OUT_OF_RANGE",
        "query.lexical_feedback",
        mode=LEXICAL,
        top_k=100,
        lexical_feedback=retriever_pb2.LexicalFeedback(documents=100, terms=100),
    )
    await refused(
        stubs,
        "FIELD_OUT_OF_RANGE",
        "query.lexical_feedback",
        mode=LEXICAL,
        lexical_feedback=retriever_pb2.LexicalFeedback(documents=11, terms=100),
    )
    for documents, terms in ((10, 100), (100, 10)):
        resp = await retrieve(
            stubs,
            mode=LEXICAL,
            lexical_feedback=retriever_pb2.LexicalFeedback(documents=documents, terms=terms),
        )
        assert resp.results


async def test_a_hybrid_leg_depth_is_bounded_with_top_k(stubs: Stubs) -> None:
    message = await refused(
        stubs,
        "FIELD_OUT_OF_RANGE",
        "query.fusion.leg_depth",
        mode=HYBRID,
        top_k=10,
        fusion=retriever_pb2.FusionOptions(leg_depth=1000),
    )
    assert "250" in message
    await refused(
        stubs,
        "FIELD_OUT_OF_RANGE",
        "query.fusion.leg_depth",
        mode=HYBRID,
        top_k=50,
        fusion=retriever_pb2.FusionOptions(leg_depth=501),
    )
    for top_k, depth in ((10, 250), (50, 500), (100, 1000)):
        resp = await retrieve(
            stubs, mode=HYBRID, top_k=top_k, fusion=retriever_pb2.FusionOptions(leg_depth=depth)
        )
        assert resp.diagnostics.applied_leg_depth == depth


async def test_a_push_is_bounded_in_chunks(stubs: Stubs) -> None:
    # Each document makes several chunks of the default policy (800 characters).
    text = " ".join([SECRET_WORD] * 700)
    docs = [ingestion_pb2.PushedDocument(document_id=f"big-{i}", text=text) for i in range(256)]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stubs.ingest.UpsertDocuments(
            ingestion_pb2.UpsertDocumentsRequest(index_name="demo", documents=docs), timeout=60
        )
    err = rich_error(caught.value)
    assert (err.code, err.reason, err.fields) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_OUT_OF_RANGE",
        ["documents"],
    )
    assert str(MAX_PUSH_CHUNKS) in err.message and "StartIngestion" in err.message
    assert SECRET_WORD not in err.message and "big-" not in err.message
    # Nothing was written: the documents are not there.
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await stubs.ingest.GetDocument(
            ingestion_pb2.GetDocumentRequest(index_name="demo", document_id="big-0"), timeout=10
        )
    assert missing.value.code() is grpc.StatusCode.NOT_FOUND
    # Fewer documents per call pass.
    resp = await stubs.ingest.UpsertDocuments(
        ingestion_pb2.UpsertDocumentsRequest(index_name="demo", documents=docs[:16]), timeout=60
    )
    assert resp.upserted == 16 and 0 < resp.chunks_written <= MAX_PUSH_CHUNKS


async def test_list_documents_pages_are_bounded(stubs: Stubs) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stubs.ingest.ListDocuments(
            ingestion_pb2.ListDocumentsRequest(index_name="demo", page_size=101), timeout=10
        )
    err = rich_error(caught.value)
    assert (err.code, err.reason, err.fields) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_OUT_OF_RANGE",
        ["page_size"],
    )


async def test_a_phrase_over_a_common_word_verifies_a_bounded_number_of_candidates(
    stubs: Stubs,
) -> None:
    """More chunks hold every phrase word than the candidate bound: the query is
    answered from the bound's candidates (the highest term frequencies of its
    rarest word), the same on both stores."""
    assert PHRASE_MAX_CANDIDATES == 1000
    # 1,010 one-chunk documents holding the phrase "zo ro" (both words in every one,
    # so the anchor is "ro", the first of equally rare words). 1,000 hold "ro" twice:
    # they fill the bound. The ten that hold it once also hold "ka", so they would
    # rank first if they were verified.
    docs = [
        ingestion_pb2.PushedDocument(
            document_id=f"rz-{i}", text="zo ro ka" if i < 10 else "zo ro ro"
        )
        for i in range(1010)
    ]
    for start in range(0, len(docs), 256):
        await stubs.ingest.UpsertDocuments(
            ingestion_pb2.UpsertDocumentsRequest(
                index_name="lexical-only", documents=docs[start : start + 256]
            ),
            timeout=60,
        )
    resp = await retrieve(
        stubs, index_name="lexical-only", text='"zo ro" ka', mode=LEXICAL, top_k=100
    )
    found = {r.document_id for r in resp.results}
    assert len(found) == 100
    assert not found & {f"rz-{i}" for i in range(10)}
    # A rarer phrase word anchors the phrase: its documents are found.
    resp = await retrieve(
        stubs, index_name="lexical-only", text='"zo ro ka"', mode=LEXICAL, top_k=100
    )
    assert {r.document_id for r in resp.results} == {f"rz-{i}" for i in range(10)}
