"""The serving snapshot: everything a call reads from the configuration (the API
keys, the admission limits and the servicers bound to this generation's engines:
agents, retrieval defaults, reranking, indexes) as one immutable object.

A reload (app/reload.py) builds a complete new snapshot and swaps it in with one
assignment. The interceptor reads the current snapshot once, when a call starts,
and binds it for the whole call (`enter`), so a call that started before a swap
finishes on the snapshot it started with and never observes a mix of two
configurations (seed 003: UpdateOptions "swaps [a cloned snapshot] into the
pipeline when complete, so in-flight queries continue using the previous
snapshot"). The holder counts the calls running on each snapshot, so a retired
one can release its resources once its last call ended.

Everything here runs on the server's event loop: swaps and call counting need
no lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from groundwire.api.auth import AuthPolicy
from groundwire.domain.admission import Admission


@dataclass(frozen=True, slots=True, eq=False)
class ServingSnapshot:
    """One configuration generation as the request path sees it."""

    generation: int
    auth: AuthPolicy
    admission: Admission | None
    # Full service name -> the servicer bound to this generation's engines.
    servicers: Mapping[str, object]


snapshot_var: contextvars.ContextVar[ServingSnapshot | None] = contextvars.ContextVar(
    "serving_snapshot", default=None
)


class SnapshotHolder:
    """The current snapshot, swapped atomically, and the calls running on each."""

    def __init__(self, initial: ServingSnapshot) -> None:
        self._current = initial
        self._running: dict[int, int] = {}
        self._drained: dict[int, asyncio.Event] = {}

    @property
    def current(self) -> ServingSnapshot:
        return self._current

    def swap(self, new: ServingSnapshot) -> ServingSnapshot:
        """Make `new` the snapshot of every call that starts from now on; returns
        the retired one (calls already running keep it)."""
        if new.generation <= self._current.generation:
            raise ValueError("a swapped-in snapshot must have a newer generation")
        old, self._current = self._current, new
        return old

    def running(self, snapshot: ServingSnapshot) -> int:
        """Calls still running on `snapshot`."""
        return self._running.get(snapshot.generation, 0)

    async def drained(self, snapshot: ServingSnapshot) -> None:
        """Wait until no call runs on a retired snapshot any more."""
        if self.running(snapshot) == 0:
            return
        event = self._drained.setdefault(snapshot.generation, asyncio.Event())
        await event.wait()

    @contextlib.contextmanager
    def enter(self) -> Iterator[ServingSnapshot]:
        """Bind the current snapshot to the calling context for one call."""
        snapshot = self._current
        gen = snapshot.generation
        self._running[gen] = self._running.get(gen, 0) + 1
        token = snapshot_var.set(snapshot)
        try:
            yield snapshot
        finally:
            snapshot_var.reset(token)
            left = self._running[gen] - 1
            if left:
                self._running[gen] = left
            else:
                del self._running[gen]
                event = self._drained.pop(gen, None)
                if event is not None:
                    event.set()

    def servicer(self, service: str) -> object:
        """The servicer of `service` for the running call (the current snapshot's
        outside of one)."""
        snapshot = snapshot_var.get() or self._current
        return snapshot.servicers[service]


class DispatchingServicer:
    """Registered once with the gRPC server in place of a servicer: each method
    forwards to the same method of the servicer in the call's snapshot. The
    generated `add_*_to_server` reads the methods at registration, so each one is
    made here with the shape grpc.aio dispatches on (async generator for server
    streams, coroutine otherwise), taken from the servicer's class."""

    def __init__(self, service: str, servicer_type: type, pick: Callable[[str], object]) -> None:
        self._service = service
        self._type = servicer_type
        self._pick = pick

    def __getattr__(self, name: str) -> Any:
        impl = getattr(self._type, name)
        service, pick = self._service, self._pick
        if inspect.isasyncgenfunction(impl):

            async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
                async for item in getattr(pick(service), name)(request, context):
                    yield item

            return stream

        async def unary(request: Any, context: Any) -> Any:
            return await getattr(pick(service), name)(request, context)

        return unary
