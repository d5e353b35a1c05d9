"""A reload that loads models stays off the serving path (issue 25, part 4).

A real `groundwire serve` process with local ONNX embedders (MiniLM), indexes
chunked by their tokens and an ONNX cross-encoder reranker is reloaded with a
configuration that changes the cross-encoder and one embedder (new sessions,
tokenizers and load probes) and so the handles of INDEXES indexes. While the reload runs, this process polls
grpc.health.v1 Check back to back and keeps Rerank (on the cross-encoder) and
Retrieve calls in flight: every health answer comes within HEALTH_BOUND_S, and
every call overlapping the reload succeeds without the reranker falling back.
Before the fix the event loop built all of that itself and stalled for 1.5-5 s
(bench/bench_reload_stall.py)."""

from __future__ import annotations

import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import numpy as np
import onnx
import pytest
from grpc_health.v1 import health_pb2
from onnx import TensorProto, helper, numpy_helper

from groundwire.app.config import load_config
from groundwire.app.lifecycle import start_app
from groundwire.providers.embeddings.onnx_local import default_model_path, default_tokenizer_path
from groundwire.providers.rerankers.onnx_cross_encoder import OnnxCrossEncoderReranker
from groundwire_client.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    reranker_pb2,
    reranker_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
)
from tests.support.reload_probe import write
from tests.support.servers import ServerProcess, free_port, health_stub

pytestmark = pytest.mark.timeout(180)

# Every health answer during a reload comes within this (the stalls it replaces
# were 1.5-5 s; an unloaded server answers in about 1 ms).
HEALTH_BOUND_S = 1.0
INDEXES = 24
TEXTS = [
    "The leave policy grants twenty days of paid leave each year.",
    "Expense reports are due within thirty days of travel.",
    "Remote work needs a manager's approval and a written plan.",
    "Security incidents must be reported to the on-call engineer at once.",
]


def cross_encoder(directory: Path) -> Path:
    """A real-size cross-encoder made of MiniLM: its graph with a head mapping the
    [CLS] hidden state to one logit (scores meaningless, cost realistic), and its
    tokenizer (pair template included)."""
    directory.mkdir(parents=True)
    model = onnx.load(str(default_model_path()))
    graph = model.graph
    names = [o.name for o in graph.output]
    hidden = "last_hidden_state" if "last_hidden_state" in names else names[0]
    weights = np.random.default_rng(0).standard_normal((384, 1)).astype(np.float32) * 0.05
    graph.initializer.extend(
        [
            numpy_helper.from_array(np.array(0, dtype=np.int64), "ce_cls"),
            numpy_helper.from_array(weights, "ce_w"),
        ]
    )
    graph.node.extend(
        [
            helper.make_node("Gather", [hidden, "ce_cls"], ["ce_first"], axis=1),
            helper.make_node("MatMul", ["ce_first", "ce_w"], ["logits"]),
        ]
    )
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1]))
    onnx.save(model, str(directory / "model.onnx"))
    shutil.copy(default_tokenizer_path(), directory / "tokenizer.json")
    return directory


def config(ce_dir: Path, *, embed_seq: int, ce_seq: int, chunk: int) -> dict[str, object]:
    docs = [{"kind": "inline", "id": f"d{i}", "text": t * 3} for i, t in enumerate(TEXTS)]
    indexes: dict[str, object] = {
        # Served throughout: its embedder does not change (an index whose
        # embedder changes answers semantic queries again once re-ingested).
        "docs": {
            "embedder": "stable",
            "sources": docs,
            "chunking": {"unit": "tokens", "size": 96, "overlap": 8},
            "ingestion": {"strategy": "on_startup"},
        }
    }
    for n in range(INDEXES):
        indexes[f"more{n}"] = {
            "embedder": "minilm",
            "sources": docs[:1],
            "chunking": {"unit": "tokens", "size": chunk, "overlap": 8},
            "ingestion": {"strategy": "manual"},
        }
    return {
        "auth": {"mode": "disabled"},
        "embedders": {
            "minilm": {"kind": "local-onnx", "max_seq_length": embed_seq, "threads": 1},
            "stable": {"kind": "local-onnx", "max_seq_length": 128, "threads": 1},
        },
        "rerankers": {
            "ce": {
                "kind": "onnx-cross-encoder",
                "model_dir": str(ce_dir),
                "max_seq_length": ce_seq,
                "threads": 1,
            }
        },
        "reranking": {"default_reranker": "ce"},
        "indexes": indexes,
    }


