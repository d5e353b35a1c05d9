"""Reads from hot standbys (issue 17, part 2) on a real primary and streaming
standby built from the shipped PostgreSQL binaries: reads are served by the standby
once it replayed the published version's WAL position, never older than the version
the caller saw (replay paused: reads fence to the primary), fail over to the primary
when the standby stops and come back when it returns; writes go to the primary."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np
import psycopg
import pytest

from groundwire.domain.errors import GroundwireError
from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import Scope
from groundwire.stores.base import ChunkRecord, DocumentRecord, IndexSpec, StagedDocument
from groundwire.stores.postgres import PostgresSettings, open_postgres_store
from groundwire.stores.postgres.store import PostgresStore
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import ingestion_pb2_grpc, retriever_pb2, retriever_pb2_grpc
from tests.support.servers import ServerProcess, free_port, toml_config
from tests.support.standby import Node, replicated_pair

pytestmark = pytest.mark.timeout(150)

DIM = 8
SPEC = IndexSpec("kb", "m", DIM)


def staged(doc_id: str, text: str, seed: int) -> StagedDocument:
    rng = np.random.default_rng(seed)
    record = DocumentRecord(doc_id, f"push:{doc_id}", f"h{seed}", "")
    chunk = ChunkRecord("c0", 0, 0, len(text), text)
    return StagedDocument(record, [chunk], rng.standard_normal((1, DIM)).astype(np.float32))


async def publish(store: PostgresStore, docs: list[StagedDocument]) -> int:
    v = await store.begin_version("kb")
    await store.stage_documents("kb", v, docs)
    await store.publish_version("kb", v, SPEC)
    return v


async def find(store: PostgresStore, token: str, min_version: int) -> list[str]:
    """A read as the retriever makes it: the version first (>= min_version), then
    the search."""
    assert await store.await_version("kb", min_version, 1.0) >= min_version
    hits = (await store.search_lexical("kb", parse_lexical(f'"{token}"'), 5, Scope())).hits
    return [h.document_id for h in hits]


async def until(predicate: object, within_s: float, what: str) -> float:
    started = time.monotonic()
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() - started < within_s, what
        await asyncio.sleep(0.02)
    return time.monotonic() - started


@dataclass
class Pair:
    primary: Node
    standby: Node
    store: PostgresStore


@pytest.fixture
async def pair() -> AsyncIterator[Pair]:
    with replicated_pair() as (primary, standby):
        store = await open_postgres_store(
            PostgresSettings(
                dsn=primary.dsn,
                data_dir=Path("unused"),
                read_dsns=(standby.dsn,),
                standby_probe_ms=50,
                connect_timeout_ms=1000,
                statement_timeout_ms=5000,
            )
        )
        try:
            yield Pair(primary, standby, store)
        finally:
            await store.close()


def standby_reads(store: PostgresStore) -> int:
    return store.read_counts.standby.get("standby-0", 0)


async def test_standby_serves_fenced_reads_and_fails_over(pair: Pair) -> None:
    store = pair.store
    await store.ensure_index(SPEC)
    docs = [staged(f"doc{i:03d}", f"common words token{i:03d}", i) for i in range(200)]
    v = await publish(store, docs)
    # Loaded: once the standby replayed the version, reads are served by it.
    await until(
        lambda: (s := store.standbys[0]).healthy and s.replay_lsn is not None
        and (p := store._feed.get("kb") if store._feed else None) is not None
        and p.lsn is not None and s.replay_lsn >= p.lsn,
        10, "the standby never replayed the load",
    )  # fmt: skip
    before = store.read_counts.primary
    for i in range(40):
        assert await find(store, f"token{i:03d}", v) == [f"doc{i:03d}"]
    vector = np.ones(DIM, np.float32)
    assert len(await store.search_vector("kb", vector, 10, Scope())) == 10
    assert standby_reads(store) == 41 and store.read_counts.primary == before

    # Fencing: replay paused, the standby lags; every read of a newer version is
    # served by the primary and sees it, none is served older than the caller saw.
    with psycopg.connect(pair.standby.dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
    served_before = standby_reads(store)
    for i in range(5):
        vi = await publish(store, [staged(f"new{i}", f"fresh{i} words", 1000 + i)])
        assert await find(store, f"fresh{i}", vi) == [f"new{i}"]
    assert standby_reads(store) == served_before
    assert store.read_counts.lagging >= 5
    with psycopg.connect(pair.standby.dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_resume()")
    # Caught up, the standby serves again (and has every version).
    deadline = time.monotonic() + 10
    while standby_reads(store) == served_before:
        assert time.monotonic() < deadline, "the standby never served again after resuming"
        assert await find(store, "fresh4", vi) == ["new4"]
        await asyncio.sleep(0.05)

    # Failover: the standby stops; reads keep working from the primary.
    pair.standby.stop("immediate")
    served = standby_reads(store)
    started = time.monotonic()
    for i in range(10):
        assert await find(store, f"token{i:03d}", v) == [f"doc{i:03d}"]
    assert time.monotonic() - started < 5  # at most one connect timeout is paid
    assert standby_reads(store) == served
    assert not store.standbys[0].healthy
    # Writes never needed it.
    v_down = await publish(store, [staged("while-down", "downtoken words", 2000)])
    assert await find(store, "downtoken", v_down) == ["while-down"]

    # Recovery: back, it catches up (slot kept the WAL) and serves reads again.
    pair.standby.start()
    await until(lambda: store.standbys[0].healthy, 15, "the standby never came back")
    deadline = time.monotonic() + 10
    while standby_reads(store) == served:
        assert time.monotonic() < deadline, "the standby never served after returning"
        assert await find(store, "downtoken", v_down) == ["while-down"]
        await asyncio.sleep(0.05)
    counts = store.read_counts
    assert counts.failed_over + counts.down >= 1


async def test_a_primary_lost_before_the_position_is_recorded_leaves_reads_on_the_standby(
    pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A publish commits, then records its WAL position in a second transaction; a
    primary lost between the two leaves the version known without a position. Reads
    then need the primary, and with it down they are served by the standby once its
    own snapshot holds that version (a version fence), never an older one."""
    store = pair.store
    await store.ensure_index(SPEC)
    v1 = await publish(store, [staged("old", "oldtoken words", 1)])

    async def primary_lost(name: str, index_id: int, version: int) -> None:
        return None  # the second transaction never ran

    monkeypatch.setattr(store, "_record_published", primary_lost)
    v2 = await publish(store, [staged("new", "newtoken words", 2)])
    assert v2 > v1
    # This replica learns v2 as the change feed would (a direct read): no position.
    assert await store.await_version("kb", v2, 1.0) >= v2
    known = store._feed.get("kb") if store._feed else None
    assert known is not None and known.version == v2 and known.lsn is None

    def standby_version() -> int:
        with psycopg.connect(pair.standby.dsn, autocommit=True) as conn:
            row = conn.execute("SELECT published_version FROM gw_indexes WHERE name = 'kb'")
            found = row.fetchone()
        return int(found[0]) if found else 0

    await until(lambda: standby_version() >= v2, 10, "the standby never replayed v2")
    pair.primary.stop("fast")
    for token, doc in (("newtoken", "new"), ("oldtoken", "old")):
        hits = (await store.search_lexical("kb", parse_lexical(token), 5, Scope())).hits
        assert [h.document_id for h in hits] == [doc]
    assert len(await store.search_vector("kb", np.ones(DIM, np.float32), 5, Scope())) == 2
    # The index's state (what a response's profile reads) and the tenant's emptiness
    # check are served the same way.
    assert (await store.index_state("kb")).published_version == v2
    assert await store.has_documents("kb", "")
    assert store.read_counts.fenced == 5

    # A standby behind the known version is not used: the read fails as the
    # primary's did (never an older answer).
    assert store._feed is not None
    await store._feed.observe("kb", v2 + 1, None)
    with pytest.raises(GroundwireError) as down:
        await store.search_lexical("kb", parse_lexical("newtoken"), 5, Scope())
    assert down.value.reason == "STORE_UNAVAILABLE"
    assert store.read_counts.fenced == 5


WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]


async def test_serve_with_read_dsns_reads_the_standby(tmp_path: Path) -> None:
    """`[store] read_dsns` wired end to end: a `groundwire serve` process reads with
    read-your-writes; with the primary stopped its reads are served by the standby
    alone; with the standby stopped (primary back), by the primary."""
    with replicated_pair() as (primary, standby):
        cfg = toml_config(
            tmp_path,
            """
[logging]
level = "WARNING"

[auth]
mode = "disabled"

[store]
kind = "postgres"
dsn = { env = "GW_PRIMARY" }
read_dsns = [{ env = "GW_STANDBY" }]
connect_timeout_ms = 1000
standby_probe_ms = 50

[embedders.hash]
kind = "hashing"
dimensions = 32

[indexes.kb]
embedder = "hash"
ingestion = { strategy = "manual" }
""",
        )
        server = ServerProcess(
            cfg,
            free_port(),
            tmp_path / "serve.log",
            env={"GW_PRIMARY": primary.dsn, "GW_STANDBY": standby.dsn},
        )
        try:
            server.start(timeout=120)
            async with grpc.aio.insecure_channel(server.target) as ch:
                push = ingestion_pb2_grpc.IngestionManagerServiceStub(ch)
                read = retriever_pb2_grpc.RetrieverServiceStub(ch)

                async def roundtrip(i: int) -> None:
                    done = await push.UpsertDocuments(
                        ing.UpsertDocumentsRequest(
                            index_name="kb",
                            documents=[ing.PushedDocument(document_id=f"d{i}", text=WORDS[i])],
                        )
                    )
                    got = await read.Retrieve(
                        retriever_pb2.RetrieveRequest(
                            query=retriever_pb2.RagQuery(
                                index_name="kb",
                                text=WORDS[i],
                                mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL,
                                min_index_version=done.published_version,
                            )
                        )
                    )
                    assert [r.document_id for r in got.results] == [f"d{i}"]
                    assert got.diagnostics.index_version >= done.published_version

                for i in range(5):
                    await roundtrip(i)
                    await asyncio.sleep(0.2)  # the standby replays; reads go there
                # The primary stops: reads that need nothing newer than what the
                # server knows are served by the standby alone.
                primary.stop("fast")
                for i in range(5):
                    got = await read.Retrieve(
                        retriever_pb2.RetrieveRequest(
                            query=retriever_pb2.RagQuery(
                                index_name="kb",
                                text=WORDS[i],
                                mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL,
                            )
                        ),
                        timeout=10,
                    )
                    assert [r.document_id for r in got.results] == [f"d{i}"]
                primary.start()
                # The standby stops: everything from the primary (once its pool is back).
                standby.stop("immediate")
                deadline = time.monotonic() + 20
                while True:
                    try:
                        await roundtrip(5)
                        break
                    except grpc.aio.AioRpcError as err:
                        assert err.code() is grpc.StatusCode.UNAVAILABLE
                        assert time.monotonic() < deadline, "the primary never came back"
                        await asyncio.sleep(0.2)
                for i in range(6, 8):
                    await roundtrip(i)
        finally:
            server.stop()
