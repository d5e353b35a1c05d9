"""`[store]` and `[stores.NAME]`: where indexes live (memory, PostgreSQL with its
pool, standbys, fair shares and shared ingestion, OpenSearch, Qdrant, or a plug-in
kind)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, model_validator

from groundwire.app.config_base import SecretRef, StrictModel, http_base_url
from groundwire.app.plugins import STORES, plugin_kind
from groundwire.domain.indexes import StoreKind

_OPENSEARCH_KEYS = frozenset(
    {
        "hosts",
        "username",
        "password",
        "api_key",
        "ca_file",
        "verify_certs",
        "request_timeout_ms",
        "shards",
        "replicas",
        "index_prefix",
        "superseded_grace_ms",
        "bulk_chunks",
        "bulk_max_mib",
        "bulk_in_flight",
        "first_build_max_segments",
        "exact_search_chunks",
        "shared_tenant_chunks",
    }
)


_QDRANT_KEYS = frozenset({"path", "url", "search_threads", "indexing_threshold_kb"})
# OpenSearch keys a kind = "qdrant" store with a url takes too (same meaning).
_QDRANT_SERVER_KEYS = frozenset(
    {"api_key", "ca_file", "request_timeout_ms", "index_prefix", "superseded_grace_ms"}
)


class StoreConfig(StrictModel):
    """Where indexes live. `postgres` with no DSN starts the embedded PostgreSQL."""

    # memory, postgres, or a kind a plug-in registers (entry point group
    # groundwire.stores), which gets the section's other keys as its options.
    kind: StoreKind | Annotated[str, AfterValidator(plugin_kind(STORES, frozenset(StoreKind)))] = (
        Field(StoreKind.MEMORY, union_mode="left_to_right")
    )
    options: dict[str, Any] = Field(default_factory=dict)
    dsn: SecretRef | None = None
    data_dir: Path = Path("var/pgdata")
    pool_min_size: int = Field(1, ge=0, le=100)
    pool_max_size: int = Field(8, ge=1, le=200)
    statement_timeout_ms: int = Field(30_000, ge=100)
    connect_timeout_ms: int = Field(5_000, ge=100)
    # Fair shares of the pool (postgres): `background_connections` of it are kept
    # for background work (ingestion runs, control-plane writes; at most
    # pool_max_size - 1), the tenants' calls share the rest, one tenant at most
    # `max_connections_per_tenant` (0: a quarter of the tenants' connections,
    # rounded up), waiting tenants served round-robin.
    background_connections: int = Field(2, ge=0, le=100)
    max_connections_per_tenant: int = Field(0, ge=0, le=200)
    hnsw_m: int = Field(16, ge=2, le=100)
    hnsw_ef_construction: int = Field(64, ge=4, le=1000)
    hnsw_ef_search: int = Field(100, ge=1, le=1000)
    # The most memory one HNSW graph build may take (postgres; its
    # maintenance_work_mem). Each build asks for the graph's estimated size: about
    # (4 x dims + 48 x hnsw_m + 136) x 1.1 bytes a chunk, 2.4 GB for a million
    # 384-d chunks at m=16; a graph larger than this bound is built several times
    # slower. A server maintenance_work_mem set higher wins.
    hnsw_build_memory_mb: int = Field(4_096, ge=64, le=1_048_576)
    # The most memory the lexical engine keeps of head terms' whole posting lists,
    # scored (postgres; 12 bytes a posting, per published version, least recently
    # used out first): a query over head words whose blocks cannot be skipped reads
    # them from here instead of the database. A million chunks' 50 most common words
    # take ~250 MB; 0 keeps none.
    lexical_list_cache_mb: int = Field(512, ge=0, le=1_048_576)
    # Hot standbys of `dsn` (streaming replication) that serve retrieval reads of
    # versions they have replayed; writes always go to `dsn`.
    read_dsns: list[SecretRef] = Field(default_factory=list, max_length=16)
    # How often each replica re-reads every index's published version (bounds a
    # missed change notification), and probes each standby's replay position.
    change_poll_ms: int = Field(1_000, ge=10, le=60_000)
    standby_probe_ms: int = Field(100, ge=10, le=60_000)
    # How often the server checks that the store answers (health service names
    # groundwire.store.NAME and those of the store's indexes follow it).
    health_check_ms: int = Field(1_000, ge=100, le=60_000)
    # Ingestion shared across replicas (kind = "postgres"; ingestion/shared.py):
    # an operation's documents are split into work items of `work_item_documents`
    # that every replica claims under a lease of `work_lease_ms` (database clock),
    # renewed every `work_renew_ms`; an idle replica looks for items every
    # `work_poll_ms` besides being notified; `work_concurrency` items at once per
    # replica. Read on the default store only; it covers the indexes on it and on
    # OpenSearch stores. `shared_ingestion = false`: each operation runs wholly
    # inside the replica that started it.
    shared_ingestion: bool = True
    # kind = "opensearch" (stores/opensearch; README "Indexes on OpenSearch"): the
    # cluster's URLs, credentials by reference (basic auth, or an API key), a CA
    # file for https, and how each tenant's index is laid out. The default store
    # keeps operations, checkpoints, usage and the ingestion lock.
    hosts: list[str] = Field(default_factory=list, max_length=64)
    username: str | None = Field(None, min_length=1, max_length=256)
    password: SecretRef | None = None
    api_key: SecretRef | None = None
    ca_file: Path | None = None
    verify_certs: bool = True
    request_timeout_ms: int = Field(30_000, ge=100, le=600_000)
    shards: int = Field(1, ge=1, le=1024)
    replicas: int = Field(1, ge=0, le=16)
    index_prefix: str = Field("groundwire-", pattern=r"^[a-z0-9][a-z0-9_-]{0,40}$")
    superseded_grace_ms: int = Field(30_000, ge=0, le=3_600_000)
    bulk_chunks: int = Field(500, ge=1, le=10_000)
    bulk_max_mib: int = Field(8, ge=1, le=100)
    bulk_in_flight: int = Field(2, ge=1, le=16)
    # A first build of a tenant's index (no published version before it) is
    # force-merged to at most this many segments before its alias swap (0: never):
    # a k-NN query searches each segment's graph on its own, so fewer segments
    # answer faster and with better recall; the merge costs node CPU at publish
    # time (docs/explanation/benchmarks.md has the figures).
    first_build_max_segments: int = Field(0, ge=0, le=1000)
    # A tenant whose published index holds at most this many chunks is searched
    # exactly (every vector scored, by Lucene's exact path; 0: never), larger ones
    # through the graph with max(hnsw_ef_search, 4 x k) candidates: HNSW loses recall
    # on small crowded collections, and exact search over a few thousand vectors
    # costs little (docs/explanation/benchmarks.md has the figures). At most 10,000,
    # OpenSearch's bound on a k-NN query's k.
    exact_search_chunks: int = Field(10_000, ge=0, le=10_000)
    # A tenant whose version holds at most this many chunks shares its index's pool,
    # one physical index for every such tenant (0: every tenant has an index of its
    # own, a shard each: a node holds cluster.max_shards_per_node of them, 1,000 by
    # default). Its alias names its version in the pool by a filter; its lexical
    # leg is scored with its own statistics by a script, its semantic leg exactly;
    # a version past the bound moves the tenant to an index of its own for good
    # (the scaling-out tutorial). At most 10,000 (exact search's bound).
    shared_tenant_chunks: int = Field(0, ge=0, le=10_000)
    # kind = "qdrant" (stores/qdrant; the scaling-out tutorial's "Indexes on
    # Qdrant"): Qdrant's engine in process (qdrant-edge-py) keeping a shard per
    # published version under `path`, which one process owns (a second fails to
    # open it). `search_threads`: the engine's search threads per shard (0: one
    # per CPU); a segment gets its HNSW graphs (one per tenant) once it holds
    # `indexing_threshold_kb` of vectors, below that it is searched exactly. The
    # HNSW keys above apply (hnsw_m is each tenant graph's m). The default store
    # keeps operations, checkpoints, usage and the ingestion lock.
    path: Path | None = None
    # Or `url`: a Qdrant server (through qdrant-client), a collection per published
    # version named `index_prefix` + a hash of the index, swapped by alias; with
    # `api_key` by reference, `ca_file` for https, `request_timeout_ms` and
    # `superseded_grace_ms` (the OpenSearch keys above, same meaning); each replica
    # re-reads an index's alias every `change_poll_ms`. `search_threads` is the
    # embedded engine's only.
    url: str | None = Field(None, max_length=2048)
    search_threads: int = Field(0, ge=0, le=256)
    indexing_threshold_kb: int = Field(10_000, ge=1, le=10_000_000)
    work_item_documents: int = Field(32, ge=1, le=10_000)
    work_lease_ms: int = Field(15_000, ge=200, le=600_000)
    work_renew_ms: int = Field(5_000, ge=50, le=300_000)
    work_poll_ms: int = Field(1_000, ge=20, le=60_000)
    work_concurrency: int = Field(1, ge=1, le=64)

    @model_validator(mode="before")
    @classmethod
    def _plugin_keys(cls, data: object) -> object:
        # A plug-in store's other keys are its options, as in every plug-in section.
        if isinstance(data, dict):
            kind = data.get("kind")
            if isinstance(kind, str) and kind not in {k.value for k in StoreKind}:
                return {"kind": kind, "options": {k: v for k, v in data.items() if k != "kind"}}
        return data

    @model_validator(mode="after")
    def _plugin_options(self) -> StoreConfig:
        if self.options and isinstance(self.kind, StoreKind):
            raise ValueError(f"options: only a plug-in store takes options, not {self.kind}")
        if self.read_dsns and (self.kind != StoreKind.POSTGRES or self.dsn is None):
            raise ValueError("read_dsns: standbys need kind = 'postgres' and a primary dsn")
        if self.kind == StoreKind.OPENSEARCH:
            if not self.hosts:
                raise ValueError("hosts: an opensearch store needs the cluster's URLs")
            for i, host in enumerate(self.hosts):
                try:
                    http_base_url(host)
                except ValueError:
                    raise ValueError(
                        f"hosts[{i}]: an absolute http(s) URL naming a host, without"
                        " credentials, query or fragment"
                    ) from None
            if self.password is not None and self.username is None:
                raise ValueError("password: give the username it belongs to")
            if self.api_key is not None and self.username is not None:
                raise ValueError("api_key: use basic auth or an API key, not both")
            if self.dsn is not None:
                raise ValueError("dsn: an opensearch store has hosts, not a dsn")
        else:
            allowed = _QDRANT_SERVER_KEYS if self.kind == StoreKind.QDRANT and self.url else set()
            stray = sorted(self.model_fields_set & _OPENSEARCH_KEYS - allowed)
            if stray:
                raise ValueError(f"{stray[0]}: only a kind = 'opensearch' store takes it")
        if self.kind == StoreKind.QDRANT:
            self._check_qdrant()
        else:
            stray = sorted(self.model_fields_set & _QDRANT_KEYS)
            if stray:
                raise ValueError(f"{stray[0]}: only a kind = 'qdrant' store takes it")
        if self.work_renew_ms * 2 > self.work_lease_ms:
            raise ValueError(
                "work_renew_ms: renew leases at most every half of work_lease_ms "
                "(a third is the default), or a slow renewal loses the lease"
            )
        return self

    def _check_qdrant(self) -> None:
        if (self.path is None) == (self.url is None):
            raise ValueError(
                "path: a qdrant store needs exactly one of path (the embedded engine's"
                " directory) or url (a Qdrant server)"
            )
        if self.dsn is not None:
            raise ValueError("dsn: a qdrant store has a path or a url, not a dsn")
        if self.url is not None:
            try:
                http_base_url(self.url)
            except ValueError:
                raise ValueError(
                    "url: an absolute http(s) URL naming a host, without credentials,"
                    " query or fragment (the API key goes in api_key, by reference)"
                ) from None
            if "search_threads" in self.model_fields_set:
                raise ValueError("search_threads: only the embedded engine (path) takes it")
