"""The PostgreSQL store at scale: up to a million chunks on one node.

    nice -n 10 .venv/bin/python bench/bench_million.py --chunks 1000000 \\
        [--data-dir /tmp/gw-million] [--keep] [--queries 300] [--no-vectors] [--compare-half]
        [--dim 384] [--filtered-queries N] [--impact-share S] [--results FILE]

The same benchmark on OpenSearch too, the same chunks and queries in one run:
bench/bench_million_stores.py --store both (it calls `run` below for PostgreSQL).

Without --dsn an embedded PostgreSQL is started on --data-dir (a fresh temporary
directory by default, removed afterwards unless --keep). A data directory that already
holds the loaded index is reused without loading again (`--keep` on the first run), so
one load can be measured by two checkouts in one session: run the older checkout's
server/ on PYTHONPATH first ("before"), then this one ("after"; it migrates the schema
on open and reports the migration's duration).

Data (deterministic, seeded, generated batch by batch so a million chunks never sit in
the benchmark's memory):
- text: chunks of 60-140 words drawn from a Zipfian (s = 1.1) vocabulary of 30,000
  pseudo-words, so the head words are really common (rank 1 is in every chunk, rank 20
  in about 40% of them) and most words are rare; one chunk in five carries 1-2
  identifiers (POL-XX-123, CamelCase type names, name_12.cs, CS1234);
- vectors: dimension 384, from bench/vector_data.py: `--vectors isotropic` (the
  default, every earlier run's data: 256 unit centroids plus Gaussian noise over all
  dimensions, renormalized) or `--vectors latent` (low-dimensional topic manifolds
  fitted to all-MiniLM-L6-v2 vectors of real text: bench_vector_structure.py); the
  text is the same for both; documents of 10 chunks; metadata `dept` takes 10 values
  (10%).

Every figure is printed as it is measured (a stopped run keeps its figures so far), with
the CPU the client (encoding, COPY) and the PostgreSQL server (from /proc) spent per
chunk and, for lexical queries, the server CPU per query: on a shared machine wall-clock
latency is mostly waiting, CPU is what a dedicated core would spend.

Load: the product's own bulk path, without embedding: begin_version, stage_documents
in batches of 200 documents (binary COPY, tokenized in a worker thread), publish_version
(postings and BM25 statistics in the publish transaction, then ANALYZE/VACUUM of the
postings and the one-pass HNSW build); each phase is timed.

Queries (one at a time, after one warm-up pass; store calls, no embedding, no gRPC):
- lexical, four kinds: `mid` 1-3 words from ranks 20-5,000; `mixed` one head word
  (ranks 1-50) and 1-2 mid words; `common` 2-3 head words only (ranks 1-50: the case
  MaxScore cannot prune); `ident` an identifier present in the corpus. p50/p99 over the
  whole mix and per kind;
- semantic: fresh points drawn like the data; recall@10 against the exact top 10
  (computed in numpy while generating), at the product's ef_search and the others
  given by --ef;
- hybrid: both legs concurrently, fused with RRF;
- filtered: `dept` = one value (10% of the chunks), semantic (with recall) and lexical;
- sizes: pg_total_relation_size of every groundwire table, pg_relation_size of its
  indexes, and the average stored width of each chunk column.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from vector_data import Isotropic, Latent, add_vectors_argument

from groundwire.domain.fusion import fuse
from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import FusionSettings, Leg, LexicalQuery, MetadataFilter, Scope
from groundwire.stores.base import (
    ChunkRecord,
    DistanceMetric,
    DocumentRecord,
    IndexSpec,
    StagedDocument,
)
from groundwire.stores.postgres import PostgresSettings, open_postgres_store
from groundwire.stores.postgres import blocks as pg_blocks
from groundwire.stores.postgres import embedded as embedded_pg
from groundwire.stores.postgres import vectors as pg_vectors
from groundwire.stores.postgres import versions as pg_versions

DIM = 384
CHUNKS_PER_DOC = 10
BATCH_DOCS = 200
VOCAB = 30_000
K = 10
NAME = "million"
SEED = 7

# Server settings for the run (the embedded defaults are for a small index: 512 MB of
# shared buffers). Kept within ~6 GiB together with the benchmark process.
SERVER_SETTINGS = {
    "shared_buffers": "1536MB",
    "work_mem": "64MB",
    "maintenance_work_mem": "2GB",
    "effective_cache_size": "4GB",
    "max_wal_size": "8GB",
    "checkpoint_timeout": "30min",
    "max_parallel_maintenance_workers": "1",
}

Vec = npt.NDArray[np.float32]


def make_vocab(rng: np.random.Generator) -> list[str]:
    consonants = list("bcdfghjklmnprstvz")
    vowels = list("aeiou")
    words: set[str] = set()
    while len(words) < VOCAB:
        n = int(rng.integers(1, 4))
        words.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(n)))
    return sorted(words, key=lambda w: (len(w), w))


def identifier(rng: np.random.Generator) -> str:
    kind = int(rng.integers(4))
    if kind == 0:
        return f"POL-{rng.choice(['HR', 'IT', 'FIN', 'OPS'])}-{int(rng.integers(1000)):03d}"
    if kind == 1:
        parts = ["Rag", "Retriever", "Factory", "Index", "Store", "Query", "Async", "Http"]
        return "I" + "".join(rng.choice(parts, size=2, replace=False))
    if kind == 2:
        return f"name_{int(rng.integers(500))}.cs"
    return f"CS{int(rng.integers(1000, 9999))}"


@dataclass
class Exact:
    """The running exact top k of each query vector (cosine), over all chunks and over
    the filtered ones."""

    queries: Vec
    top: list[list[tuple[float, tuple[str, str]]]] = field(default_factory=list)
    top_filtered: list[list[tuple[float, tuple[str, str]]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.top = [[] for _ in range(len(self.queries))]
        self.top_filtered = [[] for _ in range(len(self.queries))]

    def add(self, vectors: Vec, keys: list[tuple[str, str]], filtered: list[bool]) -> None:
        sims = self.queries @ vectors.T
        mask = np.array(filtered)
        for qi in range(len(self.queries)):
            row = sims[qi]
            for target, sel in ((self.top, None), (self.top_filtered, mask)):
                r = row if sel is None else np.where(sel, row, -np.inf)
                best = np.argpartition(-r, K)[:K]
                merged = target[qi] + [(float(r[i]), keys[i]) for i in best if np.isfinite(r[i])]
                merged.sort(key=lambda x: -x[0])
                target[qi] = merged[:K]


class Corpus:
    """The seeded corpus, generated in batches of documents."""

    def __init__(self, chunks: int, queries: int, vectors: str = "isotropic") -> None:
        self.rng = np.random.default_rng(SEED)
        self.vocab = make_vocab(self.rng)
        ranks = np.arange(1, VOCAB + 1, dtype=np.float64)
        p = ranks**-1.1
        self.cdf = np.cumsum(p / p.sum())
        # The isotropic vectors draw from the text's stream (as in every earlier run),
        # in both modes, so the text is the same whichever vectors are loaded; the
        # latent ones come from streams of their own.
        self.vectors = vectors
        self.isotropic = Isotropic(self.rng, DIM)
        self.generator: Isotropic | Latent = self.isotropic
        self.vector_rng = self.rng
        if vectors == "latent":
            self.generator = Latent(np.random.default_rng(SEED + 3), DIM)
            self.vector_rng = np.random.default_rng(SEED + 4)
        self.n_docs = max(1, chunks // CHUNKS_PER_DOC)
        self.identifiers: list[str] = []
        qrng = np.random.default_rng(SEED + 1)
        self.query_vectors = self.generator.sample(qrng, queries)
        self.exact = Exact(self.query_vectors)

    @property
    def model(self) -> str:
        """The model name the index records for these vectors."""
        return f"bench/{'clustered' if self.vectors == 'isotropic' else 'latent'}:{DIM}"

    def batches(self, vectors: bool) -> Iterator[list[StagedDocument]]:
        rng = self.rng
        for start in range(0, self.n_docs, BATCH_DOCS):
            docs = []
            n = min(BATCH_DOCS, self.n_docs - start) * CHUNKS_PER_DOC
            lengths = rng.integers(60, 141, size=n)
            word_ids = np.searchsorted(self.cdf, rng.random(int(lengths.sum()))).clip(0, VOCAB - 1)
            # Drawn in both modes: the text's stream stays the same (see __init__).
            vecs = self.isotropic.sample(rng, n)
            if self.generator is not self.isotropic:
                vecs = self.generator.sample(self.vector_rng, n)
            keys: list[tuple[str, str]] = []
            filtered: list[bool] = []
            pos_w = 0
            for d in range(start, start + n // CHUNKS_PER_DOC):
                records = []
                offset = 0
                for i in range(CHUNKS_PER_DOC):
                    j = (d - start) * CHUNKS_PER_DOC + i
                    ln = int(lengths[j])
                    words = [self.vocab[w] for w in word_ids[pos_w : pos_w + ln]]
                    pos_w += ln
                    if rng.random() < 0.2:
                        for _ in range(int(rng.integers(1, 3))):
                            ident = identifier(rng)
                            words.insert(int(rng.integers(len(words))), ident)
                            if len(self.identifiers) < 2000:
                                self.identifiers.append(ident)
                    text = " ".join(words).capitalize() + "."
                    records.append(
                        ChunkRecord(f"c{i:05d}", i, offset, offset + len(text), text, "")
                    )
                    offset += len(text) + 1
                    keys.append((f"doc{d:07d}", f"c{i:05d}"))
                    filtered.append(d % 10 == 3)
                doc = DocumentRecord(
                    f"doc{d:07d}", f"bench:doc{d:07d}", f"h{d}", f"Doc {d}", "",
                    {"dept": f"d{d % 10}"},
                )  # fmt: skip
                lo = (d - start) * CHUNKS_PER_DOC
                emb = vecs[lo : lo + CHUNKS_PER_DOC] if vectors else None
                docs.append(StagedDocument(doc, records, emb))
            self.exact.add(vecs, keys, filtered)
            yield docs

    def skip_generation(self) -> None:
        """Replay the generator without loading (a reused data directory): the exact
        neighbours and the identifiers come from the same seeded stream."""
        for _ in self.batches(vectors=False):
            pass

    def lexical_queries(self, n: int) -> list[tuple[str, LexicalQuery]]:
        rng = np.random.default_rng(SEED + 2)
        out = []
        kinds = ["mid", "mixed", "common", "mid", "mixed", "common", "mid", "mid", "mixed", "ident"]
        for i in range(n):
            kind = kinds[i % len(kinds)]
            if kind == "ident" and self.identifiers:
                text = self.identifiers[int(rng.integers(len(self.identifiers)))]
            elif kind == "common":
                words = rng.choice(50, size=int(rng.integers(2, 4)), replace=False)
                text = " ".join(self.vocab[int(r)] for r in words)
            elif kind == "mixed":
                head = [self.vocab[int(rng.integers(0, 50))]]
                mid = [
                    self.vocab[int(r)] for r in rng.integers(20, 5000, size=int(rng.integers(1, 3)))
                ]
                text = " ".join(head + mid)
            else:
                kind = "mid"
                size = int(rng.integers(1, 4))
                text = " ".join(self.vocab[int(r)] for r in rng.integers(20, 5000, size=size))
            out.append((kind, parse_lexical(text)))
        return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))] * 1000


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:,.1f} {unit}" if unit != "B" else f"{n:,.0f} B"
        n /= 1024
    return f"{n:,.1f} GB"


class Rows(list[tuple[str, str]]):
    """The report's rows, each also printed as it comes (a long run that is stopped
    still leaves its figures so far)."""

    def append(self, row: tuple[str, str]) -> None:
        print(f"  | {row[0]}: {row[1]}", flush=True)
        super().append(row)


class Timers:
    """Times the publish phases by wrapping the functions the store calls."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        for module, fname, label in (
            (pg_versions, "_bulk_postings", "postings bulk build"),
            (pg_blocks, "build_bulk", "postings bulk build"),
            (pg_versions, "refresh_statistics", "analyze/vacuum"),
            (pg_vectors, "ensure_vector_index", "HNSW build"),
        ):
            original = getattr(module, fname, None)
            if original is None:  # an older checkout (before/after runs)
                continue

            async def timed(*a: Any, _o: Any = original, _l: str = label, **kw: Any) -> Any:
                t = time.perf_counter()
                try:
                    return await _o(*a, **kw)
                finally:
                    self.seconds[_l] = self.seconds.get(_l, 0.0) + time.perf_counter() - t

            setattr(module, fname, timed)


