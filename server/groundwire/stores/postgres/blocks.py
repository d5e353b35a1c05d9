"""Block postings on PostgreSQL (`gw_posting_blocks`): how the publish path writes
them and how a query reads them.

A term's postings in one (index, tenant) are cut, in chunk-id order, into blocks
of at most BLOCK_SIZE postings, one row per block keyed by (index, tenant, term,
last chunk id). A row carries its directory entry (first chunk id, count, the
largest term frequency, the shortest chunk: the block's BM25 bound for any
average length, since a term's contribution grows with tf and falls with the
length) and its postings as three big-endian int4 arrays in bytea: chunk-id deltas
(the first one 0, from `first_chunk`), term frequencies and chunk lengths (token
counts), decoded with numpy (`decode`). 12 bytes a posting, and one row header
a block instead of one row and one index entry a posting.

Blocks of one term never overlap: block i holds the chunk ids in (last of block
i-1, its own last]. The query (blockmax.py) relies on that.

Building. A bulk publish (no published chunks yet) cuts every (tenant, term) of
the version into blocks in one statement (one sort of the version's postings,
`build_bulk`), sorted on a 64-bit hash of (tenant, term) and the chunk id rather
than on the two strings: string comparisons were two thirds of the build (a
million-chunk load's 251 s). A block must hold one term's postings, so every block
checks that its postings carry one (tenant, term); a hash collision that puts two
terms in one block fails that check and the build runs again on the strings (a
block of one term is right whatever the hash: its deltas start at its own first
chunk). Any other publish rewrites only the blocks it touches
(`update_incremental`): each removed posting's block, and for each added posting
the block whose range holds its chunk id (the term's last block when the id is
past it, which is the rule: staged chunk ids grow). A block that only receives
postings past its last chunk id (appends) is not decoded: they are added to the end
of its arrays when they fit, else cut into blocks of their own after it. Any other
touched block's postings, minus the removed ones, plus the added ones that fall in
it, are decoded and cut again into blocks of at most BLOCK_SIZE (only within that
block's own range, so blocks stay disjoint). Its cost is one index probe per
changed posting and one rewritten row (up to 1.5 KB) per touched block: a document
of 75 distinct terms appended to an index rewrites about 75 blocks, whatever the
index's size. Deletions and appends
that do not fit can leave blocks under BLOCK_SIZE (never empty: an empty block is
dropped); nothing merges them back (a rebuild into a new index does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql

from groundwire.stores.postgres.connection import Conn
from groundwire.stores.postgres.migrations import CUT_SQL

# Postings a block holds at most (Lucene's block size). Read at publish time: a
# test may lower it to make every list many blocks long.
BLOCK_SIZE = 128

# The postings of every chunk a version adds (from the chunk rows' term counts).
_ADDED_SQL = """
    SELECT c.index_id, c.tenant, j.key AS term, NULL::bigint AS grp, c.id AS chunk,
           j.value::int4 AS tf, c.token_count AS dl
    FROM gw_chunks c CROSS JOIN LATERAL jsonb_each_text(c.term_freqs) j
    WHERE c.index_id = %(index_id)s AND c.version = %(version)s
"""

# One int4 of a bytea, big-endian (int4send's order), at position {i}.
_INT4_AT = (
    "((get_byte({b}, 4 * {i}) << 24) | (get_byte({b}, 4 * {i} + 1) << 16)"
    " | (get_byte({b}, 4 * {i} + 2) << 8) | get_byte({b}, 4 * {i} + 3))"
)

# Documents a version replaces or deletes, by (tenant, document_id).
TOUCHED_CTE = """
    touched AS (
        SELECT tenant, document_id FROM gw_documents
        WHERE index_id = %(index_id)s AND version = %(version)s
        UNION
        SELECT tenant, document_id FROM gw_staged_deletions
        WHERE index_id = %(index_id)s AND version = %(version)s
    ),
    published AS (
        SELECT version FROM gw_index_versions
        WHERE index_id = %(index_id)s AND state = 'published'
    )
