"""The version lifecycle on PostgreSQL: begin, stage, publish, discard.

Chunk and document rows are immutable once staged and carry the version that staged
them. A row is visible when its version is not in the index's set of staging
versions; `publish` deletes the superseded rows and flips the version's state in one
transaction, so a reader's snapshot holds the old or the new document, never a gap
and never a mix. Publishing never rewrites the rows it makes visible; it rewrites
the postings blocks they touch (`gw_posting_blocks`, blocks.py) and moves the
per-tenant BM25 statistics, in the same transaction. A publish whose tenants hold
no published chunk (a bulk load) cuts every posting into blocks in one statement.
Publishes of different tenants run at once (`publish`).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import numpy as np
from psycopg import sql
from psycopg.types.json import Jsonb

from groundwire.domain.analysis import PLAIN, Analyzer
from groundwire.stores.base import (
    DocumentKey,
    IndexSpec,
    IndexState,
    StagedDocument,
    VersionState,
    check_staged,
    index_missing,
    publication_number,
    version_not_staging,
)
from groundwire.stores.postgres import blocks
from groundwire.stores.postgres.connection import Conn
from groundwire.stores.postgres.scope import IndexRow, index_row
from groundwire.stores.postgres.tsvector import EncodedTsvector, LexicalRow, encode_lexical

# Publish locks: (PUBLISH_LOCK_CLASS, publish_lock_key(index, tenant)), "gwpb".
PUBLISH_LOCK_CLASS = 0x67777062

# Stage batches with more chunks than this are encoded in a worker thread so
# tokenizing a large batch does not stall the event loop.
_ENCODE_IN_THREAD = 256
_ENCODE_GROUP_CHUNKS = 256

# Tables holding rows staged under a version (constants: never request data).
_STAGED_TABLES = (
    sql.Identifier("gw_chunks"),
    sql.Identifier("gw_documents"),
    sql.Identifier("gw_staged_deletions"),
)

_STATE_SQL = """
    SELECT name, published_version, published_embedding, published_dimensions,
           published_chunking, document_count, chunk_count
    FROM gw_indexes WHERE name = %s
"""

# Publishing, chunks: delete the published rows of every document this version
# replaces or deletes and move the per-tenant BM25 statistics (document frequencies,
# chunk and token counts) from the removed rows to the added ones, in the publish
# transaction (the postings blocks are rewritten before it: blocks.py).
_PUBLISH_CHUNKS_SQL = (
    "WITH"
    + blocks.TOUCHED_CTE
    + """,
    gone AS (
        DELETE FROM gw_chunks c USING touched t
        WHERE c.index_id = %(index_id)s AND c.tenant = t.tenant
          AND c.document_id = t.document_id
          AND c.version IN (SELECT version FROM published)
        RETURNING c.id, c.tenant, c.token_count, c.lex, c.term_freqs,
                  c.end_offset - c.start_offset AS characters
    ),
    added AS (
        SELECT id, tenant, token_count, lex, term_freqs,
               end_offset - start_offset AS characters FROM gw_chunks
        WHERE index_id = %(index_id)s AND version = %(version)s
    ),
    deltas AS (
        SELECT tenant, term, sum(delta) AS delta FROM (
            SELECT tenant, unnest(tsvector_to_array(lex)) AS term, -1 AS delta FROM gone
            UNION ALL
            SELECT tenant, unnest(tsvector_to_array(lex)) AS term, 1 AS delta FROM added
        ) x
        GROUP BY tenant, term HAVING sum(delta) <> 0
    ),
    stats AS (
        INSERT INTO gw_term_stats (index_id, tenant, term, df)
        SELECT %(index_id)s, tenant, term, delta FROM deltas
        ON CONFLICT (index_id, tenant, term) DO UPDATE SET df = gw_term_stats.df + EXCLUDED.df
        RETURNING tenant, term, df
    ),
    sizes AS (
        SELECT tenant, sum(n) AS n, sum(tokens) AS tokens, sum(characters) AS characters
        FROM (
            SELECT tenant, -1 AS n, -token_count AS tokens, -characters AS characters
            FROM gone
            UNION ALL
            SELECT tenant, 1, token_count, characters FROM added
        ) y
        GROUP BY tenant
    ),
    tenant_sizes AS (
        INSERT INTO gw_tenant_stats
            (index_id, tenant, document_count, chunk_count, token_count, character_count)
        SELECT %(index_id)s, tenant, 0, n, tokens, characters FROM sizes
        ON CONFLICT (index_id, tenant) DO UPDATE SET
            chunk_count = gw_tenant_stats.chunk_count + EXCLUDED.chunk_count,
            token_count = gw_tenant_stats.token_count + EXCLUDED.token_count,
            character_count = gw_tenant_stats.character_count + EXCLUDED.character_count
    )
    SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM added),
           ARRAY(SELECT tenant FROM stats WHERE df <= 0),
           ARRAY(SELECT term FROM stats WHERE df <= 0)
