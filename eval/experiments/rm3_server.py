"""Experiment: RM3 pseudo-relevance feedback for the lexical leg, through the server.

A memory-store index with the default analysis (and the cheap hashing embedder: only
the lexical leg is measured) is pushed a BEIR collection over gRPC; every judged query
is retrieved as LEXICAL (top_k 100 chunks) without feedback and with each RM3 setting
(RagQuery.lexical_feedback). Prints one JSON line per setting: nDCG@10 and Recall@100
on documents (a document ranked by its best chunk) and the median / p95 server-side
`total_duration` in ms.

    .venv/bin/python eval/experiments/rm3_server.py --dataset ../shared/data/cisi
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path

import grpc

from groundwire.app.config import parse_config
from groundwire.app.lifecycle import start_app
from groundwire.evaluation.corpus_push import ensure_ingested
from groundwire.evaluation.dataset import load_beir
from groundwire.evaluation.metrics import evaluate, mean, parse_metrics
from groundwire_client.v1 import retriever_pb2, retriever_pb2_grpc

# (documents, terms, original_query_weight); None = no feedback.
SETTINGS: list[tuple[int, int, float] | None] = [
    None,
    (10, 10, 0.5),
    (10, 10, 0.7),
    (5, 10, 0.5),
    (10, 20, 0.5),
    (3, 10, 0.7),
]


def best_chunk_docs(results: list[str]) -> list[str]:
    return list(dict.fromkeys(results))


async def run(dataset: Path, split: str, mode: str) -> None:
    ds = load_beir(dataset, split)
    cfg = parse_config(
        {
            "store": {"kind": "memory"},
            "auth": {"mode": "disabled"},
            "logging": {"level": "WARNING"},
            "embedders": {"h": {"kind": "hashing"}},
            "indexes": {"kb": {"embedder": "h"}},
        }
    )
    metrics = parse_metrics(["nDCG@10", "Recall@100"])
    app = await start_app(cfg, "127.0.0.1:0")
    try:
        await app.wait_ready()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
            await ensure_ingested(ch, "kb", ds, progress=lambda _m: None)
            stub = retriever_pb2_grpc.RetrieverServiceStub(ch)
            queries = ds.judged_queries()
            for setting in SETTINGS:
                ranks: dict[str, list[str]] = {}
                durations: list[float] = []
                added: list[int] = []
                for q in queries:
                    text = " ".join(q.text.replace('"', " ").split())
                    query = retriever_pb2.RagQuery(
                        index_name="kb",
                        text=text,
                        mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL,
                        top_k=100,
                    )
                    if setting is not None:
                        query.lexical_feedback.documents = setting[0]
                        query.lexical_feedback.terms = setting[1]
                        query.lexical_feedback.original_query_weight = setting[2]
                    r = await stub.Retrieve(retriever_pb2.RetrieveRequest(query=query), timeout=60)
                    ranks[q.id] = best_chunk_docs([x.document_id for x in r.results])
                    durations.append(r.diagnostics.total_duration.ToTimedelta().total_seconds())
                    added.append(r.diagnostics.feedback_terms)
                scores = evaluate(ds.qrels, ranks, metrics)
                ms = sorted(d * 1000 for d in durations)
                print(
                    json.dumps(
                        {
                            "dataset": ds.name,
                            "rm3": "off" if setting is None else list(setting),
                            "nDCG@10": round(mean(scores["nDCG@10"]), 4),
                            "Recall@100": round(mean(scores["Recall@100"]), 4),
                            "p50_ms": round(statistics.median(ms), 2),
                            "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 2),
                            "mean_terms_added": round(statistics.fmean(added), 1),
                        }
                    ),
                    flush=True,
                )
    finally:
        await app.stop(0)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", type=Path, required=True)
    p.add_argument("--split", default="test")
    args = p.parse_args()
    asyncio.run(run(args.dataset, args.split, "lexical"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