"""

# The changes a publish makes to the postings, each placed in the block it falls
# into (grp: that block's last chunk id; NULL when the term has no block yet):
# every posting of the published chunks it replaces or deletes (gone) and every
# posting of the chunks it adds. Run before the chunk rows are deleted.
_CHANGES_SQL = (
    """
    CREATE TEMP TABLE gw_block_changes ON COMMIT DROP AS
    WITH"""
    + TOUCHED_CTE
    + """,
    x AS (
        SELECT c.tenant, j.key AS term, c.id AS chunk, 0 AS tf, 0 AS dl, true AS gone
        FROM gw_chunks c JOIN touched t ON c.tenant = t.tenant AND c.document_id = t.document_id
        CROSS JOIN LATERAL jsonb_object_keys(c.term_freqs) j(key)
        WHERE c.index_id = %(index_id)s AND c.version IN (SELECT version FROM published)
        UNION ALL
        SELECT c.tenant, j.key, c.id, j.value::int4, c.token_count, false
        FROM gw_chunks c CROSS JOIN LATERAL jsonb_each_text(c.term_freqs) j
        WHERE c.index_id = %(index_id)s AND c.version = %(version)s
    )
    SELECT x.*, coalesce(
        (SELECT b.last_chunk FROM gw_posting_blocks b
         WHERE b.index_id = %(index_id)s AND b.tenant = x.tenant AND b.term = x.term
           AND b.last_chunk >= x.chunk
         ORDER BY b.last_chunk LIMIT 1),
        (SELECT b.last_chunk FROM gw_posting_blocks b
         WHERE b.index_id = %(index_id)s AND b.tenant = x.tenant AND b.term = x.term
         ORDER BY b.last_chunk DESC LIMIT 1)) AS grp
    FROM x
"""
)

# Per touched block: whether it must be decoded (a posting leaves it, or one lands
# inside its range) or only receives postings past its last chunk id (appends), and
# whether those fit in it (at most BLOCK_SIZE postings in all).
_GROUPS_SQL = """
    CREATE TEMP TABLE gw_block_groups ON COMMIT DROP AS
    SELECT c.tenant, c.term, c.grp, bool_or(c.gone OR c.chunk <= c.grp) AS decode,
           b.n + count(*) <= %(block_size)s AS fits
    FROM gw_block_changes c
    JOIN gw_posting_blocks b ON b.index_id = %(index_id)s AND b.tenant = c.tenant
        AND b.term = c.term AND b.last_chunk = c.grp
    WHERE c.grp IS NOT NULL
    GROUP BY c.tenant, c.term, c.grp, b.n
"""

# Appends that fit: added to the end of the block's arrays, nothing decoded (the
# first new delta is from the block's last chunk id).
_APPEND_SQL = """
    UPDATE gw_posting_blocks b SET
        last_chunk = a.last_chunk, n = b.n + a.n, max_tf = greatest(b.max_tf, a.max_tf),
        min_dl = least(b.min_dl, a.min_dl), chunks = b.chunks || a.chunks,
        tfs = b.tfs || a.tfs, dls = b.dls || a.dls
    FROM (
        SELECT tenant, term, grp, max(chunk) AS last_chunk, count(*)::int4 AS n,
               max(tf) AS max_tf, min(dl) AS min_dl,
               string_agg(int4send(delta), ''::bytea ORDER BY chunk) AS chunks,
               string_agg(int4send(tf), ''::bytea ORDER BY chunk) AS tfs,
               string_agg(int4send(dl), ''::bytea ORDER BY chunk) AS dls
        FROM (
            SELECT c.tenant, c.term, c.grp, c.chunk, c.tf, c.dl,
                   (c.chunk - lag(c.chunk, 1, c.grp) OVER (
                       PARTITION BY c.tenant, c.term, c.grp ORDER BY c.chunk))::int4 AS delta
            FROM gw_block_changes c
            JOIN gw_block_groups g ON g.tenant = c.tenant AND g.term = c.term AND g.grp = c.grp
            WHERE NOT g.decode AND g.fits
        ) x
        GROUP BY tenant, term, grp
    ) a
    WHERE b.index_id = %(index_id)s AND b.tenant = a.tenant AND b.term = a.term
      AND b.last_chunk = a.grp