"""
)

# Publishing, documents: the same replacement for document rows, with the per-tenant
# document counts.
_PUBLISH_DOCUMENTS_SQL = (
    "WITH"
    + blocks.TOUCHED_CTE
    + """,
    gone AS (
        DELETE FROM gw_documents d USING touched t
        WHERE d.index_id = %(index_id)s AND d.tenant = t.tenant
          AND d.document_id = t.document_id
          AND d.version IN (SELECT version FROM published)
        RETURNING d.tenant
    ),
    added AS (
        SELECT tenant FROM gw_documents
        WHERE index_id = %(index_id)s AND version = %(version)s
    ),
    tenant_docs AS (
        INSERT INTO gw_tenant_stats (index_id, tenant, document_count, chunk_count, token_count)
        SELECT %(index_id)s, tenant, sum(n), 0, 0 FROM (
            SELECT tenant, -1 AS n FROM gone
            UNION ALL
            SELECT tenant, 1 FROM added
        ) x
        GROUP BY tenant
        ON CONFLICT (index_id, tenant) DO UPDATE SET
            document_count = gw_tenant_stats.document_count + EXCLUDED.document_count
    )
    SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM added)
"""
)


async def state(conn: Conn, name: str) -> IndexState:
    """The index's published state, or INDEX_NOT_FOUND."""
    cur = await conn.execute(_STATE_SQL, [name])
    row = await cur.fetchone()
    if row is None:
        raise index_missing(len(name))
    return IndexState(
        str(row[0]), int(row[1]), row[2], row[3], str(row[4]), int(row[5]), int(row[6])
    )


async def begin(conn: Conn, name: str) -> int:
    """Open a new staging version (inside the caller's transaction)."""
    cur = await conn.execute(
        """
        UPDATE gw_indexes SET next_version = next_version + 1, updated_at = now()
        WHERE name = %s RETURNING id, next_version - 1
        """,
        [name],
    )
    row = await cur.fetchone()
    if row is None:
        raise index_missing(len(name))
    await conn.execute(
        "INSERT INTO gw_index_versions (index_id, version, state) VALUES (%s, %s, 'staging')",
        [row[0], row[1]],
    )
    return int(row[1])


async def _lock_staging(conn: Conn, name: str, version: int) -> IndexRow:
    idx = await index_row(conn, name)
    cur = await conn.execute(
        "SELECT state FROM gw_index_versions WHERE index_id = %s AND version = %s FOR SHARE",
        [idx.id, version],
    )
    row = await cur.fetchone()
    if row is None or row[0] != "staging":
        raise version_not_staging()
    return idx


# -- staging ------------------------------------------------------------------------


async def stage_documents(
    conn: Conn,
    name: str,
    version: int,
    documents: Sequence[StagedDocument],
    analyzer: Analyzer = PLAIN,
) -> None:
    """Stage documents under `version` (inside the caller's transaction), their
    text analyzed with the index's `analyzer`."""
    # Staging one document twice in a call keeps the last copy (as in memory).
    latest: dict[DocumentKey, StagedDocument] = {}
    for item in documents:
        latest.pop(item.document.key, None)
        latest[item.document.key] = item
    batch = list(latest.values())
    idx = await _lock_staging(conn, name, version)
    check_staged(idx.spec, documents)  # before anything of this call is written
    if not batch:
        return
    keys = [d.document.key for d in batch]
    encoded = _Encoder(batch, analyzer)
    try:
        # Re-staging a document under the same version replaces the earlier copy,
        # and staging it after a staged deletion cancels the deletion.
        await _delete_staged(conn, _STAGED_TABLES, idx.id, version, keys)
        await _copy_rows(conn, idx, version, batch, encoded)
    finally:
        encoded.close()


