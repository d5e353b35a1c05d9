"""What every PostgreSQL read shares: the index row with its staging set (rows of a
staging version are invisible), the scope predicate (the tenant and the metadata
filter, applied inside the scan) and the columns a hit is built from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from groundwire.domain.access import ALL_READERS
from groundwire.domain.retrieval import ChunkHit, MetadataFilter, Scope
from groundwire.domain.scores import Score
from groundwire.stores.base import DistanceMetric, IndexSpec, index_missing
from groundwire.stores.postgres.connection import Conn
from groundwire.stores.postgres.ranges import range_sql


@dataclass(frozen=True, slots=True)
class IndexRow:
    """An index's id, its current spec, the versions still staging and the
    published one."""

    id: int
    spec: IndexSpec
    staging: list[int]
    published: int = 0


_INDEX_ROW_SQL = """
    SELECT i.id, i.embedding, i.dimensions, i.metric, i.chunking,
           ARRAY(SELECT v.version FROM gw_index_versions v
                 WHERE v.index_id = i.id AND v.state = 'staging' ORDER BY v.version),
           i.half_precision_index, i.published_version
    FROM gw_indexes i WHERE i.name = %s
"""


async def index_row(conn: Conn, name: str) -> IndexRow:
    """The index's row, or INDEX_NOT_FOUND."""
    cur = await conn.execute(_INDEX_ROW_SQL, [name])
    row = await cur.fetchone()
    if row is None:
        raise index_missing(len(name))
    spec = IndexSpec(
        name, row[1], row[2], DistanceMetric(row[3]), row[4], half_precision_index=bool(row[6])
    )
    return IndexRow(int(row[0]), spec, [int(v) for v in row[5]], int(row[7] or 0))


HIT_COLUMNS = sql.SQL(
    "c.document_id, c.chunk_id, c.content, c.start_offset, c.end_offset, "
    "c.title, c.section, c.metadata"
)


def hit(row: Sequence[Any], score: Score) -> ChunkHit:
    """A hit from a row whose first columns are HIT_COLUMNS."""
    metadata = row[7]
    return ChunkHit(
        str(row[0]),
        str(row[1]),
        str(row[2]),
        int(row[3]),
        int(row[4]),
        str(row[5]),
        str(row[6]),
        {str(k): str(v) for k, v in metadata.items()},
        score,
    )


def scope_sql(scope: Scope, params: dict[str, Any]) -> sql.Composable:
    """The tenant, metadata filter and readers as a predicate on `c` (gw_chunks).
    Call it with a scope from `reader_scope`, whose readers are unrestricted when
    the tenant holds no chunk with an ACL (so no predicate is added for them)."""
    params["tenant"] = scope.tenant
    parts: list[sql.Composable] = [sql.SQL("c.tenant = %(tenant)s")]
    parts.extend(_filter_sql(scope.filter, params))
    if not scope.readers.unrestricted:
        params["readers"] = list(scope.readers.principals)
        parts.append(sql.SQL("(c.acl IS NULL OR c.acl && %(readers)s::text[])"))
    return sql.SQL(" AND ").join(parts)


def filters_rows(scope: Scope) -> bool:
    """Whether the scope admits fewer rows than the tenant's (a metadata filter or
    restricted readers): the lexical paths then check each chunk's row."""
    return not scope.filter.empty or not scope.readers.unrestricted


async def reader_scope(conn: Conn, idx: IndexRow, scope: Scope) -> Scope:
    """`scope` with unrestricted readers when the tenant holds no chunk with an
    ACL (an index-only probe of gw_chunks_acl): the readers would admit every row,
    and searches keep their unfiltered paths."""
    if scope.readers.unrestricted:
        return scope
    cur = await conn.execute(
        "SELECT EXISTS (SELECT 1 FROM gw_chunks WHERE index_id = %s AND tenant = %s"
        " AND acl IS NOT NULL)",
        [idx.id, scope.tenant],
    )
    row = await cur.fetchone()
    if row and row[0]:
        return scope
    return replace(scope, readers=ALL_READERS)


def _filter_sql(flt: MetadataFilter, params: dict[str, Any]) -> list[sql.Composable]:
    """One `@>` ANY condition per key (AND over keys, any of the accepted values), in
    a form the GIN (jsonb_path_ops) index on metadata can answer."""
    parts: list[sql.Composable] = []
    for i, key in enumerate(sorted(flt.conditions)):
        placeholder = f"filter{i}"
        params[placeholder] = [Jsonb({key: value}) for value in sorted(flt.conditions[key])]
        parts.append(sql.SQL("c.metadata @> ANY({}::jsonb[])").format(sql.Placeholder(placeholder)))
    for i, key in enumerate(sorted(flt.ranges)):
        for j, cond in enumerate(flt.ranges[key]):
            parts.append(range_sql(key, cond, f"range{i}_{j}", params))
    return parts
