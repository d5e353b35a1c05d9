"""RerankerService over real gRPC (127.0.0.1, the generated stub, the service
interceptor): outcomes, metadata, FAIL-policy errors and every kind of bad input
with its status, reason and field."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_reflection.v1alpha import reflection
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from groundwire.api.interceptors import ServiceInterceptor
from groundwire.api.services import RERANKER_SERVICE, register_reranker_service
from groundwire.domain.reranking import FailurePolicy
from groundwire.providers.rerankers.base import Reranker
from groundwire.providers.rerankers.offline import OfflineReranker
from groundwire.reranking.requests import RerankDefaults, RerankLimits
from groundwire.reranking.service import RerankingService
from groundwire.reranking.stage import RerankingMetrics, RerankingStage, StageSettings
from groundwire_client.v1 import reranker_pb2, reranker_pb2_grpc
from tests.support.errors import rich_error
from tests.support.toolchains import require

pytestmark = pytest.mark.timeout(30)

QUERY = "parental leave for new parents"
SECRET = "confidential salary band 7"

C = reranker_pb2.RerankCandidate


class Server:
    def __init__(self, server: grpc.aio.Server, port: int, rerankers: dict[str, Any]) -> None:
        self.server = server
        self.port = port
        self.rerankers = rerankers
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        self.stub = reranker_pb2_grpc.RerankerServiceStub(self.channel)


async def start(default: str | None = "offline", **limits: Any) -> Server:
    rerankers: dict[str, Reranker] = {
        "offline": OfflineReranker(),
        "down": OfflineReranker(behaviour="unavailable"),
        "hang": OfflineReranker(behaviour="hang"),
        "garbage": OfflineReranker(behaviour="duplicate"),
    }
    meter = MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("groundwire")
    service = RerankingService(
        rerankers,
        stage=RerankingStage(metrics=RerankingMetrics(meter)),
        defaults=RerankDefaults(default, StageSettings()),
        limits=RerankLimits(**{"max_request_candidates": 10, **limits}),
    )
    server = grpc.aio.server(interceptors=[ServiceInterceptor()])
    name = register_reranker_service(server, service)
    reflection.enable_server_reflection((name, reflection.SERVICE_NAME), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return Server(server, port, rerankers)


@pytest.fixture(scope="module")
async def srv() -> AsyncIterator[Server]:
    s = await start()
    yield s
    await s.channel.close()
    await s.server.stop(None)


def cands(n: int, ranked: bool = True) -> list[reranker_pb2.RerankCandidate]:
    words = QUERY.split()
    return [
        C(
            document_id=f"doc-{i}",
            chunk_id="c0",
            content=f"{SECRET} " + " ".join(words[: i - 1]),
            original_rank=i if ranked else 0,
        )
        for i in range(1, n + 1)
    ]


async def rerank(srv: Server, **fields: Any) -> reranker_pb2.RerankResponse:
    fields.setdefault("query", QUERY)
    return await srv.stub.Rerank(reranker_pb2.RerankRequest(**fields), timeout=10)


def error_info(err: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo:
    raw = dict(err.trailing_metadata() or ()).get("grpc-status-details-bin")
    assert isinstance(raw, bytes)
    for detail in status_pb2.Status.FromString(raw).details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    raise AssertionError("no ErrorInfo")


async def test_rerank_succeeds_with_metadata(srv: Server) -> None:
    resp = await rerank(srv, candidates=cands(4))
    assert [r.document_id for r in resp.results] == ["doc-4", "doc-3", "doc-2", "doc-1"]
    assert [r.rerank_rank for r in resp.results] == [1, 2, 3, 4]
    assert [r.original_rank for r in resp.results] == [4, 3, 2, 1]
    assert all(r.HasField("rerank_relevance") for r in resp.results)
    assert resp.results[0].rerank_relevance == pytest.approx(0.6)  # 3 of 5 words
    assert resp.results[0].answerability == reranker_pb2.ANSWERABILITY_ANSWERABLE
    assert resp.results[-1].answerability == reranker_pb2.ANSWERABILITY_NOT_ANSWERABLE
    md = resp.reranking
    assert md.requested and md.ran and md.candidate_count == 4
    assert md.outcome == reranker_pb2.RERANK_OUTCOME_SUCCEEDED
    assert md.failure_policy == reranker_pb2.RERANK_FAILURE_POLICY_USE_ORIGINAL_ORDER
    assert md.answerability == reranker_pb2.ANSWERABILITY_ANSWERABLE
    assert not md.timed_out and md.failure_code == ""
    assert list(md.candidates) == list(resp.results)
    assert md.duration.ToNanoseconds() > 0
    # The response never carries content.
    assert SECRET not in str(resp) and QUERY not in str(resp)


async def test_candidates_beyond_maximum_candidates_follow_in_original_order(srv: Server) -> None:
    resp = await rerank(srv, candidates=cands(8), maximum_candidates=3)
    assert [r.document_id for r in resp.results] == [
        "doc-3",
        "doc-2",
        "doc-1",
        "doc-4",
        "doc-5",
        "doc-6",
        "doc-7",
        "doc-8",
    ]
    tail = resp.results[3:]
    assert not any(r.HasField("rerank_relevance") for r in tail)
    assert {r.answerability for r in tail} == {reranker_pb2.ANSWERABILITY_UNKNOWN}
    assert resp.reranking.candidate_count == 3 and len(resp.reranking.candidates) == 3
    assert srv.rerankers["offline"].calls[-1] == (
        ("doc-1", "c0"),
        ("doc-2", "c0"),
        ("doc-3", "c0"),
    )


async def test_default_maximum_is_five(srv: Server) -> None:
    resp = await rerank(srv, candidates=cands(7))
    assert resp.reranking.candidate_count == 5


async def test_unset_original_ranks_are_positions(srv: Server) -> None:
    resp = await rerank(srv, candidates=cands(3, ranked=False))
    assert sorted(r.original_rank for r in resp.results) == [1, 2, 3]


async def test_empty_candidates_are_a_successful_no_op(srv: Server) -> None:
    resp = await rerank(srv, candidates=[])
    assert list(resp.results) == []
    assert resp.reranking.outcome == reranker_pb2.RERANK_OUTCOME_SKIPPED
    assert resp.reranking.requested and not resp.reranking.ran


@pytest.mark.parametrize(
    ("name", "code"), [("down", "RerankerUnavailable"), ("garbage", "RerankerInvalidResponse")]
)
async def test_failure_falls_back_by_default(srv: Server, name: str, code: str) -> None:
    resp = await rerank(srv, candidates=cands(4), reranker=name)
    md = resp.reranking
    assert md.outcome == reranker_pb2.RERANK_OUTCOME_FALLBACK
    assert md.failure_code == code and not md.timed_out
    assert md.answerability == reranker_pb2.ANSWERABILITY_UNKNOWN
    assert [r.document_id for r in resp.results] == ["doc-1", "doc-2", "doc-3", "doc-4"]
    assert not any(r.HasField("rerank_relevance") for r in resp.results)


async def test_timeout_falls_back_and_says_so(srv: Server) -> None:
    resp = await rerank(
        srv, candidates=cands(3), reranker="hang", timeout=duration_pb2.Duration(nanos=100_000_000)
    )
    md = resp.reranking
    assert md.outcome == reranker_pb2.RERANK_OUTCOME_FALLBACK
    assert md.timed_out and md.failure_code == "RerankerTimeout"
    # "hang" never answers: the bound only has to hold on a loaded machine.
    assert 0.1 <= md.duration.ToNanoseconds() / 1e9 < 5.0


async def test_fail_policy_turns_a_failure_into_an_error_status(srv: Server) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await rerank(
            srv,
            candidates=cands(3),
            reranker="down",
            failure_policy=reranker_pb2.RERANK_FAILURE_POLICY_FAIL,
        )
    err = info.value
    assert err.code() == grpc.StatusCode.UNAVAILABLE
    detail = error_info(err)
    assert detail.reason == "RERANKER_FAILED" and detail.domain == "groundwire.dev"
    assert dict(detail.metadata) == {"failure_code": "RerankerUnavailable"}
    assert SECRET not in (err.details() or "")


async def test_fail_policy_timeout_is_deadline_exceeded(srv: Server) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await rerank(
            srv,
            candidates=cands(3),
            reranker="hang",
            failure_policy=reranker_pb2.RERANK_FAILURE_POLICY_FAIL,
            timeout=duration_pb2.Duration(nanos=100_000_000),
        )
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    detail = error_info(info.value)
    assert detail.reason == "RERANKER_TIMEOUT"
    assert dict(detail.metadata) == {"failure_code": "RerankerTimeout"}


async def test_caller_deadline_cancels_the_reranker_call(srv: Server) -> None:
    hang = srv.rerankers["hang"]
    before = hang.cancelled
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await srv.stub.Rerank(
            reranker_pb2.RerankRequest(
                query=QUERY,
                candidates=cands(2),
                reranker="hang",
                timeout=duration_pb2.Duration(seconds=30),
            ),
            timeout=0.2,
        )
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    for _ in range(50):
        if hang.cancelled > before:
            break
        await asyncio.sleep(0.02)
    assert hang.cancelled == before + 1


BAD: list[tuple[dict[str, Any], grpc.StatusCode, str, list[str]]] = [
    ({"query": ""}, grpc.StatusCode.INVALID_ARGUMENT, "EMPTY_QUERY", ["query"]),
    ({"query": "   "}, grpc.StatusCode.INVALID_ARGUMENT, "EMPTY_QUERY", ["query"]),
    ({"query": "x" * 5000}, grpc.StatusCode.INVALID_ARGUMENT, "FIELD_TOO_LONG", ["query"]),
    (
        {"candidates": cands(11)},
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_OUT_OF_RANGE",
        ["candidates"],
    ),
    (
        {"candidates": [*cands(1), C(document_id="d", chunk_id="c", content=" ", original_rank=2)]},
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_REQUIRED",
        ["candidates[1].content"],
    ),
    (
        {"candidates": [C(document_id="", chunk_id="c", content="t", original_rank=1)]},
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_REQUIRED",
        ["candidates[0].document_id"],
    ),
    (
        {"candidates": [C(document_id="d", chunk_id="", content="t", original_rank=1)]},
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_REQUIRED",
        ["candidates[0].chunk_id"],
    ),
    (
        {"candidates": [C(document_id="d", chunk_id="c", content="t" * 40_000, original_rank=1)]},
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_TOO_LONG",
        ["candidates[0].content"],
    ),
    (
        {
            "candidates": [
                *cands(2),
                C(document_id="doc-1", chunk_id="c0", content="t", original_rank=3),
            ]
        },
        grpc.StatusCode.INVALID_ARGUMENT,
        "DUPLICATE_CANDIDATE",
        ["candidates[2]"],
    ),
    (
        {"candidates": [*cands(2), C(document_id="d", chunk_id="c", content="t", original_rank=2)]},
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_OUT_OF_RANGE",
        ["candidates[2].original_rank"],
    ),
    (
        {"candidates": [*cands(1), C(document_id="d", chunk_id="c", content="t", original_rank=0)]},
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_OUT_OF_RANGE",
        ["candidates[1].original_rank"],
    ),
    (
        {"failure_policy": 42},
        grpc.StatusCode.INVALID_ARGUMENT,
        "UNKNOWN_ENUM_VALUE",
        ["failure_policy"],
    ),
    (
        {"timeout": duration_pb2.Duration(seconds=0)},
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_OUT_OF_RANGE",
        ["timeout"],
    ),
    (
        {"timeout": duration_pb2.Duration(seconds=-1)},
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_OUT_OF_RANGE",
        ["timeout"],
    ),
    (
        {"timeout": duration_pb2.Duration(seconds=61)},
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_OUT_OF_RANGE",
        ["timeout"],
    ),
    (
        {"maximum_candidates": 0},
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_OUT_OF_RANGE",
        ["maximum_candidates"],
    ),
    (
        {"maximum_candidates": 101},
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_OUT_OF_RANGE",
        ["maximum_candidates"],
    ),
    ({"reranker": "x" * 65}, grpc.StatusCode.INVALID_ARGUMENT, "FIELD_TOO_LONG", ["reranker"]),
    ({"reranker": "nope"}, grpc.StatusCode.NOT_FOUND, "RERANKER_NOT_FOUND", []),
    ({"reranker": "../etc"}, grpc.StatusCode.NOT_FOUND, "RERANKER_NOT_FOUND", []),
]


@pytest.mark.parametrize(
    ("fields", "code", "reason", "violations"), BAD, ids=[f"{b[2]}-{i}" for i, b in enumerate(BAD)]
)
async def test_bad_requests_are_rejected_with_rich_errors(
    srv: Server,
    fields: dict[str, Any],
    code: grpc.StatusCode,
    reason: str,
    violations: list[str],
) -> None:
    fields = {"candidates": cands(2), **fields}
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await rerank(srv, **fields)
    err = rich_error(info.value)
    assert (err.code, err.reason, err.domain, err.fields) == (
        code,
        reason,
        "groundwire.dev",
        violations,
    )
    assert SECRET not in err.message and QUERY not in err.message and "xxxx" not in err.message


async def test_no_reranker_named_and_no_default_is_failed_precondition() -> None:
    s = await start(default=None)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await rerank(s, candidates=cands(2))
        err = rich_error(info.value)
        assert err.code == grpc.StatusCode.FAILED_PRECONDITION
        assert err.reason == "RERANKER_NOT_CONFIGURED"
        ok = await rerank(s, candidates=cands(2), reranker="offline")
        assert ok.reranking.outcome == reranker_pb2.RERANK_OUTCOME_SUCCEEDED
    finally:
        await s.channel.close()
        await s.server.stop(None)


async def test_server_default_policy_applies_when_unspecified() -> None:
    s = await start()
    # Swap in a service whose default policy is FAIL.
    try:
        svc = RerankingService(
            s.rerankers,
            stage=RerankingStage(
                metrics=RerankingMetrics(
                    MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("g")
                )
            ),
            defaults=RerankDefaults("down", StageSettings(failure_policy=FailurePolicy.FAIL)),
            limits=RerankLimits(),
        )
        server = grpc.aio.server(interceptors=[ServiceInterceptor()])
        register_reranker_service(server, svc)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = reranker_pb2_grpc.RerankerServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.Rerank(reranker_pb2.RerankRequest(query=QUERY, candidates=cands(2)))
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        await server.stop(None)
    finally:
        await s.channel.close()
        await s.server.stop(None)


async def test_grpcurl_can_describe_and_call_rerank(srv: Server) -> None:
    grpcurl = require("grpcurl", purpose="the grpcurl Rerank test")["grpcurl"]
    base = [str(grpcurl), "-plaintext", "-max-time", "10"]
    target = f"127.0.0.1:{srv.port}"
    listed = await asyncio.to_thread(
        subprocess.run, [*base, target, "list"], capture_output=True, text=True, timeout=20
    )
    assert RERANKER_SERVICE in listed.stdout.split(), listed.stderr
    data = {
        "query": QUERY,
        "candidates": [
            {"document_id": "a", "chunk_id": "1", "content": "nothing relevant"},
            {"document_id": "b", "chunk_id": "1", "content": "parental leave for new parents"},
        ],
        "failure_policy": "RERANK_FAILURE_POLICY_USE_ORIGINAL_ORDER",
        "timeout": "2s",
    }
    called = await asyncio.to_thread(
        subprocess.run,
        [*base, "-d", json.dumps(data), target, f"{RERANKER_SERVICE}/Rerank"],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert called.returncode == 0, called.stderr
    body = json.loads(called.stdout)
    assert [r["document_id"] for r in body["results"]] == ["b", "a"]
    assert body["reranking"]["outcome"] == "RERANK_OUTCOME_SUCCEEDED"