async def _copy_rows(
    conn: Conn, idx: IndexRow, version: int, batch: Sequence[StagedDocument], encoded: _Encoder
) -> None:
    cur = conn.cursor()
    async with cur.copy(
        "COPY gw_documents (index_id, version, document_id, source_id, content_hash, title, "
        "tenant, metadata, chunk_count, acl) FROM STDIN (FORMAT BINARY)"
    ) as copy:
        copy.set_types(
            ["int4", "int8", "text", "text", "text", "text", "text", "jsonb", "int4", "text[]"]
        )
        for item in batch:
            d = item.document
            await copy.write_row(
                (
                    idx.id,
                    version,
                    d.document_id,
                    d.source_id,
                    d.content_hash,
                    d.title,
                    d.tenant,
                    Jsonb(dict(d.metadata)),
                    len(item.chunks),
                    _acl(d.acl),
                )
            )
    dims = idx.spec.dimensions
    async with cur.copy(
        "COPY gw_chunks (index_id, version, document_id, chunk_id, ordinal, start_offset, "
        "end_offset, content, section, title, tenant, metadata, embedding_model, dims, "
        "embedding, lex, term_freqs, token_count, phrase_exact, acl) FROM STDIN (FORMAT BINARY)"
    ) as copy:
        copy.set_types(
            [
                "int4", "int8", "text", "text", "int4", "int4", "int4", "text", "text",
                "text", "text", "jsonb", "text", "int4", "vector", "tsvector", "jsonb",
                "int4", "bool", "text[]",
            ]
        )  # fmt: skip
        async for item, lexical in encoded:
            d = item.document
            metadata = Jsonb(dict(d.metadata))
            acl = _acl(d.acl)
            emb = item.embeddings
            for i, (chunk, lx) in enumerate(zip(item.chunks, lexical, strict=True)):
                vector = None
                if emb is not None and dims is not None:
                    vector = np.ascontiguousarray(emb[i], dtype=np.float32)
                await copy.write_row(
                    (
                        idx.id,
                        version,
                        d.document_id,
                        chunk.chunk_id,
                        chunk.ordinal,
                        chunk.start,
                        chunk.end,
                        chunk.text,
                        chunk.section,
                        d.title,
                        d.tenant,
                        metadata,
                        idx.spec.embedding if vector is not None else None,
                        dims if vector is not None else None,
                        vector,
                        EncodedTsvector(lx.lex),
                        Jsonb(lx.term_freqs, dumps=_as_is),
                        lx.token_count,
                        lx.phrase_exact,
                        acl,
                    )
                )


def _acl(acl: frozenset[str]) -> list[str] | None:
    """A document's ACL as stored: NULL for none (scope.py reads NULL as public)."""
    return sorted(acl) if acl else None


async def stage_deletions(conn: Conn, name: str, version: int, keys: Sequence[DocumentKey]) -> int:
    """Stage deletions; returns how many of the keys are published documents."""
    unique = list(dict.fromkeys(keys))
    idx = await _lock_staging(conn, name, version)
    if not unique:
        return 0
    p = {
        "index_id": idx.id,
        "version": version,
        "tenants": [k.tenant for k in unique],
        "ids": [k.document_id for k in unique],
    }
    cur = await conn.execute(
        """
        SELECT count(*) FROM unnest(%(tenants)s::text[], %(ids)s::text[])
            AS u(tenant, document_id)
        WHERE EXISTS (
            SELECT 1 FROM gw_documents d
            WHERE d.index_id = %(index_id)s AND d.tenant = u.tenant
              AND d.document_id = u.document_id
              AND d.version IN (SELECT v.version FROM gw_index_versions v
                                WHERE v.index_id = %(index_id)s AND v.state = 'published'))
        """,
        p,
    )
    row = await cur.fetchone()
    present = int(row[0]) if row else 0
    await _delete_staged(conn, _STAGED_TABLES[:2], idx.id, version, unique)
    await conn.execute(
        """
        INSERT INTO gw_staged_deletions (index_id, version, tenant, document_id)
        SELECT %(index_id)s, %(version)s, u.tenant, u.document_id
        FROM unnest(%(tenants)s::text[], %(ids)s::text[]) AS u(tenant, document_id)
        ON CONFLICT DO NOTHING
        """,
        p,
    )
    return present


