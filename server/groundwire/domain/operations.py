"""Ingestion operations as values: lifecycle states, triggers, counts,
per-document failures and the error that stopped a run (content-free).
Persisted by the store, streamed by the api."""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum

from groundwire.domain.usage import EmbeddingUsage

MAX_LISTED_FAILURES = 100


class OperationState(enum.Enum):
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        return self in (OperationState.SUCCEEDED, OperationState.FAILED, OperationState.CANCELLED)


class OperationTrigger(enum.Enum):
    MANUAL = "MANUAL"
    STARTUP = "STARTUP"
    SCHEDULE = "SCHEDULE"
    RELOAD = "RELOAD"  # a configuration reload changed what the index ingests
    WATCH = "WATCH"  # the WATCH strategy saw files of the sources change
    # UpsertDocuments, UploadDocument or DeleteDocuments: watchable while it runs
    # on the replica serving it, recorded in the log once it ended
    # (ingestion/push_operations.py).
    PUSH = "PUSH"


class DocumentFailureReason(StrEnum):
    """Why a document was not ingested (stable codes, no content;
    DocumentFailure.reason in the contract)."""

    UNREADABLE = "UNREADABLE"
    TOO_LARGE = "TOO_LARGE"
    NOT_UTF8 = "NOT_UTF8"
    BINARY = "BINARY"
    EMPTY = "EMPTY"
    UNSUPPORTED_FORMAT = "UNSUPPORTED_FORMAT"
    PARSE_FAILED = "PARSE_FAILED"
    DUPLICATE_ID = "DUPLICATE_ID"
    # `url` sources: the URL policy refused the URL, an address or a redirect target;
    # the fetch failed (DNS, connection, TLS, HTTP status); it timed out; it
    # redirected more often than allowed.
    URL_REFUSED = "URL_REFUSED"
    FETCH_FAILED = "FETCH_FAILED"
    FETCH_TIMEOUT = "FETCH_TIMEOUT"
    TOO_MANY_REDIRECTS = "TOO_MANY_REDIRECTS"
    # A chunk exceeds the embedding model's token window and the index rejects
    # over-long chunks instead of truncating them.
    CHUNK_TOO_LONG = "CHUNK_TOO_LONG"
    # Parsing the file needs more work than its bounds allow: the parser worker's
    # CPU or time budget, or a structure bound of its format (a word, a page's
    # geometry, a spreadsheet's cells, a package part's elements or nesting).
    TOO_COMPLEX = "TOO_COMPLEX"


class OperationErrorCode(StrEnum):
    """Why an operation FAILED (Operation.error_code in the contract): the reason
    of the error that stopped the run, from this closed set."""

    EMBEDDING_PROVIDER_FAILED = "EMBEDDING_PROVIDER_FAILED"
    EMBEDDING_MISMATCH = "EMBEDDING_MISMATCH"
    INDEX_NOT_FOUND = "INDEX_NOT_FOUND"
    STORE_UNAVAILABLE = "STORE_UNAVAILABLE"
    STORE_ERROR = "STORE_ERROR"
    STORE_DATA_REJECTED = "STORE_DATA_REJECTED"
    # The store has no room (an OpenSearch cluster at its shard bound).
    STORE_CAPACITY_EXHAUSTED = "STORE_CAPACITY_EXHAUSTED"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"  # a store statement timed out
    VERSION_NOT_STAGING = "VERSION_NOT_STAGING"
    # A push into an index built with another embedding model or chunking
    # policy: it must be ingested first.
    INDEX_REBUILD_REQUIRED = "INDEX_REBUILD_REQUIRED"
    # A process ended while the operation ran (found at the next start-up).
    INTERRUPTED = "INTERRUPTED"
    # A source could not be read: its credentials were refused or are not set,
    # its server was unreachable or failed, or its endpoint is refused by the
    # URL policy (s3 sources; the message names the source).
    SOURCE_ACCESS_DENIED = "SOURCE_ACCESS_DENIED"
    SOURCE_UNAVAILABLE = "SOURCE_UNAVAILABLE"
    SOURCE_REFUSED = "SOURCE_REFUSED"
    # Anything else: an unexpected exception, or an error reason outside this set.
    INTERNAL = "INTERNAL"

    @classmethod
    def for_reason(cls, reason: str) -> OperationErrorCode:
        """The code for an error reason; INTERNAL for a reason outside the set,
        so the recorded code stays within what the contract documents."""
        try:
            return cls(reason)
        except ValueError:
            return cls.INTERNAL


