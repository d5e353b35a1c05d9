"""Metadata range filters over real gRPC, on the memory and PostgreSQL stores:
number and timestamp ranges in every retrieval mode and through an agent's
execution filter, and every malformed range refused with INVALID_FILTER and
the offending field."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from groundwire.app.config import parse_config
from groundwire_client.v1 import agent_pb2 as ag
from groundwire_client.v1 import (
    agent_pb2_grpc,
    common_pb2,
    ingestion_pb2,
    ingestion_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
)
from tests.support.errors import rich_error
from tests.support.servers import serving

pytestmark = pytest.mark.timeout(60)

Cond = common_pb2.MetadataCondition
Range = common_pb2.MetadataRange
Bound = common_pb2.MetadataRangeBound
MODES = [
    retriever_pb2.RETRIEVAL_MODE_LEXICAL,
    retriever_pb2.RETRIEVAL_MODE_SEMANTIC,
    retriever_pb2.RETRIEVAL_MODE_HYBRID,
]

# (document id, year, published_at): the offsets differ, the instants are what count.
DOCS = [
    ("r1999", "1999", "1999-12-31T23:30:00-01:00"),  # 2000-01-01T00:30Z
    ("r2005", "2005", "2005-06-01T12:00:00+02:00"),
    ("r2010", "2010", "2010-01-01T00:00:00Z"),
    ("r2015", "2015.5", "2015-03-01T09:00:00.123456789+09:00"),
    ("r2020", "2020", "2020-02-29T00:00:00Z"),
    ("r2024", "2.024e3", "2024-05-01T02:00:00+02:00"),  # = 2024-05-01T00:00Z
    ("bad-year", "MMXX", "yesterday"),
    ("no-meta", "", ""),
]


def config(store: dict[str, object]) -> dict[str, Any]:
    return {
        "auth": {"mode": "disabled"},
        "store": store,
        "embedders": {"hash": {"kind": "hashing"}},
        "indexes": {"reports": {"embedder": "hash"}},
        "models": {"offline": {"kind": "offline"}},
        "agents": {
            "analyst": {
                "name": "Analyst",
                "model": "offline/extractive-v1",
                "rag": {"index": "reports", "retrieval_mode": "lexical"},
            },
            # A configured range (a TOML table); a request's filter can only narrow it.
            "recent": {
                "name": "Recent",
                "model": "offline/extractive-v1",
                "rag": {
                    "index": "reports",
                    "retrieval_mode": "lexical",
                    "filter": {"year": {"gte": 2015}},
                },
            },
        },
    }


class Client:
    def __init__(self, port: int) -> None:
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        self.ing = ingestion_pb2_grpc.IngestionManagerServiceStub(self.channel)
        self.ret = retriever_pb2_grpc.RetrieverServiceStub(self.channel)
        self.agents = agent_pb2_grpc.AgentServiceStub(self.channel)

    async def retrieve(
        self,
        conditions: list[common_pb2.MetadataCondition],
        mode: retriever_pb2.RetrievalMode.ValueType = retriever_pb2.RETRIEVAL_MODE_LEXICAL,
    ) -> list[str]:
        resp = await self.ret.Retrieve(
            retriever_pb2.RetrieveRequest(
                query=retriever_pb2.RagQuery(
                    index_name="reports",
                    text="annual report revenue",
                    mode=mode,
                    top_k=20,
                    filter=common_pb2.MetadataFilter(conditions=conditions),
                )
            ),
            timeout=10,
        )
        return sorted(r.document_id for r in resp.results)


@pytest.fixture(params=["memory", "postgres"])
async def client(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Client]:
    store: dict[str, object] = {"kind": "memory"}
    if request.param == "postgres":
        monkeypatch.setenv("GW_TEST_DSN", request.getfixturevalue("fresh_database"))
        store = {"kind": "postgres", "dsn": {"env": "GW_TEST_DSN"}, "pool_max_size": 4}
    async with serving(parse_config(config(store))) as app:
        c = Client(app.port)
        docs = []
        for doc_id, year, at in DOCS:
            meta = {"year": year, "published_at": at} if year else {}
            docs.append(
                ingestion_pb2.PushedDocument(
                    document_id=doc_id,
                    text=f"Annual report {doc_id}: revenue grew in the year.",
                    metadata=meta,
                )
            )
        await c.ing.UpsertDocuments(
            ingestion_pb2.UpsertDocumentsRequest(index_name="reports", documents=docs)
        )
        yield c
        await c.channel.close()


def years(lo: float | None = None, hi: float | None = None, *, inc: bool = False) -> Cond:
    rng = Range()
    if lo is not None:
        rng.lower.CopyFrom(Bound(number=lo, inclusive=inc))
    if hi is not None:
        rng.upper.CopyFrom(Bound(number=hi, inclusive=inc))
    return Cond(key="year", range=rng)


def published(lo: str | None = None, hi: str | None = None, *, inc: bool = False) -> Cond:
    rng = Range()
    if lo is not None:
        rng.lower.CopyFrom(Bound(timestamp=lo, inclusive=inc))
    if hi is not None:
        rng.upper.CopyFrom(Bound(timestamp=hi, inclusive=inc))
    return Cond(key="published_at", range=rng)


@pytest.mark.parametrize("mode", MODES)
async def test_number_and_timestamp_ranges_in_every_mode(
    client: Client, mode: retriever_pb2.RetrievalMode.ValueType
) -> None:
    assert await client.retrieve([years(2010, 2020, inc=True)], mode) == [
        "r2010",
        "r2015",
        "r2020",
    ]
    assert await client.retrieve([years(2010, 2020)], mode) == ["r2015"]
    assert await client.retrieve([years(lo=2020)], mode) == ["r2024"]
    assert await client.retrieve([years(hi=2005, inc=True)], mode) == ["r1999", "r2005"]
    # Instants, not strings: 23:30 at -01:00 on 31 December 1999 is in 2000 UTC, and
    # 02:00 at +02:00 is midnight UTC.
    assert await client.retrieve([published(lo="2000-01-01T00:00:00Z")], mode) == [
        "r1999",
        "r2005",
        "r2010",
        "r2015",
        "r2020",
        "r2024",
    ]
    assert await client.retrieve(
        [published("2024-05-01T00:00:00Z", "2024-05-01T00:00:00+00:00", inc=True)], mode
    ) == ["r2024"]
    assert await client.retrieve([published(hi="2024-05-01T00:00:00Z")], mode) == [
        "r1999",
        "r2005",
        "r2010",
        "r2015",
        "r2020",
    ]
    # With a second range: all must hold. 09:00:00.123456789 at +09:00 is
    # 00:00:00.123456 UTC once truncated to microseconds.
    both = [years(lo=2000), published(hi="2015-03-01T00:00:00.123456Z", inc=True)]
    assert await client.retrieve(both, mode) == ["r2005", "r2010", "r2015"]
    both = [years(lo=2000), published(hi="2015-03-01T00:00:00.123456Z")]
    assert await client.retrieve(both, mode) == ["r2005", "r2010"]
    exact = Cond(key="year", equals="2020")
    assert await client.retrieve([exact, published(lo="2020-01-01T00:00:00Z")], mode) == ["r2020"]
    assert await client.retrieve([exact, published(hi="2020-01-01T00:00:00Z")], mode) == []


async def test_agent_execution_filter_takes_ranges(client: Client) -> None:
    def run(cond: Cond, agent: str = "analyst") -> ag.ExecuteRequest:
        return ag.ExecuteRequest(
            input=ag.ExecutionInput(
                agent_id=agent,
                message="annual report revenue",
                filter=common_pb2.MetadataFilter(conditions=[cond]),
            )
        )

    # The agent's configured year >= 2015 and the request's range both hold.
    narrowed = (
        await client.agents.Execute(run(published(hi="2024-05-01T00:00:00Z"), "recent"), timeout=30)
    ).result
    assert {c.document_id for c in narrowed.rag.context} == {"r2015", "r2020"}
    widened = (await client.agents.Execute(run(years(hi=2030), "recent"), timeout=30)).result
    assert {c.document_id for c in widened.rag.context} == {"r2015", "r2020", "r2024"}

    result = (await client.agents.Execute(run(years(2019, 2021)), timeout=30)).result
    assert {c.document_id for c in result.rag.context} == {"r2020"}
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await client.agents.Execute(run(years(2021, 2019)), timeout=30)
    err = rich_error(info.value)
    assert (err.code, err.reason, err.fields) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_FILTER",
        ["input.filter.conditions[0].range"],
    )


def raw(lower: Bound | None = None, upper: Bound | None = None) -> Cond:
    rng = Range()
    if lower is not None:
        rng.lower.CopyFrom(lower)
    if upper is not None:
        rng.upper.CopyFrom(upper)
    return Cond(key="year", range=rng)


BAD_RANGES = [
    (raw(), "query.filter.conditions[0].range"),
    (raw(Bound(inclusive=True)), "query.filter.conditions[0].range.lower"),
    (raw(Bound(number=float("nan"))), "query.filter.conditions[0].range.lower.number"),
    (raw(upper=Bound(number=float("inf"))), "query.filter.conditions[0].range.upper.number"),
    (raw(Bound(number=1e308)), "query.filter.conditions[0].range.lower.number"),
    (raw(Bound(timestamp="2024-05-01")), "query.filter.conditions[0].range.lower.timestamp"),
    (
        raw(Bound(timestamp="2024-05-01T00:00:00")),
        "query.filter.conditions[0].range.lower.timestamp",
    ),
    (
        raw(upper=Bound(timestamp="2023-02-29T00:00:00Z")),
        "query.filter.conditions[0].range.upper.timestamp",
    ),
    (raw(Bound(timestamp="x" * 100)), "query.filter.conditions[0].range.lower.timestamp"),
    (
        raw(Bound(number=1), Bound(timestamp="2024-05-01T00:00:00Z")),
        "query.filter.conditions[0].range",
    ),
    (raw(Bound(number=5), Bound(number=4)), "query.filter.conditions[0].range"),
    (raw(Bound(number=5, inclusive=True), Bound(number=5)), "query.filter.conditions[0].range"),
    (
        raw(Bound(timestamp="2024-05-01T02:00:00+02:00"), Bound(timestamp="2024-05-01T00:00:00Z")),
        "query.filter.conditions[0].range",
    ),
]


async def test_malformed_ranges_are_invalid_filters(client: Client) -> None:
    for cond, field in BAD_RANGES:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await client.retrieve([cond])
        err = rich_error(info.value)
        assert (err.code, err.reason, err.fields) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_FILTER",
            [field],
        ), field
    # Keys stay unique across exact and range conditions.
    with pytest.raises(grpc.aio.AioRpcError) as dup:
        await client.retrieve([Cond(key="year", equals="2020"), years(lo=1)])
    assert rich_error(dup.value).fields == ["query.filter.conditions[1].key"]
