"""The chunk ids a scope admits: what a filtered search intersects (lexical.py's
block scan) or ranks exactly (vectors.py, a selective filter).

A scope that filters rows (a metadata filter, readers restricted by access lists)
is read once per published version as the sorted ids of the chunks it admits,
packed server-side into one bytea, and kept in the store's bounded filter cache
(blockmax.LexicalCache.filters): a publish changes the key, so a cached set is
never stale, and a repeated filter costs one dictionary lookup. The vector leg
only wants the set when it is small (`at_most`): its read stops after at_most + 1
rows, and a scope found larger is remembered as such for the version, so a broad
filter costs the vector leg one bounded read per version, never a whole scan.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import sql

from groundwire.domain.retrieval import Scope
from groundwire.stores.lru import LRU
from groundwire.stores.postgres.connection import Conn
from groundwire.stores.postgres.scope import IndexRow, scope_sql

# The chunk ids a scope admits in the published version (at most %(limit)s of them,
# NULL: all), sorted, packed server-side.
_ADMITTED_SQL = """
    SELECT coalesce(string_agg(int8send(x.id), ''::bytea ORDER BY x.id), ''::bytea)
    FROM (
        SELECT c.id FROM gw_chunks c
        WHERE c.index_id = %(index_id)s AND NOT (c.version = ANY(%(staging)s::bigint[]))
          AND {scope}
        LIMIT %(limit)s
    ) x
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
    conn: Conn,
    idx: IndexRow,
    scope: Scope,
    version: int,
    cache: LRU | None,
    at_most: int | None = None,
) -> npt.NDArray[np.int64] | None:
    """The sorted chunk ids `scope` admits in published `version` (read inside
    `conn`'s snapshot, whose published version it must be), cached per version;
    None when `at_most` is given and the scope admits more than that."""
    key = filter_key(idx, scope, version)
    found: npt.NDArray[np.int64] | None = cache.get(key) if cache is not None else None
    if found is not None:
        return None if at_most is not None and len(found) > at_most else found
    over = (key, "over")
    if at_most is not None and cache is not None:
        known = cache.get(over)
        if known is not None and known >= at_most:
            return None
    params: dict[str, Any] = {
        "index_id": idx.id,
        "staging": idx.staging,
        "limit": None if at_most is None else at_most + 1,
    }
    query = sql.SQL(_ADMITTED_SQL).format(scope=scope_sql(scope, params))
    cur = await conn.execute(query, params)
    row = await cur.fetchone()
    ids = np.frombuffer(bytes(row[0]) if row else b"", dtype=">i8").astype(np.int64)
    if at_most is not None and len(ids) > at_most:
        if cache is not None:
            cache.put(over, at_most, 200)  # admits more than at_most
        return None
    if cache is not None:
        cache.put(key, ids, ids.nbytes + 200)
    return ids
