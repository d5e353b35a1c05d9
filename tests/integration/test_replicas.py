"""Replicas that agree (issue 17, part 1): several `groundwire serve` processes on one
PostgreSQL serve the same indexes; a push through one is read through another with
read-your-writes (RagQuery.min_index_version), a version no replica has yet is a
retryable INDEX_VERSION_NOT_YET_VISIBLE, and each replica's change feed (LISTEN/NOTIFY
with a poll fallback) learns of publishes through the others, also across a lost
connection."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import numpy as np
import psycopg
import pytest

from groundwire.app.config import ConfigError, parse_config
from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import Scope
from groundwire.stores.base import ChunkRecord, DocumentRecord, IndexSpec, StagedDocument
from groundwire.stores.postgres import PostgresSettings, open_postgres_store
from groundwire.stores.postgres.store import PostgresStore
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import ingestion_pb2_grpc, retriever_pb2, retriever_pb2_grpc
from tests.support.errors import rich_error
from tests.support.replicas import replicas, retry_delay_s

pytestmark = pytest.mark.timeout(180)


def query(token: str, min_version: int = 0) -> retriever_pb2.RetrieveRequest:
    return retriever_pb2.RetrieveRequest(
        query=retriever_pb2.RagQuery(
            index_name="kb",
            text=token,
            mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL,
            min_index_version=min_version,
        )
    )


async def test_a_push_through_one_replica_is_read_through_the_other(
    tmp_path: Path, fresh_database: str
) -> None:
    with replicas(tmp_path, fresh_database) as targets:
        channels = [grpc.aio.insecure_channel(t) for t in targets]
        try:
            ingest = [ingestion_pb2_grpc.IngestionManagerServiceStub(c) for c in channels]
            retrieve = [retriever_pb2_grpc.RetrieverServiceStub(c) for c in channels]
            seen = 0
            for i in range(8):
                writer, reader = i % 2, 1 - i % 2
                token = f"pushtoken{i:03d}"
                pushed = await ingest[writer].UpsertDocuments(
                    ing.UpsertDocumentsRequest(
                        index_name="kb",
                        documents=[ing.PushedDocument(document_id=f"d{i}", text=f"{token} words")],
                    )
                )
                assert pushed.published_version > seen
                seen = pushed.published_version
                got = await retrieve[reader].Retrieve(query(f'"{token}"', seen))
                assert [r.document_id for r in got.results] == [f"d{i}"]
                assert got.diagnostics.index_version >= seen
            # Status and version agree across the replicas.
            statuses = [
                (await s.GetIndexStatus(ing.GetIndexStatusRequest(index_name="kb"))).status
                for s in ingest
            ]
            assert {(s.published_version, s.document_count) for s in statuses} == {(seen, 8)}
            # Without a minimum, each reports the version it read: the latest, once
            # its change feed has it (bounded by a notification, else the poll).
            for r in retrieve:
                deadline = time.monotonic() + 3
                while (await r.Retrieve(query("pushtoken000"))).diagnostics.index_version < seen:
                    assert time.monotonic() < deadline, "a replica never saw the last version"
                    await asyncio.sleep(0.02)
            # A version nobody published yet: a bounded wait, then a retryable error.
            started = time.monotonic()
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await retrieve[1].Retrieve(query("pushtoken000", seen + 5))
            waited = time.monotonic() - started
            err = rich_error(info.value)
            assert err.code is grpc.StatusCode.UNAVAILABLE
            assert err.reason == "INDEX_VERSION_NOT_YET_VISIBLE"
            assert retry_delay_s(info.value) == pytest.approx(0.2)
            assert 0.9 <= waited < 5
            # The wait ends as soon as the version is published through another replica.
            pending = asyncio.ensure_future(retrieve[1].Retrieve(query("latetoken", seen + 1)))
            await asyncio.sleep(0.2)
            await ingest[0].UpsertDocuments(
                ing.UpsertDocumentsRequest(
                    index_name="kb",
                    documents=[ing.PushedDocument(document_id="late", text="latetoken")],
                )
            )
            late = await pending
            assert [r.document_id for r in late.results] == ["late"]
            assert late.diagnostics.index_version == seen + 1
        finally:
            for c in channels:
                await c.close()


# -- the change feed, in process -----------------------------------------------------

DIM = 4


def settings(dsn: str, poll_ms: int = 300) -> PostgresSettings:
    return PostgresSettings(
        dsn=dsn, data_dir=Path("unused"), change_poll_ms=poll_ms, connect_timeout_ms=1000
    )


async def publish_one(store: PostgresStore, spec: IndexSpec, doc_id: str, text: str) -> int:
    await store.ensure_index(spec)
    v = await store.begin_version(spec.name)
    record = DocumentRecord(doc_id, f"push:{doc_id}", doc_id, "")
    chunk = ChunkRecord("c0", 0, 0, len(text), text)
    vectors = np.full((1, DIM), 0.5, dtype=np.float32)
    await store.stage_documents(spec.name, v, [StagedDocument(record, [chunk], vectors)])
    await store.publish_version(spec.name, v, spec)
    return v


async def known(store: PostgresStore, name: str, version: int, within_s: float) -> float:
    """Seconds until `store`'s change feed knows `version` of `name` (fails past
    `within_s`)."""
    started = time.monotonic()
    while True:
        p = store._feed.get(name) if store._feed is not None else None
        if p is not None and p.version >= version and p.lsn is not None:
            return time.monotonic() - started
        assert time.monotonic() - started < within_s, "the change never reached the replica"
        await asyncio.sleep(0.005)


async def test_change_feed_notifies_and_recovers_a_lost_connection(fresh_database: str) -> None:
    spec = IndexSpec("feed", "m", DIM)
    a = await open_postgres_store(settings(fresh_database))
    b = await open_postgres_store(settings(fresh_database, poll_ms=60_000))
    try:
        assert b._feed is not None and b._feed.listening
        v1 = await publish_one(a, spec, "one", "alpha words")
        # Notified: far sooner than b's (one minute) poll, even on a loaded machine.
        await known(b, "feed", v1, within_s=20.0)
        assert b._feed.notifications >= 1
        # b's listening connection is cut; a publish meanwhile is caught up when b
        # reconnects (it polls right after subscribing), and notifications resume.
        with psycopg.connect(fresh_database, autocommit=True) as conn:
            cut = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = 'groundwire-changes'"
            ).fetchone()
        assert cut is not None and cut[0] >= 2  # a's and b's feeds
        v2 = await publish_one(a, spec, "two", "beta words")
        await known(b, "feed", v2, within_s=5.0)
        assert b._feed.connects >= 2
        v3 = await publish_one(a, spec, "three", "gamma words")
        await known(b, "feed", v3, within_s=20.0)
        # Reads through b see every version published through a.
        hits = (await b.search_lexical("feed", parse_lexical("gamma"), 5, Scope())).hits
        assert [h.document_id for h in hits] == ["three"]
    finally:
        await a.close()
        await b.close()


async def test_poll_bounds_a_missed_notification(fresh_database: str) -> None:
    """A version published without a notification (one the recording step never
    announced) still reaches every replica within the poll interval."""
    spec = IndexSpec("quiet", "m", DIM)
    a = await open_postgres_store(settings(fresh_database))
    b = await open_postgres_store(settings(fresh_database, poll_ms=200))
    try:
        await a.ensure_index(spec)
        v = await a.begin_version("quiet")
        # Published by hand: the version flips with no NOTIFY and no recorded position.
        with psycopg.connect(fresh_database, autocommit=True) as conn:
            conn.execute("UPDATE gw_index_versions SET state = 'published' WHERE version = %s", [v])
            conn.execute("UPDATE gw_indexes SET published_version = %s WHERE name = 'quiet'", [v])
        started = time.monotonic()
        while (p := b._feed.get("quiet") if b._feed else None) is None or p.version < v:
            # Never, without the poll; 0.2 s with it, up to seconds on a loaded machine.
            assert time.monotonic() - started < 10.0
            await asyncio.sleep(0.01)
        assert p.lsn is None  # no recorded position: only the primary may serve it
        # A minimum version above what the feed knows is read from the primary
        # before any waiting.
        assert await a.await_version("quiet", v, 0.0) == v
    finally:
        await a.close()
        await b.close()


# -- the request side, any store ------------------------------------------------------


async def test_min_index_version_on_one_process(
    retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub,
) -> None:
    """The demo server (memory store): a minimum it has is served and reported; one
    beyond it is the retryable error at once (no other process can publish it)."""
    req = retriever_pb2.RetrieveRequest(
        query=retriever_pb2.RagQuery(index_name="demo", text="leave", min_index_version=1)
    )
    got = await retriever.Retrieve(req)
    assert got.diagnostics.index_version >= 1
    req.query.min_index_version = got.diagnostics.index_version + 1
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await retriever.Retrieve(req)
    err = rich_error(info.value)
    assert (err.code, err.reason) == (
        grpc.StatusCode.UNAVAILABLE,
        "INDEX_VERSION_NOT_YET_VISIBLE",
    )
    assert retry_delay_s(info.value) == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("store", "needle"),
    [
        ({"kind": "postgres", "read_dsns": [{"env": "X"}]}, "read_dsns"),
        ({"kind": "memory", "dsn": {"env": "X"}, "read_dsns": [{"env": "Y"}]}, "read_dsns"),
        ({"kind": "postgres", "dsn": {"env": "X"}, "change_poll_ms": 5}, "change_poll_ms"),
        ({"kind": "postgres", "dsn": {"env": "X"}, "standby_probe_ms": 0}, "standby_probe_ms"),
        ({"kind": "postgres", "dsn": {"env": "X"}, "read_dsns": ["host=x"]}, "read_dsns"),
    ],
)
def test_replica_store_keys_are_validated(store: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"auth": {"mode": "disabled"}, "store": store})
    assert needle in str(info.value)


def test_read_dsns_accepted_beside_a_primary() -> None:
    cfg = parse_config(
        {
            "auth": {"mode": "disabled"},
            "store": {
                "kind": "postgres",
                "dsn": {"env": "PRIMARY"},
                "read_dsns": [{"env": "STANDBY_A"}, {"file": "/run/secrets/standby-b"}],
                "change_poll_ms": 500,
            },
        }
    )
    assert [r.env for r in cfg.store.read_dsns] == ["STANDBY_A", None]
    assert cfg.store.change_poll_ms == 500 and cfg.store.standby_probe_ms == 100
