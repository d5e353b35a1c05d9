"""The versioned migrations of the PostgreSQL schema groundwire owns (applied by
schema.apply_migrations, which holds the migration lock and records each one).

Each migration's statements are constants (or composed from constants here);
request data never reaches DDL.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step; `statements` run in order inside one transaction."""

    version: int
    name: str
    statements: tuple[str, ...]


# Block postings (blocks.py, migration 21): cut each (index, tenant, term, grp)'s
# postings of {source} in chunk-id order into blocks of at most {block_size}. `grp`
# keeps apart the postings of different touched blocks (so no new block spans
# another one's range); NULL for fresh ones.
CUT_SQL = """
    INSERT INTO gw_posting_blocks (index_id, tenant, term, last_chunk, first_chunk, n,
                                   max_tf, min_dl, chunks, tfs, dls)
    SELECT index_id, tenant, term, max(chunk), min(chunk), count(*)::int4, max(tf), min(dl),
           string_agg(int4send(delta), ''::bytea ORDER BY chunk),
           string_agg(int4send(tf), ''::bytea ORDER BY chunk),
           string_agg(int4send(dl), ''::bytea ORDER BY chunk)
    FROM (
        SELECT index_id, tenant, term, grp, chunk, tf, dl, piece,
               CASE WHEN rn = piece * {block_size} THEN 0 ELSE (chunk - prev)::int4 END AS delta
        FROM (
            SELECT index_id, tenant, term, grp, chunk, tf, dl,
                   row_number() OVER w - 1 AS rn,
                   (row_number() OVER w - 1) / {block_size} AS piece,
                   lag(chunk) OVER w AS prev
            FROM ({source}) s
            WINDOW w AS (PARTITION BY index_id, tenant, term, grp ORDER BY chunk)
        ) r
    ) x
    GROUP BY index_id, tenant, term, grp, piece
"""


# Rows of a version that is not staging are published (discarded versions have no
# rows left): the same visibility rule readers apply.
_PUBLISHED_ROW = """
    NOT EXISTS (SELECT 1 FROM gw_index_versions v
                WHERE v.index_id = c.index_id AND v.version = c.version
                  AND v.state = 'staging')
"""

