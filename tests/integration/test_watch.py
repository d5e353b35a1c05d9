"""The `watch` ingestion strategy with real file changes (inotify through
watchfiles) on a running server: a first run at start-up, then an incremental
run per quiet period after files are added, changed or deleted; a burst of
writes makes one run; hidden files (editor swap files, .git) start none."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from groundwire.app.config import parse_config
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import ingestion_pb2_grpc
from tests.support.servers import serving

pytestmark = pytest.mark.timeout(60)
DEBOUNCE_MS = 150


class Watched:
    def __init__(self, port: int, docs: Path) -> None:
        self.docs = docs
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        self.ing = ingestion_pb2_grpc.IngestionManagerServiceStub(self.channel)

    async def operations(self) -> list[ing.Operation]:
        resp = await self.ing.ListOperations(
            ing.ListOperationsRequest(index_name="docs", page_size=100)
        )
        return list(reversed(resp.operations))  # oldest first

    async def settled(self, runs: int, within: float = 20.0) -> list[ing.Operation]:
        """The operations once `runs` have ended and no other starts for a while."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            ops = await self.operations()
            done = [o for o in ops if o.state == ing.OPERATION_STATE_SUCCEEDED]
            if len(ops) >= runs and len(done) == len(ops):
                # Quiet for a few debounce periods: nothing more is coming.
                await asyncio.sleep(4 * DEBOUNCE_MS / 1000)
                if len(await self.operations()) == len(ops):
                    return ops
            await asyncio.sleep(0.05)
        raise AssertionError(f"{runs} runs did not settle: {await self.operations()}")

    async def ids(self) -> list[str]:
        resp = await self.ing.ListDocuments(ing.ListDocumentsRequest(index_name="docs"))
        return [d.document_id for d in resp.documents]


@pytest.fixture
async def watched(tmp_path: Path) -> AsyncIterator[Watched]:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("a.md", "b.md", "c.md"):
        (docs / name).write_text(f"# {name}\n\ncontent of {name}\n")
    cfg = {
        "auth": {"mode": "disabled"},
        "store": {"kind": "memory"},
        "embedders": {"hash": {"kind": "hashing"}},
        "indexes": {
            "docs": {
                "embedder": "hash",
                "sources": [{"kind": "directory", "path": str(docs)}],
                "ingestion": {"strategy": "watch", "watch_debounce_ms": DEBOUNCE_MS},
            }
        },
    }
    async with serving(parse_config(cfg)) as app:
        w = Watched(app.port, docs)
        yield w
        await w.channel.close()


async def test_changes_start_debounced_incremental_runs(watched: Watched) -> None:
    first = await watched.settled(1)
    assert [o.trigger for o in first] == [ing.OPERATION_TRIGGER_STARTUP]
    assert first[0].counts.ingested == 3
    index = await watched.ing.GetIndex(ing.GetIndexRequest(index_name="docs"))
    assert index.index.strategy == ing.INGESTION_STRATEGY_WATCH

    # Add one, change one, delete one: one incremental run.
    (watched.docs / "d.md").write_text("# d\n\nnew document\n")
    (watched.docs / "a.md").write_text("# a\n\nchanged content\n")
    (watched.docs / "c.md").unlink()
    ops = await watched.settled(2)
    runs = ops[1:]
    assert all(o.trigger == ing.OPERATION_TRIGGER_WATCH for o in runs)
    assert sum(o.counts.ingested for o in runs) == 2  # d.md new, a.md changed
    assert sum(o.counts.deleted for o in runs) == 1  # c.md
    assert runs[-1].counts.unchanged >= 1  # b.md was not re-embedded
    assert await watched.ids() == ["a.md", "b.md", "d.md"]

    # A burst of writes within the quiet period makes one run (two at most, when
    # the first write's run started before the rest arrived).
    before = len(ops)
    for i in range(20):
        (watched.docs / f"burst{i:02d}.md").write_text(f"burst {i}\n")
    ops = await watched.settled(before + 1)
    assert 1 <= len(ops) - before <= 2
    assert len(await watched.ids()) == 23

    # Hidden files and directories are not documents: no run.
    before = len(ops)
    (watched.docs / ".a.md.swp").write_text("swap")
    (watched.docs / ".git").mkdir()
    (watched.docs / ".git" / "HEAD").write_text("ref")
    await asyncio.sleep(6 * DEBOUNCE_MS / 1000)
    assert len(await watched.operations()) == before


def test_watch_debounce_is_validated(tmp_path: Path) -> None:
    from groundwire.app.config import ConfigError

    bad = {
        "auth": {"mode": "disabled"},
        "indexes": {
            "docs": {
                "sources": [{"kind": "directory", "path": str(tmp_path)}],
                "ingestion": {"strategy": "watch", "watch_debounce_ms": 1},
            }
        },
    }
    with pytest.raises(ConfigError, match="watch_debounce_ms"):
        parse_config(bad)


def test_watched_paths_and_relevant_changes(tmp_path: Path) -> None:
    from watchfiles import Change

    from groundwire.indexes.sources import DirectorySource, FilesSource, InlineSource, SourceConfig
    from groundwire.ingestion.watch import relevant, watched_paths

    docs = tmp_path / "docs"
    docs.mkdir()
    extra = tmp_path / "extra"
    extra.mkdir()
    sources: list[SourceConfig] = [
        DirectorySource(docs),
        FilesSource((extra / "faq.txt", extra / "more.md")),
        DirectorySource(tmp_path / "missing"),
        InlineSource("i", "text"),
    ]
    watched = watched_paths(sources)
    assert watched == [
        (docs.absolute(), None),
        (extra.absolute(), frozenset({extra / "faq.txt", extra / "more.md"})),
    ]

    def one(path: Path) -> set[tuple[Change, str]]:
        return {(Change.modified, str(path))}

    assert relevant(watched, one(docs / "sub" / "a.md"))
    assert relevant(watched, one(extra / "faq.txt"))
    assert not relevant(watched, one(extra / "unlisted.txt"))
    assert not relevant(watched, one(docs / ".a.md.swp"))
    assert not relevant(watched, one(docs / ".git" / "index"))
    assert not relevant(watched, one(tmp_path / "elsewhere.md"))
