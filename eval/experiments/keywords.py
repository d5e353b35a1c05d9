"""Experiment: does searching the derived keyword query (domain/query_rewrite.py)
instead of the question move lexical nDCG@10?

A scratch experiment (not product code) over the lexical prototype of
eval/experiments/lexical.py (the in-memory store's BM25 at the server's k1=0.9,
b=0.4, the product analyzer, documents ranked by their best chunk). Each judged
query is searched four ways: as written, as its keywords, wrapped in a
conversational frame ("Hi! Could you please tell me ... Thanks!"), and the
keywords of that conversational form.

    .venv/bin/python eval/experiments/keywords.py --dataset ../shared/data/cranfield --split test
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lexical import Bm25, chunks_of

from groundwire.domain.query_rewrite import derive_keywords
from groundwire.domain.text import index_tokens
from groundwire.evaluation.dataset import load_beir
from groundwire.evaluation.metrics import evaluate, mean, parse_metrics

FRAMES = (
    "Hi! Could you please tell me what the documents say about {q}? Thanks!",
    "I was wondering, do you know anything about {q}",
    "Can you help me find out: {q}",
)


def keywords(text: str) -> str:
    k = derive_keywords(text)
    return text if k is None else k.text


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", type=Path, required=True)
    p.add_argument("--split", default="test")
    p.add_argument("--chunk-size", type=int, default=800)
    p.add_argument("--chunk-overlap", type=int, default=100)
    args = p.parse_args()
    ds = load_beir(args.dataset, args.split)
    queries = ds.judged_queries()
    index = Bm25(chunks_of(ds, args.chunk_size, args.chunk_overlap), index_tokens)
    metrics = parse_metrics(["nDCG@10", "Recall@100"])

    def clean(t: str) -> str:
        return " ".join(t.replace('"', " ").split())

    forms = {
        "question": lambda q, i: q,
        "keywords": lambda q, i: keywords(q),
        "conversational": lambda q, i: FRAMES[i % len(FRAMES)].format(q=q),
        "conversational+keywords": lambda q, i: keywords(FRAMES[i % len(FRAMES)].format(q=q)),
    }
    for name, form in forms.items():
        ranks = {q.id: index.rank(clean(form(q.text, i)), 0.9, 0.4) for i, q in enumerate(queries)}
        per = evaluate(ds.qrels, ranks, metrics)
        row = {
            "dataset": ds.name,
            "queries": len(queries),
            "form": name,
            "nDCG@10": round(mean(per["nDCG@10"]), 4),
            "Recall@100": round(mean(per["Recall@100"]), 4),
        }
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