"""

# The touched blocks that must be decoded, taken out of gw_posting_blocks.
_TAKE_TOUCHED_SQL = """
    WITH d AS (
        DELETE FROM gw_posting_blocks b
        USING (SELECT tenant, term, grp FROM gw_block_groups WHERE decode) t
        WHERE b.index_id = %(index_id)s AND b.tenant = t.tenant AND b.term = t.term
          AND b.last_chunk = t.grp
        RETURNING b.tenant, b.term, b.last_chunk, b.first_chunk, b.n, b.chunks, b.tfs, b.dls
    )
    INSERT INTO gw_block_touched SELECT * FROM d
"""

# What the touched blocks hold after the publish: their postings (decoded) but
# the removed ones, and the added postings, each with its block.
_MERGED_SQL = (
    """
    SELECT %(index_id)s::integer AS index_id, o.tenant, o.term, o.grp, o.chunk, o.tf, o.dl
    FROM (
        SELECT t.tenant, t.term, t.last_chunk AS grp,
               t.first_chunk + sum({delta}) OVER (
                   PARTITION BY t.tenant, t.term, t.last_chunk ORDER BY i) AS chunk,
               {tf} AS tf, {dl} AS dl
        FROM gw_block_touched t CROSS JOIN LATERAL generate_series(0, t.n - 1) i
    ) o
    WHERE NOT EXISTS (SELECT 1 FROM gw_block_changes g
                      WHERE g.gone AND g.tenant = o.tenant AND g.term = o.term
                        AND g.chunk = o.chunk)
    UNION ALL
    SELECT %(index_id)s, c.tenant, c.term, c.grp, c.chunk, c.tf, c.dl
    FROM gw_block_changes c
    LEFT JOIN gw_block_groups g ON g.tenant = c.tenant AND g.term = c.term AND g.grp = c.grp
    WHERE NOT c.gone AND (c.grp IS NULL OR g.decode)
    UNION ALL
    -- Appends that did not fit in their term's last block: blocks of their own, past it.
    SELECT %(index_id)s, c.tenant, c.term, -1 - c.grp, c.chunk, c.tf, c.dl
    FROM gw_block_changes c
    JOIN gw_block_groups g ON g.tenant = c.tenant AND g.term = c.term AND g.grp = c.grp
    WHERE NOT g.decode AND NOT g.fits
    """.replace("{delta}", _INT4_AT.format(b="t.chunks", i="i"))
    .replace("{tf}", _INT4_AT.format(b="t.tfs", i="i"))
    .replace("{dl}", _INT4_AT.format(b="t.dls", i="i"))
)


def _cut(source: str) -> sql.Composed:
    return sql.SQL(CUT_SQL).format(source=sql.SQL(source), block_size=sql.Placeholder("block_size"))


# The bulk build keyed on a hash of (tenant, term). A block whose postings carry two
# (tenant, term) pairs (a collision) divides by zero, which sends `build_bulk` to
# the string-keyed CUT_SQL. (Not a constant: the planner would fold it.) Its own
# text rather than CUT_SQL with another key: CUT_SQL is also migration 21's, whose
# SQL must not change under databases that already ran it.
BULK_HASH = "hashtextextended(c.tenant || chr(1) || j.key, 0)"
_BULK_SQL = """
    INSERT INTO gw_posting_blocks (index_id, tenant, term, last_chunk, first_chunk, n,
                                   max_tf, min_dl, chunks, tfs, dls)
    SELECT %(index_id)s, min(tenant), min(term), max(chunk), min(chunk), count(*)::int4,
           max(tf), min(dl),
           string_agg(int4send(delta), ''::bytea ORDER BY chunk),
           string_agg(int4send(tf), ''::bytea ORDER BY chunk),
           string_agg(int4send(dl), ''::bytea ORDER BY chunk)
    FROM (
        SELECT h, tenant, term, chunk, tf, dl,
               (row_number() OVER w - 1) / %(block_size)s AS piece,
               CASE WHEN (row_number() OVER w - 1) %% %(block_size)s = 0 THEN 0
                    ELSE (chunk - lag(chunk) OVER w)::int4 END AS delta
        FROM (
            SELECT {hash} AS h, c.tenant, j.key AS term, c.id AS chunk,
                   j.value::int4 AS tf, c.token_count AS dl
            FROM gw_chunks c CROSS JOIN LATERAL jsonb_each_text(c.term_freqs) j
            WHERE c.index_id = %(index_id)s AND c.version = %(version)s
        ) p
        WINDOW w AS (PARTITION BY h ORDER BY chunk)
    ) r
    GROUP BY h, piece
    HAVING CASE WHEN min(tenant) = max(tenant) AND min(term) = max(term) THEN true
                ELSE 1 / (count(*) - count(*)) = 1 END
