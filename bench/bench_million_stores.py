"""The million-chunk benchmark on the stores in one run: OpenSearch, PostgreSQL, Qdrant, memory.

    nice -n 10 .venv/bin/python bench/bench_million_stores.py --chunks 1000000 \\
        [--store postgres|opensearch|qdrant|memory|both|all] [--opensearch-url URL]
        [--opensearch-heap-mb 4096] [--opensearch-line 3|2] [--opensearch-dir D]
        [--ef 10 40 200 400]
        [--shards 1] [--bulk-chunks 500] [--bulk-bytes N] [--bulk-in-flight 2] [--hnsw-m 16]
        [--hnsw-ef-construction 100] [--force-merge] [--summary FILE] [--qdrant-dir D]
        [every option of bench_million.py: --queries, --no-vectors, --dim, --data-dir, ...]

The same seeded chunks and queries (bench_million.Corpus: Zipfian text, clustered
vectors, exact neighbours computed while generating) go to each store in turn,
OpenSearch first, then PostgreSQL (bench_million.run, unchanged); the corpus is
regenerated for each store from the same seed, so neither holds it in memory. The
figures are printed as they are measured, then side by side, with the targets of
issue 26 item 6 checked for OpenSearch.

OpenSearch: without --opensearch-url one node is started with
scripts/opensearch_node.py (heap --opensearch-heap-mb, data under --opensearch-dir
or a temporary folder removed afterwards). An index already loaded on the node is
reused (a node started with `scripts/opensearch_node.py start` and given as
--opensearch-url keeps its data between runs). Everything goes
through the store API: begin_version, stage_documents in batches of 200 documents
(2,000 chunks; the store cuts them into _bulk requests of --bulk-chunks),
publish_version (refresh, replicas, alias swap). Replicas are 0 (one node). The
k-NN query's k is max(k, ef_search): each ef value is measured by replacing the
store's settings (`dataclasses.replace(store._settings, ef_search=ef)`), as the PG
part does with hnsw_ef_search. Server CPU is the node's JVM process CPU (/proc);
disk is `_cat/indices` of the bench index's physical index; heap is
`_nodes/stats/jvm` heap_used, RSS the node's VmRSS. --force-merge then merges the
physical index to one segment and measures the queries again.

Qdrant and memory (`--store qdrant`, `--store memory`, or `all` for the four stores in
that order: OpenSearch, PostgreSQL, Qdrant, memory): the embedded Qdrant engine
(qdrant-edge-py) on files under --qdrant-dir (default: a temporary folder removed
afterwards) and the in-memory store (the reference every store's results are checked
against; it searches exactly, so its rows are the same at every ef), each measured by
bench_qdrant_store.py's code on the same corpus and queries: bulk load through the store API, lexical p50/p99 unfiltered and with the
10% filter, vector recall@10 at each --ef unfiltered and filtered, disk. `both`
stays OpenSearch and PostgreSQL (issue 45's pairing).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import bench_million as bm
from bench_million import CHUNKS_PER_DOC, NAME, Corpus, K, Rows, _fmt_bytes, pct
from vector_data import add_vectors_argument

from groundwire.domain.fusion import fuse
from groundwire.domain.retrieval import FusionSettings, Leg, LexicalQuery, MetadataFilter, Scope
from groundwire.stores.base import DistanceMetric, IndexSpec
from groundwire.stores.opensearch.client import OpenSearchSettings
from groundwire.stores.opensearch.store import OpenSearchStore, open_opensearch_store

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "gwbench-"
Row = tuple[str, str]


def node_module() -> ModuleType:
    """scripts/opensearch_node.py (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "opensearch_node", ROOT / "scripts" / "opensearch_node.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["opensearch_node"] = module
    spec.loader.exec_module(module)
    return module


def proc_cpu(pid: int | None) -> float:
    """CPU seconds (user + system, all threads) of process `pid` so far."""
    if pid is None:
        return float("nan")
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss(pid: int | None) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def load_note() -> str:
    return "loadavg " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


class Node:
    """Admin reads of the node behind the store: pid, physical indexes, segments."""

    def __init__(self, store: OpenSearchStore) -> None:
        self.client = store._client
        self.pid: int | None = None

    async def find_pid(self) -> None:
        found = await self.client.nodes.info(metric="process")
        for node in found.get("nodes", {}).values():
            self.pid = int(node["process"]["id"])
            return

    async def physicals(self) -> list[str]:
        rows = await self.client.cat.indices(index=f"{PREFIX}{NAME}.*", format="json", h="index")
        return sorted(r["index"] for r in rows)

    async def disk(self) -> list[dict[str, str]]:
        rows: list[dict[str, str]] = await self.client.cat.indices(
            index=f"{PREFIX}{NAME}.*",
            format="json",
            bytes="b",
            h="index,docs.count,store.size,pri.store.size",
        )
        return rows

    async def segments(self) -> tuple[int, int]:
        """(segment count, bytes) of the bench index's physical indexes (primaries)."""
        rows = await self.client.cat.segments(
            index=f"{PREFIX}{NAME}.*", format="json", bytes="b", h="prirep,size"
        )
        prim = [r for r in rows if r.get("prirep") in ("p", "primary")]
        return len(prim), sum(int(r.get("size") or 0) for r in prim)

    async def heap(self) -> tuple[int, int]:
        found = await self.client.nodes.stats(metric="jvm")
        for node in found.get("nodes", {}).values():
            mem = node["jvm"]["mem"]
            return int(mem["heap_used_in_bytes"]), int(mem["heap_max_in_bytes"])
        return 0, 0

    async def merges_running(self) -> int:
        found = await self.client.nodes.stats(metric="indices", index_metric="merge")
        return sum(int(n["indices"]["merges"]["current"]) for n in found.get("nodes", {}).values())

    async def wait_merges(self, limit_s: float = 1800.0) -> float:
        t = time.perf_counter()
        while time.perf_counter() - t < limit_s:
            if not await self.merges_running():
                break
            await asyncio.sleep(2.0)
        return time.perf_counter() - t


async def load(
    store: OpenSearchStore,
    node: Node,
    corpus: Corpus,
    spec: IndexSpec,
    vectors: bool,
    name: str = NAME,
) -> list[Row]:
    rows: list[Row] = Rows()
    n_chunks = corpus.n_docs * CHUNKS_PER_DOC
    t = time.perf_counter()
    cpu0, srv0, gen_wall, stage_wall = time.process_time(), proc_cpu(node.pid), 0.0, 0.0
    gen_cpu = 0.0
    v = await store.begin_version(name)
    done = 0
    batches = corpus.batches(vectors=vectors)
    while True:
        g, gc = time.perf_counter(), time.process_time()
        batch = next(batches, None)
        gen_wall += time.perf_counter() - g
        gen_cpu += time.process_time() - gc
        if batch is None:
            break
        s = time.perf_counter()
        await store.stage_documents(name, v, batch)
        stage_wall += time.perf_counter() - s
        done += len(batch) * CHUNKS_PER_DOC
        if done % 100_000 == 0:
            print(
                f"  staged {done:,} chunks, {time.perf_counter() - t:.0f}s "
                f"({done / stage_wall:,.0f} chunks/s staging; {load_note()})",
                flush=True,
            )
    p = time.perf_counter()
    await store.publish_version(name, v, spec)
    publish = time.perf_counter() - p
    end = time.perf_counter()
    client_cpu = time.process_time() - cpu0 - gen_cpu
    server_used = proc_cpu(node.pid) - srv0
    rows.append(
        ("bulk load (chunks/s)",
         f"{n_chunks / (stage_wall + publish):,.0f} ({stage_wall + publish:.0f}s, "
         f"corpus generation excluded; {n_chunks / (end - t):,.0f} with it)")
    )  # fmt: skip
    rows.append(("  staging: stage_documents (chunks/s)", f"{n_chunks / stage_wall:,.0f}"))
    rows.append(("  staging, incl. corpus generation (s)", f"{p - t:.0f}"))
    rows.append(("  publish: refresh + replicas + alias swap (s)", f"{publish:.1f}"))
    rows.append(
        ("  CPU per chunk: client (analyze, JSON) / server (ms)",
         f"{client_cpu / n_chunks * 1000:.3f} / {server_used / n_chunks * 1000:.3f}"
         f"  (corpus generation {gen_cpu:.0f} s CPU, not counted)")
    )  # fmt: skip
    segs, _ = await node.segments()
    rows.append(("  segments after publish (primaries)", f"{segs}  ({load_note()})"))
    return rows


async def lexical_figures(
    store: OpenSearchStore,
    node: Node,
    lex_q: list[tuple[str, LexicalQuery]],
    filtered_queries: int | None,
    rows: list[Row],
    prefix: str = "",
) -> list[Any]:
    scope = Scope()
    for _, q in lex_q:  # warm-up
        await store.search_lexical(NAME, q, K, scope)
    times: dict[str, list[float]] = {}
    cpu: dict[str, float] = {}
    results = []
    for kind, q in lex_q:
        c0, t = proc_cpu(node.pid), time.perf_counter()
        res = await store.search_lexical(NAME, q, K, scope)
        dt = time.perf_counter() - t
        times.setdefault(kind, []).append(dt)
        times.setdefault("all", []).append(dt)
        cpu[kind] = cpu.get(kind, 0.0) + proc_cpu(node.pid) - c0
        results.append(res)
    cpu["all"] = sum(cpu.values())
    for kind in ("all", "mid", "mixed", "common", "ident"):
        ts = times.get(kind, [])
        rows.append(
            (f"{prefix}lexical {kind} p50 / p99 / max (ms) [{len(ts)}]",
             f"{pct(ts, 50):.1f} / {pct(ts, 99):.1f} / {pct(ts, 100):.1f}"
             f"  server CPU {cpu.get(kind, 0.0) / max(len(ts), 1) * 1000:.1f} ms/query")
        )  # fmt: skip
    flt = Scope(filter=MetadataFilter({"dept": frozenset({"d3"})}))
    ft: list[float] = []
    flt_q = lex_q[:filtered_queries]
    for _, q in flt_q:
        await store.search_lexical(NAME, q, K, flt)
    for _, q in flt_q:
        t = time.perf_counter()
        await store.search_lexical(NAME, q, K, flt)
        ft.append(time.perf_counter() - t)
    rows.append(
        (f"{prefix}lexical filtered 10% p50 / p99 (ms) [{len(ft)}]",
         f"{pct(ft, 50):.1f} / {pct(ft, 99):.1f}")
    )  # fmt: skip
    return results


def _with_ef(store: OpenSearchStore, ef: int) -> None:
    store._settings = dataclasses.replace(store._settings, ef_search=ef)


async def vector_figures(
    store: OpenSearchStore,
    node: Node,
    corpus: Corpus,
    efs: list[int],
    rows: list[Row],
    lex_q: list[tuple[str, LexicalQuery]],
    prefix: str = "",
) -> None:
    exact, scope = corpus.exact, Scope()
    default_ef = store._settings.ef_search
    for ef in dict.fromkeys([default_ef, *efs]):
        _with_ef(store, ef)
        for v in corpus.query_vectors:  # warm-up
            await store.search_vector(NAME, v, K, scope)
        ts, recalls = [], []
        c0 = proc_cpu(node.pid)
        for qi, v in enumerate(corpus.query_vectors):
            t = time.perf_counter()
            hits = await store.search_vector(NAME, v, K, scope)
            ts.append(time.perf_counter() - t)
            got = {(h.document_id, h.chunk_id) for h in hits}
            recalls.append(len(got & {k for _, k in exact.top[qi]}) / K)
        tag = " (product default)" if ef == default_ef else ""
        rows.append(
            (f"{prefix}semantic ef_search={ef}{tag}: recall@10 / p50 / p99 (ms)",
             f"{np.mean(recalls):.3f} / {pct(ts, 50):.1f} / {pct(ts, 99):.1f}"
             f"  server CPU {(proc_cpu(node.pid) - c0) / len(ts) * 1000:.1f} ms/query")
        )  # fmt: skip
    _with_ef(store, default_ef)
    flt = Scope(filter=MetadataFilter({"dept": frozenset({"d3"})}))
    ts, recalls, returned = [], [], 0
    for v in corpus.query_vectors:  # warm-up
        await store.search_vector(NAME, v, K, flt)
    for qi, v in enumerate(corpus.query_vectors):
        t = time.perf_counter()
        hits = await store.search_vector(NAME, v, K, flt)
        ts.append(time.perf_counter() - t)
        returned += len(hits)
        got = {(h.document_id, h.chunk_id) for h in hits}
        recalls.append(len(got & {k for _, k in exact.top_filtered[qi]}) / K)
    rows.append(
        (f"{prefix}semantic filtered 10%: recall@10 / p50 / p99 (ms)",
         f"{np.mean(recalls):.3f} / {pct(ts, 50):.1f} / {pct(ts, 99):.1f}"
         f"  returned {returned}/{K * len(corpus.query_vectors)}")
    )  # fmt: skip
    hyb = []
    for (_, q), v in zip(lex_q, corpus.query_vectors, strict=False):
        t = time.perf_counter()
        sem_hits, lex_hits = await asyncio.gather(
            store.search_vector(NAME, v, K, scope), store.search_lexical(NAME, q, K, scope)
        )
        fuse([(Leg.SEMANTIC, sem_hits), (Leg.LEXICAL, lex_hits.hits)], FusionSettings(), K)
        hyb.append(time.perf_counter() - t)
    rows.append((f"{prefix}hybrid p50 / p99 (ms)", f"{pct(hyb, 50):.1f} / {pct(hyb, 99):.1f}"))


async def size_figures(node: Node, n_chunks: int, rows: list[Row]) -> None:
    for r in await node.disk():
        total, prim = int(r.get("store.size") or 0), int(r.get("pri.store.size") or 0)
        rows.append(
            (f"disk index {r['index']} ({r.get('docs.count')} docs, primaries)",
             f"{_fmt_bytes(prim)} ({prim / n_chunks:,.0f} B/chunk); with replicas "
             f"{_fmt_bytes(total)}")
        )  # fmt: skip
    segs, seg_bytes = await node.segments()
    rows.append(("segments (primaries) / their bytes", f"{segs} / {_fmt_bytes(seg_bytes)}"))
    used, top = await node.heap()
    rows.append(
        ("heap used / max; node RSS",
         f"{_fmt_bytes(used)} / {_fmt_bytes(top)}; RSS {_fmt_bytes(proc_rss(node.pid))}")
    )  # fmt: skip


async def run_opensearch(args: argparse.Namespace, url: str) -> list[Row]:
    t0 = time.perf_counter()
    print(f"\n== OpenSearch at {url} ({load_note()}, {os.cpu_count()} cores)", flush=True)
    settings = OpenSearchSettings(
        hosts=(url,),
        request_timeout_s=300.0,
        shards=args.shards,
        replicas=0,
        index_prefix=PREFIX,
        hnsw_m=args.hnsw_m,
        hnsw_ef_construction=args.hnsw_ef_construction,
        bulk_chunks=args.bulk_chunks,
        bulk_bytes=args.bulk_bytes,
        bulk_in_flight=args.bulk_in_flight,
        label="bench",
    )
    store = await open_opensearch_store(settings)
    node = Node(store)
    await node.find_pid()
    corpus = Corpus(args.chunks, args.queries, args.vectors)
    n_chunks = corpus.n_docs * CHUNKS_PER_DOC
    spec = IndexSpec(
        NAME,
        None if args.no_vectors else corpus.model,
        None if args.no_vectors else bm.DIM,
        DistanceMetric.COSINE,
        "bench",
    )
    rows: list[Row] = Rows()
    try:
        await store.ensure_index(spec)
        loaded = (await store.index_state(NAME)).chunk_count
        if loaded == 0:
            rows.extend(await load(store, node, corpus, spec, not args.no_vectors))
            waited = await node.wait_merges()
            if waited > 1:
                print(f"  background merges after publish: {waited:.0f}s", flush=True)
        else:
            n_chunks = loaded
            print(f"reusing the loaded index ({loaded:,} chunks)", flush=True)
            corpus.skip_generation()
        print(f"loaded at {time.perf_counter() - t0:.0f}s", flush=True)
        lex_q = corpus.lexical_queries(args.queries)
        results = await lexical_figures(store, node, lex_q, args.filtered_queries, rows)
        if args.results:
            lines = [
                f"{kind}\t{q.text}\t"
                + " ".join(f"{h.document_id}/{h.chunk_id}:{h.score.raw!r}" for h in res.hits)
                for (kind, q), res in zip(lex_q, results, strict=True)
            ]
            out = Path(args.results + ".opensearch")
            await asyncio.to_thread(out.write_text, "\n".join(lines) + "\n")
        if not args.no_vectors:
            await vector_figures(store, node, corpus, args.ef, rows, lex_q)
        await size_figures(node, n_chunks, rows)
        if args.force_merge:
            for physical in await node.physicals():
                t = time.perf_counter()
                await store._client.indices.forcemerge(
                    index=physical, max_num_segments=1, request_timeout=7200
                )
                # The store leaves refresh off: the merged segment is searchable
                # (and the old ones released) only after a refresh.
                await store._client.indices.refresh(index=physical)
                rows.append((f"force-merge to 1 segment (s) [{physical}]",
                             f"{time.perf_counter() - t:.0f}  ({load_note()})"))  # fmt: skip
            pre = "merged: "
            await lexical_figures(store, node, lex_q, args.filtered_queries, rows, pre)
            if not args.no_vectors:
                await vector_figures(store, node, corpus, args.ef, rows, lex_q, pre)
            await size_figures(node, n_chunks, rows)
        if args.text_only_bulk and not args.no_vectors:
            rows.extend(await text_only_load(store, node, corpus))
        rows.append(("OpenSearch total (s)", f"{time.perf_counter() - t0:.0f}  ({load_note()})"))
    finally:
        await store.close()
    return rows


async def text_only_load(store: OpenSearchStore, node: Node, corpus: Corpus) -> list[Row]:
    """The same corpus again without vectors, into an index of its own (dropped after):
    the text-only bulk figure from the same invocation as the rest."""
    name = f"{NAME}-text"
    print(f"\n  text-only load into {name} ({load_note()})", flush=True)
    spec = IndexSpec(name, None, None, DistanceMetric.COSINE, "bench")
    await store.ensure_index(spec)
    try:
        found = await load(store, node, corpus, spec, False, name)
    finally:  # its physical indexes (the bench's prefix): the disk back for what follows
        await store._client.indices.delete(index=f"{PREFIX}{name}.*", ignore_unavailable=True)
    return [(f"text only: {label.strip()}", value) for label, value in found]


async def run_embedded(kind: str, args: argparse.Namespace) -> list[Row]:
    """The embedded Qdrant store's or the memory store's figures (bench_qdrant_store.one),
    rows labelled as the other stores' where they measure the same thing."""
    import bench_qdrant_store as bq

    base = Path(args.qdrant_dir) if args.qdrant_dir else Path(tempfile.mkdtemp(prefix="gw-q-"))
    try:
        found = await bq.one(kind, argparse.Namespace(**{**vars(args), "reuse": False}), base)
    finally:
        if not args.qdrant_dir:
            shutil.rmtree(base, ignore_errors=True)
    rows: list[Row] = []
    for label, value in found:
        print(f"  {label}: {value}", flush=True)
        m = re.fullmatch(r"vector ef=(\d+): recall@10, p50 / p99 \(ms\)", label)
        if m:  # the other stores' label and format, for first_ef_reaching and the table
            label, value = (
                f"semantic ef_search={m[1]}: recall@10 / p50 / p99 (ms)",
                value.replace(", ", " / ", 1),
            )
        rows.append((label, value))
    return rows


def _figures(value: str) -> list[float]:
    out = []
    for part in value.split("  ")[0].replace("(", " ").split():
        try:
            out.append(float(part.replace(",", "")))
        except ValueError:
            continue
    return out


def first_ef_reaching(rows: list[Row], target: float = 0.95) -> Row | None:
    best: tuple[int, str] | None = None
    for label, value in rows:
        if label.startswith("semantic ef_search="):
            ef = int(label.split("=")[1].split(":")[0].split()[0])
            f = _figures(value)
            if f and f[0] >= target and (best is None or ef < best[0]):
                best = (ef, value)
    if best is None:
        return None
    return (f"semantic: lowest ef_search reaching recall {target}", f"ef {best[0]}: {best[1]}")


def _first(rows: list[Row], prefix: str) -> str | None:
    return next((v for k, v in rows if k.strip().startswith(prefix)), None)


def _target(
    out: list[Row],
    rows: list[Row],
    prefix: str,
    what: str,
    pick: int,
    bound: float,
    at_least: bool = False,
) -> None:
    """One target row: the figure at index ``pick`` of the first row labelled ``prefix``."""
    value = _first(rows, prefix)
    if value is None:
        return
    got = _figures(value)[pick]
    out.append((what, f"{got:,.1f}: {_ok(got >= bound if at_least else got <= bound)}"))


def targets(rows: list[Row]) -> list[Row]:
    """Issue 46 item 3's OpenSearch targets at 1M on this machine (as published, and after
    the force-merge where the run made one)."""
    out: list[Row] = []
    _target(out, rows, "bulk load (chunks/s)", "OpenSearch target bulk with vectors >= 1,000 "
            "chunks/s", 0, 1000, at_least=True)  # fmt: skip
    _target(out, rows, "text only: bulk load (chunks/s)", "OpenSearch target bulk text only "
            ">= 3,000 chunks/s", 0, 3000, at_least=True)  # fmt: skip
    for pre, tag in (("", "as published"), ("merged: ", "merged")):
        _target(out, rows, f"{pre}lexical all p50", f"OpenSearch target lexical whole-mix p99 "
                f"<= 60 ms ({tag})", 1, 60)  # fmt: skip
        _target(out, rows, f"{pre}lexical filtered 10%", f"OpenSearch target lexical filtered "
                f"10% p99 <= 60 ms ({tag})", 1, 60)  # fmt: skip
        semantic = [
            (k[len(pre) :], v) for k, v in rows if k.startswith(f"{pre}semantic ef_search=")
        ]
        if not semantic:
            continue
        reach = first_ef_reaching(semantic)
        what = f"OpenSearch target recall@10 >= 0.95 at p50 <= 20 ms ({tag})"
        if reach is None:
            out.append((what, "recall 0.95 never reached: MISSED"))
        else:
            p50 = _figures(reach[1].split(": ", 1)[1])[1]
            out.append((what, f"{reach[1]}: {_ok(p50 <= 20)}"))
    return out


def postgres_targets(rows: list[Row]) -> list[Row]:
    """Issue 45's PostgreSQL targets at 1M on this machine."""
    out: list[Row] = []
    _target(out, rows, "load without HNSW build (chunks/s)", "PostgreSQL target bulk without "
            "HNSW >= 2,000 chunks/s", 0, 2000, at_least=True)  # fmt: skip
    _target(out, rows, "lexical all p50", "PostgreSQL target lexical whole-mix p99 <= 100 ms",
            1, 100)  # fmt: skip
    _target(out, rows, "lexical common p50", "PostgreSQL target common-word-only p50 <= 30 ms",
            0, 30)  # fmt: skip
    _target(out, rows, "lexical filtered 10%", "PostgreSQL target filtered 10% p99 <= 150 ms",
            1, 150)  # fmt: skip
    postings = _first(rows, "table gw_posting_blocks (total)")
    if postings is not None:
        per = float(postings.split("(")[1].split(" B/chunk")[0].replace(",", ""))
        out.append(("PostgreSQL target postings <= 3,000 B a chunk", f"{per:,.0f}: "
                    f"{_ok(per <= 3000)}"))  # fmt: skip
    return out


def _ok(ok: bool) -> str:
    return "met" if ok else "MISSED"


def agreement(results: str) -> Row | None:
    """Mean top-10 overlap of the lexical mix between the two stores' results files."""
    try:
        a = Path(results).read_text().splitlines()
        b = Path(results + ".opensearch").read_text().splitlines()
    except OSError:
        return None
    overlaps = []
    for la, lb in zip(a, b, strict=False):
        sa = {h.rsplit(":", 1)[0] for h in la.split("\t")[2].split()}
        sb = {h.rsplit(":", 1)[0] for h in lb.split("\t")[2].split()}
        if sa or sb:
            overlaps.append(len(sa & sb) / max(len(sa), len(sb)))
    return ("lexical top-10 overlap PG vs OpenSearch", f"{np.mean(overlaps):.3f}")


def disk_per_chunk(rows: list[Row]) -> Row | None:
    """Bytes per chunk over every table (PG, indexes included) or physical index
    (OpenSearch, primaries)."""
    total, seen = 0.0, set()
    for label, value in rows:
        if label in seen:  # a re-measurement (after --force-merge)
            continue
        seen.add(label)
        if (label.startswith("table ") or label.startswith("disk index ")) and "B/chunk)" in value:
            total += float(value.split("(")[1].split(" B/chunk")[0].replace(",", ""))
    return ("disk total (B/chunk)", f"{total:,.0f}") if total else None


def side_by_side(stores: dict[str, list[Row]]) -> list[str]:
    labels: list[str] = []
    for rows in stores.values():
        labels.extend(label for label, _ in rows if label not in labels)
    names = list(stores)
    lookup = {name: dict(rows) for name, rows in stores.items()}
    lines = ["| figure | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for label in labels:
        cells = [lookup[n].get(label, "-").replace("|", "/") for n in names]
        lines.append(f"| {label.strip()} | " + " | ".join(cells) + " |")
    return lines


ORDER = ("opensearch", "postgres", "qdrant", "memory")
GROUPS = {"both": ("opensearch", "postgres"), "all": ORDER}


def stores_of(names: list[str]) -> list[str]:
    """The stores named (both = OpenSearch and PostgreSQL, all = every store), in the
    fixed order the invocation runs them."""
    wanted = {kind for name in names for kind in GROUPS.get(name, (name,))}
    return [kind for kind in ORDER if kind in wanted]


async def run(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    stores: dict[str, list[Row]] = {}
    dim = "- (text only)" if args.no_vectors else f"{bm.DIM} ({args.vectors} vectors)"
    kinds = stores_of(args.store)
    print(f"{args.chunks:,} chunks, dim {dim}, stores {', '.join(kinds)}; {load_note()}")
    if "opensearch" in kinds:
        cluster = None
        url = args.opensearch_url
        if url is None:
            # Started from the main thread: the node dies with this process.
            base = Path(args.opensearch_dir) if args.opensearch_dir else None
            cluster = node_module().start_cluster(
                1, base, args.opensearch_heap_mb, line=args.opensearch_line
            )
            url = cluster.url
        try:
            rows = await run_opensearch(args, url)
            for row in (first_ef_reaching(rows), disk_per_chunk(rows)):
                if row:
                    rows.append(row)
            stores["OpenSearch"] = rows
        finally:
            if cluster is not None:
                await asyncio.to_thread(cluster.stop)
    if "postgres" in kinds:
        print(f"\n== PostgreSQL ({load_note()})", flush=True)
        rows = await bm.run(args)
        for row in (first_ef_reaching(rows), disk_per_chunk(rows)):
            if row:
                rows.append(row)
        stores["PostgreSQL"] = rows
    for kind, label in (("qdrant", "Qdrant"), ("memory", "memory")):
        if kind in kinds:
            print(f"\n== {label}, embedded ({load_note()})", flush=True)
            rows = await run_embedded(kind, args)
            for row in (first_ef_reaching(rows), disk_per_chunk(rows)):
                if row:
                    rows.append(row)
            stores[label] = rows
    extra: list[Row] = []
    if "OpenSearch" in stores:
        extra.extend(targets(stores["OpenSearch"]))
    if "PostgreSQL" in stores:
        extra.extend(postgres_targets(stores["PostgreSQL"]))
    if args.results and {"OpenSearch", "PostgreSQL"} <= set(stores):
        row = agreement(args.results)
        if row:
            extra.append(row)
    head = (
        f"{args.chunks:,} chunks, dim {dim}, k={K}, "
        f"{args.queries} queries per figure; {load_note()} at end "
        f"({os.cpu_count()} cores, shared); total {time.perf_counter() - t0:.0f}s"
    )
    lines = [head, "", *side_by_side(stores), ""]
    lines.extend(f"- {label}: {value}" for label, value in extra)
    print("\n" + "\n".join(lines))
    if args.summary:
        Path(args.summary).parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(Path(args.summary).write_text, "\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--store",
        nargs="+",
        choices=[*ORDER, *GROUPS],
        default=["postgres"],
        help="one or more stores, run one after the other in one invocation (both = "
        "opensearch postgres; all = every store)",
    )
    parser.add_argument(
        "--text-only-bulk",
        action="store_true",
        help="OpenSearch: load the corpus again without vectors (its own index, dropped after)",
    )
    parser.add_argument("--opensearch-url", default=None, help="a running node (else started)")
    parser.add_argument("--opensearch-heap-mb", type=int, default=4096)
    parser.add_argument(
        "--opensearch-line",
        default=None,
        help="release line of the started node: 3 (3.5, Java 21+; default) or 2 (2.19, Java 17)",
    )
    parser.add_argument(
        "--opensearch-dir",
        default=None,
        help="folder of the started node (default: a temporary one)",
    )
    parser.add_argument(
        "--qdrant-dir", default=None, help="the Qdrant engine's files (default: a temporary folder)"
    )
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--bulk-chunks", type=int, default=500)
    parser.add_argument("--bulk-bytes", type=int, default=8 * 1024 * 1024)
    parser.add_argument("--bulk-in-flight", type=int, default=2)
    parser.add_argument("--hnsw-m", type=int, default=16)
    parser.add_argument("--hnsw-ef-construction", type=int, default=100)
    parser.add_argument("--force-merge", action="store_true", help="then 1 segment, re-measure")
    parser.add_argument("--summary", default=None, help="write the side-by-side table here")
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--data-dir", default=None, help="PG embedded data directory")
    parser.add_argument("--keep", action="store_true", help="keep the PG data directory")
    parser.add_argument("--no-vectors", action="store_true", help="text only")
    parser.add_argument("--ef", type=int, nargs="*", default=[10, 40, 200, 400])
    parser.add_argument("--results", default=None, help="lexical results (PG; +.opensearch)")
    parser.add_argument("--filtered-queries", type=int, default=None)
    parser.add_argument("--dim", type=int, default=bm.DIM)
    add_vectors_argument(parser)
    args = parser.parse_args()
    args.compare_half = False
    bm.DIM = args.dim
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
