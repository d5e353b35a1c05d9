"""The Qdrant store's engine: settings, the in-process engine (qdrant-edge-py's
`EdgeShard`), the lock that makes one process the owner of a path, and one place
where the engine's failures become groundwire's error reasons.

Every engine call runs in a worker thread (the engine is native code that
releases the GIL), timed by operation. Error messages carry the exception's type
only: an engine message can quote a payload, which never reaches a groundwire
error or log."""

from __future__ import annotations

import asyncio
import contextvars
import fcntl
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

import qdrant_edge as q

from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.instruments import STORE_ENGINE_ERRORS, STORE_ENGINE_LATENCY
from groundwire.stores.base import store_unavailable

_T = TypeVar("_T")
_PAGE = 1_000


@dataclass(frozen=True, slots=True)
class QdrantSettings:
    """Where the engine keeps its shards and how it builds and searches them (see
    the `[stores.NAME] kind = "qdrant"` keys in the configuration reference)."""

    path: Path
    hnsw_m: int = 16
    hnsw_ef_construction: int = 100
    ef_search: int = 100
    # Segments are indexed (HNSW, sparse) once they hold this many kilobytes of
    # vectors; below it a segment is searched exactly.
    indexing_threshold_kb: int = 10_000
    # A filtered search whose filter admits fewer kilobytes of vectors than this
    # scans them exactly instead of searching the graph.
    full_scan_threshold_kb: int = 10_000
    # Engine search threads per shard (0: one per CPU).
    search_threads: int = 0
    label: str = "default"


def engine_error(exc: BaseException) -> GroundwireError:
    """The groundwire error for an engine failure (content-free)."""
    if isinstance(exc, GroundwireError):
        return exc
    if isinstance(exc, ValueError | TypeError):
        return GroundwireError(
            ErrorKind.INVALID_ARGUMENT,
            "STORE_DATA_REJECTED",
            f"vector engine rejected the data ({type(exc).__name__})",
        )
    if isinstance(exc, OSError):
        return store_unavailable(f"vector engine storage failed ({type(exc).__name__})")
    return store_unavailable(f"vector engine call failed ({type(exc).__name__})")


async def call(
    store: str, operation: str, fn: Callable[[], _T], executor: Executor | None = None
) -> _T:
    """Run one engine call in a worker thread (of `executor`, else the default
    pool): its latency recorded by operation, its failure mapped."""
    if executor is None:
        return await acall(store, operation, asyncio.to_thread(fn))
    ctx = contextvars.copy_context()
    pending = asyncio.get_running_loop().run_in_executor(executor, ctx.run, fn)
    return await acall(store, operation, pending)


async def acall(store: str, operation: str, awaitable: Awaitable[_T]) -> _T:
    """Await one engine (or server) call: its latency recorded by operation, its
    failure mapped."""
    started = time.perf_counter()
    outcome = "ok"
    try:
        return await awaitable
    except Exception as exc:
        outcome = "error"
        err = engine_error(exc)
        err.metadata.setdefault("store", store)
        STORE_ENGINE_ERRORS.add(1, {"store": store, "operation": operation, "reason": err.reason})
        raise err from None
    finally:
        STORE_ENGINE_LATENCY.record(
            time.perf_counter() - started,
            {"store": store, "operation": operation, "outcome": outcome},
        )


class PathLock:
    """An exclusive advisory lock on `path/.lock`: one process owns an embedded
    engine's files (two writers would corrupt each other's segments). A second
    process (or a second store on the same path) fails at open with
    STORE_UNAVAILABLE; the lock is released when the store closes or the
    process dies."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._file: IO[bytes] | None = None

    def acquire(self) -> None:
        self._path.mkdir(parents=True, exist_ok=True)
        handle = open(self._path / ".lock", "ab")  # noqa: SIM115 - held until release
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise store_unavailable(
                "the embedded vector engine's path is owned by another process or store"
            ) from None
        self._file = handle

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None


def write_atomically(target: Path, data: bytes) -> None:
    """Replace `target` with `data` in one step (a reader or a crash sees the old
    or the new file, never a part), durable once this returns."""
    tmp = target.with_name(target.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def scroll_pages(
    edge: q.EdgeShard, flt: q.Filter, with_payload: Any, *, with_vector: bool = False
) -> Iterator[list[Any]]:
    """The points `flt` admits, a page at a time (in a worker thread)."""
    offset: Any = None
    while True:
        records, offset = scroll(
            edge,
            offset=offset,
            limit=_PAGE,
            filter=flt,
            with_payload=with_payload,
            with_vector=with_vector,
        )
        yield records
        if offset is None:
            return


def scroll_all(
    edge: q.EdgeShard, flt: q.Filter, with_payload: Any, *, with_vector: bool = False
) -> list[Any]:
    """Every point `flt` admits, page by page (in a worker thread)."""
    return [
        record
        for page in scroll_pages(edge, flt, with_payload, with_vector=with_vector)
        for record in page
    ]


# The engine interface: an embedded `EdgeShard` or a server collection
# (remote.RemoteShard), which answers count, facet and retrieve as the shard does
# and these four calls with the same arguments (a request whose payload selector
# the edge binding would make opaque is passed as its parts).


def scroll(edge: Any, **request: Any) -> tuple[list[Any], Any]:
    """One page of a scroll (q.ScrollRequest's arguments)."""
    if isinstance(edge, q.EdgeShard):
        page: tuple[list[Any], Any] = edge.scroll(q.ScrollRequest(**request))
        return page
    return edge.scroll(**request)  # type: ignore[no-any-return]


def query(edge: Any, **request: Any) -> list[Any]:
    """The points of a nearest-neighbour query (q.QueryRequest's arguments)."""
    if isinstance(edge, q.EdgeShard):
        points: list[Any] = edge.query(q.QueryRequest(**request))
        return points
    return edge.query(**request)  # type: ignore[no-any-return]


def upsert(edge: Any, points: list[q.Point]) -> None:
    """Write `points` to an embedded shard or a server collection (remote.py)."""
    if isinstance(edge, q.EdgeShard):
        edge.update(q.UpdateOperation.upsert_points(points))
    else:
        edge.upsert(points)


def delete_where(edge: Any, flt: q.Filter) -> None:
    """Delete the points `flt` admits from an embedded shard or a server collection."""
    if isinstance(edge, q.EdgeShard):
        edge.update(q.UpdateOperation.delete_points_by_filter(flt))
    else:
        edge.delete_where(flt)