# The task-mode suffix migration 8 appends to descriptors recorded before it
# existed (tests/unit/test_embedding_descriptor.py proves these are what
# EmbeddingInfo.descriptor() writes for empty prefixes).
LEGACY_TASK_MODE = ';{"document_prefix":"","query_prefix":""}'
LEGACY_LOCAL_ONNX_TASK_MODE = ';{"document_prefix":"","max_tokens":256,"query_prefix":""}'

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "indexes, versions, documents, chunks",
        (
            """
            CREATE TABLE gw_indexes (
                id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                name text COLLATE "C" NOT NULL UNIQUE,
                -- the spec of the last ensure_index: what staging validates against
                embedding text,
                dimensions integer CHECK (dimensions BETWEEN 1 AND 16000),
                metric text NOT NULL CHECK (metric IN ('cosine', 'euclidean', 'dot')),
                chunking text NOT NULL,
                -- what the published version was built with
                published_version bigint NOT NULL DEFAULT 0,
                published_embedding text,
                published_dimensions integer,
                published_metric text NOT NULL,
                published_chunking text NOT NULL,
                next_version bigint NOT NULL DEFAULT 1,
                -- published totals, maintained at publish (token_count: dropped by 5)
                document_count bigint NOT NULL DEFAULT 0,
                chunk_count bigint NOT NULL DEFAULT 0,
                token_count bigint NOT NULL DEFAULT 0,
                created_at timestamptz NOT NULL DEFAULT now(),
                updated_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            """
            CREATE TABLE gw_index_versions (
                index_id integer NOT NULL REFERENCES gw_indexes (id) ON DELETE CASCADE,
                version bigint NOT NULL,
                state text NOT NULL CHECK (state IN ('staging', 'published', 'discarded')),
                embedding text,
                dimensions integer,
                metric text,
                chunking text,
                created_at timestamptz NOT NULL DEFAULT now(),
                finished_at timestamptz,
                PRIMARY KEY (index_id, version)
            )
            """,
            """
            CREATE INDEX gw_index_versions_staging
                ON gw_index_versions (index_id) WHERE state = 'staging'
            """,
            """
            CREATE TABLE gw_documents (
                index_id integer NOT NULL REFERENCES gw_indexes (id) ON DELETE CASCADE,
                version bigint NOT NULL,
                document_id text COLLATE "C" NOT NULL,
                source_id text COLLATE "C" NOT NULL,
                content_hash text NOT NULL,
                title text NOT NULL,
                tenant text COLLATE "C" NOT NULL,
                metadata jsonb NOT NULL,
                chunk_count integer NOT NULL,
                staged_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (index_id, document_id, version)
            )
            """,
            "CREATE INDEX gw_documents_version ON gw_documents (index_id, version)",
            "CREATE INDEX gw_documents_source ON gw_documents (index_id, source_id)",
            """
            CREATE TABLE gw_staged_deletions (
                index_id integer NOT NULL,
                version bigint NOT NULL,
                document_id text COLLATE "C" NOT NULL,
                PRIMARY KEY (index_id, version, document_id),
                FOREIGN KEY (index_id, version)
                    REFERENCES gw_index_versions (index_id, version) ON DELETE CASCADE
            )
            """,
            # Chunk rows are immutable once staged: visibility comes from their
            # version's state, so publishing never rewrites (and never re-inserts
            # into HNSW) the rows it makes visible.
            """
            CREATE TABLE gw_chunks (
                id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                index_id integer NOT NULL REFERENCES gw_indexes (id) ON DELETE CASCADE,
                version bigint NOT NULL,
                document_id text COLLATE "C" NOT NULL,
                chunk_id text COLLATE "C" NOT NULL,
                ordinal integer NOT NULL,
                start_offset integer NOT NULL,
                end_offset integer NOT NULL,
                content text NOT NULL,
                section text NOT NULL,
                title text NOT NULL,
                tenant text COLLATE "C" NOT NULL,
                metadata jsonb NOT NULL,
                embedding_model text,
                dims integer,
                embedding vector,
                lex tsvector NOT NULL,
                term_freqs jsonb NOT NULL,
                token_count integer NOT NULL,
                phrase_exact boolean NOT NULL,
                CHECK ((embedding IS NULL) = (dims IS NULL))
            )
            """,
            # Lexical scoring reads every matching row's term frequencies, so they
            # stay inline and uncompressed (MAIN, with room up to half a page before
            # PostgreSQL compresses): decompressing them per lookup cost more than the
            # wider heap. Vectors are read from the HNSW graph while searching and
            # from the heap only for the k results, so they go out of line first.
            "ALTER TABLE gw_chunks SET (toast_tuple_target = 4080)",
            "ALTER TABLE gw_chunks ALTER COLUMN term_freqs SET STORAGE MAIN",
            "ALTER TABLE gw_chunks ALTER COLUMN embedding SET STORAGE EXTERNAL",
            "CREATE INDEX gw_chunks_document ON gw_chunks (index_id, document_id)",
            "CREATE INDEX gw_chunks_version ON gw_chunks (index_id, version)",
            "CREATE INDEX gw_chunks_tenant ON gw_chunks (index_id, tenant)",
            "CREATE INDEX gw_chunks_lex ON gw_chunks USING gin (lex)",
            "CREATE INDEX gw_chunks_metadata ON gw_chunks USING gin (metadata jsonb_path_ops)",
            # Document frequency of every term over an index's published chunks, kept
            # in the publish transaction: BM25's idf without counting at query time.
            """
            CREATE TABLE gw_term_stats (
                index_id integer NOT NULL REFERENCES gw_indexes (id) ON DELETE CASCADE,
                term text COLLATE "C" NOT NULL,
                df bigint NOT NULL,
                PRIMARY KEY (index_id, term)
            )
            """,
            """
            CREATE TABLE gw_vector_indexes (
                index_id integer NOT NULL REFERENCES gw_indexes (id) ON DELETE CASCADE,
                dims integer NOT NULL,
                metric text NOT NULL,
                relname text NOT NULL UNIQUE,
                m integer NOT NULL,
                ef_construction integer NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (index_id, dims, metric)
            )
            """,
        ),
    ),
    Migration(
        2,
        "ingestion operations",
        (
            # The ingestion manager records operations here so their
            # history survives a restart; it may extend the table in later migrations.
            """
            CREATE TABLE gw_operations (
                id text COLLATE "C" PRIMARY KEY,
                index_id integer NOT NULL REFERENCES gw_indexes (id) ON DELETE CASCADE,
                version bigint,
                state text NOT NULL,
                trigger text NOT NULL DEFAULT '',
                counts jsonb NOT NULL DEFAULT '{}'::jsonb,
                error_code text,
                created_at timestamptz NOT NULL DEFAULT now(),
                started_at timestamptz,
                finished_at timestamptz,
                updated_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            "CREATE INDEX gw_operations_index ON gw_operations (index_id, created_at DESC)",
        ),
    ),
    Migration(
        3,
        "operation records",
        (
            # The whole operation snapshot (counts, phase, failures) as the manager
            # reports it, and the index name listings filter on without a join.
            """
            ALTER TABLE gw_operations
                ADD COLUMN index_name text COLLATE "C" NOT NULL DEFAULT '',
                ADD COLUMN record jsonb
            """,
            """
            CREATE INDEX gw_operations_listing
                ON gw_operations (index_name, created_at DESC, id DESC)
            """,
            "CREATE INDEX gw_operations_unfinished ON gw_operations (state) "
            "WHERE state IN ('QUEUED', 'RUNNING')",
        ),
    ),
    Migration(
        4,
        "documents keyed by tenant; per-tenant BM25 statistics",
        (
            # Document ids are unique per (index, tenant): tenants of one index never
            # overwrite, delete or detect each other's documents.
            """
            ALTER TABLE gw_documents DROP CONSTRAINT gw_documents_pkey,
                ADD PRIMARY KEY (index_id, tenant, document_id, version)
            """,
            # Deletions staged by an older server (versions left staging by a crash,
            # which nothing publishes any more) get the untenanted key.
            """
            ALTER TABLE gw_staged_deletions
                ADD COLUMN tenant text COLLATE "C" NOT NULL DEFAULT ''
            """,
            """
            ALTER TABLE gw_staged_deletions ALTER COLUMN tenant DROP DEFAULT,
                DROP CONSTRAINT gw_staged_deletions_pkey,
                ADD PRIMARY KEY (index_id, version, tenant, document_id)
            """,
            "DROP INDEX gw_chunks_document",
            "DROP INDEX gw_chunks_tenant",
            "CREATE INDEX gw_chunks_document ON gw_chunks (index_id, tenant, document_id)",
            # BM25 statistics per tenant, recomputed from the published chunks: one
            # tenant's documents must not move another tenant's scores.
            "DELETE FROM gw_term_stats",
            """
            ALTER TABLE gw_term_stats ADD COLUMN tenant text COLLATE "C" NOT NULL,
                DROP CONSTRAINT gw_term_stats_pkey,
                ADD PRIMARY KEY (index_id, tenant, term)
            """,
            """
            INSERT INTO gw_term_stats (index_id, tenant, term, df)
            SELECT c.index_id, c.tenant, t.term, count(*)
            FROM gw_chunks c CROSS JOIN LATERAL unnest(tsvector_to_array(c.lex)) AS t(term)
            WHERE """
            + _PUBLISHED_ROW
            + """
            GROUP BY 1, 2, 3
            """,
            """
            CREATE TABLE gw_tenant_stats (
                index_id integer NOT NULL REFERENCES gw_indexes (id) ON DELETE CASCADE,
                tenant text COLLATE "C" NOT NULL,
                document_count bigint NOT NULL,
                chunk_count bigint NOT NULL,
                token_count bigint NOT NULL,
                PRIMARY KEY (index_id, tenant)
            )
            """,
            """
            INSERT INTO gw_tenant_stats (index_id, tenant, document_count, chunk_count, token_count)
            SELECT index_id, tenant, sum(documents), sum(chunks), sum(tokens) FROM (
                SELECT c.index_id, c.tenant, 0 AS documents, count(*) AS chunks,
                       sum(c.token_count) AS tokens
                FROM gw_chunks c WHERE """
            + _PUBLISHED_ROW
            + """
                GROUP BY 1, 2
                UNION ALL
                SELECT c.index_id, c.tenant, count(*), 0, 0
                FROM gw_documents c WHERE """
            + _PUBLISHED_ROW
            + """
                GROUP BY 1, 2
            ) x
            GROUP BY 1, 2
            """,
        ),
    ),
    Migration(
        5,
        "drop the index-wide token count",
        # BM25's average length is per tenant (gw_tenant_stats) since migration 4;
        # nothing reads the index-wide total any more.
        ("ALTER TABLE gw_indexes DROP COLUMN token_count",),
    ),
    Migration(
        6,
        "per-tenant postings for lexical search",
        (
            # One row per (published chunk, term): what BM25 needs of a posting (tf,
            # and the chunk's length) is in the primary key's leaf, so a term's
            # postings are an index-only range scan of the scope tenant's own rows,
            # whatever other tenants hold. Rows exist for published chunks only
            # (written and deleted in the publish transaction), so reads need no
            # staging filter.
            """
            CREATE TABLE gw_postings (
                index_id integer NOT NULL,
                tenant text COLLATE "C" NOT NULL,
                term text COLLATE "C" NOT NULL,
                chunk bigint NOT NULL,
                tf integer NOT NULL,
                dl integer NOT NULL,
                PRIMARY KEY (index_id, tenant, term, chunk) INCLUDE (tf, dl)
            )
            """,
            """
            INSERT INTO gw_postings (index_id, tenant, term, chunk, tf, dl)
            SELECT c.index_id, c.tenant, j.key, c.id, j.value::integer, c.token_count
            FROM gw_chunks c CROSS JOIN LATERAL jsonb_each_text(c.term_freqs) j
            WHERE """
            + _PUBLISHED_ROW,
            # Candidates now come from the postings; the tsvector is only matched
            # against a candidate's own row (phrases), never searched through.
            "DROP INDEX IF EXISTS gw_chunks_lex",
            "ANALYZE gw_postings",
        ),
    ),
    Migration(
        7,
        "execution checkpoints",
        (
            # One row per checkpointed execution (agents/checkpoints.py): the opaque
            # serialized state, the lease that makes running it exclusive across
            # replicas, and the retention after which it is deleted.
            """
            CREATE TABLE gw_checkpoints (
                execution_id text COLLATE "C" PRIMARY KEY,
                tenant text COLLATE "C" NOT NULL,
                agent_id text COLLATE "C" NOT NULL,
                state text NOT NULL
                    CHECK (state IN ('RUNNING', 'REQUIRES_ACTION', 'COMPLETED')),
                payload bytea NOT NULL,
                lease_owner text,
                lease_expires_at timestamptz,
                created_at timestamptz NOT NULL DEFAULT now(),
                updated_at timestamptz NOT NULL DEFAULT now(),
                expires_at timestamptz NOT NULL
            )
            """,
            "CREATE INDEX gw_checkpoints_expiry ON gw_checkpoints (expires_at)",
        ),
    ),
    Migration(
        8,
        "embedding descriptors record the task mode",
        # Descriptors gained the task mode (EmbeddingInfo.descriptor: the query and
        # document prefixes, and the local model's token window) so a change of
        # either forces a rebuild. Older servers could not record them: what they
        # published is taken to be built with empty prefixes and local-onnx's
        # default 256-token window, the only settings they validated against, so an
        # index built that way keeps serving without a rebuild. Chunk rows'
        # `embedding_model` is an audit copy nothing compares; it keeps the old form.
        tuple(
            f"""
            UPDATE {table} SET {column} = {column} || CASE
                WHEN {column} LIKE 'local-onnx/%' THEN '{LEGACY_LOCAL_ONNX_TASK_MODE}'
                ELSE '{LEGACY_TASK_MODE}' END
            WHERE {column} IS NOT NULL
            """
            for table, column in (
                ("gw_indexes", "embedding"),
                ("gw_indexes", "published_embedding"),
                ("gw_index_versions", "embedding"),
            )
        ),
    ),
    Migration(
        9,
        "per-tenant embedding usage",
        (
            # Totals per (tenant, embedding task), added to by every replica's
            # usage flushes (stores/postgres/usage.py).
            """
            CREATE TABLE gw_usage (
                tenant text COLLATE "C" NOT NULL,
                task text COLLATE "C" NOT NULL,
                requests bigint NOT NULL DEFAULT 0,
                input_tokens bigint NOT NULL DEFAULT 0,
                estimated_input_tokens bigint NOT NULL DEFAULT 0,
                texts bigint NOT NULL DEFAULT 0,
                truncated_texts bigint NOT NULL DEFAULT 0,
                updated_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (tenant, task)
            )
            """,
        ),
    ),
    Migration(
        10,
        "impact-ordered postings",
        (
            # Postings ordered best first within a term (tf descending, then the
            # shorter chunk): a query of common words reads each term's best
            # postings and stops once the rest cannot reach its top k, instead of
            # scoring every posting (lexical._impact_top). Still an index-only range
            # scan of the scope tenant's own rows; a posting is found for deletion by
            # its whole key (publish knows the tf and length of the rows it removes).
            "ALTER TABLE gw_postings DROP CONSTRAINT gw_postings_pkey",
            """
            CREATE UNIQUE INDEX gw_postings_impact
                ON gw_postings (index_id, tenant, term, tf DESC, dl, chunk)
            """,
            "ANALYZE gw_postings",
            # Half-precision HNSW graphs (pgvector halfvec) per index: the graph is
            # built over `embedding::halfvec(dims)`; stored vectors stay float32.
            """
            ALTER TABLE gw_indexes
                ADD COLUMN half_precision_index boolean NOT NULL DEFAULT false
            """,
            """
            ALTER TABLE gw_vector_indexes ADD COLUMN half boolean NOT NULL DEFAULT false,
                DROP CONSTRAINT gw_vector_indexes_pkey,
                ADD PRIMARY KEY (index_id, dims, metric, half)
            """,
        ),
    ),
    Migration(
        13,
        "published WAL position",
        (
            # The primary's WAL position once the published version was committed
            # (replication.py): a hot standby that replayed it serves that version.
            # NULL while unknown (between a publish and its recording): reads go to
            # the primary.
            "ALTER TABLE gw_indexes ADD COLUMN published_lsn pg_lsn",
        ),
    ),
    Migration(
        14,
        "shared ingestion work items",
        (
            # An ingestion operation shared across replicas (workitems.py): its
            # staging version, what it was planned with, and its state; `running`
            # until it publishes (exactly once: a conditional UPDATE in the publish
            # transaction), fails or is cancelled.
            """
            CREATE TABLE gw_ingestion_plans (
                operation_id text COLLATE "C" PRIMARY KEY,
                index_name text COLLATE "C" NOT NULL,
                version bigint NOT NULL,
                spec_key text NOT NULL,
                rebuild boolean NOT NULL,
                state text NOT NULL
                    CHECK (state IN ('running', 'published', 'failed', 'cancelled')),
                error_code text,
                item_count integer NOT NULL,
                summary jsonb NOT NULL,
                -- The replica following it to its end (publish), under a lease like
                -- the items': another replica adopts it once the lease lapses.
                coordinator text,
                coordinator_expires_at timestamptz,
                created_at timestamptz NOT NULL DEFAULT now(),
                finished_at timestamptz
            )
            """,
            "CREATE INDEX gw_ingestion_plans_running ON gw_ingestion_plans (index_name) "
            "WHERE state = 'running'",
            # Its work items (batches of documents in discovery order), each claimed
            # under a lease on the database clock; a done item holds its own counts,
            # so an item run twice (reclaimed) is counted once.
            """
            CREATE TABLE gw_work_items (
                operation_id text COLLATE "C" NOT NULL
                    REFERENCES gw_ingestion_plans (operation_id) ON DELETE CASCADE,
                seq integer NOT NULL,
                document_ids jsonb NOT NULL,
                state text NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'leased', 'done')),
                lease_owner text,
                lease_expires_at timestamptz,
                attempts integer NOT NULL DEFAULT 0,
                result jsonb,
                done_by text,
                done_at timestamptz,
                PRIMARY KEY (operation_id, seq)
            )
            """,
            "CREATE INDEX gw_work_items_open ON gw_work_items (operation_id, seq) "
            "WHERE state <> 'done'",
        ),
    ),
    Migration(
        16,
        "postings partitioned per index",
        (
            # One partition of the postings per index (postings_partition): a bulk
            # publish into an empty index fills a fresh table and builds its index in
            # one sort, then swaps it in (versions._bulk_postings), instead of
            # inserting tens of millions of entries into a shared B-tree one by one;
            # and an index's postings are its own table and index (sizes, VACUUM).
            # Queries are unchanged: `index_id = $1` prunes to the one partition.
            "ALTER TABLE gw_postings RENAME TO gw_postings_unpartitioned",
            "ALTER INDEX gw_postings_impact RENAME TO gw_postings_impact_unpartitioned",
            """
            CREATE TABLE gw_postings (
                index_id integer NOT NULL,
                tenant text COLLATE "C" NOT NULL,
                term text COLLATE "C" NOT NULL,
                chunk bigint NOT NULL,
                tf integer NOT NULL,
                dl integer NOT NULL
            ) PARTITION BY LIST (index_id)
            """,
            """
            DO $$
            DECLARE i integer;
            BEGIN
                FOR i IN SELECT id FROM gw_indexes LOOP
                    EXECUTE format(
                        'CREATE TABLE %I PARTITION OF gw_postings FOR VALUES IN (%s)',
                        'gw_postings_' || i, i);
                END LOOP;
            END $$
            """,
            """
            INSERT INTO gw_postings SELECT p.* FROM gw_postings_unpartitioned p
            WHERE EXISTS (SELECT 1 FROM gw_indexes i WHERE i.id = p.index_id)
            """,
            "DROP TABLE gw_postings_unpartitioned",
            # Built once per partition, after the rows are in.
            """
            CREATE UNIQUE INDEX gw_postings_impact
                ON gw_postings (index_id, tenant, term, tf DESC, dl, chunk)
            """,
            "ANALYZE gw_postings",
        ),
    ),
    Migration(
        17,
        "vector graphs per tenant",
        (
            # One tenant's semantic results and latency must not depend on another
            # tenant's vectors: a tenant with few chunks is searched exactly over its
            # own rows, a large one through its own partial HNSW graph (WHERE index_id
            # = ... AND dims = ... AND tenant = ...), recorded here; the index-wide
            # graphs of gw_vector_indexes are no longer built (vectors.py drops them).
            """
            CREATE TABLE gw_tenant_vector_indexes (
                index_id integer NOT NULL REFERENCES gw_indexes (id) ON DELETE CASCADE,
                tenant text COLLATE "C" NOT NULL,
                dims integer NOT NULL,
                metric text NOT NULL,
                half boolean NOT NULL,
                relname text NOT NULL UNIQUE,
                m integer NOT NULL,
                ef_construction integer NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (index_id, tenant, dims, metric, half)
            )
            """,
        ),
    ),
    Migration(
        18,
        "embedding cache",
        (
            # Document vectors by sha256(embedder descriptor, namespace, chunk text)
            # (stores/embedding_cache.py), so re-ingesting unchanged text embeds
            # nothing. `vector` is little-endian float32 bytes; `used_at` is touched
            # by lookups at most daily and drives retention (rows unused for the
            # retention are swept in bounded batches on every insert).
            """
            CREATE TABLE gw_embedding_cache (
                key bytea PRIMARY KEY CHECK (octet_length(key) = 32),
                vector bytea NOT NULL,
                used_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            "CREATE INDEX gw_embedding_cache_used_at ON gw_embedding_cache (used_at)",
        ),
    ),
    Migration(
        19,
        "operations of indexes on other stores",
        (
            # The default store records the operations of indexes whose data lives
            # elsewhere (an OpenSearch store keeps none): they have no gw_indexes row
            # here, so the row is kept by index name alone.
            "ALTER TABLE gw_operations ALTER COLUMN index_id DROP NOT NULL",
        ),
    ),
    Migration(
        20,
        "document access lists",
        (
            # A document's ACL (domain.access), on the document and on each chunk so
            # searches filter inside the scan like the tenant; NULL: no ACL (every
            # caller of the tenant reads it), so existing rows keep today's meaning.
            "ALTER TABLE gw_documents ADD COLUMN acl text[]",
            "ALTER TABLE gw_chunks ADD COLUMN acl text[]",
            # Whether a tenant holds any chunk with an ACL at all: one probe of this
            # partial index per search, so tenants without ACLs pay nothing else.
            "CREATE INDEX gw_chunks_acl ON gw_chunks (index_id, tenant) WHERE acl IS NOT NULL",
        ),
    ),
    Migration(
        21,
        "block postings",
        (
            # Each term's postings in blocks of at most 128 chunk ids, one row a
            # block with its BM25 bound (largest tf, shortest chunk) and its postings
            # packed (blocks.py): a query reads a term's block directory (an
            # index-only scan of the primary key, whose INCLUDE columns hold it) and
            # only the blocks that can still reach its top k (blockmax.py). Replaces
            # gw_postings, one row a posting.
            """
            CREATE TABLE gw_posting_blocks (
                index_id integer NOT NULL,
                tenant text COLLATE "C" NOT NULL,
                term text COLLATE "C" NOT NULL,
                last_chunk bigint NOT NULL,
                first_chunk bigint NOT NULL,
                n integer NOT NULL,
                max_tf integer NOT NULL,
                min_dl integer NOT NULL,
                chunks bytea NOT NULL,
                tfs bytea NOT NULL,
                dls bytea NOT NULL,
                PRIMARY KEY (index_id, tenant, term, last_chunk) INCLUDE (n, max_tf, min_dl)
            )
            """,
            "SELECT set_config('statement_timeout', '0', true)",
            CUT_SQL.replace("{block_size}", "128").replace(
                "{source}",
                "SELECT index_id, tenant, term, NULL::bigint AS grp, chunk, tf, dl "
                "FROM gw_postings",
            ),
            "DROP TABLE gw_postings",
            "ANALYZE gw_posting_blocks",
        ),
    ),
    Migration(
        22,
        "per-tenant characters of chunk text",
        (
            # What `max_characters_per_tenant` bounds (domain.quotas): the sum of
            # each published chunk's end - start, moved in the publish transaction
            # like the chunk count.
            "ALTER TABLE gw_tenant_stats ADD COLUMN character_count bigint NOT NULL DEFAULT 0",
            "SELECT set_config('statement_timeout', '0', true)",
            """
            UPDATE gw_tenant_stats s SET character_count = x.characters
            FROM (
                SELECT c.index_id, c.tenant, sum(c.end_offset - c.start_offset) AS characters
                FROM gw_chunks c WHERE """
            + _PUBLISHED_ROW
            + """
                GROUP BY 1, 2
            ) x
            WHERE s.index_id = x.index_id AND s.tenant = x.tenant
            """,
        ),
    ),
)

LATEST_VERSION = MIGRATIONS[-1].version
