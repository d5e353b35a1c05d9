"""Do the two stores rank lexically alike? SciFact's corpus (chunked as the embedded
default chunks it) is loaded into the in-memory store and the embedded PostgreSQL
store through the store API (the English analyzer by default, as the service indexes), 300 of its claims are run as lexical queries at top_k
100 on both, and the ordered (document_id, chunk_id) lists are compared.

    .venv/bin/python bench/bench_lexical_agreement.py [--data ../shared/data/scifact]
        [--queries 300] [--k 100] [--examples 5] [--analyzer english|plain]

Prints how many queries rank differently (the whole list, and within the top 10) and,
for a few, why: equal scores ordered differently, scores differing in the last digits
(float noise), or different candidate sets.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_lexical import NAME, claims, load_corpus

from groundwire.domain.analysis import ENGLISH, PLAIN, Analyzer
from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import ChunkHit, Scope
from groundwire.stores.base import DistanceMetric, IndexSpec, StagedDocument, Store
from groundwire.stores.memory import MemoryStore
from groundwire.stores.postgres import PostgresSettings, open_postgres_store

Key = tuple[str, str]


async def load(store: Store, docs: list[StagedDocument], analyzer: Analyzer) -> float:
    spec = IndexSpec(NAME, None, None, DistanceMetric.COSINE, "bench", analyzer)
    t0 = time.perf_counter()
    await store.ensure_index(spec)
    v = await store.begin_version(NAME)
    for i in range(0, len(docs), 500):
        await store.stage_documents(NAME, v, docs[i : i + 500])
    await store.publish_version(NAME, v, spec)
    return time.perf_counter() - t0


async def run(store: Store, queries: list[str], k: int, analyzer: Analyzer) -> list[list[ChunkHit]]:
    out = []
    for text in queries:
        query = parse_lexical(text, analyzer=analyzer)
        result: Any = await store.search_lexical(NAME, query, k, Scope())
        out.append(list(getattr(result, "hits", result)))
    return out


def keys(hits: list[ChunkHit]) -> list[Key]:
    return [(h.document_id, h.chunk_id) for h in hits]


def why(mem: list[ChunkHit], pg: list[ChunkHit]) -> str:
    """The first position where the lists part, and the kind of difference."""
    at = next(
        (i for i, (a, b) in enumerate(zip(mem, pg, strict=False)) if keys([a]) != keys([b])),
        min(len(mem), len(pg)),
    )
    a = mem[at] if at < len(mem) else None
    b = pg[at] if at < len(pg) else None
    ms = {(h.document_id, h.chunk_id): h.score.raw for h in mem}
    ps = {(h.document_id, h.chunk_id): h.score.raw for h in pg}
    common = ms.keys() & ps.keys()
    worst = max((abs(ms[c] - ps[c]) for c in common), default=0.0)
    parts = [f"first difference at rank {at + 1}"]
    if a is not None and b is not None:
        parts.append(
            f"memory {a.document_id}/{a.chunk_id} {a.score.raw!r}"
            f" vs postgres {b.document_id}/{b.chunk_id} {b.score.raw!r}"
        )
        if a.score.raw == b.score.raw:
            kind = "equal scores ordered differently"
        elif abs(a.score.raw - b.score.raw) <= 1e-9 * abs(a.score.raw):
            kind = "scores differing in the last digits"
        else:
            kind = "different scores"
        parts.append(kind)
    if ms.keys() != ps.keys():
        parts.append(
            f"different candidate sets ({len(ms.keys() - ps.keys())} only in memory,"
            f" {len(ps.keys() - ms.keys())} only in postgres)"
        )
    parts.append(f"largest score difference on shared hits {worst:.3g}")
    return "; ".join(parts)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).parents[2] / "shared/data/scifact"
    )
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--examples", type=int, default=5)
    parser.add_argument(
        "--analyzer", choices=("english", "plain"), default="english", help="the index's"
    )
    args = parser.parse_args()
    analyzer = ENGLISH if args.analyzer == "english" else PLAIN
    docs = load_corpus(args.data)
    queries = claims(args.data, args.queries)
    chunks = sum(len(d.chunks) for d in docs)
    print(
        f"corpus: {len(docs)} documents, {chunks} chunks; {len(queries)} queries;"
        f" k = {args.k}; {args.analyzer} analyzer"
    )
    results: dict[str, list[list[ChunkHit]]] = {}
    root = Path(tempfile.mkdtemp(prefix="gw-bench-agree-"))
    try:
        for kind in ("memory", "postgres"):
            store: Store
            if kind == "memory":
                store = MemoryStore()
            else:
                store = await open_postgres_store(PostgresSettings(None, root / "pgdata"))
            try:
                seconds = await load(store, docs, analyzer)
                t0 = time.perf_counter()
                results[kind] = await run(store, queries, args.k, analyzer)
                print(f"{kind:9} load {seconds:.1f} s, queries {time.perf_counter() - t0:.1f} s")
            finally:
                await store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    mem, pg = results["memory"], results["postgres"]
    whole = [i for i in range(len(queries)) if keys(mem[i]) != keys(pg[i])]
    top10 = [i for i in range(len(queries)) if keys(mem[i][:10]) != keys(pg[i][:10])]
    scores = [
        i
        for i in range(len(queries))
        if [h.score.raw for h in mem[i]] != [h.score.raw for h in pg[i]]
    ]
    print(f"queries ranking differently: {len(whole)} of {len(queries)} (whole list of {args.k})")
    print(f"queries ranking differently within the top 10: {len(top10)}")
    print(f"queries whose score lists differ (any digit): {len(scores)}")
    for i in whole[: args.examples]:
        print(f"  q{i} {queries[i][:60]!r}: {why(mem[i], pg[i])}")


if __name__ == "__main__":
    asyncio.run(main())