def server_cpu(data_dir: Path) -> float:
    """CPU seconds used by the PostgreSQL server on `data_dir` so far: the postmaster
    with its exited children, plus every live backend and worker."""
    try:
        postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")
    ticks = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry.name) == postmaster:
            ticks += sum(int(x) for x in fields[11:15])
        elif int(fields[1]) == postmaster:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def start_server(data_dir: Path) -> embedded_pg.EmbeddedPostgres:
    server = embedded_pg.start_embedded_sync(data_dir, durable=False)
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        for key, value in SERVER_SETTINGS.items():
            conn.execute(f"ALTER SYSTEM SET {key} = '{value}'")
    # A restart applies them all (shared_buffers takes nothing less).
    server.stop_process()
    server.start_process()
    return server


async def sizes(dsn: str) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(
            """
            SELECT c.relname, pg_total_relation_size(c.oid), pg_relation_size(c.oid)
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname LIKE 'gw_%'
            ORDER BY 2 DESC
            """
        )
        for rel, total, heap in await cur.fetchall():
            if total < 1 << 20:
                continue
            out.append((f"table {rel} (total)", int(total)))
            out.append((f"  heap {rel}", int(heap)))
            icur = await conn.execute(
                """
                SELECT i.relname, pg_relation_size(i.oid) FROM pg_index x
                JOIN pg_class i ON i.oid = x.indexrelid
                WHERE x.indrelid = %s::regclass ORDER BY 2 DESC
                """,
                [rel],
            )
            for iname, isize in await icur.fetchall():
                out.append((f"  index {iname}", int(isize)))
        cur = await conn.execute(
            """
            SELECT avg(pg_column_size(content)), avg(pg_column_size(lex)),
                   avg(pg_column_size(term_freqs)), avg(pg_column_size(embedding)),
                   avg(pg_column_size(c.*))
            FROM gw_chunks c TABLESAMPLE SYSTEM (1)
            """
        )
        row = await cur.fetchone()
        if row is not None:
            for label, value in zip(
                ("content", "lex (tsvector)", "term_freqs (jsonb)", "embedding", "whole row"),
                row,
                strict=True,
            ):
                out.append((f"avg stored width: {label}", int(value or 0)))
    return out


