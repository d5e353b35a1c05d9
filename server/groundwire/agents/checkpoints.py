"""Checkpointed executions: what is persisted once the context is prepared, and
the lease that lets exactly one replica run an execution at a time.

The state (`ExecutionState`) is saved before the first model call — after every
RAG stage ran, so a resume repeats no retrieval and no reranking and uses the
same evidence — and again after every tool step, when the execution waits for
client tool results, and when it completes (then with the result, which a later
resume returns as recorded). It holds the agent's id and a fingerprint of its
definition, the tenant, the input, the result so far (the full RAG metadata:
candidates, accepted context with scores, reranking, budget, index version; the
tool calls; usage) and the model messages so far. It is stored through the
`CheckpointStore` of the configured store (PostgreSQL or process memory), as an
opaque payload that never reaches logs or metrics.

Whoever creates or claims a checkpoint holds its lease and renews it while it
runs (`Lease.keep_alive`); a replica that dies stops renewing, and the
execution becomes resumable once the lease lapses.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import hashlib
import json
import logging
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import pydantic
from pydantic import ConfigDict, TypeAdapter

from groundwire.agents.definition import AgentDefinition
from groundwire.agents.events import ExecutionResult
from groundwire.agents.execution_input import ExecutionInput
from groundwire.agents.model_loop import LoopState
from groundwire.domain.access import PUBLIC_READERS, Readers
from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.stores.base import (
    CheckpointRecord,
    CheckpointState,
    CheckpointStore,
    Claim,
    ClaimStatus,
)

log = logging.getLogger("groundwire.agents.checkpoints")

# The payload format; a reader refuses payloads of another format version.
FORMAT = 1


@dataclass(frozen=True, slots=True)
class CheckpointSettings:
    """Retention of checkpoints, the lease (renewed every third of it while an
    execution runs), and the client tool bounds."""

    retention_seconds: float = 3600.0
    lease_seconds: float = 30.0
    tool_result_timeout_seconds: float = 300.0
    max_tool_result_chars: int = 16_384


@pydantic.dataclasses.dataclass(config=ConfigDict(ser_json_inf_nan="constants"))
class ExecutionState:
    """Everything a resume needs, as values (see module docstring)."""

    execution_id: str
    agent_id: str
    agent_fingerprint: str
    tenant: str
    input: ExecutionInput
    result: ExecutionResult
    loop: LoopState
    format: int = FORMAT


_CODEC = TypeAdapter(ExecutionState)


def encode_state(state: ExecutionState) -> bytes:
    return _CODEC.dump_json(state)


def decode_state(payload: bytes) -> ExecutionState:
    """The stored state; a payload this server cannot read is an internal error
    (the message names no content)."""
    try:
        state = _CODEC.validate_json(payload)
    except pydantic.ValidationError:
        raise GroundwireError(
            ErrorKind.INTERNAL, "INTERNAL", "the execution checkpoint cannot be read"
        ) from None
    if state.format != FORMAT:
        raise GroundwireError(
            ErrorKind.INTERNAL, "INTERNAL", "the execution checkpoint has another format"
        )
    return state


def _canonical(value: Any) -> Any:
    """A JSON-able, process-independent rendering: objects that are not plain
    values (models, rerankers, tools) count by their type only."""
    if isinstance(value, enum.Enum):
        return value.value
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (set, frozenset)):
        return sorted((_canonical(v) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return type(value).__qualname__


def agent_fingerprint(agent: AgentDefinition) -> str:
    """A hash of the agent's definition as configured (its model by reference):
    a checkpoint continues only under the definition it was prepared with."""
    doc = {
        "id": agent.id,
        "instructions": agent.instructions,
        "model": agent.model_ref,
        "tools": [[t.name, t.description, _canonical(t.parameters)] for t in agent.tools],
        "rag": _canonical(agent.rag),
        "max_tool_steps": agent.max_tool_steps,
        "options": _canonical(agent.options),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def execution_not_found() -> GroundwireError:
    return GroundwireError(
        ErrorKind.NOT_FOUND, "EXECUTION_NOT_FOUND", "no execution with the requested id"
    )


def execution_in_progress(retry_after_s: float) -> GroundwireError:
    return GroundwireError(
        ErrorKind.ABORTED,
        "EXECUTION_IN_PROGRESS",
        "the execution is running (here or on another replica); retry later",
        retry_after_seconds=retry_after_s,
    )


def lease_lost() -> GroundwireError:
    return GroundwireError(
        ErrorKind.ABORTED,
        "EXECUTION_LEASE_LOST",
        "this replica lost the execution's lease; resume the execution",
    )


class Lease:
    """The right to run one execution (see module docstring)."""

    def __init__(self, checkpoints: Checkpointer, execution_id: str, owner: str) -> None:
        self._cp = checkpoints
        self.execution_id = execution_id
        self.owner = owner
        self.held = True
        self.lost = False

    async def save(self, state: ExecutionState, kind: CheckpointState, release: bool) -> None:
        """Write the state; raises EXECUTION_LEASE_LOST when another claim took it."""
        ok = await self._cp.store.update_checkpoint(
            self.execution_id,
            self.owner,
            kind,
            encode_state(state),
            self._cp.settings.retention_seconds,
            release,
        )
        if not ok:
            self.held = False
            raise lease_lost()
        if release:
            self.held = False

    async def release(self) -> None:
        """Give the lease up (best effort: otherwise it lapses)."""
        if not self.held:
            return
        self.held = False
        try:
            await self._cp.store.release_checkpoint(self.execution_id, self.owner)
        except GroundwireError as err:
            log.warning("checkpoint lease not released", extra={"reason": err.reason})

    @contextlib.asynccontextmanager
    async def keep_alive(self) -> AsyncIterator[None]:
        """Renew the lease every third of its length while the block runs."""
        task = asyncio.create_task(self._renew())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _renew(self) -> None:
        period = self._cp.settings.lease_seconds / 3
        while self.held:
            await asyncio.sleep(period)
            try:
                ok = await self._cp.store.renew_lease(
                    self.execution_id, self.owner, self._cp.settings.lease_seconds
                )
            except GroundwireError as err:
                log.warning("checkpoint lease not renewed", extra={"reason": err.reason})
                continue
            if not ok:
                self.lost = True
                return


class Checkpointer:
    """Creates, claims and reads execution checkpoints in a `CheckpointStore`."""

    def __init__(self, store: CheckpointStore, settings: CheckpointSettings) -> None:
        self.store = store
        self.settings = settings

    async def create(self, state: ExecutionState, kind: CheckpointState) -> Lease:
        """The first checkpoint of an execution, held by this caller."""
        owner = uuid.uuid4().hex
        await self._insert(state, kind, owner, self.settings.lease_seconds)
        return Lease(self, state.execution_id, owner)

    async def record_completed(self, state: ExecutionState) -> None:
        """Record the result of an execution that never needed a checkpoint
        before (the model was skipped), so a resume returns it (one write, no
        lease)."""
        await self._insert(state, CheckpointState.COMPLETED, uuid.uuid4().hex, 0.0)

    async def _insert(
        self, state: ExecutionState, kind: CheckpointState, owner: str, lease_s: float
    ) -> None:
        record = CheckpointRecord(
            state.execution_id, state.tenant, state.agent_id, kind, encode_state(state)
        )
        await self.store.create_checkpoint(record, owner, lease_s, self.settings.retention_seconds)

    async def get(self, execution_id: str, tenant: str) -> tuple[CheckpointState, ExecutionState]:
        record = await self.store.get_checkpoint(execution_id, tenant)
        if record is None:
            raise execution_not_found()
        return record.state, decode_state(record.payload)

    async def claim(
        self, execution_id: str, tenant: str, readers: Readers = PUBLIC_READERS
    ) -> tuple[Claim, Lease | None, ExecutionState | None]:
        """Claim the execution: the claim, the lease when taken, and the state
        (None when missing or busy). An execution started by a caller with other
        readers (domain.access) is as missing as an unknown one: its recorded
        evidence is what those readers could read."""
        owner = uuid.uuid4().hex
        claim = await self.store.claim_checkpoint(
            execution_id, tenant, owner, self.settings.lease_seconds
        )
        if claim.record is None:
            return claim, None, None
        lease = Lease(self, execution_id, owner) if claim.status is ClaimStatus.CLAIMED else None
        try:
            state = decode_state(claim.record.payload)
        except GroundwireError:
            if lease is not None:
                await lease.release()
            raise
        if state.input.readers.fingerprint() != readers.fingerprint():
            if lease is not None:
                await lease.release()
            return Claim(ClaimStatus.MISSING), None, None
        return claim, lease, state

    @property
    def retry_after_s(self) -> float:
        """When a refused resume may try again: a lease renewal period."""
        return max(1.0, self.settings.lease_seconds / 3)
