"""Experiment: record both legs and HYBRID through the server, for offline fusion variants.

Starts a server (memory or embedded PostgreSQL store, MiniLM, the default analysis),
pushes a BEIR collection, and retrieves every judged query as LEXICAL, SEMANTIC and
HYBRID (server defaults) with top_k 100 chunks, keeping each result's
(document_id, chunk_id, raw score) and the server-side `total_duration`. The pickle
it writes is what `fusion_server.py --cache` and `fusion_variants.py` read.

MiniLM vectors are memoized on disk (`--vectors`, keyed by task and text), so a second
store or a re-run does not embed the collection again; the vectors are the model's,
computed once. Ingestion throughput is only meaningful on a run that embedded.

    nice .venv/bin/python eval/experiments/fusion_collect.py --dataset ../shared/data/cisi \
        --store memory --out /tmp/legs-cisi-memory.pkl --vectors /tmp/vec-cisi.pkl
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from groundwire.app.config import parse_config
from groundwire.app.lifecycle import start_app
from groundwire.domain.usage import EmbeddingUsage
from groundwire.evaluation.corpus_push import ensure_ingested
from groundwire.evaluation.dataset import load_beir
from groundwire.providers.embeddings import onnx_local
from groundwire.providers.embeddings.base import EmbeddingTask
from groundwire_client.v1 import retriever_pb2, retriever_pb2_grpc

MODES = {
    "lexical": retriever_pb2.RETRIEVAL_MODE_LEXICAL,
    "semantic": retriever_pb2.RETRIEVAL_MODE_SEMANTIC,
    "hybrid": retriever_pb2.RETRIEVAL_MODE_HYBRID,
}


def memoize_vectors(path: Path) -> dict[tuple[str, str], Any]:
    cache: dict[tuple[str, str], Any] = pickle.loads(path.read_bytes()) if path.exists() else {}
    original = onnx_local.LocalOnnxEmbedder.embed_counted

    def embed_counted(
        self: onnx_local.LocalOnnxEmbedder,
        texts: Sequence[str],
        task: EmbeddingTask = EmbeddingTask.DOCUMENT,
    ) -> tuple[Any, EmbeddingUsage]:
        missing = [t for t in dict.fromkeys(texts) if (task.value, t) not in cache]
        usage = EmbeddingUsage()
        if missing:
            vectors, usage = original(self, missing, task)
            for t, v in zip(missing, vectors, strict=True):
                cache[(task.value, t)] = v
        if not texts:
            return original(self, texts, task)
        return np.stack([cache[(task.value, t)] for t in texts]), usage

    onnx_local.LocalOnnxEmbedder.embed_counted = embed_counted  # type: ignore[method-assign]
    return cache


def rrf_hybrid(
    legs: dict[str, list[tuple[str, str, float]]], k: int = 20, depth: int = 100
) -> list[tuple[str, str, float]]:
    """The server's HYBRID (RRF k 20, weights 1/1, leg depth = top_k 100) computed from
    recorded legs: it reproduces the server's order exactly (checked on CISI, 76/76)."""
    acc: dict[tuple[str, str], float] = {}
    for name in ("semantic", "lexical"):
        for rank, (d, c, _s) in enumerate(legs[name][:depth], start=1):
            acc[(d, c)] = acc.get((d, c), 0.0) + 1.0 / (k + rank)
    ordered = sorted(acc.items(), key=lambda kv: (-kv[1], kv[0]))[:depth]
    return [(d, c, s) for (d, c), s in ordered]


async def collect(
    dataset: Path, split: str, store: str, semantic_from: dict[str, Any] | None = None
) -> dict[str, Any]:
    ds = load_beir(dataset, split)
    tmp = tempfile.mkdtemp(prefix="fusion-pg-")
    store_cfg: dict[str, object] = (
        {"kind": "memory"} if store == "memory" else {"kind": "postgres", "data_dir": tmp}
    )
    cfg = parse_config(
        {
            "store": store_cfg,
            "auth": {"mode": "disabled"},
            "logging": {"level": "WARNING"},
            "embedders": {
                "minilm": {"kind": "local-onnx"} if semantic_from is None else {"kind": "hashing"}
            },
            "indexes": {"kb": {"embedder": "minilm"}},
        }
    )
    recorded: dict[str, Any] = {}
    modes = MODES
    if semantic_from is not None:
        # The semantic leg of an earlier run (same model, chunking and corpus); only
        # the lexical leg is retrieved, HYBRID is fused from the two.
        recorded = semantic_from.get("legs", semantic_from)
        modes = {"lexical": MODES["lexical"]}
    app = await start_app(cfg, "127.0.0.1:0")
    legs: dict[str, dict[str, list[tuple[str, str, float]]]] = {}
    durations: dict[str, list[float]] = {m: [] for m in modes}
    try:
        await app.wait_ready()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
            t0 = time.perf_counter()
            report = await ensure_ingested(ch, "kb", ds, progress=lambda _m: None)
            ingest_seconds = time.perf_counter() - t0
            stub = retriever_pb2_grpc.RetrieverServiceStub(ch)
            for q in ds.judged_queries():
                text = " ".join(q.text.replace('"', " ").split())
                per: dict[str, list[tuple[str, str, float]]] = {}
                for name, mode in modes.items():
                    r = await stub.Retrieve(
                        retriever_pb2.RetrieveRequest(
                            query=retriever_pb2.RagQuery(
                                index_name="kb", text=text, mode=mode, top_k=100
                            )
                        ),
                        timeout=120,
                    )
                    per[name] = [(x.document_id, x.chunk_id, x.score.raw_score) for x in r.results]
                    durations[name].append(
                        r.diagnostics.total_duration.ToTimedelta().total_seconds()
                    )
                if semantic_from is not None:
                    per["semantic"] = list(recorded[q.id]["semantic"])
                    per["hybrid"] = rrf_hybrid(per)
                legs[q.id] = per
    finally:
        await app.stop(0)
    return {
        "legs": legs,
        "durations": durations,
        "ingest_seconds": ingest_seconds,
        "ingest_report": repr(report),
        "store": store,
    }


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", type=Path, required=True)
    p.add_argument("--split", default="test")
    p.add_argument("--store", choices=("memory", "postgres"), default="memory")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--vectors", type=Path, required=True)
    p.add_argument(
        "--semantic-from",
        type=Path,
        default=None,
        help="take the semantic leg from this earlier pickle; retrieve only the lexical leg",
    )
    args = p.parse_args()
    cache = memoize_vectors(args.vectors)
    before = len(cache)
    try:
        earlier = pickle.loads(args.semantic_from.read_bytes()) if args.semantic_from else None
        result = asyncio.run(collect(args.dataset, args.split, args.store, earlier))
    finally:
        if len(cache) > before:
            args.vectors.write_bytes(pickle.dumps(cache))
    result["embedded_texts"] = len(cache) - before
    args.out.write_bytes(pickle.dumps(result))
    d = result["durations"]
    print(
        args.dataset.name,
        args.store,
        f"ingest {result['ingest_seconds']:.1f}s embedded {result['embedded_texts']}",
        {m: round(float(np.median(v)) * 1000, 2) for m, v in d.items() if v},
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
