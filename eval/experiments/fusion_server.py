"""Experiment: fusion of the two legs, re-measured with the analyzed lexical leg.

A memory-store index with the MiniLM embedder and the default analysis is pushed a
BEIR collection over gRPC; every judged query is retrieved once per leg (LEXICAL and
SEMANTIC, top_k 100 chunks, with their leg scores) and once as HYBRID with the
server's defaults (to check the offline fusion below reproduces it). Fusion variants
are then computed offline from the recorded legs: RRF k, leg weights, leg depth, a
convex combination of min-max normalized leg scores, one of rank-normalized scores,
and document-level aggregation (best chunk, or best plus a share of the next ones).
Prints one JSON line per variant (nDCG@10 on documents).

    .venv/bin/python eval/experiments/fusion_server.py --dataset ../shared/data/cisi
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pickle
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import grpc

from groundwire.app.config import parse_config
from groundwire.app.lifecycle import start_app
from groundwire.evaluation.corpus_push import ensure_ingested
from groundwire.evaluation.dataset import load_beir
from groundwire.evaluation.metrics import evaluate, mean, parse_metrics
from groundwire_client.v1 import retriever_pb2, retriever_pb2_grpc

# (document_id, chunk_id, leg score), best first.
Leg = list[tuple[str, str, float]]


async def collect(dataset: Path, split: str) -> dict[str, dict[str, Leg]]:
    ds = load_beir(dataset, split)
    cfg = parse_config(
        {
            "store": {"kind": "memory"},
            "auth": {"mode": "disabled"},
            "embedders": {"minilm": {"kind": "local-onnx"}},
            "indexes": {"kb": {"embedder": "minilm"}},
        }
    )
    app = await start_app(cfg, "127.0.0.1:0")
    out: dict[str, dict[str, Leg]] = {}
    modes = {
        "lexical": retriever_pb2.RETRIEVAL_MODE_LEXICAL,
        "semantic": retriever_pb2.RETRIEVAL_MODE_SEMANTIC,
        "hybrid": retriever_pb2.RETRIEVAL_MODE_HYBRID,
    }
    try:
        await app.wait_ready()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
            await ensure_ingested(ch, "kb", ds, progress=lambda _m: None)
            stub = retriever_pb2_grpc.RetrieverServiceStub(ch)
            for q in ds.judged_queries():
                text = " ".join(q.text.replace('"', " ").split())
                legs: dict[str, Leg] = {}
                for name, mode in modes.items():
                    r = await stub.Retrieve(
                        retriever_pb2.RetrieveRequest(
                            query=retriever_pb2.RagQuery(
                                index_name="kb", text=text, mode=mode, top_k=100
                            )
                        ),
                        timeout=120,
                    )
                    legs[name] = [(x.document_id, x.chunk_id, x.score.raw_score) for x in r.results]
                out[q.id] = legs
    finally:
        await app.stop(0)
    return out


def docs_best(fused: Sequence[tuple[str, str, float]], share: float = 0.0) -> list[str]:
    """Documents by their best chunk's fused score (plus `share` of the rest)."""
    per: dict[str, list[float]] = defaultdict(list)
    for d, _c, s in fused:
        per[d].append(s)
    score = {d: max(v) + share * (sum(v) - max(v)) for d, v in per.items()}
    return sorted(score, key=lambda d: (-score[d], d))


def rrf(legs: dict[str, Leg], k: int, ws: float, wl: float, depth: int) -> Leg:
    acc: dict[tuple[str, str], float] = defaultdict(float)
    for name, w in (("semantic", ws), ("lexical", wl)):
        for rank, (d, c, _s) in enumerate(legs[name][:depth], start=1):
            acc[(d, c)] += w / (k + rank)
    return [(d, c, s) for (d, c), s in sorted(acc.items(), key=lambda kv: (-kv[1], kv[0]))]


def convex(legs: dict[str, Leg], alpha: float, depth: int, by_rank: bool) -> Leg:
    """alpha * semantic + (1 - alpha) * lexical, each leg normalized to [0, 1]
    (min-max of its scores, or 1 - (rank - 1) / depth); absent = 0."""
    acc: dict[tuple[str, str], float] = defaultdict(float)
    for name, w in (("semantic", alpha), ("lexical", 1.0 - alpha)):
        hits = legs[name][:depth]
        if not hits:
            continue
        hi, lo = hits[0][2], hits[-1][2]
        for rank, (d, c, s) in enumerate(hits, start=1):
            minmax = (s - lo) / (hi - lo) if hi > lo else 1.0
            norm = 1.0 - (rank - 1) / depth if by_rank else minmax
            acc[(d, c)] += w * norm
    return [(d, c, s) for (d, c), s in sorted(acc.items(), key=lambda kv: (-kv[1], kv[0]))]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", type=Path, required=True)
    p.add_argument("--split", default="test")
    p.add_argument("--cache", type=Path, default=None, help="pickle of the recorded legs")
    args = p.parse_args()
    ds = load_beir(args.dataset, args.split)
    if args.cache and args.cache.exists():
        legs = pickle.loads(args.cache.read_bytes())
    else:
        legs = asyncio.run(collect(args.dataset, args.split))
        if args.cache:
            args.cache.write_bytes(pickle.dumps(legs))
    metrics = parse_metrics(["nDCG@10"])

    def ndcg(make: Callable[[dict[str, Leg]], list[str]]) -> float:
        ranks = {q: make(legs[q]) for q in legs}
        return round(mean(evaluate(ds.qrels, ranks, metrics)["nDCG@10"]), 4)

    rows: dict[str, float] = {
        "lexical": ndcg(lambda lg: docs_best(lg["lexical"])),
        "semantic": ndcg(lambda lg: docs_best(lg["semantic"])),
        "hybrid (server)": ndcg(lambda lg: docs_best(lg["hybrid"])),
    }
    for k in (10, 20, 40, 60):
        for depth in (50, 100):
            rows[f"rrf k={k} depth={depth}"] = ndcg(
                lambda lg, k=k, d=depth: docs_best(rrf(lg, k, 1.0, 1.0, d))
            )
    for ws, wl in ((1.0, 0.7), (1.0, 1.5), (0.7, 1.0), (1.5, 1.0)):
        rows[f"rrf k=20 w={ws}/{wl}"] = ndcg(
            lambda lg, a=ws, b=wl: docs_best(rrf(lg, 20, a, b, 50))
        )
    for alpha in (0.3, 0.4, 0.5, 0.6, 0.7):
        rows[f"minmax a={alpha}"] = ndcg(lambda lg, a=alpha: docs_best(convex(lg, a, 50, False)))
        rows[f"ranknorm a={alpha}"] = ndcg(lambda lg, a=alpha: docs_best(convex(lg, a, 50, True)))
    for share in (0.1, 0.3):
        rows[f"rrf k=20 best+{share}"] = ndcg(
            lambda lg, s=share: docs_best(rrf(lg, 20, 1.0, 1.0, 50), s)
        )
    for name, value in rows.items():
        print(json.dumps({"dataset": ds.name, "variant": name, "nDCG@10": value}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