# What each reason means, for a reader (content-free: no file, no text).
_FAILURE_MESSAGES: dict[str, str] = {
    DocumentFailureReason.UNREADABLE: "the file could not be read",
    DocumentFailureReason.TOO_LARGE: "the file is larger than the index's max_file_bytes",
    DocumentFailureReason.NOT_UTF8: "the text is not UTF-8",
    DocumentFailureReason.BINARY: "the file is not text",
    DocumentFailureReason.EMPTY: "the file has no text",
    DocumentFailureReason.UNSUPPORTED_FORMAT: "no loader reads this media type",
    DocumentFailureReason.PARSE_FAILED: "the file could not be parsed",
    DocumentFailureReason.DUPLICATE_ID: "another document has the same id",
    DocumentFailureReason.URL_REFUSED: "the URL policy refused the URL",
    DocumentFailureReason.FETCH_FAILED: "the URL could not be fetched",
    DocumentFailureReason.FETCH_TIMEOUT: "fetching the URL timed out",
    DocumentFailureReason.TOO_MANY_REDIRECTS: "the URL redirected too often",
    DocumentFailureReason.CHUNK_TOO_LONG: (
        "a chunk exceeds the embedding model's token window and the index rejects such chunks"
    ),
    DocumentFailureReason.TOO_COMPLEX: "parsing the file needs more than its bounds allow",
}


def failure_message(reason: str) -> str:
    """A reader's explanation of a document failure's reason ("" for none known)."""
    return _FAILURE_MESSAGES.get(reason, "")


@dataclass(frozen=True, slots=True)
class DocumentFailureInfo:
    """A document that was not ingested and the stable reason code."""

    document_id: str
    reason: DocumentFailureReason


# Reasons a document is skipped rather than failed: no loader reads its type.
SKIP_REASONS = frozenset({DocumentFailureReason.UNSUPPORTED_FORMAT})


class OperationWarning(StrEnum):
    """Something a SUCCEEDED operation's user must know (Operation.warnings)."""

    # The sources yielded no document to ingest (none found, or none readable):
    # the published version holds no configured document.
    NO_DOCUMENTS = "NO_DOCUMENTS"


@dataclass(frozen=True, slots=True)
class OperationCounts:
    discovered: int = 0
    ingested: int = 0
    unchanged: int = 0
    failed: int = 0
    deleted: int = 0
    chunks_written: int = 0
    # Documents found whose type no enabled loader reads (not counted in failed).
    skipped: int = 0
    # Documents not ingested (failed or skipped) per reason, every one counted.
    by_reason: tuple[tuple[str, int], ...] = ()
    # Embedding usage of the run (domain.usage.EmbeddingUsage, flattened so the
    # persisted record stays a flat map; truncated_chunks = its truncated_texts).
    embedding_requests: int = 0
    embedding_input_tokens: int = 0
    embedding_estimated_input_tokens: int = 0
    embedding_texts: int = 0
    truncated_chunks: int = 0

    @property
    def embedding_usage(self) -> EmbeddingUsage:
        return EmbeddingUsage(
            self.embedding_requests,
            self.embedding_input_tokens,
            self.embedding_estimated_input_tokens,
            self.embedding_texts,
            self.truncated_chunks,
        )

    def with_usage(self, usage: EmbeddingUsage) -> OperationCounts:
        """These counts with `usage` as their embedding usage."""
        return replace(
            self,
            embedding_requests=usage.requests,
            embedding_input_tokens=usage.input_tokens,
            embedding_estimated_input_tokens=usage.estimated_input_tokens,
            embedding_texts=usage.texts,
            truncated_chunks=usage.truncated_texts,
        )

    @staticmethod
    def of(
        *,
        discovered: int,
        ingested: int,
        unchanged: int,
        not_ingested: int,
        reasons: Iterable[str],
        usage: EmbeddingUsage,
        deleted: int = 0,
        chunks_written: int = 0,
    ) -> OperationCounts:
        """The counts of a run or a push: `not_ingested` documents, of which those
        whose reason (`reasons`, one per document) is a skip reason are skipped and
        the rest failed; every reason counted in by_reason."""
        by_reason = Counter(str(r) for r in reasons)
        skipped = sum(n for r, n in by_reason.items() if r in SKIP_REASONS)
        return OperationCounts(
            discovered=discovered,
            ingested=ingested,
            unchanged=unchanged,
            failed=not_ingested - skipped,
            deleted=deleted,
            chunks_written=chunks_written,
            skipped=skipped,
            by_reason=tuple(sorted(by_reason.items())),
        ).with_usage(usage)


# How many operations an operation log keeps: past it, the oldest finished ones are
# deleted (pushes record one each, so history would otherwise grow without bound).
KEPT_OPERATIONS = 100_000