async def _delete_staged(
    conn: Conn,
    tables: Sequence[sql.Identifier],
    index_id: int,
    version: int,
    keys: Sequence[DocumentKey],
) -> None:
    p = {
        "index_id": index_id,
        "version": version,
        "tenants": [k.tenant for k in keys],
        "ids": [k.document_id for k in keys],
    }
    for table in tables:
        await conn.execute(
            sql.SQL(
                "DELETE FROM {} WHERE index_id = %(index_id)s AND version = %(version)s "
                "AND (tenant, document_id) IN "
                "(SELECT * FROM unnest(%(tenants)s::text[], %(ids)s::text[]))"
            ).format(table),
            p,
        )


# -- publish and discard --------------------------------------------------------------


async def publish(
    conn: Conn, name: str, version: int, spec: IndexSpec
) -> tuple[int, int, IndexState]:
    """Publish `version` (inside the caller's transaction); returns the index id,
    the number of chunks made visible and the new state.

    Publishes of one index run at once when their tenants differ: a publish locks
    the tenants its version touches (transaction advisory locks, in key order, so
    two publishes never wait on each other in a cycle), rewrites their postings and
    statistics, and takes the index's row only to move its published version and
    counts, at its end. Publishes that share a tenant run one after the other."""
    cur = await conn.execute("SELECT id FROM gw_indexes WHERE name = %s", [name])
    row = await cur.fetchone()
    if row is None:
        raise index_missing(len(name))
    index_id = int(row[0])
    cur = await conn.execute(
        "SELECT state FROM gw_index_versions WHERE index_id = %s AND version = %s FOR UPDATE",
        [index_id, version],
    )
    row = await cur.fetchone()
    if row is None or row[0] != "staging":
        raise version_not_staging()
    tenants = await _lock_tenants(conn, index_id, version)
    p = {"index_id": index_id, "version": version, "tenants": tenants}
    # The postings first: an incremental update reads the replaced chunk rows. The
    # version's tenants holding no published chunk (a bulk load) hold no blocks.
    cur = await conn.execute(
        "SELECT coalesce(sum(chunk_count), 0) FROM gw_tenant_stats "
        "WHERE index_id = %(index_id)s AND tenant = ANY(%(tenants)s::text[])",
        p,
    )
    found = await cur.fetchone()
    if found is None or int(found[0]) == 0:
        await blocks.build_bulk(conn, index_id, version)
    else:
        await blocks.update_incremental(conn, index_id, version)
    cur = await conn.execute(_PUBLISH_CHUNKS_SQL, p)
    chunks = await cur.fetchone()
    cur = await conn.execute(_PUBLISH_DOCUMENTS_SQL, p)
    docs = await cur.fetchone()
    assert chunks is not None and docs is not None
    # Only the statistics this publish brought to zero: their keys, not a scan of the
    # index's whole vocabulary (which would make one tenant's push cost every tenant's).
    await conn.execute(
        """
        DELETE FROM gw_term_stats s
        USING unnest(%(tenants)s::text[], %(terms)s::text[]) AS z(tenant, term)
        WHERE s.index_id = %(index_id)s AND s.tenant = z.tenant AND s.term = z.term
          AND s.df <= 0
        """,
        {**p, "tenants": list(chunks[2]), "terms": list(chunks[3])},
    )
    # (Only this version's tenants' rows: another publish holds its own.)
    await conn.execute(
        """
        DELETE FROM gw_tenant_stats
        WHERE index_id = %(index_id)s AND tenant = ANY(%(tenants)s::text[])
          AND document_count <= 0 AND chunk_count <= 0
        """,
        p,
    )
    await conn.execute(
        "DELETE FROM gw_staged_deletions WHERE index_id = %(index_id)s AND version = %(version)s",
        p,
    )
    spec_params = {
        "embedding": spec.embedding,
        "dims": spec.dimensions,
        "metric": spec.metric.value,
        "chunking": spec.chunking,
    }
    await conn.execute(
        """
        UPDATE gw_index_versions SET state = 'published', finished_at = now(),
            embedding = %(embedding)s, dimensions = %(dims)s, metric = %(metric)s,
            chunking = %(chunking)s
        WHERE index_id = %(index_id)s AND version = %(version)s
        """,
        {**p, **spec_params},
    )
    # The index's row, last and briefly: publishes take their numbers in commit order.
    # NO KEY UPDATE: rows inserted meanwhile (this publish's, another's, a stage's)
    # hold the row FOR KEY SHARE through their foreign keys, which FOR UPDATE waits
    # for (two publishes would deadlock).
    cur = await conn.execute(
        "SELECT published_version, next_version FROM gw_indexes WHERE id = %s FOR NO KEY UPDATE",
        [index_id],
    )
    row = await cur.fetchone()
    assert row is not None
    published, next_version = publication_number(int(row[0]), version, int(row[1]))
    await conn.execute(
        """
        UPDATE gw_indexes SET
            published_version = %(published)s,
            next_version = %(next_version)s,
            published_embedding = %(embedding)s,
            published_dimensions = %(dims)s,
            published_metric = %(metric)s,
            published_chunking = %(chunking)s,
            document_count = document_count - %(docs_out)s + %(docs_in)s,
            chunk_count = chunk_count - %(chunks_out)s + %(chunks_in)s,
            updated_at = now()
        WHERE id = %(index_id)s
        """,
        {
            **p,
            **spec_params,
            "published": published,
            "next_version": next_version,
            "docs_out": int(docs[0]),
            "docs_in": int(docs[1]),
            "chunks_out": int(chunks[0]),
            "chunks_in": int(chunks[1]),
        },
    )
    return index_id, int(chunks[1]), await state(conn, name)


