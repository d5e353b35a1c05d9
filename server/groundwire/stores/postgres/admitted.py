"""The chunk ids a scope admits: what a filtered search intersects (lexical.py's
block scan) or ranks exactly (vectors.py, a selective filter).

A scope that filters rows (a metadata filter, readers restricted by access lists)
is read once per published version as the sorted ids of the chunks it admits,
packed server-side into one bytea, and kept in the store's bounded filter cache
(blockmax.LexicalCache.filters): a publish changes the key, so a cached set is
never stale, and a repeated filter costs one dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import sql

from groundwire.domain.retrieval import Scope
from groundwire.stores.postgres.blockmax import LRU
from groundwire.stores.postgres.connection import Conn
from groundwire.stores.postgres.scope import IndexRow, scope_sql

# The chunk ids a scope admits in the published version, sorted, packed server-side.
_ADMITTED_SQL = """
    SELECT coalesce(string_agg(int8send(c.id), ''::bytea ORDER BY c.id), ''::bytea)
    FROM gw_chunks c
    WHERE c.index_id = %(index_id)s AND NOT (c.version = ANY(%(staging)s::bigint[])) AND {scope}
"""


def filter_key(idx: IndexRow, scope: Scope, version: int) -> Hashable:
    flt, readers = scope.filter, scope.readers
    return (
        idx.id,
        version,
        scope.tenant,
        tuple(sorted((k, tuple(sorted(v))) for k, v in flt.conditions.items())),
        tuple(sorted((k, repr(v)) for k, v in flt.ranges.items())),
        readers.unrestricted,
        tuple(sorted(readers.principals)),
    )


async def admitted_ids(
    conn: Conn, idx: IndexRow, scope: Scope, version: int, cache: LRU | None
) -> npt.NDArray[np.int64]:
    """The sorted chunk ids `scope` admits in published `version` (read inside
    `conn`'s snapshot, whose published version it must be), cached per version."""
    key = filter_key(idx, scope, version)
    found = cache.get(key) if cache is not None else None
    if found is not None:
        return found  # type: ignore[no-any-return]
    params: dict[str, Any] = {"index_id": idx.id, "staging": idx.staging}
    query = sql.SQL(_ADMITTED_SQL).format(scope=scope_sql(scope, params))
    cur = await conn.execute(query, params)
    row = await cur.fetchone()
    ids = np.frombuffer(bytes(row[0]) if row else b"", dtype=">i8").astype(np.int64)
    if cache is not None:
        cache.put(key, ids, ids.nbytes + 200)
    return ids
