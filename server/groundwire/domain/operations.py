"""Ingestion operations as values: lifecycle states, triggers, counts and
per-document failures (content-free). Persisted by the store, streamed by the api."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field, replace

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


@dataclass(frozen=True, slots=True)
class DocumentFailureInfo:
    """A document that was not ingested and the stable reason code."""

    document_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class OperationCounts:
    discovered: int = 0
    ingested: int = 0
    unchanged: int = 0
    failed: int = 0
    deleted: int = 0
    chunks_written: int = 0


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
    error_code: str = ""
    failures: tuple[DocumentFailureInfo, ...] = ()
    failures_omitted: int = 0

    @staticmethod
    def new(index_name: str, trigger: OperationTrigger, now: float) -> Operation:
        return Operation(uuid.uuid4().hex, index_name, OperationState.QUEUED, trigger, now)

    def with_failures(self, failures: list[DocumentFailureInfo]) -> Operation:
        """Keep the first MAX_LISTED_FAILURES failures and count the rest."""
        listed = tuple(failures[:MAX_LISTED_FAILURES])
        return replace(self, failures=listed, failures_omitted=len(failures) - len(listed))

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
            },
            "start_time": self.start_time,
            "end_time": self.end_time,
            "version": self.version,
            "rebuild": self.rebuild,
            "error_code": self.error_code,
            "failures": [[f.document_id, f.reason] for f in self.failures],
            "failures_omitted": self.failures_omitted,
        }

    @staticmethod
    def from_json(data: dict[str, object]) -> Operation:
        counts = data.get("counts") or {}
        assert isinstance(counts, dict)
        failures = data.get("failures") or []
        assert isinstance(failures, list)

        def num(v: object) -> float | None:
            return None if v is None else float(v)  # type: ignore[arg-type]

        return Operation(
            id=str(data["id"]),
            index_name=str(data["index_name"]),
            state=OperationState(str(data["state"])),
            trigger=OperationTrigger(str(data["trigger"])),
            create_time=float(data["create_time"]),  # type: ignore[arg-type]
            phase=str(data.get("phase", "")),
            counts=OperationCounts(**{k: int(v) for k, v in counts.items()}),
            start_time=num(data.get("start_time")),
            end_time=num(data.get("end_time")),
            version=int(data.get("version", 0)),  # type: ignore[call-overload]
            rebuild=bool(data.get("rebuild", False)),
            error_code=str(data.get("error_code", "")),
            failures=tuple(DocumentFailureInfo(str(d), str(r)) for d, r in failures),
            failures_omitted=int(data.get("failures_omitted", 0)),  # type: ignore[call-overload]
        )