async def version_state(conn: Conn, name: str, version: int) -> VersionState:
    """Whether `version` of the index is staging, published or gone."""
    cur = await conn.execute(
        "SELECT v.state FROM gw_index_versions v JOIN gw_indexes i ON i.id = v.index_id "
        "WHERE i.name = %s AND v.version = %s",
        [name, version],
    )
    row = await cur.fetchone()
    if row is None or row[0] == "discarded":
        return VersionState.GONE
    return VersionState.PUBLISHED if row[0] == "published" else VersionState.STAGING


async def _lock_tenants(conn: Conn, index_id: int, version: int) -> list[str]:
    """Lock every tenant `version` stages or deletes documents of, for this
    transaction, in key order; returns them."""
    cur = await conn.execute(
        """
        SELECT tenant FROM gw_documents WHERE index_id = %(index_id)s AND version = %(version)s
        UNION
        SELECT tenant FROM gw_staged_deletions
        WHERE index_id = %(index_id)s AND version = %(version)s
        """,
        {"index_id": index_id, "version": version},
    )
    tenants = sorted(str(r[0]) for r in await cur.fetchall())
    keys = sorted({publish_lock_key(index_id, t) for t in tenants})
    await conn.execute(
        "SELECT pg_advisory_xact_lock(%s, k) FROM (SELECT unnest(%s::int4[]) AS k) s ORDER BY k",
        [PUBLISH_LOCK_CLASS, keys],
    )
    return tenants


def publish_lock_key(index_id: int, tenant: str) -> int:
    """A tenant's publish lock key in an index: a signed 32-bit hash (a collision
    only makes two publishes wait for each other)."""
    value = zlib.crc32(f"{index_id}\x00{tenant}".encode())
    return value - (1 << 32) if value >= (1 << 31) else value


