"""What document access lists cost a search, on each store, same data, same queries.

    .venv/bin/python bench/bench_acl_filter.py [--chunks 100000] [--dsn DSN]
        [--opensearch URL] [--queries 50] [--vectors clustered|latent]

The corpus is bench_stores.py's (Zipfian text, clustered 384-d vectors, 10 chunks
per document); `--vectors latent` replaces its vectors (and the query vectors) with
bench/vector_data.py's `latent` ones, shaped like real text embeddings (the clustered
ones are far harder for any graph index: at a million chunks their unfiltered
recall says more about the data than about the filter). Access lists, by document: half have none (every caller of the
tenant reads them), the other half name one of 20 groups (`group:g0`..`group:g19`,
each on 2.5% of the documents). Callers:

- `read_all`: unrestricted readers (the store adds no ACL condition: the baseline);
- `one group`: holds `group:g3` (reads 52.5% of the chunks);
- `no principals`: least privilege (reads the 50% without an ACL);
- `rare`: holds `group:g3`, and a metadata filter admits only the odd documents'
  departments (where every document has an ACL): together 2.5% of the chunks.

Reported per store and caller: p50/p99 (ms) of vector (top 10) and lexical (top 10)
store calls, one at a time after a warm-up pass; whether every call returned 10
hits; and the recall@10 of the vector search against the exact answer (the memory
store's exact scan over the same readable rows).

Second part, the side channel the how-to states: BM25 statistics are the tenant's,
so documents a caller may not read move the lexical scores of those it may. Reported:
a public chunk's BM25 score for a rare term before and after 50 restricted chunks
holding the same term are published, as seen by a caller who reads none of them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np

from groundwire.domain.access import ALL_READERS, PUBLIC_READERS, Readers
from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import ChunkHit, MetadataFilter, Scope
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

sys.path.insert(0, str(Path(__file__).parent))
from bench_stores import Corpus, K, load_everywhere, pct, timed
from vector_data import Latent

GROUPS = 20


def with_acls(corpus: Corpus) -> None:
    docs: list[StagedDocument] = []
    for d, staged in enumerate(corpus.docs):
        acl = frozenset() if d % 2 == 0 else frozenset({f"group:g{(d // 2) % GROUPS}"})
        docs.append(replace(staged, document=replace(staged.document, acl=acl)))
    corpus.docs = docs


CALLERS = {
    "read_all": Scope(readers=ALL_READERS),
    "one group": Scope(readers=Readers(frozenset({"group:g3"}))),
    "no principals": Scope(readers=PUBLIC_READERS),
    "rare (2.5%)": Scope(
        filter=MetadataFilter({"dept": frozenset({"d1", "d3", "d5", "d7", "d9"})}),
        readers=Readers(frozenset({"group:g3"})),
    ),
}


async def open_stores(args: argparse.Namespace, tmp: Path) -> dict[str, Store]:
    stores: dict[str, Store] = {"memory": MemoryStore()}
    stores["postgres"] = await open_postgres_store(
        PostgresSettings(dsn=args.dsn, data_dir=tmp / "pgdata")
    )
    if args.opensearch:
        from groundwire.stores.opensearch import OpenSearchSettings, open_opensearch_store

        stores["opensearch"] = await open_opensearch_store(
            OpenSearchSettings(
                hosts=(args.opensearch,),
                index_prefix=f"gwbenchacl{int(time.time())}-",
                replicas=0,
                label="bench",
            )
        )
    return stores


def recall(got: list[ChunkHit], exact: list[ChunkHit]) -> float:
    want = {h.key for h in exact}
    return len({h.key for h in got} & want) / max(1, len(want))


def with_latent_vectors(corpus: Corpus, queries: int) -> np.ndarray:
    """Replace the corpus's vectors with `latent` ones (in batches: sampling gathers a
    topic basis per point); returns `queries` query vectors from the same model."""
    rng = np.random.default_rng(11)
    model = Latent(rng)
    docs: list[StagedDocument] = []
    batch = 200  # documents
    for start in range(0, len(corpus.docs), batch):
        group = corpus.docs[start : start + batch]
        vectors = model.sample(rng, sum(len(d.chunks) for d in group))
        at = 0
        for staged in group:
            n = len(staged.chunks)
            docs.append(replace(staged, embeddings=vectors[at : at + n]))
            at += n
    corpus.docs = docs
    return model.sample(rng, queries)


async def costs(args: argparse.Namespace, stores: dict[str, Store]) -> None:
    t = time.perf_counter()
    corpus = Corpus(args.chunks)
    with_acls(corpus)
    if args.vectors == "latent":
        vec_q = with_latent_vectors(corpus, args.queries)
    else:
        vec_q = corpus.vectors(args.queries)
    print(f"corpus built in {time.perf_counter() - t:.0f} s ({args.vectors} vectors)", flush=True)
    name = await load_everywhere(stores, corpus, "benchacl")
    lex_q = corpus.lexical_queries(args.queries)
    exact: dict[str, list[list[ChunkHit]]] = {}
    for caller, scope in CALLERS.items():
        exact[caller] = [await stores["memory"].search_vector(name, v, K, scope) for v in vec_q]
    print(
        "| caller | store | vector p50 / p99 (ms) | lexical p50 / p99 (ms) | full top 10 |"
        " vector recall@10 |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for caller, scope in CALLERS.items():
        for label, store in stores.items():
            vcalls: list[Callable[[], Awaitable[object]]] = [
                partial(store.search_vector, name, v, K, scope) for v in vec_q
            ]
            lcalls: list[Callable[[], Awaitable[object]]] = [
                partial(store.search_lexical, name, q, K, scope) for q in lex_q
            ]
            await timed(vcalls)
            await timed(lcalls)
            vt, vres = await timed(vcalls)
            lt, _ = await timed(lcalls)
            full = all(len(r) == K for r in vres)  # type: ignore[arg-type]
            recalls = [
                recall(r, e)  # type: ignore[arg-type]
                for r, e in zip(vres, exact[caller], strict=True)
            ]
            rec = sum(recalls) / len(recalls)
            print(
                f"| {caller} | {label} | {pct(vt, 50):.1f} / {pct(vt, 99):.1f} "
                f"| {pct(lt, 50):.1f} / {pct(lt, 99):.1f} | {'yes' if full else 'NO'} "
                f"| {rec:.3f} |",
                flush=True,
            )


def _doc(doc_id: str, text: str, acl: frozenset[str]) -> StagedDocument:
    chunk = ChunkRecord("c0", 0, 0, len(text), text, "")
    record = DocumentRecord(doc_id, f"bench:{doc_id}", doc_id, doc_id, "t", {}, acl)
    return StagedDocument(record, [chunk], None)


async def side_channel(stores: dict[str, Store]) -> None:
    print(
        "\n| store | public chunk's BM25 for a rare term: alone | with 50 restricted"
        " chunks holding it | ratio |"
    )
    print("| --- | --- | --- | --- |")
    filler = [_doc(f"f{i}", f"ordinary words number {i} here", frozenset()) for i in range(200)]
    public = _doc("public", "the zyxquartz procedure for everyone", frozenset())
    secret = [
        _doc(f"s{i}", f"zyxquartz board matter {i}", frozenset({"group:board"})) for i in range(50)
    ]
    query = parse_lexical("zyxquartz")
    scope = Scope("t", readers=PUBLIC_READERS)
    for label, store in stores.items():
        name = f"benchaclside{int(time.time())}{label}"
        spec = IndexSpec(name, None, None, DistanceMetric.COSINE, "bench")
        await store.ensure_index(spec)
        v = await store.begin_version(name)
        await store.stage_documents(name, v, [*filler, public])
        await store.publish_version(name, v, spec)
        alone = (await store.search_lexical(name, query, 5, scope)).hits
        v = await store.begin_version(name)
        await store.stage_documents(name, v, secret)
        await store.publish_version(name, v, spec)
        after = (await store.search_lexical(name, query, 5, scope)).hits
        assert [h.document_id for h in after] == ["public"], "a restricted chunk was returned"
        a, b = alone[0].score.raw, after[0].score.raw
        print(f"| {label} | {a:.4f} | {b:.4f} | {b / a:.3f} |", flush=True)


async def run(args: argparse.Namespace) -> None:
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    tmp = Path(tempfile.mkdtemp(prefix="gw-bench-acl-"))
    stores = await open_stores(args, tmp)
    try:
        await side_channel(stores)
        if args.chunks:
            await costs(args, stores)
    finally:
        for store in stores.values():
            await store.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--dsn", default=None, help="an external PostgreSQL (default: embedded)")
    parser.add_argument("--opensearch", default=None, help="an OpenSearch URL (default: none)")
    parser.add_argument("--vectors", choices=("clustered", "latent"), default="clustered")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
