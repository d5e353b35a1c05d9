"""Untrusted files are parsed where they cannot hurt anyone: in worker processes,
never in the serving process.

A file's parser is someone else's library fed someone else's bytes: a crafted PDF,
spreadsheet or package can ask it for minutes of CPU or gigabytes of memory. So every
built-in loader runs in a pool of worker processes (pebble's ProcessPool over a
forkserver: a clean process, no gRPC threads inherited), and each job is bounded:

- CPU: the worker's RLIMIT_CPU soft limit is set to its CPU time so far plus the job's
  budget, with the default action of SIGXCPU, so the kernel ends a job that spends its
  budget even inside a C extension that never returns to Python;
- memory: RLIMIT_AS of the worker (an allocation past it raises MemoryError, or the
  worker dies);
- wall-clock time: a job running longer than its bound, or whose caller is gone (a
  deadline passed, an operation cancelled, the server shutting down), is killed;
- priority: workers run at a lower CPU priority (nice 10), so the threads that serve
  queries and embed them win the cores from a busy parser.

A job killed for its bounds fails its document with TOO_COMPLEX (CPU or time) or
TOO_LARGE (memory); a worker that died otherwise, PARSE_FAILED. The pool replaces a
killed worker; nothing of a failed document is stored. Shutdown stops the workers at
once: it never waits for a parse.

Sharing the workers among tenants (issue 44: a victim's one-page PDF waited up to 43 s
behind another tenant's hostile files on one worker):

- fair turns: each pool's workers are handed out round-robin among the tenants waiting
  (stores/fair_gate.py), so a tenant waits for at most one job of each other tenant;
- a reserved small-file lane: files of at most `small_file_bytes` go first to workers
  of their own (`small_workers`), where a job may run at most `small_seconds` of wall
  clock. A job past that is no small job: it is killed and queued again in the main
  pool, in its tenant's turn, under the full bounds. So a small file waits in its lane
  for at most one slice of each other tenant, never for a hostile file's whole CPU
  limit;
- per-tenant budgets (ingestion/parse_budget.py): a tenant that has spent its parser
  CPU-seconds for the window is refused at once (RESOURCE_EXHAUSTED,
  PARSE_BUDGET_EXHAUSTED) instead of waiting, and no parse may run past what is left
  of its tenant's budget.

Plug-in loaders (`groundwire.loaders` entry points) are the operator's code and objects
of the serving process: they run in a worker thread, bounded by the same text limits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import multiprocessing
import os
import resource
import signal
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from multiprocessing import spawn
from pathlib import Path
from typing import Any

import pebble
from pebble.pool.process import WORKERS_NAME as _WORKERS_NAME

from groundwire.domain.operations import DocumentFailureReason
from groundwire.indexes.loaders import Loader
from groundwire.ingestion.loaders import (
    DocumentFormat,
    LoadedDocument,
    LoadFailure,
    load_bytes,
    load_file,
    load_with_plugin,
)
from groundwire.ingestion.parse_budget import ParseBudget, ParseBudgets, budget_exhausted
from groundwire.stores import request_scope
from groundwire.stores.fair_gate import FairGate

log = logging.getLogger("groundwire.ingestion.parsing")

Loaded = LoadedDocument | LoadFailure

# Modules the forkserver imports once, so a new worker (after one was killed) starts
# in milliseconds instead of importing the parsing libraries again.
_PRELOAD = ["groundwire.ingestion.loaders", "pypdf", "docx", "pptx", "openpyxl", "selectolax"]


@dataclass(frozen=True, slots=True)
class ParserLimits:
    """The bounds of every parse job (`[ingestion]` parser_* keys)."""

    workers: int = 1
    cpu_seconds: float = 20.0
    memory_mib: int = 1024
    timeout_seconds: float = 60.0
    # The small-file lane: workers of its own (0: none), the largest file it takes and
    # the wall-clock slice of one job there (past it, the job moves to the main pool).
    small_workers: int = 1
    small_file_bytes: int = 256 * 1024
    small_seconds: float = 0.5
    # Parser CPU a tenant may spend per window (0: unbudgeted).
    tenant_budget: ParseBudget = field(default_factory=ParseBudget)


def default_workers() -> int:
    """Half the cores (at least one): parsing never owns every core of the machine."""
    return max(1, (os.cpu_count() or 1) // 2)


def _init_worker(memory_bytes: int) -> None:
    """Runs once in each new worker, before any job."""
    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # column detection's numpy: one thread
    os.environ["OMP_NUM_THREADS"] = "1"
    with contextlib.suppress(OSError):  # a priority is a preference, not a bound
        os.nice(10)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    # SIGXCPU keeps its default action (the kernel ends the process) and SIGTERM
    # likewise: a worker stops at once, whatever the parser is doing.
    signal.signal(signal.SIGXCPU, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _cpu_spent() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _job(
    fn: Callable[..., Loaded], args: tuple[Any, ...], cpu_seconds: float
) -> tuple[Loaded, float]:
    """One parse in a worker: the CPU budget armed, memory exhaustion a TOO_LARGE;
    returns the outcome and the CPU-seconds the parse spent (its tenant's charge)."""
    spent = _cpu_spent()
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = math.ceil(spent + cpu_seconds)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    document_id = str(args[1])
    try:
        loaded = fn(*args)
    except MemoryError:
        loaded = LoadFailure(document_id, DocumentFailureReason.TOO_LARGE)
    except RecursionError:
        loaded = LoadFailure(document_id, DocumentFailureReason.TOO_COMPLEX)
    return loaded, _cpu_spent() - spent


def _file_job(
    path: str,
    document_id: str,
    source_id: str,
    max_bytes: int,
    metadata: Mapping[str, str],
    formats: Mapping[str, DocumentFormat | None] | None,
) -> Loaded:
    return load_file(
        Path(path), document_id, source_id, max_bytes=max_bytes, metadata=metadata, formats=formats
    )


def _bytes_job(
    data: bytes,
    document_id: str,
    source_id: str,
    fmt: DocumentFormat,
    max_bytes: int,
    metadata: Mapping[str, str],
    fallback_title: str,
    extension: str,
) -> Loaded:
    return load_bytes(
        document_id,
        source_id,
        data,
        fmt,
        max_bytes=max_bytes,
        metadata=metadata,
        fallback_title=fallback_title,
        extension=extension,
    )


# Exit statuses of a worker killed for a bound: the CPU limit (SIGXCPU, or SIGKILL
# past the hard limit) is too much work; anything else the parser could not survive.
_CPU_SIGNALS = {-signal.SIGXCPU, -signal.SIGKILL}
# The fair-share key of parses that are no call's (ingestion runs).
_BACKGROUND = "\x00background"


def _install_clean_workers() -> None:
    """Start parser workers without re-running the server's main script.

    multiprocessing prepares each new process like the parent's main module: a process
    started from a script (the `groundwire` console script) re-runs that script in the
    worker as `__mp_main__`, importing the whole server (gRPC, models) into every
    parser before its rlimits are set. A parser needs none of it: for pebble's workers
    (and only them, by their process name) the main module is left out of the
    preparation data, so a worker holds the forkserver's preloaded parsers only."""
    original = spawn.get_preparation_data
    if getattr(original, "_groundwire_parsers", False):
        return

    def preparation_data(name: str) -> dict[str, Any]:
        data: dict[str, Any] = original(name)
        if name == _WORKERS_NAME:
            data.pop("init_main_from_path", None)
            data.pop("init_main_from_name", None)
        return data

    preparation_data._groundwire_parsers = True  # type: ignore[attr-defined]
    spawn.get_preparation_data = preparation_data


class _Lane:
    """One pool of workers and the fair turns at it (one gate per event loop)."""

    def __init__(
        self, workers: int, memory_mib: int, context: multiprocessing.context.BaseContext
    ) -> None:
        self.workers = workers
        self.pool = pebble.ProcessPool(
            max_workers=workers,
            # A fresh worker now and then: no parser's leftovers (fragmented heap,
            # caches) outlive a few hundred files.
            max_tasks=200,
            initializer=_init_worker,
            initargs=(memory_mib * 1024 * 1024,),
            context=context,
        )
        # Workers one tenant may hold at once: half of them, at least one.
        self.share = max(1, workers // 2)
        self._gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, FairGate] = (
            weakref.WeakKeyDictionary()
        )

    def gate(self) -> FairGate:
        loop = asyncio.get_running_loop()
        gate = self._gates.get(loop)
        if gate is None:
            gate = self._gates[loop] = FairGate(self.workers, self.share)
        return gate

    def stop(self) -> None:
        self.pool.stop()  # type: ignore[no-untyped-call]

    def join(self) -> None:
        # pebble stops its workers from a manager thread: joined with a bound, so a
        # shutdown never waits on a parser.
        self.pool.join(timeout=5)


class _Slice:
    """A small-lane job that ran out of its slice: it goes on in the main pool."""


_SLICED = _Slice()


class ParserPool:
    """Worker processes that run the built-in loaders under `limits`."""

    def __init__(self, limits: ParserLimits) -> None:
        self.limits = limits
        _install_clean_workers()
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(_PRELOAD)
        self._main = _Lane(limits.workers, limits.memory_mib, context)
        self._small = (
            _Lane(limits.small_workers, limits.memory_mib, context)
            if limits.small_workers > 0
            else None
        )
        self._closed = False
        self.budgets = ParseBudgets(limits.tenant_budget)

    async def load_file(
        self,
        path: Path,
        document_id: str,
        source_id: str,
        *,
        max_bytes: int,
        metadata: Mapping[str, str],
        loaders: Mapping[str, Loader] | None = None,
        formats: Mapping[str, DocumentFormat | None] | None = None,
    ) -> Loaded:
        """`loaders.load_file` in a worker (a plug-in loader's file in a thread)."""
        suffix = path.suffix.lower()
        if loaders and suffix in loaders and (formats is None or suffix in formats):
            return await asyncio.to_thread(
                load_file,
                path,
                document_id,
                source_id,
                max_bytes=max_bytes,
                metadata=metadata,
                loaders=loaders,
                formats=formats,
            )
        args = (str(path), document_id, source_id, max_bytes, dict(metadata), formats)
        try:
            size = await asyncio.to_thread(os.path.getsize, path)
        except OSError:
            size = max_bytes  # the loader reports what is wrong with the file
        return await self._run(_file_job, args, document_id, size)

    async def load_bytes(
        self,
        document_id: str,
        source_id: str,
        data: bytes,
        fmt: DocumentFormat,
        *,
        max_bytes: int,
        metadata: Mapping[str, str] | None = None,
        fallback_title: str = "",
        extension: str = "",
    ) -> Loaded:
        """`loaders.load_bytes` in a worker. Plain text and Markdown need no parser
        library and cost time linear in their (bounded) size: they are read in a
        thread, which saves a round trip to a worker per pushed text."""
        meta = dict(metadata or {})
        if fmt in (DocumentFormat.TEXT, DocumentFormat.MARKDOWN):
            return await asyncio.to_thread(
                load_bytes,
                document_id,
                source_id,
                data,
                fmt,
                max_bytes=max_bytes,
                metadata=meta,
                fallback_title=fallback_title,
                extension=extension,
            )
        if len(data) > max_bytes:
            return LoadFailure(document_id, DocumentFailureReason.TOO_LARGE)
        args = (data, document_id, source_id, fmt, max_bytes, meta, fallback_title, extension)
        return await self._run(_bytes_job, args, document_id, len(data))

    async def load_with_plugin(
        self,
        loader: Loader,
        document_id: str,
        source_id: str,
        data: bytes,
        *,
        max_bytes: int,
        metadata: Mapping[str, str],
        fallback_title: str,
    ) -> Loaded:
        return await asyncio.to_thread(
            load_with_plugin,
            loader,
            document_id,
            source_id,
            data,
            max_bytes=max_bytes,
            metadata=metadata,
            fallback_title=fallback_title,
        )

    async def _run(
        self,
        fn: Callable[..., Loaded],
        args: tuple[Any, ...],
        document_id: str,
        size: int | None = None,
    ) -> Loaded:
        """Run one parse job: a file of `size` bytes (None: unknown, the main pool)."""
        if self._closed:
            raise asyncio.CancelledError  # shutting down: the run is being cancelled
        # One tenant's files never queue ahead of everyone's: workers are handed out
        # round-robin among the tenants waiting (a push's caller; ingestion runs are
        # background work, one more party in the ring).
        scope = request_scope.current()
        tenant = scope.tenant if scope is not None else None
        party = tenant if tenant is not None else _BACKGROUND
        if tenant is not None:
            self.budgets.require(tenant)  # a spent budget is refused now, not after a wait
        limits = self.limits
        if self._small is not None and size is not None and size <= limits.small_file_bytes:
            async with self._small.gate().slot(party):
                outcome = await self._run_now(
                    self._small, fn, args, document_id, tenant, limits.small_seconds
                )
            if not isinstance(outcome, _Slice):
                return outcome
        async with self._main.gate().slot(party):
            outcome = await self._run_now(
                self._main, fn, args, document_id, tenant, limits.timeout_seconds
            )
        assert not isinstance(outcome, _Slice)
        return outcome

    async def _run_now(
        self,
        lane: _Lane,
        fn: Callable[..., Loaded],
        args: tuple[Any, ...],
        document_id: str,
        tenant: str | None,
        timeout_s: float,
    ) -> Loaded | _Slice:
        """One job in `lane`'s workers under its tenant's budget (None: unbudgeted)."""
        want = self.limits.cpu_seconds
        granted = want if tenant is None else self.budgets.reserve(tenant, want)
        started = time.monotonic()
        spent: float | None = None
        try:
            future = lane.pool.schedule(_job, args=(fn, args, granted), timeout=timeout_s)
            # Cancelling the awaiting task (a deadline, a cancelled operation,
            # shutdown) cancels the pebble future, which kills the worker running it.
            try:
                loaded, used = await asyncio.wrap_future(future)
                spent = used
                return loaded
            except FutureTimeout:
                if lane is self._small:
                    log.info("small-lane parse moved to the main pool")
                    return _SLICED
                reason, exit_code = DocumentFailureReason.TOO_COMPLEX, None
            except pebble.ProcessExpired as expired:
                exit_code = expired.exitcode
                reason = (
                    DocumentFailureReason.TOO_COMPLEX
                    if exit_code in _CPU_SIGNALS
                    else DocumentFailureReason.PARSE_FAILED
                )
                if (
                    tenant is not None
                    and reason is DocumentFailureReason.TOO_COMPLEX
                    and granted < want
                ):
                    # Stopped at what was left of its tenant's budget, not its own bound.
                    raise budget_exhausted(self.budgets.refill_s(tenant)) from None
            # Whatever else the parser raised in the worker (a library's own error on
            # a malformed file) fails this document only.
            except Exception as exc:
                log.warning("document parser failed", extra={"error_type": type(exc).__name__})
                return LoadFailure(document_id, DocumentFailureReason.PARSE_FAILED)
            log.warning(
                "document parser stopped",
                extra={"reason": reason.value, "exit_code": exit_code},
            )
            return LoadFailure(document_id, reason)
        finally:
            if tenant is not None:
                # A job that did not say what it spent (killed, timed out, cancelled)
                # is charged its wall-clock time, at most its grant: one worker
                # process spends at most one CPU-second per second.
                if spent is None:
                    spent = min(granted + 1.0, time.monotonic() - started)
                self.budgets.settle(tenant, granted, spent)

    def close(self) -> None:
        """Stop every worker now (running parses are killed, not awaited)."""
        if self._closed:
            return
        self._closed = True
        lanes = [lane for lane in (self._main, self._small) if lane is not None]
        for lane in lanes:  # every lane's workers stopped before any is waited for
            lane.stop()
        for lane in lanes:
            lane.join()


_lock = threading.Lock()
_current: ParserPool | None = None
_configured = ParserLimits(workers=default_workers())


def configure(limits: ParserLimits) -> None:
    """Set the limits of the process's pool (the app calls this once at start-up);
    a pool already running with other limits is replaced."""
    global _configured, _current
    with _lock:
        _configured = limits
        stale = _current if _current is not None and _current.limits != limits else None
        if stale is not None:
            _current = None
    if stale is not None:
        stale.close()  # outside the lock: it joins the workers


def parsers() -> ParserPool:
    """The process's parser pool, started on first use."""
    global _current
    with _lock:
        if _current is None or _current._closed:
            _current = ParserPool(_configured)
        return _current


def shutdown() -> None:
    """Stop the process's parser workers (graceful shutdown, tests)."""
    global _current
    with _lock:
        pool, _current = _current, None
    if pool is not None:
        pool.close()