@dataclass(frozen=True, slots=True)
class Operation:
    """A snapshot of one ingestion operation. Times are UNIX seconds (UTC)."""

    id: str
    index_name: str
    state: OperationState
    trigger: OperationTrigger
    create_time: float
    phase: str = ""
    counts: OperationCounts = field(default_factory=OperationCounts)
    start_time: float | None = None
    end_time: float | None = None
    version: int = 0
    rebuild: bool = False
    # Set only when the state is FAILED.
    error_code: OperationErrorCode | None = None
    failures: tuple[DocumentFailureInfo, ...] = ()
    failures_omitted: int = 0
    skipped: tuple[DocumentFailureInfo, ...] = ()
    skipped_omitted: int = 0
    warnings: tuple[OperationWarning, ...] = ()
    # The id of the API key that started it ("" for runs the server started, and
    # when authentication is disabled): a key with only `ingest` sees its own.
    started_by: str = ""
    # A push's tenant (the pushing key's; "" untenanted, and for ingestion runs,
    # which ingest the index's configured sources): only that tenant lists it.
    tenant: str = ""

    @staticmethod
    def new(
        index_name: str, trigger: OperationTrigger, now: float, started_by: str = ""
    ) -> Operation:
        return Operation(
            uuid.uuid4().hex,
            index_name,
            OperationState.QUEUED,
            trigger,
            now,
            started_by=started_by,
        )

    def another_tenants_push(self, tenant: str) -> bool:
        """A push is its tenant's own operation: to another tenant it does not
        exist (listing, watching)."""
        return self.trigger is OperationTrigger.PUSH and self.tenant != tenant

    def in_tenant_scope(self, tenant: str, tenant_indexes: set[str]) -> bool:
        """Whether a key scoped to `tenant` (a `manage` key) sees it: the runs of
        the indexes configured for its tenant, and its tenant's own pushes."""
        if self.trigger is OperationTrigger.PUSH:
            return self.tenant == tenant
        return self.index_name in tenant_indexes

    def with_failures(self, failures: list[DocumentFailureInfo]) -> Operation:
        """Keep the first MAX_LISTED_FAILURES failures and skipped documents each
        and count the rest."""
        failed = [f for f in failures if f.reason not in SKIP_REASONS]
        skipped = [f for f in failures if f.reason in SKIP_REASONS]
        listed = tuple(failed[:MAX_LISTED_FAILURES])
        listed_skipped = tuple(skipped[:MAX_LISTED_FAILURES])
        return replace(
            self,
            failures=listed,
            failures_omitted=len(failed) - len(listed),
            skipped=listed_skipped,
            skipped_omitted=len(skipped) - len(listed_skipped),
        )

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "index_name": self.index_name,
            "state": self.state.value,
            "trigger": self.trigger.value,
            "create_time": self.create_time,
            "phase": self.phase,
            "counts": {
                "discovered": self.counts.discovered,
                "ingested": self.counts.ingested,
                "unchanged": self.counts.unchanged,
                "failed": self.counts.failed,
                "deleted": self.counts.deleted,
                "chunks_written": self.counts.chunks_written,
                "skipped": self.counts.skipped,
                "embedding_requests": self.counts.embedding_requests,
                "embedding_input_tokens": self.counts.embedding_input_tokens,
                "embedding_estimated_input_tokens": self.counts.embedding_estimated_input_tokens,
                "embedding_texts": self.counts.embedding_texts,
                "truncated_chunks": self.counts.truncated_chunks,
            },
            "by_reason": [list(pair) for pair in self.counts.by_reason],
            "start_time": self.start_time,
            "end_time": self.end_time,
            "version": self.version,
            "rebuild": self.rebuild,
            "error_code": self.error_code or "",
            "failures": [[f.document_id, f.reason] for f in self.failures],
            "failures_omitted": self.failures_omitted,
            "skipped": [[f.document_id, f.reason] for f in self.skipped],
            "skipped_omitted": self.skipped_omitted,
            "warnings": list(self.warnings),
            "started_by": self.started_by,
            "tenant": self.tenant,
        }

    @staticmethod
    def from_json(data: dict[str, object]) -> Operation:
        counts = data.get("counts") or {}
        assert isinstance(counts, dict)
        failures = data.get("failures") or []
        assert isinstance(failures, list)
        skipped = data.get("skipped") or []
        assert isinstance(skipped, list)
        by_reason = data.get("by_reason") or []
        assert isinstance(by_reason, list)
        warnings = data.get("warnings") or []
        assert isinstance(warnings, list)

        def num(v: object) -> float | None:
            return None if v is None else float(v)  # type: ignore[arg-type]

        return Operation(
            id=str(data["id"]),
            index_name=str(data["index_name"]),
            state=OperationState(str(data["state"])),
            trigger=OperationTrigger(str(data["trigger"])),
            create_time=float(data["create_time"]),  # type: ignore[arg-type]
            phase=str(data.get("phase", "")),
            counts=OperationCounts(
                **{k: int(v) for k, v in counts.items()},
                by_reason=tuple((str(r), int(n)) for r, n in by_reason),
            ),
            start_time=num(data.get("start_time")),
            end_time=num(data.get("end_time")),
            version=int(data.get("version", 0)),  # type: ignore[call-overload]
            rebuild=bool(data.get("rebuild", False)),
            error_code=_error_code(data.get("error_code")),
            failures=tuple(
                DocumentFailureInfo(str(d), DocumentFailureReason(str(r))) for d, r in failures
            ),
            failures_omitted=int(data.get("failures_omitted", 0)),  # type: ignore[call-overload]
            skipped=tuple(
                DocumentFailureInfo(str(d), DocumentFailureReason(str(r))) for d, r in skipped
            ),
            skipped_omitted=int(data.get("skipped_omitted", 0)),  # type: ignore[call-overload]
            warnings=tuple(OperationWarning(str(w)) for w in warnings),
            started_by=str(data.get("started_by") or ""),
            tenant=str(data.get("tenant") or ""),
        )


def _error_code(value: object) -> OperationErrorCode | None:
    return OperationErrorCode.for_reason(str(value)) if value else None
