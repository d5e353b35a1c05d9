"""Many small tenants on one OpenSearch node (issue 46 item 4): what a tenant costs
when every tenant is an index of its own (stores/opensearch/layout.py), or, with
`--shared-tenant-chunks N`, when tenants of at most N chunks share their index's pool
(stores/opensearch/pool.py).

    .venv/bin/python bench/bench_opensearch_tenants.py [--tenants 1000] [--step 250]
        [--chunks 20] [--heap-mb 1024] [--opensearch URL] [--line 2|3]
        [--shared-tenant-chunks N] [--updates 250]

Tenants are added `step` at a time, each with `chunks` chunks (384-d `latent` vectors
and a few words of text), all of a step staged into one version and published by one
alias swap, as an ingestion touching many tenants is. After each step: the publish's
seconds, the node's shards, heap used and its old generation (what survives the
node's collections; OpenSearch has no "collect now"), its segments and the cluster state's size, and p50/p99
of a lexical and a semantic search of random tenants (one at a time). OpenSearch
refuses shards past `cluster.max_shards_per_node` (1,000 by default): the step that
crosses it is reported with the refusal, then the bound is raised (by `--raise-limit`,
default on) so the cost past it is measured too.

After the last step, `--updates` tenants (default: one step's) get a new version that
changes one of their documents, in one publish: its seconds are the incremental
publish's cost (a pooled tenant's unchanged documents are copied through this process,
an own index's by the engine's `_reindex`).

Without --opensearch a one-node cluster is started (scripts/opensearch_node.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from groundwire.domain.access import ALL_READERS
from groundwire.domain.analysis import Analyzer
from groundwire.domain.errors import GroundwireError
from groundwire.domain.retrieval import LexicalQuery, Scope
from groundwire.stores.base import ChunkRecord, DocumentRecord, StagedDocument
from groundwire.stores.opensearch import open_opensearch_store

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_million_stores import node_module  # noqa: E402
from bench_opensearch_exact import pct, settings  # noqa: E402
from bench_opensearch_exact import spec as vector_spec  # noqa: E402
from vector_data import Latent  # noqa: E402

NAME = "tenants"
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "omicron",
]


def spec() -> Any:
    return vector_spec(NAME)


async def node_figures(client: httpx.AsyncClient) -> dict[str, Any]:
    stats = (await client.get("/_nodes/stats/jvm,indices")).json()
    node = next(iter(stats["nodes"].values()))
    health = (await client.get("/_cluster/health")).json()
    state = await client.get("/_cluster/state/metadata,routing_table")
    return {
        "shards": health["active_shards"],
        "heap_mb": node["jvm"]["mem"]["heap_used_in_bytes"] / 2**20,
        "heap_max_mb": node["jvm"]["mem"]["heap_max_in_bytes"] / 2**20,
        "old_mb": node["jvm"]["mem"]["pools"].get("old", {}).get("used_in_bytes", 0) / 2**20,
        "segments_mb": node["indices"]["segments"].get("memory_in_bytes", 0) / 2**20,
        "segments": node["indices"]["segments"]["count"],
        "state_kb": len(state.content) / 1024,
    }


async def run(args: argparse.Namespace, url: str) -> None:
    print(
        f"OpenSearch at {url}; {args.chunks} chunks a tenant; "
        f"load average at start {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)\n"
    )
    print(
        "| tenants | publish of the step (s) | shards | heap used, old generation / max (MB) | segments "
        "(count, MB) | cluster state (KB) | lexical p50 / p99 (ms) | semantic p50 / p99 (ms) "
        "| load |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    store = await open_opensearch_store(
        settings(
            url,
            index_prefix="gwbench-tenants-",
            shared_tenant_chunks=args.shared_tenant_chunks,
        )
    )
    rng = np.random.default_rng(4)
    gen = Latent(np.random.default_rng(46))
    analyzer = Analyzer()
    client = httpx.AsyncClient(base_url=url, timeout=600)
    try:
        await store.ensure_index(spec())
        made = 0
        while made < args.tenants:
            step = min(args.step, args.tenants - made)
            version = await store.begin_version(NAME)
            docs = []
            vectors = gen.sample(rng, step * args.chunks)
            for t in range(made, made + step):
                for c in range(args.chunks):
                    text = " ".join(rng.choice(WORDS, size=8)) + f" item{t}x{c}"
                    chunk = ChunkRecord("c0000", 0, 0, len(text), text)
                    record = DocumentRecord(f"d{c}", f"bench:{c}", "h", "", f"tenant{t:05d}")
                    row = (t - made) * args.chunks + c
                    docs.append(StagedDocument(record, [chunk], vectors[row : row + 1]))
            started = time.perf_counter()
            refused = ""
            try:
                for i in range(0, len(docs), 500):
                    await store.stage_documents(NAME, version, docs[i : i + 500])
                await store.publish_version(NAME, version, spec())
            except GroundwireError as exc:  # the shard bound: reported, then raised
                await store.discard_version(NAME, version)
                if exc.reason != "STORE_CAPACITY_EXHAUSTED":
                    raise
                refused = f" (a first attempt refused: {exc.reason})"
                print(f"<!-- step to {made + step:,} tenants refused: {exc.reason} -->", flush=True)
                if not args.raise_limit:
                    print(f"| {made + step:,} | refused{refused} | | | | | | | |")
                    return
                await client.put(
                    "/_cluster/settings",
                    json={"persistent": {"cluster.max_shards_per_node": 100_000}},
                )
                continue
            took = time.perf_counter() - started
            made += step
            lexical, semantic = [], []
            for _ in range(50):
                tenant = f"tenant{int(rng.integers(made)):05d}"
                scope = Scope(tenant, readers=ALL_READERS)
                terms = tuple(analyzer.terms(" ".join(rng.choice(WORDS, size=2))))
                query = LexicalQuery("q", terms, ())
                t0 = time.perf_counter()
                await store.search_lexical(NAME, query, 10, scope)
                lexical.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                await store.search_vector(NAME, gen.sample(rng, 1)[0], 10, scope)
                semantic.append(time.perf_counter() - t0)
            f = await node_figures(client)
            print(
                f"| {made:,} | {took:.1f}{refused} | {f['shards']:,} | "
                f"{f['heap_mb']:.0f}, {f['old_mb']:.0f} / {f['heap_max_mb']:.0f} | {f['segments']:,}, "
                f"{f['segments_mb']:.1f} | {f['state_kb']:.0f} | "
                f"{pct(lexical, 50):.1f} / {pct(lexical, 99):.1f} | "
                f"{pct(semantic, 50):.1f} / {pct(semantic, 99):.1f} | {os.getloadavg()[0]:.1f} |",
                flush=True,
            )
        await updates(store, args, made, rng, gen)
    finally:
        await client.aclose()
        await store.close()


async def updates(store: Any, args: argparse.Namespace, made: int, rng: Any, gen: Any) -> None:
    """One version changing one document of each of `--updates` tenants."""
    count = min(made, args.step if args.updates is None else args.updates)
    if not count:
        return
    version = await store.begin_version(NAME)
    vectors = gen.sample(rng, count)
    docs = []
    for i, t in enumerate(rng.choice(made, size=count, replace=False).tolist()):
        text = " ".join(rng.choice(WORDS, size=8)) + f" changed{t}"
        chunk = ChunkRecord("c0000", 0, 0, len(text), text)
        record = DocumentRecord("d0", "bench:0", "h2", "", f"tenant{t:05d}")
        docs.append(StagedDocument(record, [chunk], vectors[i : i + 1]))
    started = time.perf_counter()
    for i in range(0, len(docs), 500):
        await store.stage_documents(NAME, version, docs[i : i + 500])
    await store.publish_version(NAME, version, spec())
    took = time.perf_counter() - started
    print(
        f"\nA version changing one document of each of {count:,} tenants "
        f"({args.chunks - 1} unchanged chunks each copied): {took:.1f} s",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--step", type=int, default=250)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--heap-mb", type=int, default=1024)
    parser.add_argument("--opensearch", default=None)
    parser.add_argument("--line", choices=("2", "3"), default="3")
    parser.add_argument("--raise-limit", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--shared-tenant-chunks",
        type=int,
        default=0,
        help="tenants of at most this many chunks share their index's pool (0: none)",
    )
    parser.add_argument("--updates", type=int, default=None, help="tenants of the update step")
    args = parser.parse_args()
    if args.opensearch:
        asyncio.run(run(args, args.opensearch))
        return
    with node_module().start_cluster(1, heap_mb=args.heap_mb, line=args.line) as cluster:
        asyncio.run(run(args, cluster.url))


if __name__ == "__main__":
    main()
