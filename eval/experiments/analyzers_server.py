"""Experiment: lexical analyzer variants through the server. For each variant an
in-memory lexical-only index with that `[indexes.kb.analysis]` is pushed a BEIR
collection over gRPC and every judged query is retrieved (LEXICAL, top_k 100, a
document ranked by its best chunk), next to the rank-bm25 baseline `eval run`
computes. Prints one JSON line per variant, with ingestion throughput and the p50
server-side lexical time.

    .venv/bin/python eval/experiments/analyzers_server.py --dataset ../shared/data/cisi
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

from groundwire.app.config import parse_config
from groundwire.app.lifecycle import start_app
from groundwire.evaluation.baseline import bm25_rankings
from groundwire.evaluation.corpus_push import ensure_ingested
from groundwire.evaluation.dataset import load_beir
from groundwire.evaluation.metrics import evaluate, mean, parse_metrics
from groundwire_client.v1 import retriever_pb2, retriever_pb2_grpc

VARIANTS: dict[str, dict[str, Any]] = {
    "plain": {"stemming": False, "stop_words": "none"},
    "stop": {"stemming": False, "stop_words": "standard"},
    "stem": {"stemming": True, "stop_words": "none"},
    "stem+stop": {"stemming": True, "stop_words": "standard"},
}


async def run(dataset: Path, split: str, names: list[str], store: str = "memory") -> None:
    ds = load_beir(dataset, split)
    queries = ds.judged_queries()
    metrics = parse_metrics(["nDCG@10", "Recall@100"])
    base, _ = bm25_rankings(ds.corpus, queries)
    per = evaluate(ds.qrels, base, metrics)
    print(
        json.dumps(
            {
                "dataset": ds.name,
                "variant": "rank-bm25",
                "nDCG@10": round(mean(per["nDCG@10"]), 4),
                "Recall@100": round(mean(per["Recall@100"]), 4),
            }
        ),
        flush=True,
    )
    for name in names:
        cfg = parse_config(
            {
                "store": {"kind": "memory"}
                if store == "memory"
                else {"kind": "postgres", "data_dir": tempfile.mkdtemp(prefix="gw-an-")},
                "auth": {"mode": "disabled"},
                "indexes": {"kb": {"analysis": VARIANTS[name]}},
            }
        )
        app = await start_app(cfg, "127.0.0.1:0")
        try:
            await app.wait_ready()
            async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
                t0 = time.perf_counter()
                await ensure_ingested(ch, "kb", ds, progress=lambda _m: None)
                ingest_s = time.perf_counter() - t0
                stub = retriever_pb2_grpc.RetrieverServiceStub(ch)
                lexical_ms: list[float] = []

                async def rank(text: str) -> list[str]:
                    text = " ".join(text.replace('"', " ").split())
                    r = await stub.Retrieve(  # noqa: B023 (used within the iteration)
                        retriever_pb2.RetrieveRequest(
                            query=retriever_pb2.RagQuery(
                                index_name="kb",
                                text=text,
                                mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL,
                                top_k=100,
                            )
                        ),
                        timeout=60,
                    )
                    lexical_ms.append(r.diagnostics.total_duration.ToNanoseconds() / 1e6)  # noqa: B023
                    return list(dict.fromkeys(x.document_id for x in r.results))

                ranks = {q.id: await rank(q.text) for q in queries}
                per = evaluate(ds.qrels, ranks, metrics)
                print(
                    json.dumps(
                        {
                            "dataset": ds.name,
                            "variant": name,
                            "store": store,
                            "k1": bm25_params()[0],
                            "b": bm25_params()[1],
                            "nDCG@10": round(mean(per["nDCG@10"]), 4),
                            "Recall@100": round(mean(per["Recall@100"]), 4),
                            "ingest_docs_per_s": round(len(ds.corpus) / ingest_s, 1),
                            "p50_server_ms": round(statistics.median(lexical_ms), 3),
                        }
                    ),
                    flush=True,
                )
        finally:
            await app.stop(0)


def bm25_params() -> tuple[float, float]:
    from groundwire.domain import bm25

    return bm25.K1, bm25.B


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", type=Path, required=True)
    p.add_argument("--split", default="test")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--store", choices=["memory", "postgres"], default="memory")
    p.add_argument("--k1", type=float, default=None, help="override BM25 k1 (experiment)")
    p.add_argument("--b", type=float, default=None, help="override BM25 b (experiment)")
    args = p.parse_args()
    from groundwire.domain import bm25

    if args.k1 is not None:
        bm25.K1 = args.k1
    if args.b is not None:
        bm25.B = args.b
    asyncio.run(run(args.dataset, args.split, args.variants.split(","), args.store))
    return 0


if __name__ == "__main__":
    sys.exit(main())