@dataclass
class Calls:
    """(start, end, ok) of every call a client thread made."""

    stop: threading.Event = field(default_factory=threading.Event)
    health: list[tuple[float, float, bool]] = field(default_factory=list)
    rerank: list[tuple[float, float, bool]] = field(default_factory=list)
    retrieve: list[tuple[float, float, bool]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @staticmethod
    def during(
        calls: list[tuple[float, float, bool]], start: float, end: float
    ) -> list[tuple[float, float, bool]]:
        return [c for c in calls if c[1] >= start and c[0] <= end]


def poll_health(target: str, calls: Calls) -> None:
    with grpc.insecure_channel(target) as ch:
        stub = health_stub(ch)
        while not calls.stop.is_set():
            t = time.perf_counter()
            try:
                r = stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
                ok = r.status == health_pb2.HealthCheckResponse.SERVING
            except grpc.RpcError as err:
                calls.errors.append(f"health: {err.code()}")
                ok = False
            calls.health.append((t, time.perf_counter(), ok))
            time.sleep(0.01)


def keep_reranking(target: str, calls: Calls) -> None:
    request = reranker_pb2.RerankRequest(
        query="how many days of leave",
        candidates=[
            reranker_pb2.RerankCandidate(
                document_id=f"d{i}", chunk_id=f"c{i}", content=t * 2, original_rank=i + 1
            )
            for i, t in enumerate(TEXTS * 2)
        ],
        maximum_candidates=8,
    )
    with grpc.insecure_channel(target) as ch:
        stub = reranker_pb2_grpc.RerankerServiceStub(ch)
        while not calls.stop.is_set():
            t = time.perf_counter()
            try:
                r = stub.Rerank(request, timeout=30)
                ok = r.reranking.outcome == reranker_pb2.RERANK_OUTCOME_SUCCEEDED
            except grpc.RpcError as err:
                calls.errors.append(f"rerank: {err.code()}")
                ok = False
            calls.rerank.append((t, time.perf_counter(), ok))


def keep_retrieving(target: str, calls: Calls) -> None:
    request = retriever_pb2.RetrieveRequest(
        query=retriever_pb2.RagQuery(
            index_name="docs", text="days of leave", mode=retriever_pb2.RETRIEVAL_MODE_HYBRID
        )
    )
    with grpc.insecure_channel(target) as ch:
        stub = retriever_pb2_grpc.RetrieverServiceStub(ch)
        while not calls.stop.is_set():
            t = time.perf_counter()
            try:
                r = stub.Retrieve(request, timeout=30)
                ok = len(r.results) > 0
            except grpc.RpcError as err:
                calls.errors.append(f"retrieve: {err.code()}")
                ok = False
            calls.retrieve.append((t, time.perf_counter(), ok))
            time.sleep(0.05)


def test_a_model_reload_never_stalls_health_checks_or_calls_in_flight(tmp_path: Path) -> None:
    ce = cross_encoder(tmp_path / "ce")
    path = tmp_path / "groundwire.toml"
    write(path, config(ce, embed_seq=128, ce_seq=256, chunk=96))
    server = ServerProcess(path, free_port(), tmp_path / "server.log").start(
        service="groundwire.index.docs"
    )
    calls = Calls()
    threads = [
        threading.Thread(target=f, args=(server.target, calls), daemon=True)
        for f in (poll_health, keep_reranking, keep_retrieving)
    ]
    try:
        for t in threads:
            t.start()
        time.sleep(1.0)
        quiet = time.perf_counter()
        time.sleep(3.0)
        quiet_end = time.perf_counter()
        write(path, config(ce, embed_seq=160, ce_seq=320, chunk=88))
        with grpc.insecure_channel(server.target) as ch:
            admin = admin_pb2_grpc.AdminServiceStub(ch)
            start = time.perf_counter()
            r = admin.ReloadConfiguration(admin_pb2.ReloadConfigurationRequest(), timeout=120)
            end = time.perf_counter()
        assert r.applied and r.generation == 2
        assert {"embedders", "rerankers", "indexes"} <= set(r.changed_sections)
        # The calls running when the reload ended finish (on the old snapshot or
        # the new one), then a little more serving on the new one.
        time.sleep(2.0)
    finally:
        calls.stop.set()
        for t in threads:
            t.join(60)
        server.stop()

    health = Calls.during(calls.health, start, end)
    rerank = Calls.during(calls.rerank, start, end)
    retrieve = Calls.during(calls.retrieve, start, end)
    latency = {
        name: max((c[1] - c[0] for c in got), default=0.0)
        for name, got in (("health", health), ("rerank", rerank), ("retrieve", retrieve))
    }
    before = Calls.during(calls.health, quiet, quiet_end)
    print(
        f"\nno reload: {len(before)} health checks, max"
        f" {max(c[1] - c[0] for c in before) * 1000:.0f} ms;"
        f" reload {end - start:.3f} s; during it: {len(health)} health checks, max"
        f" {latency['health'] * 1000:.0f} ms; {len(rerank)} Rerank, max"
        f" {latency['rerank'] * 1000:.0f} ms; {len(retrieve)} Retrieve, max"
        f" {latency['retrieve'] * 1000:.0f} ms"
    )
    assert not calls.errors, calls.errors
    # Polled back to back: the reload's whole duration is covered.
    assert len(health) >= 3
    assert all(ok for *_, ok in health)
    assert latency["health"] < HEALTH_BOUND_S, latency
    # Calls in flight finish, the reranker never falling back to the original order.
    assert rerank and all(ok for *_, ok in rerank), rerank
    assert retrieve and all(ok for *_, ok in retrieve), retrieve
    # Calls after the reload succeeded too (on the new models).
    assert calls.rerank[-1][2] and calls.retrieve[-1][2]


async def test_a_reload_loads_only_the_models_it_changes(tmp_path: Path) -> None:
    """An unchanged cross-encoder (and embedder) is kept across a reload, not
    loaded again; a changed one is replaced and the retired one closed after its
    last call."""
    ce = cross_encoder(tmp_path / "ce")
    path = tmp_path / "groundwire.toml"
    cfg = config(ce, embed_seq=128, ce_seq=256, chunk=96)
    write(path, cfg)
    app = await start_app(load_config(path), "127.0.0.1:0", config_path=path)
    try:
        await app.wait_ready()
        assert app.reloader is not None
        before = app.components.reranking.get("ce")
        minilm = app.components.embedders["minilm"]
        write(path, {**cfg, "retrieval": {"default_top_k": 3}})
        report = await app.reloader.reload()
        assert report.applied and list(report.changed_sections) == ["retrieval"]
        assert app.components.reranking.get("ce") is before
        assert app.components.embedders["minilm"] is minilm

        write(path, config(ce, embed_seq=128, ce_seq=320, chunk=96))
        report = await app.reloader.reload()
        assert report.applied and "rerankers" in report.changed_sections
        after = app.components.reranking.get("ce")
        assert after is not before and app.components.embedders["minilm"] is minilm
        await app.reloader.aclose()  # retiring has finished: no call ran
        assert isinstance(before, OnnxCrossEncoderReranker)
        assert before._session is None
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
            r = await reranker_pb2_grpc.RerankerServiceStub(ch).Rerank(
                reranker_pb2.RerankRequest(
                    query="leave",
                    candidates=[
                        reranker_pb2.RerankCandidate(
                            document_id="d", chunk_id="c", content=TEXTS[0], original_rank=1
                        )
                    ],
                ),
                timeout=30,
            )
        assert r.reranking.outcome == reranker_pb2.RERANK_OUTCOME_SUCCEEDED
    finally:
        await app.stop(0)
