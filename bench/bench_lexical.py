"""Lexical search cost on a real collection: the PostgreSQL store next to the in-memory
store, SciFact's corpus chunked as the embedded default chunks it, SciFact's claims as
queries, and long pasted queries of 50 to 1,000 distinct corpus words.

    .venv/bin/python bench/bench_lexical.py [--data ../shared/data/scifact] [--queries 300]

Prints, per store and query kind, the latency p50 / p99 / max of the store call (no
gRPC, one at a time, after a warm-up), the scored and pruned term counts and the number
of hits. Run it from an older checkout with PYTHONPATH pointing at that checkout's
`server/` to get a before/after pair in one session (older stores return a plain list;
the script accepts both).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from groundwire.domain.chunking import ChunkPolicy, chunk_text
from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import Scope
from groundwire.stores.base import (
    ChunkRecord,
    DistanceMetric,
    DocumentRecord,
    IndexSpec,
    StagedDocument,
    Store,
)
from groundwire.stores.memory import MemoryStore
from groundwire.stores.postgres import PostgresSettings, open_postgres_store

K = 10
NAME = "lexical-bench"


def load_corpus(data: Path) -> list[StagedDocument]:
    policy = ChunkPolicy()
    docs = []
    with (data / "corpus.jsonl").open() as f:
        for line in f:
            row = json.loads(line)
            text = (row.get("title", "") + "\n\n" + row["text"]).strip()
            chunks = [
                ChunkRecord(c.chunk_id, c.ordinal, c.start, c.end, c.text, c.section)
                for c in chunk_text(text, policy, markdown=False)
            ]
            record = DocumentRecord(
                row["_id"], f"bench:{row['_id']}", "h", row.get("title", ""), "", {}
            )
            docs.append(StagedDocument(record, chunks, None))
    return docs


def claims(data: Path, n: int) -> list[str]:
    with (data / "queries.jsonl").open() as f:
        texts = [json.loads(line)["text"] for line in f]
    return random.Random(3).sample(texts, min(n, len(texts)))


def pasted(docs: list[StagedDocument], words: int, n: int) -> list[str]:
    """Queries of `words` distinct words that the corpus holds, drawn from its text."""
    rng = random.Random(words)
    vocab = sorted(
        {w for d in docs for c in d.chunks for w in c.text.lower().split() if w.isalpha()}
    )
    return [" ".join(rng.sample(vocab, words)) for _ in range(n)]


async def load(store: Store, docs: list[StagedDocument]) -> float:
    spec = IndexSpec(NAME, None, None, DistanceMetric.COSINE, "bench")
    t0 = time.perf_counter()
    await store.ensure_index(spec)
    v = await store.begin_version(NAME)
    for i in range(0, len(docs), 500):
        await store.stage_documents(NAME, v, docs[i : i + 500])
    await store.publish_version(NAME, v, spec)
    return time.perf_counter() - t0


async def measure(store: Store, queries: list[str]) -> dict[str, Any]:
    parsed = [parse_lexical(q) for q in queries]
    for q in parsed[:5]:
        await store.search_lexical(NAME, q, K, Scope())
    times, hits, scored, pruned = [], [], [], []
    for q in parsed:
        t0 = time.perf_counter()
        result: Any = await store.search_lexical(NAME, q, K, Scope())
        times.append(time.perf_counter() - t0)
        found = getattr(result, "hits", result)
        hits.append(len(found))
        scored.append(getattr(result, "terms_scored", len(set(q.terms))))
        pruned.append(getattr(result, "terms_pruned", 0))
    times.sort()
    return {
        "p50_ms": 1000 * statistics.median(times),
        "p99_ms": 1000 * times[min(len(times) - 1, int(0.99 * len(times)))],
        "max_ms": 1000 * times[-1],
        "terms": statistics.mean(scored),
        "pruned": statistics.mean(pruned),
        "hits": statistics.mean(hits),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).parents[2] / "shared/data/scifact"
    )
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--long", type=int, default=5, help="long queries per length")
    parser.add_argument("--lengths", default="50,100,200,400,1000")
    parser.add_argument("--stores", default="memory,postgres")
    args = parser.parse_args()
    docs = load_corpus(args.data)
    chunks = sum(len(d.chunks) for d in docs)
    kinds: dict[str, list[str]] = {"claims": claims(args.data, args.queries)}
    for n in (int(x) for x in args.lengths.split(",")):
        kinds[f"{n} words"] = pasted(docs, n, args.long)
    print(f"corpus: {len(docs)} documents, {chunks} chunks; k = {K}")
    print(
        f"{'store':9} {'queries':10} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'terms':>6} {'pruned':>7} {'hits':>5}"
    )
    root = Path(tempfile.mkdtemp(prefix="gw-bench-lex-"))
    try:
        for kind in args.stores.split(","):
            store: Store
            if kind == "memory":
                store = MemoryStore()
            else:
                store = await open_postgres_store(PostgresSettings(None, root / "pgdata"))
            try:
                seconds = await load(store, docs)
                print(f"{kind:9} load {seconds:.1f} s ({chunks / seconds:.0f} chunks/s)")
                for name, queries in kinds.items():
                    r = await measure(store, queries)
                    print(
                        f"{kind:9} {name:10} {r['p50_ms']:8.1f} {r['p99_ms']:8.1f} {r['max_ms']:8.1f}"
                        f" {r['terms']:6.0f} {r['pruned']:7.0f} {r['hits']:5.1f}"
                    )
            finally:
                await store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
