"""The memory store gives memory back when a large document is deleted (issue 44: the
red team's CSV of one 1,000,000-column header took the server from 180 to 1,569 MiB
RSS, and it stayed there). Measured in a child process of its own, so no other test's
allocations move the figures: its RSS after the delete must be back within a third of
what the push added."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.security.harness import report

CHILD = textwrap.dedent(
    """
    import asyncio, gc, json
    from groundwire.domain.chunking import ChunkPolicy
    from groundwire.domain.quotas import StorageQuota
    from groundwire.indexes.catalog import IndexHandle
    from groundwire.ingestion.loaders import push_format
    from groundwire.ingestion.push import (
        PushDocument, delete_documents, one_file_upload, upsert_documents,
    )
    from groundwire.providers.embeddings.hashing import HashingEmbedder
    from groundwire.stores.base import DistanceMetric, IndexSpec
    from groundwire.stores.memory import MemoryStore

    def rss():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024

    async def main():
        h = IndexHandle(
            name="x", spec=IndexSpec("x", "hashing/64", 64, DistanceMetric.COSINE, "c"),
            store=MemoryStore(), embedder=HashingEmbedder(64),
            chunk_policy=ChunkPolicy(1000, 100, True), storage_quota=StorageQuota(0, 0, 0),
        )
        await upsert_documents(h, [PushDocument("small", "hello world " * 50)], "v")
        gc.collect()
        before = rss()
        columns = 300_000
        data = (",".join(f"c{i}" for i in range(columns)) + "\\n"
                + ",".join("1" for _ in range(columns)) + "\\n").encode()
        fmt, ext = push_format("text/csv")
        with one_file_upload():
            pushed = await upsert_documents(
                h, [PushDocument("big.csv", "", format=fmt, content=data, extension=ext)], "a"
            )
        del data
        gc.collect()
        peak = rss()
        await delete_documents(h, ["big.csv"], "a")
        gc.collect()
        after = rss()
        print(json.dumps({"before": before, "peak": peak, "after": after,
                          "chunks": pushed.chunks_written}))

    asyncio.run(main())
    """
)


def test_deleting_a_large_document_returns_its_memory() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=600, check=True
    )
    m = json.loads(done.stdout.strip().splitlines()[-1])
    report(
        "memory store",
        f"RSS {m['before']:.0f} MiB, {m['peak']:.0f} MiB holding a {m['chunks']}-chunk CSV, "
        f"{m['after']:.0f} MiB after deleting it",
    )
    added = m["peak"] - m["before"]
    assert added > 100, m  # the document really took memory
    assert m["after"] - m["before"] < added / 3, m