"""


async def build_bulk(conn: Conn, index_id: int, version: int) -> bool:
    """Blocks for every chunk `version` adds, into an index with none (one sort).
    Proportional to the load, so without a statement timeout (this transaction's).
    Returns whether the hash-keyed build did it (False: a collision, built on the
    strings)."""
    await conn.execute("SELECT set_config('statement_timeout', '0', true)")
    p = {"index_id": index_id, "version": version, "block_size": BLOCK_SIZE}
    try:
        async with conn.transaction():  # a savepoint: the fallback starts clean
            await conn.execute(sql.SQL(_BULK_SQL.replace("{hash}", BULK_HASH)), p)
        return True
    except psycopg.errors.DivisionByZero:
        await conn.execute(_cut(_ADDED_SQL), p)
        return False


async def update_incremental(conn: Conn, index_id: int, version: int) -> None:
    """Rewrite the blocks a publish of `version` touches (see the module text); call
    it inside the publish transaction, before the replaced chunk rows are deleted."""
    p = {"index_id": index_id, "version": version, "block_size": BLOCK_SIZE}
    await conn.execute("DROP TABLE IF EXISTS gw_block_changes, gw_block_groups, gw_block_touched")
    await conn.execute(_CHANGES_SQL, p)
    # Temporary tables have no statistics until analyzed: without them the planner
    # takes the anti-join below for a nested loop over the changes (minutes for a
    # few thousand chunks).
    await conn.execute("ANALYZE gw_block_changes")
    await conn.execute(_GROUPS_SQL, p)
    await conn.execute("ANALYZE gw_block_groups")
    await conn.execute(
        "CREATE TEMP TABLE gw_block_touched ON COMMIT DROP AS "
        "SELECT tenant, term, last_chunk, first_chunk, n, chunks, tfs, dls "
        "FROM gw_posting_blocks WITH NO DATA"
    )
    await conn.execute(_TAKE_TOUCHED_SQL, p)
    await conn.execute("ANALYZE gw_block_touched")
    await conn.execute(_cut(_MERGED_SQL), p)
    await conn.execute(_APPEND_SQL, p)


# -- reading -------------------------------------------------------------------------


def _be_int4(raw: bytes) -> npt.NDArray[np.int64]:
    return np.frombuffer(raw, dtype=">i4").astype(np.int64)


@dataclass(frozen=True, slots=True)
class Block:
    """One block's postings, decoded."""

    chunks: npt.NDArray[np.int64]
    tfs: npt.NDArray[np.float64]
    dls: npt.NDArray[np.float64]


def decode(first: int, chunks: bytes, tfs: bytes, dls: bytes) -> Block:
    """A block row's postings: chunk ids (first + running sum of the deltas), term
    frequencies and lengths as float64 (the scoring arithmetic's type)."""
    ids = np.cumsum(_be_int4(chunks)) + int(first)
    return Block(ids, _be_int4(tfs).astype(np.float64), _be_int4(dls).astype(np.float64))


@dataclass(frozen=True, slots=True)
class Directory:
    """One term's block directory in one (index, tenant): each block's last chunk
    id (ascending), posting count, largest tf and shortest length."""

    lasts: npt.NDArray[np.int64]
    counts: npt.NDArray[np.int64]
    max_tf: npt.NDArray[np.float64]
    min_dl: npt.NDArray[np.float64]

    @property
    def nbytes(self) -> int:
        return int(self.lasts.nbytes * 4)


# A term's directory, packed server-side into one row (an index-only scan of the
# primary key, whose INCLUDE columns hold the entries).
_DIRECTORY_SQL = """
    SELECT term, string_agg(int8send(last_chunk), ''::bytea ORDER BY last_chunk),
           string_agg(int4send(n), ''::bytea ORDER BY last_chunk),
           string_agg(int4send(max_tf), ''::bytea ORDER BY last_chunk),
           string_agg(int4send(min_dl), ''::bytea ORDER BY last_chunk)
    FROM gw_posting_blocks
    WHERE index_id = %(index_id)s AND tenant = %(tenant)s AND term = ANY(%(terms)s)
    GROUP BY term
"""


async def directories(
    conn: Conn, index_id: int, tenant: str, terms: list[str]
) -> dict[str, Directory]:
    """The block directories of `terms` (a term without blocks is absent)."""
    cur = await conn.execute(
        _DIRECTORY_SQL, {"index_id": index_id, "tenant": tenant, "terms": terms}
    )
    out: dict[str, Directory] = {}
    for term, lasts, counts, max_tf, min_dl in await cur.fetchall():
        out[str(term)] = Directory(
            np.frombuffer(lasts, dtype=">i8").astype(np.int64),
            _be_int4(counts),
            _be_int4(max_tf).astype(np.float64),
            _be_int4(min_dl).astype(np.float64),
        )
    return out


# Blocks packed server-side into one row a term (blocks in ascending order): their
# postings' bytes end to end, and each block's first chunk id and count, so a whole
# round decodes with a few numpy calls a term. {which}: the blocks wanted.
_PACKED_SQL = """
    SELECT b.term, string_agg(b.chunks, ''::bytea ORDER BY b.last_chunk),
           string_agg(b.tfs, ''::bytea ORDER BY b.last_chunk),
           string_agg(b.dls, ''::bytea ORDER BY b.last_chunk),
           string_agg(int8send(b.first_chunk), ''::bytea ORDER BY b.last_chunk),
           string_agg(int4send(b.n), ''::bytea ORDER BY b.last_chunk)
    FROM {which}
    GROUP BY b.term
"""
_BLOCKS_SQL = _PACKED_SQL.replace(
    "{which}",
    """unnest(%(terms)s::text[], %(lasts)s::bigint[]) AS u(term, last_chunk)
    JOIN gw_posting_blocks b ON b.index_id = %(index_id)s AND b.tenant = %(tenant)s
        AND b.term = u.term AND b.last_chunk = u.last_chunk""",
)
_LISTS_SQL = _PACKED_SQL.replace(
    "{which}",
    """gw_posting_blocks b
    WHERE b.index_id = %(index_id)s AND b.tenant = %(tenant)s AND b.term = ANY(%(terms)s)""",
)


def _unpack(rows: list[tuple[Any, ...]]) -> dict[str, Block]:
    out: dict[str, Block] = {}
    for term, chunks, tfs, dls, firsts, counts in rows:
        deltas = _be_int4(bytes(chunks))
        n = _be_int4(bytes(counts))
        first = np.frombuffer(bytes(firsts), dtype=">i8").astype(np.int64)
        running = np.cumsum(deltas)
        starts = np.concatenate(([0], np.cumsum(n)[:-1]))
        # Each block restarts from its first chunk id (its first delta is 0).
        ids = running + np.repeat(first - running[starts], n)
        out[str(term)] = Block(
            ids, _be_int4(bytes(tfs)).astype(np.float64), _be_int4(bytes(dls)).astype(np.float64)
        )
    return out


async def read_blocks(
    conn: Conn, index_id: int, tenant: str, wanted: dict[str, npt.NDArray[np.int64]]
) -> dict[str, Block]:
    """The postings of the wanted blocks (per term, their last chunk ids), each
    term's blocks decoded together, in ascending chunk-id order."""
    terms = [t for t, lasts in wanted.items() for _ in range(len(lasts))]
    if not terms:
        return {}
    lasts = np.concatenate([v for v in wanted.values() if len(v)]).tolist()
    cur = await conn.execute(
        _BLOCKS_SQL, {"index_id": index_id, "tenant": tenant, "terms": terms, "lasts": lasts}
    )
    return _unpack(await cur.fetchall())


async def read_lists(conn: Conn, index_id: int, tenant: str, terms: list[str]) -> dict[str, Block]:
    """Every posting of each term (a range scan of its blocks), decoded."""
    if not terms:
        return {}
    cur = await conn.execute(_LISTS_SQL, {"index_id": index_id, "tenant": tenant, "terms": terms})
    return _unpack(await cur.fetchall())
