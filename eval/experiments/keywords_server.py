"""Experiment: the keyword query through the server. A lexical-only in-memory
index is pushed a BEIR collection over gRPC, and each judged query is retrieved
(LEXICAL, top_k 100) as written and as its derived keywords, the text an
agent's lexical leg searches with `keyword_query = "derived"` (the server's BM25
with its 32-distinct-term cap, unlike the prototype of keywords.py).

    .venv/bin/python eval/experiments/keywords_server.py --dataset ../shared/data/cranfield
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import grpc

from groundwire.app.config import parse_config
from groundwire.app.lifecycle import start_app
from groundwire.domain.query_rewrite import derive_keywords
from groundwire.evaluation.corpus_push import ensure_ingested
from groundwire.evaluation.dataset import load_beir
from groundwire.evaluation.metrics import evaluate, mean, parse_metrics
from groundwire_client.v1 import retriever_pb2, retriever_pb2_grpc

FRAMES = (
    "Hi! Could you please tell me what the documents say about {q}? Thanks!",
    "I was wondering, do you know anything about {q}",
    "Can you help me find out: {q}",
)


async def run(dataset: Path, split: str) -> None:
    ds = load_beir(dataset, split)
    cfg = parse_config(
        {"store": {"kind": "memory"}, "auth": {"mode": "disabled"}, "indexes": {"kb": {}}}
    )
    app = await start_app(cfg, "127.0.0.1:0")
    try:
        await app.wait_ready()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
            await ensure_ingested(ch, "kb", ds, progress=lambda _m: None)
            stub = retriever_pb2_grpc.RetrieverServiceStub(ch)

            async def rank(text: str) -> list[str]:
                text = " ".join(text.replace('"', " ").split())
                r = await stub.Retrieve(
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
                return list(dict.fromkeys(x.document_id for x in r.results))

            def kw(t: str) -> str:
                k = derive_keywords(t)
                return t if k is None else k.text

            queries = ds.judged_queries()
            metrics = parse_metrics(["nDCG@10", "Recall@100"])
            forms = {
                "question": lambda q, i: q,
                "keywords": lambda q, i: kw(q),
                "conversational": lambda q, i: FRAMES[i % 3].format(q=q),
                "conversational+keywords": lambda q, i: kw(FRAMES[i % 3].format(q=q)),
            }
            for name, form in forms.items():
                ranks = {q.id: await rank(form(q.text, i)) for i, q in enumerate(queries)}
                per = evaluate(ds.qrels, ranks, metrics)
                print(
                    json.dumps(
                        {
                            "dataset": ds.name,
                            "queries": len(queries),
                            "form": name,
                            "nDCG@10": round(mean(per["nDCG@10"]), 4),
                            "Recall@100": round(mean(per["Recall@100"]), 4),
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
    asyncio.run(run(args.dataset, args.split))
    return 0


if __name__ == "__main__":
    sys.exit(main())
