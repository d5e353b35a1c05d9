"""The Connect protocol on the HTTP port: every RPC of the contract answers over
Connect (JSON and binary) what it answers over gRPC for the same request, with
the same authentication, permissions, tenancy and error reasons; streams end
with the end-stream message; broken bodies are MALFORMED_REQUEST."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf.message import Message

from groundwire.app.config import parse_config
from groundwire.app.defaults import HANDBOOK_DIR
from groundwire.domain.auth import hash_key
from groundwire_client.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    agent_pb2,
    agent_pb2_grpc,
    ingestion_pb2,
    ingestion_pb2_grpc,
    reranker_pb2,
    reranker_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
)
from tests.support.connect import (
    ENVELOPE,
    ConnectError,
    parse_error,
    server_stream,
    split_envelopes,
    unary_json,
    unary_proto,
)
from tests.support.errors import rich_error
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(60)

KEYS = {
    "admin": "gw_admin-key-00000000000000000000000000000000000000",
    "acme": "gw_acme-key-0000000000000000000000000000000000000",
    "reader": "gw_reader-key-000000000000000000000000000000000000",
}
ALL = ["retrieve", "rerank", "execute", "ingest", "manage", "prepare"]


def config() -> dict[str, object]:
    return {
        "auth": {
            "keys": [
                {"id": "admin", "hash": hash_key(KEYS["admin"]), "permissions": ALL},
                {
                    "id": "acme",
                    "hash": hash_key(KEYS["acme"]),
                    "tenant": "acme",
                    "permissions": ["retrieve", "execute", "ingest"],
                },
                {
                    "id": "reader",
                    "hash": hash_key(KEYS["reader"]),
                    "tenant": "acme",
                    "permissions": ["retrieve"],
                },
            ]
        },
        "embedders": {"hash": {"kind": "hashing"}},
        "models": {"offline": {"kind": "offline"}},
        "rerankers": {"overlap": {"kind": "offline", "minimum_answerable_relevance": 0.5}},
        "reranking": {"default_reranker": "overlap"},
        "indexes": {
            "demo": {
                "embedder": "hash",
                "sources": [{"kind": "directory", "path": str(HANDBOOK_DIR), "glob": "**/*.md"}],
                "ingestion": {"strategy": "on_startup"},
            },
            "pushed": {"embedder": "hash"},
        },
        "agents": {
            "assistant": {
                "name": "Assistant",
                "model": "offline/extractive-v1",
                "rag": {
                    "index": "demo",
                    "retrieval_mode": "lexical",
                    "mode": "grounded",
                    "no_context_behavior": "return_not_found",
                },
            }
        },
    }


@pytest.fixture(scope="module")
async def app() -> AsyncIterator[RunningApp]:
    async with serving(parse_config(config()), http=True) as running:
        yield running


@pytest.fixture(scope="module")
async def http(app: RunningApp) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{app.http_port}", timeout=30) as c:
        yield c


@pytest.fixture(scope="module")
async def channel(app: RunningApp) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        yield ch


def md(key: str | None) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {KEYS[key]}"),) if key else ()


VOLATILE = {
    "execution_id",
    "operation_id",
    "id",
    "duration",
    "timings",
    "started_at",
    "finished_at",
}


def normalized(message: Message) -> dict[str, Any]:
    """The message as JSON without what differs between two runs of one request
    (durations, timestamps, generated ids)."""
    from google.protobuf import json_format

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: strip(v)
                for k, v in value.items()
                if k not in VOLATILE
                and not k.endswith(("_at", "duration", "_ms", "_id", "_seconds"))
            }
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(json_format.MessageToDict(message, preserving_proto_field_name=True))  # type: ignore[no-any-return]


RETRIEVE = retriever_pb2.RetrieveRequest(
    query=retriever_pb2.RagQuery(index_name="demo", text="parental leave", top_k=3)
)
EXECUTE_INPUT = agent_pb2.ExecutionInput(
    agent_id="assistant", message="How many weeks of parental leave under POL-HR-014?"
)

# (method, request, response type, gRPC stub class) for every read-only unary RPC.
READS: list[tuple[str, Message, type[Message], Any]] = [
    (
        "groundwire.v1.RetrieverService/Retrieve",
        RETRIEVE,
        retriever_pb2.RetrieveResponse,
        retriever_pb2_grpc.RetrieverServiceStub,
    ),
    (
        "groundwire.v1.RerankerService/Rerank",
        reranker_pb2.RerankRequest(
            query="parental leave",
            candidates=[
                reranker_pb2.RerankCandidate(
                    document_id="a",
                    chunk_id="1",
                    content="parental leave is 16 weeks",
                    original_rank=1,
                ),
                reranker_pb2.RerankCandidate(
                    document_id="b",
                    chunk_id="1",
                    content="the cafeteria opens at 8",
                    original_rank=2,
                ),
            ],
        ),
        reranker_pb2.RerankResponse,
        reranker_pb2_grpc.RerankerServiceStub,
    ),
    (
        "groundwire.v1.IngestionManagerService/ListIndexes",
        ingestion_pb2.ListIndexesRequest(),
        ingestion_pb2.ListIndexesResponse,
        ingestion_pb2_grpc.IngestionManagerServiceStub,
    ),
    (
        "groundwire.v1.IngestionManagerService/GetIndex",
        ingestion_pb2.GetIndexRequest(index_name="demo"),
        ingestion_pb2.GetIndexResponse,
        ingestion_pb2_grpc.IngestionManagerServiceStub,
    ),
    (
        "groundwire.v1.IngestionManagerService/GetIndexStatus",
        ingestion_pb2.GetIndexStatusRequest(index_name="demo"),
        ingestion_pb2.GetIndexStatusResponse,
        ingestion_pb2_grpc.IngestionManagerServiceStub,
    ),
    (
        "groundwire.v1.IngestionManagerService/ListOperations",
        ingestion_pb2.ListOperationsRequest(index_name="demo"),
        ingestion_pb2.ListOperationsResponse,
        ingestion_pb2_grpc.IngestionManagerServiceStub,
    ),
    (
        "groundwire.v1.AgentService/ListAgents",
        agent_pb2.ListAgentsRequest(),
        agent_pb2.ListAgentsResponse,
        agent_pb2_grpc.AgentServiceStub,
    ),
    (
        "groundwire.v1.AgentService/GetAgent",
        agent_pb2.GetAgentRequest(agent_id="assistant"),
        agent_pb2.GetAgentResponse,
        agent_pb2_grpc.AgentServiceStub,
    ),
    (
        "groundwire.v1.AgentService/Execute",
        agent_pb2.ExecuteRequest(input=EXECUTE_INPUT),
        agent_pb2.ExecuteResponse,
        agent_pb2_grpc.AgentServiceStub,
    ),
    (
        "groundwire.v1.AgentService/PrepareExecution",
        agent_pb2.PrepareExecutionRequest(input=EXECUTE_INPUT),
        agent_pb2.PrepareExecutionResponse,
        agent_pb2_grpc.AgentServiceStub,
    ),
]


async def grpc_call(
    channel: grpc.aio.Channel, stub_type: Any, method: str, request: Message, key: str | None
) -> Message:
    stub = stub_type(channel)
    response: Message = await getattr(stub, method.rpartition("/")[2])(
        request, metadata=md(key), timeout=30
    )
    return response


@pytest.mark.parametrize(
    ("method", "request_", "response_type", "stub"),
    READS,
    ids=[r[0].rpartition("/")[2] for r in READS],
)
async def test_every_unary_read_answers_as_over_grpc(
    http: httpx.AsyncClient,
    channel: grpc.aio.Channel,
    method: str,
    request_: Message,
    response_type: type[Message],
    stub: Any,
) -> None:
    expected = await grpc_call(channel, stub, method, request_, "admin")
    over_json = await unary_json(http, method, request_, response_type, KEYS["admin"])
    over_proto = await unary_proto(http, method, request_, response_type, KEYS["admin"])
    assert not isinstance(over_json, ConnectError), over_json
    assert not isinstance(over_proto, ConnectError), over_proto
    assert normalized(over_json) == normalized(expected)
    assert normalized(over_proto) == normalized(expected)


async def test_writes_answer_as_over_grpc(
    http: httpx.AsyncClient, channel: grpc.aio.Channel
) -> None:
    ing = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
    upsert = "groundwire.v1.IngestionManagerService/UpsertDocuments"

    def push(doc_id: str) -> ingestion_pb2.UpsertDocumentsRequest:
        return ingestion_pb2.UpsertDocumentsRequest(
            index_name="pushed",
            documents=[
                ingestion_pb2.PushedDocument(
                    document_id=doc_id, text="Badges are renewed every year.", title="Badges"
                )
            ],
        )

    via_grpc = await ing.UpsertDocuments(push("grpc-doc"), metadata=md("admin"))
    via_connect = await unary_json(
        http, upsert, push("connect-doc"), ingestion_pb2.UpsertDocumentsResponse, KEYS["admin"]
    )
    assert not isinstance(via_connect, ConnectError), via_connect
    assert normalized(via_connect).keys() == normalized(via_grpc).keys()
    # The document pushed over Connect is found over gRPC: one process, one store.
    found = await retriever_pb2_grpc.RetrieverServiceStub(channel).Retrieve(
        retriever_pb2.RetrieveRequest(
            query=retriever_pb2.RagQuery(
                index_name="pushed",
                text="badges renewed",
                mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL,
            )
        ),
        metadata=md("admin"),
    )
    assert {r.document_id for r in found.results} >= {"grpc-doc", "connect-doc"}
    delete = "groundwire.v1.IngestionManagerService/DeleteDocuments"
    deleted = await unary_json(
        http,
        delete,
        ingestion_pb2.DeleteDocumentsRequest(index_name="pushed", document_ids=["connect-doc"]),
        ingestion_pb2.DeleteDocumentsResponse,
        KEYS["admin"],
    )
    assert not isinstance(deleted, ConnectError), deleted
    expected = await ing.DeleteDocuments(
        ingestion_pb2.DeleteDocumentsRequest(index_name="pushed", document_ids=["grpc-doc"]),
        metadata=md("admin"),
    )
    # Each write publishes the next version; otherwise the answers agree.
    assert int(expected.published_version) == int(deleted.published_version) + 1  # type: ignore[attr-defined]
    assert {**normalized(deleted), "published_version": 0} == {
        **normalized(expected),
        "published_version": 0,
    }


async def test_ingestion_start_watch_and_cancel(
    http: httpx.AsyncClient, channel: grpc.aio.Channel
) -> None:
    start = await unary_json(
        http,
        "groundwire.v1.IngestionManagerService/StartIngestion",
        ingestion_pb2.StartIngestionRequest(index_name="demo"),
        ingestion_pb2.StartIngestionResponse,
        KEYS["admin"],
    )
    assert not isinstance(start, ConnectError), start
    op_id = start.operation.id  # type: ignore[attr-defined]
    watched = await server_stream(
        http,
        "groundwire.v1.IngestionManagerService/WatchIngestion",
        ingestion_pb2.WatchIngestionRequest(operation_id=op_id),
        ingestion_pb2.WatchIngestionResponse,
        KEYS["admin"],
    )
    assert watched.error is None
    assert watched.messages, "at least the final state"
    final = watched.messages[-1].operation  # type: ignore[attr-defined]
    stub = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
    over_grpc = [
        m
        async for m in stub.WatchIngestion(
            ingestion_pb2.WatchIngestionRequest(operation_id=op_id), metadata=md("admin")
        )
    ]
    assert normalized(over_grpc[-1]) == normalized(watched.messages[-1])
    assert final.state == over_grpc[-1].operation.state
    assert len(watched.metadata["x-request-id"]) == 1
    # Nothing runs any more: both transports refuse the cancel the same way.
    cancel = ingestion_pb2.CancelIngestionRequest(index_name="demo")
    refused = await unary_json(
        http,
        "groundwire.v1.IngestionManagerService/CancelIngestion",
        cancel,
        ingestion_pb2.CancelIngestionResponse,
        KEYS["admin"],
    )
    try:
        expected = await stub.CancelIngestion(cancel, metadata=md("admin"))
    except grpc.aio.AioRpcError as err:
        assert isinstance(refused, ConnectError)
        assert refused.reason == rich_error(err).reason
        assert refused.code == err.code().name.lower()
    else:
        assert not isinstance(refused, ConnectError)
        assert normalized(refused) == normalized(expected)


@pytest.mark.parametrize("codec", ["json", "proto"])
async def test_execute_stream_matches_grpc(
    http: httpx.AsyncClient, channel: grpc.aio.Channel, codec: str
) -> None:
    request = agent_pb2.ExecuteStreamRequest(input=EXECUTE_INPUT)
    over_connect = await server_stream(
        http,
        "groundwire.v1.AgentService/ExecuteStream",
        request,
        agent_pb2.ExecuteStreamResponse,
        KEYS["admin"],
        codec,
    )
    stub = agent_pb2_grpc.AgentServiceStub(channel)
    over_grpc = [e async for e in stub.ExecuteStream(request, metadata=md("admin"))]
    assert over_connect.error is None
    assert [e.type for e in over_connect.messages] == [e.type for e in over_grpc]  # type: ignore[attr-defined]
    assert normalized(over_connect.messages[-1]) == normalized(over_grpc[-1])
    assert over_connect.messages[-1].type == agent_pb2.EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED  # type: ignore[attr-defined]


async def test_stream_errors_travel_in_the_end_stream_message(http: httpx.AsyncClient) -> None:
    request = agent_pb2.ExecuteStreamRequest(
        input=agent_pb2.ExecutionInput(agent_id="nobody", message="hi")
    )
    result = await server_stream(
        http,
        "groundwire.v1.AgentService/ExecuteStream",
        request,
        agent_pb2.ExecuteStreamResponse,
        KEYS["admin"],
    )
    assert result.messages == []
    assert result.error is not None
    assert (result.error.code, result.error.reason) == ("not_found", "AGENT_NOT_FOUND")
    denied = await server_stream(
        http,
        "groundwire.v1.AgentService/ExecuteStream",
        agent_pb2.ExecuteStreamRequest(input=EXECUTE_INPUT),
        agent_pb2.ExecuteStreamResponse,
        KEYS["reader"],
    )
    assert denied.error is not None and denied.error.reason == "PERMISSION_DENIED"


async def test_reload_is_refused_as_over_grpc(
    http: httpx.AsyncClient, channel: grpc.aio.Channel
) -> None:
    method = "groundwire.v1.AdminService/ReloadConfiguration"
    request = admin_pb2.ReloadConfigurationRequest(validate_only=True)
    over_connect = await unary_json(
        http, method, request, admin_pb2.ReloadConfigurationResponse, KEYS["admin"]
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await admin_pb2_grpc.AdminServiceStub(channel).ReloadConfiguration(
            request, metadata=md("admin")
        )
    assert isinstance(over_connect, ConnectError)
    assert over_connect.reason == rich_error(caught.value).reason == "RELOAD_UNAVAILABLE"
    assert over_connect.code == "failed_precondition" and over_connect.http_status == 400


DENIALS = [
    # (key, method, request, expected code, reason)
    (
        None,
        "groundwire.v1.RetrieverService/Retrieve",
        RETRIEVE,
        "unauthenticated",
        "UNAUTHENTICATED",
    ),
    (
        "reader",
        "groundwire.v1.AgentService/Execute",
        agent_pb2.ExecuteRequest(input=EXECUTE_INPUT),
        "permission_denied",
        "PERMISSION_DENIED",
    ),
    (
        "acme",
        "groundwire.v1.IngestionManagerService/StartIngestion",
        ingestion_pb2.StartIngestionRequest(index_name="demo"),
        "permission_denied",
        "PERMISSION_DENIED",
    ),
    (
        "acme",
        "groundwire.v1.RetrieverService/Retrieve",
        retriever_pb2.RetrieveRequest(
            query=retriever_pb2.RagQuery(index_name="demo", text="leave", tenant="globex")
        ),
        "permission_denied",
        None,
    ),
    (
        "admin",
        "groundwire.v1.RetrieverService/Retrieve",
        retriever_pb2.RetrieveRequest(query=retriever_pb2.RagQuery(index_name="nope", text="x")),
        "not_found",
        "INDEX_NOT_FOUND",
    ),
    (
        "admin",
        "groundwire.v1.RetrieverService/Retrieve",
        retriever_pb2.RetrieveRequest(query=retriever_pb2.RagQuery(index_name="demo", text="  ")),
        "invalid_argument",
        "EMPTY_QUERY",
    ),
]
STATUS = {
    "unauthenticated": 401,
    "permission_denied": 403,
    "not_found": 404,
    "invalid_argument": 400,
}
STUBS = {
    "RetrieverService": retriever_pb2_grpc.RetrieverServiceStub,
    "AgentService": agent_pb2_grpc.AgentServiceStub,
    "IngestionManagerService": ingestion_pb2_grpc.IngestionManagerServiceStub,
}


@pytest.mark.parametrize(("key", "method", "request_", "code", "reason"), DENIALS)
async def test_denials_match_grpc(
    http: httpx.AsyncClient,
    channel: grpc.aio.Channel,
    key: str | None,
    method: str,
    request_: Message,
    code: str,
    reason: str | None,
) -> None:
    service = method.split("/")[0].rpartition(".")[2]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await grpc_call(channel, STUBS[service], method, request_, key)
    expected = rich_error(caught.value)
    got = await unary_json(http, method, request_, Message, KEYS[key] if key else None)
    assert isinstance(got, ConnectError)
    assert got.code == code == expected.code.name.lower()
    assert got.http_status == STATUS[code]
    assert got.reason == expected.reason
    assert got.message == expected.message
    assert got.fields == expected.fields
    if reason is not None:
        assert got.reason == reason


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/json", b"{"),
        ("application/json", b'{"query": {"top_k": "many"}}'),
        ("application/json", b"[1, 2]"),
        ("application/json", b"\xff\xfe"),
        ("application/proto", b"\xff\xff\xff"),
        ("application/proto", b"\x0a\x05\x12\x03\xc3\x28"),  # invalid UTF-8 in a string field
    ],
)
async def test_malformed_bodies_are_refused_after_authentication(
    http: httpx.AsyncClient, content_type: str, body: bytes
) -> None:
    url = "/groundwire.v1.RetrieverService/Retrieve"
    r = await http.post(
        url,
        content=body,
        headers={"content-type": content_type, "authorization": f"Bearer {KEYS['admin']}"},
    )
    assert r.status_code == 400
    err = parse_error(r.status_code, r.json())
    assert (err.code, err.reason) == ("invalid_argument", "MALFORMED_REQUEST")
    anonymous = await http.post(url, content=body, headers={"content-type": content_type})
    assert anonymous.status_code == 401


async def test_transport_refusals(http: httpx.AsyncClient, app: RunningApp) -> None:
    auth = {"authorization": f"Bearer {KEYS['admin']}"}
    r = await http.post(
        "/groundwire.v1.RetrieverService/Nope",
        content=b"{}",
        headers={"content-type": "application/json", **auth},
    )
    assert r.status_code == 404 and parse_error(404, r.json()).reason == "METHOD_NOT_FOUND"
    # A bidirectional stream has no Connect form over HTTP/1.1: refused by name.
    r = await http.post(
        "/groundwire.v1.AgentService/ExecuteInteractive",
        content=b"{}",
        headers={"content-type": "application/connect+json", **auth},
    )
    assert r.status_code == 404 and parse_error(404, r.json()).reason == "METHOD_NOT_FOUND"
    r = await http.post(
        "/groundwire.v1.RetrieverService/Retrieve",
        content=b"{}",
        headers={"content-type": "text/plain", **auth},
    )
    assert r.status_code == 415 and parse_error(415, r.json()).reason == "UNSUPPORTED_MEDIA_TYPE"
    r = await http.post(
        "/groundwire.v1.RetrieverService/Retrieve",
        content=b"{}",
        headers={"content-type": "application/json", "content-encoding": "gzip", **auth},
    )
    assert parse_error(r.status_code, r.json()).reason == "UNSUPPORTED_MEDIA_TYPE"
    r = await http.get("/groundwire.v1.RetrieverService/Retrieve", headers=auth)
    assert r.status_code == 405
    big = (
        b'{"query": {"text": "'
        + b"x" * (app.components.config.server.max_message_bytes + 10)
        + b'"}}'
    )
    r = await http.post(
        "/groundwire.v1.RetrieverService/Retrieve",
        content=big,
        headers={"content-type": "application/json", **auth},
    )
    assert r.status_code == 429 and parse_error(429, r.json()).reason == "MESSAGE_TOO_LARGE"
    # A broken envelope on a stream is MALFORMED_REQUEST in the end-stream message.
    r = await http.post(
        "/groundwire.v1.AgentService/ExecuteStream",
        content=ENVELOPE.pack(0, 99) + b"{}",
        headers={"content-type": "application/connect+json", **auth},
    )
    end = json.loads(split_envelopes(r.content)[-1][1])
    assert parse_error(200, end["error"]).reason == "MALFORMED_REQUEST"


async def test_request_id_and_deadline(http: httpx.AsyncClient) -> None:
    r = await http.post(
        "/groundwire.v1.AgentService/ListAgents",
        content=b"{}",
        headers={
            "content-type": "application/json",
            "authorization": f"Bearer {KEYS['admin']}",
            "x-request-id": "trace-123",
            "connect-timeout-ms": "5000",
        },
    )
    assert r.status_code == 200
    assert r.headers["trailer-x-request-id"] == "trace-123"
    bad = await http.post(
        "/groundwire.v1.AgentService/ListAgents",
        content=b"{}",
        headers={
            "content-type": "application/json",
            "authorization": f"Bearer {KEYS['admin']}",
            "connect-timeout-ms": "soon",
        },
    )
    assert bad.status_code == 400


async def test_cors_is_off_by_default(http: httpx.AsyncClient) -> None:
    r = await http.options(
        "/groundwire.v1.AgentService/ListAgents",
        headers={"origin": "https://evil.example", "access-control-request-method": "POST"},
    )
    assert "access-control-allow-origin" not in r.headers


async def test_cors_when_configured() -> None:
    cfg = parse_config(
        {
            **config(),
            "http": {"cors_allowed_origins": ["https://console.example"]},
            "indexes": {},
            "agents": {},
        }
    )
    async with (
        serving(cfg, http=True) as running,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{running.http_port}") as c,
    ):
        pre = await c.options(
            "/groundwire.v1.AgentService/ListAgents",
            headers={
                "origin": "https://console.example",
                "access-control-request-method": "POST",
                "access-control-request-headers": "authorization,content-type,connect-protocol-version",
            },
        )
        assert pre.status_code == 200
        assert pre.headers["access-control-allow-origin"] == "https://console.example"
        other = await c.options(
            "/groundwire.v1.AgentService/ListAgents",
            headers={"origin": "https://evil.example", "access-control-request-method": "POST"},
        )
        assert other.status_code == 400
        # CORS decides what a browser may read, never who may call: the key still rules.
        r = await c.post(
            "/groundwire.v1.AgentService/ListAgents",
            content=b"{}",
            headers={"content-type": "application/json", "origin": "https://console.example"},
        )
        assert r.status_code == 401


async def test_access_log_names_the_transport_and_no_content(
    http: httpx.AsyncClient, channel: grpc.aio.Channel, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="groundwire.access")
    await unary_json(
        http,
        "groundwire.v1.RetrieverService/Retrieve",
        RETRIEVE,
        retriever_pb2.RetrieveResponse,
        KEYS["admin"],
    )
    await grpc_call(
        channel,
        retriever_pb2_grpc.RetrieverServiceStub,
        "groundwire.v1.RetrieverService/Retrieve",
        RETRIEVE,
        "admin",
    )
    lines = [
        r
        for r in caplog.records
        if r.name == "groundwire.access" and getattr(r, "method", "").endswith("/Retrieve")
    ]
    assert sorted(str(getattr(r, "transport", "")) for r in lines[-2:]) == ["connect_rpc", "grpc"]
    for record in lines:
        assert "parental" not in record.getMessage() and "parental" not in str(record.__dict__)
        assert KEYS["admin"] not in str(record.__dict__)


async def test_health_check_over_connect(http: httpx.AsyncClient) -> None:
    # Public, like on the gRPC port: no key needed.
    r = await http.post(
        "/grpc.health.v1.Health/Check", content=b"{}", headers={"content-type": "application/json"}
    )
    assert r.status_code == 200 and r.json() == {"status": "SERVING"}
    r = await http.post(
        "/grpc.health.v1.Health/Check",
        content=b'{"service": "nope"}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    r = await http.post(
        "/grpc.health.v1.Health/Watch",
        content=b"{}",
        headers={"content-type": "application/connect+json"},
    )
    assert r.status_code == 404


# ---- gRPC-Web on the same paths --------------------------------------------


def grpc_web_frames(data: bytes) -> tuple[list[bytes], dict[str, str]]:
    """Data frames and the parsed trailer frame of a gRPC-Web answer."""
    messages: list[bytes] = []
    trailers: dict[str, str] = {}
    for flags, payload in split_envelopes(data):
        if flags & 0x80:
            for line in payload.decode().split("\r\n"):
                if line:
                    key, _, value = line.partition(":")
                    trailers[key.strip()] = value.strip()
        else:
            messages.append(payload)
    return messages, trailers


async def grpc_web(
    http: httpx.AsyncClient, method: str, request: Message, key: str | None, text: bool = False
) -> tuple[list[bytes], dict[str, str]]:
    body = request.SerializeToString()
    framed = ENVELOPE.pack(0, len(body)) + body
    content_type = "application/grpc-web-text" if text else "application/grpc-web+proto"
    headers = {"content-type": content_type, "x-grpc-web": "1"}
    if key:
        headers["authorization"] = f"Bearer {KEYS[key]}"
    r = await http.post(
        f"/{method}", content=base64.b64encode(framed) if text else framed, headers=headers
    )
    assert r.status_code == 200
    content = r.content
    if text:
        # Each frame is base64 on its own (padded), so decode frame by frame.
        raw = b""
        for chunk in re.findall(rb"[A-Za-z0-9+/]+=*", content):
            raw += base64.b64decode(chunk)
        content = raw
    return grpc_web_frames(content)


@pytest.mark.parametrize("text", [False, True], ids=["binary", "text"])
async def test_grpc_web_unary_and_stream(
    http: httpx.AsyncClient, channel: grpc.aio.Channel, text: bool
) -> None:
    messages, trailers = await grpc_web(
        http, "groundwire.v1.RetrieverService/Retrieve", RETRIEVE, "admin", text
    )
    expected = await grpc_call(
        channel,
        retriever_pb2_grpc.RetrieverServiceStub,
        "groundwire.v1.RetrieverService/Retrieve",
        RETRIEVE,
        "admin",
    )
    assert trailers["grpc-status"] == "0" and trailers["x-request-id"]
    assert normalized(retriever_pb2.RetrieveResponse.FromString(messages[0])) == normalized(
        expected
    )
    events, trailers = await grpc_web(
        http,
        "groundwire.v1.AgentService/ExecuteStream",
        agent_pb2.ExecuteStreamRequest(input=EXECUTE_INPUT),
        "admin",
        text,
    )
    assert trailers["grpc-status"] == "0"
    assert (
        agent_pb2.ExecuteStreamResponse.FromString(events[-1]).type
        == agent_pb2.EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED
    )


async def test_grpc_web_errors_carry_the_rich_status(http: httpx.AsyncClient) -> None:
    from google.rpc import error_details_pb2, status_pb2

    for key, request, code, reason in [
        (None, RETRIEVE, grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED"),
        (
            "admin",
            retriever_pb2.RetrieveRequest(
                query=retriever_pb2.RagQuery(index_name="nope", text="x")
            ),
            grpc.StatusCode.NOT_FOUND,
            "INDEX_NOT_FOUND",
        ),
    ]:
        messages, trailers = await grpc_web(
            http, "groundwire.v1.RetrieverService/Retrieve", request, key
        )
        assert messages == []
        assert trailers["grpc-status"] == str(code.value[0])
        raw = trailers["grpc-status-details-bin"]
        status = status_pb2.Status.FromString(base64.b64decode(raw + "=" * (-len(raw) % 4)))
        info = error_details_pb2.ErrorInfo()
        assert status.details[0].Unpack(info) and info.reason == reason
    r = await http.post(
        "/groundwire.v1.RetrieverService/Retrieve",
        content=b"\x00\x00\x00\x00\x09garbage!!",
        headers={
            "content-type": "application/grpc-web+proto",
            "authorization": f"Bearer {KEYS['admin']}",
        },
    )
    _, trailers = grpc_web_frames(r.content)
    assert trailers["grpc-status"] == str(grpc.StatusCode.INVALID_ARGUMENT.value[0])


async def test_http_calls_bind_to_the_reloaded_snapshot(tmp_path: Path) -> None:
    """Keys, agents and limits of a reloaded file apply to the HTTP port at the
    same instant as to the gRPC port (one snapshot holder, one interceptor)."""
    from groundwire.app.config import load_config
    from groundwire.app.lifecycle import start_app
    from tests.support.toml_writer import dumps

    first = config()
    path = tmp_path / "groundwire.toml"
    path.write_text(dumps(first))
    app = await start_app(
        load_config(path), "127.0.0.1:0", config_path=path, http_address="127.0.0.1:0"
    )
    try:
        await app.wait_ready()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{app.http_port}") as http:
            method = "groundwire.v1.AgentService/ListAgents"
            late = "gw_late-key-000000000000000000000000000000000000000"
            before = await unary_json(
                http, method, agent_pb2.ListAgentsRequest(), agent_pb2.ListAgentsResponse, late
            )
            assert isinstance(before, ConnectError) and before.reason == "UNAUTHENTICATED"
            second: dict[str, Any] = config()
            second["auth"]["keys"].append(
                {"id": "late", "hash": hash_key(late), "permissions": ["execute"]}
            )
            second["agents"]["second"] = {"name": "Second", "model": "offline/extractive-v1"}
            path.write_text(dumps(second))
            reload = await unary_json(
                http,
                "groundwire.v1.AdminService/ReloadConfiguration",
                admin_pb2.ReloadConfigurationRequest(),
                admin_pb2.ReloadConfigurationResponse,
                KEYS["admin"],
            )
            assert not isinstance(reload, ConnectError), reload
            after = await unary_json(
                http, method, agent_pb2.ListAgentsRequest(), agent_pb2.ListAgentsResponse, late
            )
            assert not isinstance(after, ConnectError), after
            assert sorted(a.id for a in after.agents) == ["assistant", "second"]  # type: ignore[attr-defined]
            # A changed [http] section needs a restart, like the gRPC address.
            path.write_text(dumps({**second, "http": {"cors_allowed_origins": ["*"]}}))
            refused = await unary_json(
                http,
                "groundwire.v1.AdminService/ReloadConfiguration",
                admin_pb2.ReloadConfigurationRequest(),
                admin_pb2.ReloadConfigurationResponse,
                KEYS["admin"],
            )
            assert isinstance(refused, ConnectError) and refused.reason == "CONFIG_RESTART_REQUIRED"
            assert "http" in refused.fields
    finally:
        await app.stop(0)