async def run(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The PostgreSQL figures (also returned, for bench_million_stores.py)."""
    t0 = time.perf_counter()
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    corpus = Corpus(args.chunks, args.queries, args.vectors)
    n_chunks = corpus.n_docs * CHUNKS_PER_DOC
    tmp: Path | None = None
    data_dir = Path(args.data_dir) if args.data_dir else None
    if data_dir is None:
        tmp = Path(tempfile.mkdtemp(prefix="gw-million-"))
        data_dir = tmp / "pgdata"
    server = start_server(data_dir)
    timers = Timers()
    t_open = time.perf_counter()
    store = await open_postgres_store(
        PostgresSettings(
            dsn=server.dsn,
            data_dir=data_dir,
            statement_timeout_ms=1_800_000,
            # bench_million_stores.py passes the graph parameters both stores build with.
            hnsw_m=getattr(args, "hnsw_m", 16),
            hnsw_ef_construction=getattr(args, "hnsw_ef_construction", 64),
        )
    )
    print(f"store opened (migrations included) in {time.perf_counter() - t_open:.1f}s")
    rows: list[tuple[str, str]] = Rows()
    spec = IndexSpec(
        NAME,
        corpus.model if not args.no_vectors else None,
        DIM if not args.no_vectors else None,
        DistanceMetric.COSINE,
        "bench",
    )
    try:
        try:
            loaded = (await store.index_state(NAME)).chunk_count
        except Exception:
            loaded = 0
        if loaded == 0:
            await store.ensure_index(spec)
            t = time.perf_counter()
            cpu0, server0, gen_cpu = time.process_time(), server_cpu(data_dir), 0.0
            gen_wall = 0.0
            v = await store.begin_version(NAME)
            done = 0
            batches = corpus.batches(vectors=not args.no_vectors)
            while True:
                g, gw = time.process_time(), time.perf_counter()
                batch = next(batches, None)
                gen_cpu += time.process_time() - g
                gen_wall += time.perf_counter() - gw
                if batch is None:
                    break
                await store.stage_documents(NAME, v, batch)
                done += len(batch) * CHUNKS_PER_DOC
                if done % 100_000 == 0:
                    print(f"  staged {done:,} chunks, {time.perf_counter() - t:.0f}s", flush=True)
            staged = time.perf_counter()
            await store.publish_version(NAME, v, spec)
            end = time.perf_counter()
            client_cpu = time.process_time() - cpu0 - gen_cpu
            server_used = server_cpu(data_dir) - server0
            publish = end - staged - sum(timers.seconds.values())
            # The corpus is generated between batches (not overlapped with staging):
            # its wall time is the benchmark's, not the store's, and is left out, as
            # the OpenSearch figures do (bench_million_stores.load).
            hnsw = timers.seconds.get("HNSW build", 0)
            rows.append(
                ("bulk load (chunks/s)",
                 f"{n_chunks / (end - t - gen_wall):,.0f} ({end - t - gen_wall:.0f}s; corpus "
                 f"generation excluded; {n_chunks / (end - t):,.0f} with it)")
            )  # fmt: skip
            rows.append(
                ("  load without HNSW build (chunks/s)",
                 f"{n_chunks / (end - t - gen_wall - hnsw):,.0f}"
                 f"  ({n_chunks / (end - t - hnsw):,.0f} with corpus generation)")
            )  # fmt: skip
            rows.append(("  staging, incl. corpus generation (s)", f"{staged - t:.0f}"))
            rows.append(("  corpus generation (s)", f"{gen_wall:.0f}"))
            rows.append(("  publish transaction (s)", f"{publish:.0f}"))
            for label, s in timers.seconds.items():
                rows.append((f"  {label} (s)", f"{s:.0f}"))
            rows.append(
                ("  CPU per chunk: client (encode, COPY) / server (ms)",
                 f"{client_cpu / n_chunks * 1000:.3f} / {server_used / n_chunks * 1000:.3f}"
                 f"  (corpus generation {gen_cpu:.0f} s CPU, not counted)")
            )  # fmt: skip
        else:
            n_chunks = loaded
            print(f"reusing the loaded index ({loaded:,} chunks)", flush=True)
            corpus.skip_generation()
        print(f"loaded at {time.perf_counter() - t0:.0f}s", flush=True)

        lex_q = corpus.lexical_queries(args.queries)
        scope = Scope()
        cold: dict[str, list[float]] = {}
        for kind, q in lex_q:  # warm-up (timed: each query's first run)
            t = time.perf_counter()
            await store.search_lexical(NAME, q, K, scope)
            took = time.perf_counter() - t
            cold.setdefault(kind, []).append(took)
            cold.setdefault("all", []).append(took)
        for kind in ("all", "common"):
            ts = cold.get(kind, [])
            rows.append(
                (f"lexical {kind}, first pass (the store's caches cold) p50 / p99 (ms) [{len(ts)}]",
                 f"{pct(ts, 50):.1f} / {pct(ts, 99):.1f}")
            )  # fmt: skip
        times: dict[str, list[float]] = {}
        results = []
        cpu: dict[str, float] = {}
        for kind, q in lex_q:
            c0, t = server_cpu(data_dir), time.perf_counter()
            res = await store.search_lexical(NAME, q, K, scope)
            times.setdefault(kind, []).append(time.perf_counter() - t)
            times.setdefault("all", []).append(time.perf_counter() - t)
            cpu[kind] = cpu.get(kind, 0.0) + server_cpu(data_dir) - c0
            results.append(res)
        cpu["all"] = sum(cpu.values())
        for kind in ("all", "mid", "mixed", "common", "ident"):
            ts = times.get(kind, [])
            rows.append(
                (f"lexical {kind} p50 / p99 / max (ms) [{len(ts)}]",
                 f"{pct(ts, 50):.1f} / {pct(ts, 99):.1f} / {pct(ts, 100):.1f}"
                 f"  server CPU {cpu.get(kind, 0.0) / max(len(ts), 1) * 1000:.1f} ms/query")
            )  # fmt: skip
        if args.results:
            lines = [
                f"{kind}\t{q.text}\t"
                + " ".join(f"{h.document_id}/{h.chunk_id}:{h.score.raw!r}" for h in res.hits)
                for (kind, q), res in zip(lex_q, results, strict=True)
            ]
            await asyncio.to_thread(Path(args.results).write_text, "\n".join(lines) + "\n")

        flt = Scope(filter=MetadataFilter({"dept": frozenset({"d3"})}))
        ft: list[float] = []
        flt_q = lex_q[: args.filtered_queries]
        for _, q in flt_q:
            await store.search_lexical(NAME, q, K, flt)
        for _, q in flt_q:
            t = time.perf_counter()
            await store.search_lexical(NAME, q, K, flt)
            ft.append(time.perf_counter() - t)
        rows.append(
            (
                f"lexical filtered 10% p50 / p99 (ms) [{len(ft)}]",
                f"{pct(ft, 50):.1f} / {pct(ft, 99):.1f}",
            )
        )

        if not args.no_vectors:
            await vector_figures(store, corpus, args, rows, scope, flt, lex_q)
            if args.compare_half:
                await half_figures(store, server.dsn, spec, corpus, args, rows, scope, flt, lex_q)
        for label, size in await sizes(server.dsn):
            per = f"  ({size / n_chunks:,.0f} B/chunk)" if not label.startswith("avg") else ""
            rows.append(
                (label, (_fmt_bytes(size) if not label.startswith("avg") else f"{size} B") + per)
            )
        print()
        print(
            f"{n_chunks:,} chunks, dim {DIM} ({corpus.vectors} vectors), k={K}, {len(lex_q)} queries per figure"
        )
        width = max(len(r[0]) for r in rows)
        for label, value in rows:
            print(f"{label:<{width}}  {value}")
        print(
            f"load average at end: {os.getloadavg()[0]:.1f}; total {time.perf_counter() - t0:.0f}s"
        )
        return rows
    finally:
        await store.close()
        if not args.keep:
            server.release()
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
        else:
            server.release()


async def vector_figures(
    store: Any,
    corpus: Corpus,
    args: argparse.Namespace,
    rows: list[tuple[str, str]],
    scope: Scope,
    flt: Scope,
    lex_q: list[tuple[str, LexicalQuery]],
) -> None:
    exact = corpus.exact
    default_ef = store._settings.hnsw_ef_search
    for ef in [default_ef, *args.ef]:
        store._settings = _with_ef(store._settings, ef)
        for v in corpus.query_vectors:  # warm-up
            await store.search_vector(NAME, v, K, scope)
        ts, recalls = [], []
        for qi, v in enumerate(corpus.query_vectors):
            t = time.perf_counter()
            hits = await store.search_vector(NAME, v, K, scope)
            ts.append(time.perf_counter() - t)
            got = {(h.document_id, h.chunk_id) for h in hits}
            recalls.append(len(got & {k for _, k in exact.top[qi]}) / K)
        tag = " (product default)" if ef == default_ef else ""
        rows.append(
            (f"semantic ef_search={ef}{tag}: recall@10 / p50 / p99 (ms)",
             f"{np.mean(recalls):.3f} / {pct(ts, 50):.1f} / {pct(ts, 99):.1f}")
        )  # fmt: skip
    store._settings = _with_ef(store._settings, default_ef)
    ts, recalls, returned = [], [], 0
    for qi, v in enumerate(corpus.query_vectors):
        t = time.perf_counter()
        hits = await store.search_vector(NAME, v, K, flt)
        ts.append(time.perf_counter() - t)
        returned += len(hits)
        got = {(h.document_id, h.chunk_id) for h in hits}
        recalls.append(len(got & {k for _, k in exact.top_filtered[qi]}) / K)
    rows.append(
        ("semantic filtered 10%: recall@10 / p50 / p99 (ms)",
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
    rows.append(("hybrid p50 / p99 (ms)", f"{pct(hyb, 50):.1f} / {pct(hyb, 99):.1f}"))


async def half_figures(
    store: Any,
    dsn: str,
    spec: IndexSpec,
    corpus: Corpus,
    args: argparse.Namespace,
    rows: list[tuple[str, str]],
    scope: Scope,
    flt: Scope,
    lex_q: list[tuple[str, LexicalQuery]],
) -> None:
    """The same index switched to a half-precision HNSW graph (built by ensure_index,
    which then drops the float32 graph): build time, graph size, recall, latency."""
    from dataclasses import replace

    before = await hnsw_size(dsn)
    t = time.perf_counter()
    await store.ensure_index(replace(spec, half_precision_index=True))
    rows.append(("halfvec: HNSW graph build (s)", f"{time.perf_counter() - t:.0f}"))
    after = await hnsw_size(dsn)
    rows.append(
        ("halfvec: HNSW graph size float32 -> float16",
         f"{_fmt_bytes(before)} -> {_fmt_bytes(after)} ({1 - after / max(before, 1):.0%} saved)")
    )  # fmt: skip
    extra: list[tuple[str, str]] = Rows()
    await vector_figures(store, corpus, args, extra, scope, flt, lex_q)
    rows.extend((f"halfvec: {label}", value) for label, value in extra)


async def hnsw_size(dsn: str) -> int:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT coalesce(sum(pg_relation_size(indexrelid)), 0) FROM pg_index x "
            "JOIN pg_class c ON c.oid = x.indexrelid WHERE c.relname LIKE 'gw_chunks_hnsw_%'"
        )
        row = await cur.fetchone()
        return int(row[0]) if row else 0


def _with_ef(settings: PostgresSettings, ef: int) -> PostgresSettings:
    from dataclasses import replace

    return replace(settings, hnsw_ef_search=ef)


def main() -> None:
    global DIM
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--data-dir", default=None, help="embedded data directory to (re)use")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    parser.add_argument("--no-vectors", action="store_true", help="text only (lexical curve)")
    parser.add_argument("--ef", type=int, nargs="*", default=[40, 200], help="more ef_search")
    parser.add_argument(
        "--compare-half", action="store_true", help="then switch to a halfvec graph and re-measure"
    )
    parser.add_argument("--results", default=None, help="write lexical results to this file")
    parser.add_argument(
        "--filtered-queries", type=int, default=None, help="lexical filtered: first N queries"
    )
    parser.add_argument("--dim", type=int, default=DIM, help="vector dimension (default 384)")
    add_vectors_argument(parser)
    parser.add_argument(
        "--block-size", type=int, default=None, help="override blocks.BLOCK_SIZE (postings)"
    )
    args = parser.parse_args()
    DIM = args.dim
    if args.block_size is not None:
        from groundwire.stores.postgres import blocks

        blocks.BLOCK_SIZE = args.block_size
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
