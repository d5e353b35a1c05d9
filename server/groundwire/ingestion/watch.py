"""The `watch` ingestion strategy: file-system events on an index's directory and
files sources (via `watchfiles`, which uses the platform's notification API, e.g.
inotify) start an ingestion run.

- Debounced: events are gathered until the directory has been quiet for
  `watch_debounce_ms`, so saving or copying many files starts one run.
- Incremental like any re-ingest: the run re-reads the sources, skips documents
  whose content hash is unchanged, ingests new and changed ones and deletes those
  whose files left (the pipeline's change detection).
- Never lost: events that arrive while a run is going (here or on another
  replica) start one more run once it has ended, so the last change is always
  ingested; several such events still make one run.
- Hidden files and directories (a leading dot: editors' swap files, .git) are not
  documents and their events are ignored.
- s3 sources send no events: their listings are polled every `watch_poll_seconds`,
  and a listing unlike the last one (a key added or gone, an ETag, size or
  last-modified changed) starts a run, which downloads only what changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from watchfiles import Change, awatch

from groundwire.domain.errors import GroundwireError
from groundwire.domain.operations import Operation
from groundwire.indexes.sources import DirectorySource, FilesSource, S3Source, SourceConfig
from groundwire.ingestion.s3_source import list_source

log = logging.getLogger("groundwire.ingestion")

# How long a watch waits before retrying when a run could not start because
# another replica holds the index's lock.
LOCKED_RETRY_SECONDS = 5.0

StartRun = Callable[[], Awaitable[Operation]]
WaitRun = Callable[[str], Awaitable[Operation]]


# A watched directory, and the only files in it that count (None: every file).
Watched = tuple[Path, frozenset[Path] | None]


def watched_paths(sources: Sequence[SourceConfig]) -> list[Watched]:
    """The existing directories of an index's directory sources, and those holding
    the files of its `files` sources (whose events count for those files only)."""
    out: dict[Path, set[Path] | None] = {}
    for src in sources:
        if isinstance(src, DirectorySource):
            out[src.path.absolute()] = None
        elif isinstance(src, FilesSource):
            for path in src.paths:
                parent = path.absolute().parent
                if parent in out and out[parent] is None:
                    continue
                only = out.setdefault(parent, set())
                assert only is not None
                only.add(path.absolute())
    return [
        (root, None if only is None else frozenset(only))
        for root, only in out.items()
        if root.is_dir()
    ]


def relevant(watched: Sequence[Watched], changes: set[tuple[Change, str]]) -> bool:
    """Whether any change is to a document of the sources (not a hidden file)."""
    for _, raw in changes:
        path = Path(raw).absolute()
        for root, only in watched:
            try:
                parts = path.relative_to(root).parts
            except ValueError:
                continue
            if any(part.startswith(".") for part in parts):
                continue
            if only is None or path in only:
                return True
    return False


class Watch:
    """Watches one index's sources and starts runs (see module docstring)."""

    def __init__(
        self,
        index_name: str,
        sources: Sequence[SourceConfig],
        *,
        start: StartRun,
        wait: WaitRun,
        debounce_ms: int,
        poll_seconds: float = 60.0,
    ) -> None:
        self._name = index_name
        self._sources = sources
        self._start = start
        self._wait = wait
        self._debounce_ms = debounce_ms
        self._poll_seconds = poll_seconds
        self._pending = asyncio.Event()
        self.runs_started = 0

    async def run(self) -> None:
        """Watch until cancelled; the runner task starts runs as events come."""
        watched = watched_paths(self._sources)
        buckets = [s for s in self._sources if isinstance(s, S3Source)]
        if not watched and not buckets:
            log.warning("watch has no existing directory to watch", extra={"index": self._name})
            return
        runner = asyncio.create_task(self._runner())
        poller = asyncio.create_task(self._poll(buckets)) if buckets else None
        try:
            if not watched:
                assert poller is not None
                await poller
                return
            # Changes are yielded once the sources were quiet for the debounce
            # period (`step`), or at the latest after ten of them.
            async for changes in awatch(
                *(root for root, _ in watched),
                step=self._debounce_ms,
                debounce=10 * self._debounce_ms,
                recursive=True,
            ):
                if relevant(watched, changes):
                    log.info(
                        "watch saw changes",
                        extra={"index": self._name, "events": len(changes)},
                    )
                    self._pending.set()
        finally:
            for task in (runner, poller):
                if task is not None:
                    task.cancel()
            await asyncio.gather(
                *(t for t in (runner, poller) if t is not None), return_exceptions=True
            )

    async def _poll(self, buckets: Sequence[S3Source]) -> None:
        """List the buckets every `poll_seconds`; a listing unlike the last one
        (the first included: the start-up run may have listed before a change)
        asks for a run. A source that cannot be listed is logged by the listing
        (named, content-free) and polled again."""
        last: list[tuple[str, int, str, str]] | None = None
        while True:
            try:
                listed = [
                    (i.document_id, i.size, i.etag, i.last_modified)
                    for src in buckets
                    for i in await list_source(src, ())
                ]
            except GroundwireError:
                listed = None
            if listed is not None and listed != last:
                if last is not None:
                    log.info("watch saw the bucket change", extra={"index": self._name})
                last = listed
                self._pending.set()
            await asyncio.sleep(self._poll_seconds)

    async def _runner(self) -> None:
        while True:
            await self._pending.wait()
            self._pending.clear()
            await self._run_once()

    async def _run_once(self) -> None:
        while True:
            try:
                op = await self._start()
            except GroundwireError as err:
                if err.reason == "INGESTION_ALREADY_RUNNING":
                    # Let the running operation end, then run again: it may have
                    # read the sources before this change.
                    running = err.metadata.get("operation_id", "")
                    with contextlib.suppress(GroundwireError):
                        await (self._wait(running) if running else asyncio.sleep(0.5))
                    continue
                if err.reason == "INGESTION_LOCKED":
                    await asyncio.sleep(LOCKED_RETRY_SECONDS)
                    continue
                log.warning(
                    "watch could not start ingestion",
                    extra={"index": self._name, "reason": err.reason},
                )
                return
            self.runs_started += 1
            await self._wait(op.id)
            return
