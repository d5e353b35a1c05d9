"""A bucket beside a directory of the same files (issue 48): objects/s listed and read.

    python bench/bench_bucket_ingest.py [--objects 1000] [--rounds 3]

Writes `--objects` small text files (one chunk each) to a directory and puts the same
files into a bucket of a real S3 server on this machine (SeaweedFS, `weed server -s3`,
built by scripts/install_ops_tools.sh weed), then, in the same process and alternating
directory and bucket in each round (so machine load hits both alike):

1. listing: the directory walk (`discover`) against the bucket's paginated listing
   (`list_source`, 1,000 keys a page): items/s;
2. a first ingestion of everything into a fresh in-memory index (hashing embedder, so
   reading, parsing and staging show rather than a model): items/s read end to end;
3. a second ingestion of the unchanged source: items/s checked (the directory re-reads
   and hashes every file; the bucket compares the listing's ETag/size/last-modified and
   downloads nothing).

Reports the median of the rounds and the bucket's ratio to the directory.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from groundwire.app.config import parse_config  # noqa: E402
from groundwire.app.factories import Components, build_components  # noqa: E402
from groundwire.domain.operations import OperationState  # noqa: E402
from groundwire.indexes.sources import DirectorySource, S3Source  # noqa: E402
from groundwire.ingestion.manager import IngestionManager  # noqa: E402
from groundwire.ingestion.s3_source import list_source  # noqa: E402
from groundwire.ingestion.sources import discover  # noqa: E402
from tests.support.seaweedfs import SeaweedS3, weed_binary  # noqa: E402

KEY_ENV, SECRET_ENV = "GW_BENCH_S3_KEY", "GW_BENCH_S3_SECRET"
BUCKET = "bench-bucket"


def text(i: int) -> str:
    return f"# Note {i}\n\nNote number {i} records decision {i * 7919 % 10007} of the team.\n"


def configuration(weed: SeaweedS3, docs: Path) -> dict[str, object]:
    s3 = {
        "kind": "s3",
        "endpoint": weed.endpoint,
        "bucket": BUCKET,
        "prefix": "notes/",
        "addressing": "path",
        "allow_cidrs": ["127.0.0.1/32"],
        "access_key_id": {"env": KEY_ENV},
        "secret_access_key": {"env": SECRET_ENV},
    }
    directory = {"kind": "directory", "path": str(docs)}
    index = {"embedder": "hash", "ingestion": {"embed_batch_size": 256}}
    return {
        "auth": {"mode": "disabled"},
        "store": {"kind": "memory"},
        "embedders": {"hash": {"kind": "hashing", "dimensions": 64}},
        "indexes": {
            "folder": {**index, "sources": [directory]},
            "bucket": {**index, "sources": [s3]},
        },
    }


async def ingest_twice(cfg: dict[str, object], index: str) -> tuple[float, float]:
    """Seconds of a first ingestion into a fresh index, then of a second, unchanged one."""
    components = await parse_and_build(cfg)
    try:
        manager = IngestionManager(components.catalog, components.operation_log)
        times = []
        for _ in range(2):
            t0 = time.perf_counter()
            op = await manager.wait((await manager.start(index)).id)
            times.append(time.perf_counter() - t0)
            assert op.state is OperationState.SUCCEEDED, op
        await manager.close()
        return times[0], times[1]
    finally:
        await components.aclose()


async def parse_and_build(cfg: dict[str, object]) -> Components:
    return await build_components(parse_config(cfg))


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gw-bucket-bench-"))
    docs = tmp / "notes"
    docs.mkdir()
    files = {f"note{i:05d}.md": text(i).encode() for i in range(args.objects)}
    for name, body in files.items():
        (docs / name).write_bytes(body)
    weed = SeaweedS3(weed_binary(), tmp / "seaweedfs")
    weed.start()
    try:
        os.environ[KEY_ENV], os.environ[SECRET_ENV] = weed.access_key, weed.secret_key
        weed.make_bucket(BUCKET)
        t0 = time.perf_counter()
        weed.put(BUCKET, {f"notes/{k}": v for k, v in files.items()})
        print(f"put {args.objects} objects in {time.perf_counter() - t0:.1f} s (setup)")
        cfg = configuration(weed, docs)
        components = await parse_and_build(cfg)
        folder_src = components.catalog.get("folder").sources[0]
        bucket_src = components.catalog.get("bucket").sources[0]
        extensions = components.catalog.get("bucket").extensions
        await components.aclose()
        assert isinstance(folder_src, DirectorySource) and isinstance(bucket_src, S3Source)
        rows: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            assert len(discover([folder_src], extensions)) == args.objects
            rows.setdefault("list folder", []).append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            assert len(await list_source(bucket_src, extensions)) == args.objects
            rows.setdefault("list bucket", []).append(time.perf_counter() - t0)
            for index in ("folder", "bucket"):
                first, second = await ingest_twice(cfg, index)
                rows.setdefault(f"read {index}", []).append(first)
                rows.setdefault(f"unchanged {index}", []).append(second)
    finally:
        weed.stop()
    n = args.objects
    print(f"{n} objects, median of {args.rounds} rounds (items/s, higher is better)")
    for what in ("list", "read", "unchanged"):
        folder = n / statistics.median(rows[f"{what} folder"])
        bucket = n / statistics.median(rows[f"{what} bucket"])
        print(
            f"  {what:9s} directory {folder:10.0f}/s   bucket {bucket:10.0f}/s"
            f"   bucket/directory {bucket / folder:.3f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