async def refresh_statistics(
    conn: Conn, added_chunks: int, statement_timeout_ms: int, *, index_id: int | None = None
) -> None:
    """After a bulk load (outside any transaction): ANALYZE, because the load leaves
    the planner's statistics describing the table before it (autovacuum catches up
    only a minute or more later) and the HNSW build that follows plans better with
    them; and VACUUM the postings blocks, so the visibility map lets lexical search
    read their directories with index-only scans."""
    if added_chunks < 10_000:
        return
    cur = await conn.execute("SELECT reltuples FROM pg_class WHERE oid = 'gw_chunks'::regclass")
    row = await cur.fetchone()
    known = float(row[0]) if row else 0.0
    if added_chunks <= 0.1 * max(known, 0.0):
        return
    await conn.execute("ANALYZE gw_chunks, gw_documents, gw_term_stats")
    # Proportional to the load it follows, like the HNSW build: no statement timeout.
    await conn.execute("SELECT set_config('statement_timeout', '0', false)")
    try:
        await conn.execute("VACUUM (ANALYZE) gw_posting_blocks")
    finally:
        await conn.execute(
            "SELECT set_config('statement_timeout', %s, false)", [str(statement_timeout_ms)]
        )


async def discard(conn: Conn, name: str, version: int) -> None:
    """Drop a staging version's rows (inside the caller's transaction); a version
    that is not staging is left alone."""
    cur = await conn.execute("SELECT id FROM gw_indexes WHERE name = %s", [name])
    row = await cur.fetchone()
    if row is None:
        raise index_missing(len(name))
    p = {"index_id": int(row[0]), "version": version}
    cur = await conn.execute(
        """
        SELECT state FROM gw_index_versions
        WHERE index_id = %(index_id)s AND version = %(version)s FOR UPDATE
        """,
        p,
    )
    found = await cur.fetchone()
    if found is None or found[0] != "staging":
        return
    for table in _STAGED_TABLES:
        await conn.execute(
            sql.SQL(
                "DELETE FROM {} WHERE index_id = %(index_id)s AND version = %(version)s"
            ).format(table),
            p,
        )
    await conn.execute(
        """
        UPDATE gw_index_versions SET state = 'discarded', finished_at = now()
        WHERE index_id = %(index_id)s AND version = %(version)s
        """,
        p,
    )


# -- encoding a stage batch off the event loop ----------------------------------------


def _encode_group(
    group: Sequence[StagedDocument], analyzer: Analyzer = PLAIN
) -> list[list[LexicalRow]]:
    return [[encode_lexical(chunk.text, analyzer) for chunk in item.chunks] for item in group]


def _as_is(value: Any) -> str:
    return str(value)


class _Encoder:
    """Tokenizes a stage batch group by group in a worker thread, one group ahead of
    the COPY that consumes it, so Python tokenizing overlaps the server's inserts
    and a large batch never stalls the event loop. Small batches encode inline."""

    def __init__(self, batch: Sequence[StagedDocument], analyzer: Analyzer = PLAIN) -> None:
        self._analyzer = analyzer
        self._groups: list[list[StagedDocument]] = []
        size = 0
        for item in batch:
            if not self._groups or size >= _ENCODE_GROUP_CHUNKS:
                self._groups.append([])
                size = 0
            self._groups[-1].append(item)
            size += len(item.chunks)
        self._threaded = sum(len(d.chunks) for d in batch) > _ENCODE_IN_THREAD
        self._next: asyncio.Future[list[list[LexicalRow]]] | None = None
        if self._threaded and self._groups:
            self._next = asyncio.ensure_future(
                asyncio.to_thread(_encode_group, self._groups[0], analyzer)
            )

    async def __aiter__(self) -> AsyncIterator[tuple[StagedDocument, list[LexicalRow]]]:
        for i, group in enumerate(self._groups):
            if self._next is None:
                encoded = _encode_group(group, self._analyzer)
            else:
                encoded = await self._next
                self._next = None
                if i + 1 < len(self._groups):
                    self._next = asyncio.ensure_future(
                        asyncio.to_thread(_encode_group, self._groups[i + 1], self._analyzer)
                    )
            for item, rows in zip(group, encoded, strict=True):
                yield item, rows

    def close(self) -> None:
        """Drop a group still being encoded (the stage failed)."""
        if self._next is not None:
            self._next.cancel()
            self._next = None
