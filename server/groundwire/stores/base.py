"""The store protocol: durable or in-memory indexes of documents, chunks,
embeddings and metadata, with vector and lexical search and versioned publishing.

Visibility model (shared by every store, verified by the contract suite):
writers stage changes under a new index version (`begin_version`), then
`publish_version` makes all of them visible at once — new chunks appear and the
chunks they supersede disappear in one atomic step — or `discard_version` drops
them and the previously published state keeps serving. Readers therefore see the
old or the new version of a document, never a gap and never a mix.

Version numbers: every publish moves the index's published version to a number
no earlier publish has had (`publication_number`): the version itself when it is
newer than the published one, else (versions of one index stage concurrently and
may publish in any order) a fresh number past every version begun. So the
published version only grows, a reader that asks for at least the version a
publish returned sees it (read-your-writes), and one number always means one
published state (caches may key on it).

Access lists: a document may carry an ACL (domain.access); the scope's readers are
applied with the tenant, before ranking, and by every document-level read.

Tenancy: a document is identified by (tenant, document_id), so tenants of one index
have separate id namespaces and never overwrite, delete or detect each other's
documents. Scope (tenant + metadata filter) is applied inside the store before
ranking, so a filtered search still returns k results when k matching chunks exist,
and lexical collection statistics (BM25's N, document frequencies and average
length) are the scope tenant's own, so one tenant's documents never move another
tenant's scores.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from groundwire.domain.access import PUBLIC_READERS, Readers
from groundwire.domain.analysis import PLAIN, Analyzer
from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.domain.indexes import DistanceMetric as DistanceMetric  # re-exported
from groundwire.domain.indexes import StoreKind
from groundwire.domain.operations import Operation
from groundwire.domain.retrieval import ChunkHit, LexicalQuery, LexicalResult, Scope


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """What an index is built with. `embedding` is None for lexical-only indexes.

    `embedding` and `chunking` are descriptors (strings) recorded with every
    published version; a change forces a full rebuild, never a mix. `analyzer` turns
    staged text into index terms; its descriptor is part of `chunking` (see
    app/factories.py), so changing it rebuilds the index like a chunking change.

    `half_precision_index`: the approximate vector index (PostgreSQL's HNSW graph)
    holds half-precision copies of the vectors (pgvector `halfvec`), about half the
    size; the stored vectors, the final ranking and the scores stay float32, so only
    recall can move. Stores without an approximate index ignore it."""

    name: str
    embedding: str | None
    dimensions: int | None
    metric: DistanceMetric = DistanceMetric.COSINE
    chunking: str = ""
    analyzer: Analyzer = PLAIN
    half_precision_index: bool = False


@dataclass(frozen=True, slots=True)
class IndexState:
    """Published state of an index."""

    name: str
    published_version: int
    embedding: str | None
    dimensions: int | None
    chunking: str
    document_count: int
    chunk_count: int


def publication_number(published: int, version: int, next_version: int) -> tuple[int, int]:
    """(the published version after publishing `version`, the index's next version
    number after it): `version` when it is newer than `published`; else a fresh
    number, `next_version`, which the counter then moves past (no version is ever
    begun under it)."""
    if version > published:
        return version, next_version
    return next_version, next_version + 1


class DocumentKey(NamedTuple):
    """A document's identity within an index: ids are unique per tenant."""

    tenant: str
    document_id: str


@dataclass(frozen=True, slots=True)
class DocumentRecord:
    """A document as stored: stable identity, attribution and hash for change detection."""

    document_id: str
    source_id: str
    content_hash: str
    title: str = ""
    tenant: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    # Who may read it (domain.access); empty: every caller of its tenant. Stored
    # with the document and every chunk, applied by searches like the tenant.
    acl: frozenset[str] = frozenset()

    @property
    def key(self) -> DocumentKey:
        return DocumentKey(self.tenant, self.document_id)


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    """A chunk as stored; its hits carry the document's metadata."""

    chunk_id: str
    ordinal: int
    start: int
    end: int
    text: str
    section: str = ""


@dataclass(frozen=True, slots=True)
class StagedDocument:
    """One document and all its chunks, with one embedding row per chunk (or None
    for lexical-only indexes)."""

    document: DocumentRecord
    chunks: Sequence[ChunkRecord]
    embeddings: npt.NDArray[np.float32] | None


@dataclass(frozen=True, slots=True)
class LiveDocument:
    """What change detection needs to know about a published document."""

    document_id: str
    source_id: str
    content_hash: str
    tenant: str

    @property
    def key(self) -> DocumentKey:
        return DocumentKey(self.tenant, self.document_id)


@dataclass(frozen=True, slots=True)
class DocumentInfo:
    """A published document as listed (content-free): its identity, attribution,
    size in characters of its normalized text (the end of its last chunk), chunk
    count, the version that wrote it and when it was staged (UNIX seconds)."""

    document_id: str
    source_id: str
    content_hash: str
    title: str
    tenant: str
    metadata: Mapping[str, str]
    chunk_count: int
    characters: int
    version: int
    ingested_at: float
    acl: frozenset[str] = frozenset()


def store_unavailable(message: str) -> GroundwireError:
    """The store cannot be reached or failed; retryable."""
    return GroundwireError(ErrorKind.UNAVAILABLE, "STORE_UNAVAILABLE", message)


def embedding_mismatch(message: str) -> GroundwireError:
    """Vectors do not fit the index's embedding space."""
    return GroundwireError(ErrorKind.FAILED_PRECONDITION, "EMBEDDING_MISMATCH", message)


def version_not_staging() -> GroundwireError:
    """The version is not (or no longer) staging: published, discarded or unknown."""
    return GroundwireError(
        ErrorKind.FAILED_PRECONDITION, "VERSION_NOT_STAGING", "index version is not staging"
    )


def index_missing(name_len: int) -> GroundwireError:
    """The store has no such index (a wiring error: indexes are declared in config)."""
    return GroundwireError(
        ErrorKind.NOT_FOUND,
        "INDEX_NOT_FOUND",
        f"index not found in store (name of {name_len} chars)",
    )


# A graph (HNSW) search for k rows keeps at least this many candidates a row: a walk
# returns the best candidates it found, so at k candidates its last rows are its
# misses. Measured on SciFact (13.7k MiniLM chunks, a leg of 100): PostgreSQL nDCG@10
# -0.0012 against exact search at 1 a row, equal at 4 (bench/bench_semantic_depth.py);
# OpenSearch recall@100 0.9937 at 1 a row, 0.9997 at 4 (bench/bench_opensearch_exact.py
# --real); docs/explanation/benchmarks.md.
CANDIDATES_PER_ROW = 4


def graph_candidates(configured: int, k: int, limit: int) -> int:
    """The candidates of a graph search for k rows: the configured ef_search, raised
    to CANDIDATES_PER_ROW a row, at most the engine's `limit`."""
    return min(limit, max(configured, CANDIDATES_PER_ROW * k))


def check_staged(spec: IndexSpec, staged: Sequence[StagedDocument]) -> None:
    """Reject a batch before anything is written: one embedding row per chunk, the
    index's dimension, finite values; none at all for lexical-only indexes."""
    for item in staged:
        emb = item.embeddings
        if spec.dimensions is None:
            if emb is not None:
                raise embedding_mismatch("lexical-only index received embeddings")
            continue
        if emb is None:
            raise embedding_mismatch("semantic index received a document without embeddings")
        if emb.ndim != 2 or emb.shape[0] != len(item.chunks):
            raise embedding_mismatch("embedding count does not match chunk count")
        if emb.shape[1] != spec.dimensions:
            raise embedding_mismatch(
                f"embedding dimension {emb.shape[1]} does not match "
                f"index dimension {spec.dimensions}"
            )
        if not np.isfinite(emb).all():
            raise embedding_mismatch("embeddings contain non-finite values")


class Store(Protocol):
    """A vector + lexical store. Every method is safe to call concurrently."""

    @property
    def kind(self) -> StoreKind:
        """Where the store keeps its indexes."""
        ...

    async def ensure_index(self, spec: IndexSpec) -> IndexState:
        """Create the index if missing and return its published state. Never deletes
        data; a spec that differs from the published one is reported by the state
        (the ingestion pipeline decides to rebuild)."""
        ...

    async def index_state(self, name: str) -> IndexState:
        """Published state of an index (raises INDEX_NOT_FOUND)."""
        ...

    async def begin_version(self, name: str) -> int:
        """Allocate a new staging version (> every earlier version)."""
        ...

    async def stage_documents(
        self, name: str, version: int, documents: Sequence[StagedDocument]
    ) -> None:
        """Stage documents under `version`, replacing any published chunks of the same
        document keys (tenant, id) when the version is published. Validates before writing
        (`check_staged`); on failure nothing of this call is stored."""
        ...

    async def stage_deletions(self, name: str, version: int, keys: Sequence[DocumentKey]) -> int:
        """Stage the removal of documents; returns how many are currently published."""
        ...

    async def publish_version(self, name: str, version: int, spec: IndexSpec) -> IndexState:
        """Atomically make every change staged under `version` visible and record
        `spec` as the published embedding/chunking descriptors."""
        ...

    async def discard_version(self, name: str, version: int) -> None:
        """Drop everything staged under `version`; the published state is untouched."""
        ...

    async def live_documents(
        self, name: str, keys: Collection[DocumentKey] | None = None
    ) -> Mapping[DocumentKey, LiveDocument]:
        """Published documents by key (for change detection): all of them, or those
        among `keys`."""
        ...

    async def has_documents(
        self, name: str, tenant: str, readers: Readers = PUBLIC_READERS
    ) -> bool:
        """Whether any published document of the index belongs to `tenant` and is
        readable by `readers` (cheap: an existence check; it reveals nothing of
        other tenants or of documents the readers may not read)."""

    async def tenant_counts(
        self, name: str, tenant: str, readers: Readers = PUBLIC_READERS
    ) -> tuple[int, int]:
        """`tenant`'s published documents and chunks in the index that `readers`
        may read: the store's per-tenant statistics when the readers pass every
        document (never another tenant's; no listing), else a count."""
        ...

    async def tenant_characters(self, name: str, tenant: str) -> int:
        """The characters of chunk text `tenant`'s published chunks in the index
        store, every access list included: the sum of each chunk's end - start
        (domain.quotas: what `max_characters_per_tenant` bounds). From the store's
        per-tenant statistics, or an aggregate; never a listing of texts."""
        ...

    async def list_documents(
        self,
        name: str,
        tenant: str,
        limit: int,
        after: str | None,
        readers: Readers = PUBLIC_READERS,
    ) -> list[DocumentInfo]:
        """At most `limit` of `tenant`'s published documents that `readers` may
        read with an id after `after`, ordered by id (code point order)."""
        ...

    async def get_document(
        self, name: str, tenant: str, document_id: str, readers: Readers = PUBLIC_READERS
    ) -> DocumentInfo | None:
        """One of `tenant`'s published documents, or None (also when `readers` may
        not read it: indistinguishable from a missing one)."""
        ...

    async def document_chunks(
        self,
        name: str,
        tenant: str,
        document_id: str,
        limit: int,
        readers: Readers = PUBLIC_READERS,
    ) -> list[ChunkRecord]:
        """The first `limit` chunks of one of `tenant`'s published documents, in
        order ([] when it has none, is not published or `readers` may not read it)."""
        ...

    async def search_vector(
        self, name: str, vector: npt.NDArray[np.float32], k: int, scope: Scope
    ) -> list[ChunkHit]:
        """At most k published chunks in `scope`, best first by the index metric."""
        ...

    async def search_lexical(
        self, name: str, query: LexicalQuery, k: int, scope: Scope
    ) -> LexicalResult:
        """At most k published chunks in `scope` matching `query` (every phrase must
        occur), best first by BM25 over the scope tenant's published chunks (the
        metadata filter selects rows; it does not change the statistics). At most
        `query.max_terms` distinct terms are scored (`bm25.select_terms`). The cost
        depends on the scope tenant's own postings only, never on other tenants'."""
        ...

    async def close(self) -> None: ...


class IngestionLock(Protocol):
    """Exclusive right to ingest one index, across every replica sharing the store."""

    async def acquire(self) -> bool:
        """Try to take the lock without waiting; True when taken."""
        ...

    async def release(self) -> None: ...


class OperationLog(Protocol):
    """Durable (PostgreSQL) or process-local (memory) record of ingestion operations."""

    async def save_operation(self, operation: Operation) -> None:
        """Insert or replace the operation with this id."""
        ...

    async def get_operation(self, operation_id: str) -> Operation | None: ...

    async def list_operations(
        self, index_name: str | None, limit: int, before: tuple[float, str] | None
    ) -> list[Operation]:
        """Newest first (create_time, id descending), strictly before `before`."""
        ...

    async def unfinished_operations(self) -> list[Operation]:
        """Operations recorded as QUEUED or RUNNING (after a crash: interrupted)."""
        ...

    def ingestion_lock(self, index_name: str) -> IngestionLock: ...


class CheckpointState(enum.Enum):
    """Where a checkpointed execution stands."""

    # Prepared (or between tool steps): resumable once no replica holds its lease.
    RUNNING = "RUNNING"
    # Waiting for the caller's results of client-executed tools.
    REQUIRES_ACTION = "REQUIRES_ACTION"
    # Finished: the payload holds the recorded result.
    COMPLETED = "COMPLETED"


@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    """One execution's checkpoint as stored: the keys the store filters on and an
    opaque payload (the runtime's serialized state; never logged)."""

    execution_id: str
    tenant: str
    agent_id: str
    state: CheckpointState
    payload: bytes


class ClaimStatus(enum.Enum):
    # The caller now holds the execution's lease.
    CLAIMED = "CLAIMED"
    # Another claim's lease is live: the execution runs elsewhere.
    BUSY = "BUSY"
    # Completed: the record holds the result; no lease was taken.
    DONE = "DONE"
    # Unknown, expired or another tenant's (indistinguishable by design).
    MISSING = "MISSING"


@dataclass(frozen=True, slots=True)
class Claim:
    status: ClaimStatus
    record: CheckpointRecord | None = None


class CheckpointStore(Protocol):
    """Execution checkpoints: durable (PostgreSQL) or process-local (memory), each
    row kept for a bounded retention and deleted once expired.

    A lease makes running an execution exclusive across replicas: whoever creates or
    claims a checkpoint holds it until it releases it or the lease lapses (a crashed
    replica), and only the holder may update the row. Lookups are by (execution id,
    tenant): another tenant's id is as missing as an unknown one."""

    async def create_checkpoint(
        self, record: CheckpointRecord, owner: str, lease_s: float, retention_s: float
    ) -> None:
        """Insert a new checkpoint held by `owner` (and drop expired rows)."""
        ...

    async def get_checkpoint(self, execution_id: str, tenant: str) -> CheckpointRecord | None:
        """The live (unexpired) checkpoint of `tenant` with this id, without claiming it."""
        ...

    async def claim_checkpoint(
        self, execution_id: str, tenant: str, owner: str, lease_s: float
    ) -> Claim:
        """Take the lease of a resumable checkpoint atomically (see ClaimStatus)."""
        ...

    async def update_checkpoint(
        self,
        execution_id: str,
        owner: str,
        state: CheckpointState,
        payload: bytes,
        retention_s: float,
        release: bool,
    ) -> bool:
        """Replace state and payload and restart the retention, only while `owner`
        holds the lease (False otherwise); `release` gives the lease up."""
        ...

    async def renew_lease(self, execution_id: str, owner: str, lease_s: float) -> bool:
        """Extend `owner`'s lease; False when it is no longer the holder."""
        ...

    async def release_checkpoint(self, execution_id: str, owner: str) -> None:
        """Give up `owner`'s lease (no-op when not the holder)."""
        ...

    async def delete_expired_checkpoints(self) -> int:
        """Delete every checkpoint past its retention; returns how many."""
        ...


@runtime_checkable
class VersionWatch(Protocol):
    """A store that knows each index's published version without a round trip and
    can wait for a newer one (PostgreSQL: the change feed shared by replicas)."""

    async def await_version(self, name: str, min_version: int, wait_s: float) -> int:
        """The published version reads of `name` see at least, once it reaches
        `min_version` or `wait_s` passed (the caller compares)."""
        ...


class SharedStaging(Protocol):
    """A store whose staging accepts one version from several processes, so the
    work items of one ingestion operation can be run by every replica
    (ingestion/shared.py). It sets `shared_staging = True` (a promise: any process
    may stage into a version another began, re-staging a document under the same
    version replaces the earlier copy whoever staged it, and the publish takes
    every process's staging), and may define `share_version`, which the process
    that began a version calls before other processes stage into it.

    PostgreSQL and OpenSearch are such stores. Memory and Qdrant's embedded engine
    are not: their data lives in one process (Qdrant's edge shard in process-local
    files), so their ingestion runs in the process that starts it."""

    shared_staging: bool

    async def share_version(self, name: str, version: int) -> None: ...

    async def version_state(self, name: str, version: int) -> VersionState:
        """Whether `version` is still staging, was published, or is gone
        (discarded, or never begun): how a replica that adopts an ingestion whose
        coordinator died mid-publish learns whether the publish happened."""
        ...


class VersionState(enum.Enum):
    STAGING = "staging"
    PUBLISHED = "published"
    GONE = "gone"


def shares_staging(store: object) -> bool:
    """Whether `store` is a SharedStaging store."""
    return getattr(store, "shared_staging", False) is True


async def share_version(store: object, name: str, version: int) -> None:
    """Tell a SharedStaging store that other processes stage into `version` too."""
    share = getattr(store, "share_version", None)
    if share is not None:
        await share(name, version)


class PlanState(enum.Enum):
    """Where an ingestion operation shared across replicas stands."""

    RUNNING = "running"
    PUBLISHED = "published"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class WorkPlan:
    """An ingestion operation shared across replicas: its staging version, what it
    was planned with (`spec_key`: a replica configured otherwise takes none of its
    items), its state and progress. `summary` holds the plan's own counts
    (discovered, DUPLICATE_ID failures) as JSON."""

    operation_id: str
    index_name: str
    version: int
    spec_key: str
    rebuild: bool
    state: PlanState
    item_count: int
    done_count: int = 0
    error_code: str | None = None
    summary: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WorkItem:
    """One claimed batch of a plan's documents (ids in discovery order); `attempt`
    numbers the claims of the item (a reclaimed item has a higher one)."""

    operation_id: str
    seq: int
    document_ids: tuple[str, ...]
    attempt: int
    index_name: str
    version: int
    rebuild: bool


class WorkQueue(Protocol):
    """Work items of shared ingestion operations, claimed by every replica under
    leases on the store's clock (PostgreSQL: `FOR UPDATE SKIP LOCKED`). Only the
    holder of an item's current claim may complete it; a claim whose lease lapsed
    is lost and the item claimable again."""

    @property
    def owner(self) -> str:
        """This replica's identity on the leases it holds."""
        ...

    async def create_plan(
        self, plan: WorkPlan, batches: Sequence[Sequence[str]], lease_s: float
    ) -> None:
        """Record a RUNNING plan and its items (one per batch of document ids),
        coordinated by this replica under a lease of `lease_s`."""
        ...

    async def coordinate(self, operation_id: str, lease_s: float, *, adopt: bool) -> bool:
        """Renew this replica's coordination lease of a plan, or with `adopt` take it
        over once the coordinator's lease lapsed; True when held."""
        ...

    async def claim(self, indexes: Mapping[str, str], lease_s: float) -> WorkItem | None:
        """Claim one pending item (or one whose lease lapsed) of a running plan of
        one of `indexes` (name -> spec_key this replica serves); None when none."""
        ...

    async def renew(self, item: WorkItem, lease_s: float) -> bool:
        """Extend the claim; False when it is lost or the plan is no longer running."""
        ...

    async def complete(self, item: WorkItem, result: Mapping[str, object]) -> bool:
        """Record the item done with its counts, only while the claim holds."""
        ...

    async def release(self, item: WorkItem) -> None:
        """Give an unfinished item back (claimable at once by any replica)."""
        ...

    async def get_plan(self, operation_id: str) -> WorkPlan | None: ...

    async def running_plans(self) -> list[WorkPlan]: ...

    async def orphaned_plans(self) -> list[WorkPlan]:
        """Plans (in any state) whose operation is not recorded as ended and whose
        coordinator's lease lapsed: a replica adopts them to finish and record them."""
        ...

    async def item_results(self, operation_id: str) -> list[tuple[tuple[str, ...], object]]:
        """Every item's document ids and its recorded result (None until done)."""
        ...

    async def end_plan(self, operation_id: str, state: PlanState, error_code: str | None) -> bool:
        """Move a RUNNING plan to FAILED or CANCELLED; False when it was not running."""
        ...

    async def publish(self, plan: WorkPlan, spec: IndexSpec, store: Store | None = None) -> bool:
        """Publish the plan's version and mark the plan PUBLISHED in one transaction,
        only when it is RUNNING with every item done; False (nothing published)
        otherwise. At most one call per plan ever returns True. `store`: the store the
        plan's index is placed on, when it is not the queue's own (OpenSearch): its
        publish runs inside the queue's transaction, committed once it succeeded."""
        ...

    async def wait(self, timeout_s: float) -> None:
        """Return when a plan or item changed (any replica), or after `timeout_s`."""
        ...
