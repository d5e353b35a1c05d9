"""Uploading one file through the dashboard API's raw upload route
(POST /api/rag/indexes/{name}/files, api/http/dashboard_upload.py): throughput
and the server's memory.

For each size, a fresh `groundwire serve` on loopback (memory store, the hashing
embedder at 32 dimensions, one index `big` with max_file_bytes 60 MiB and chunks of
20,000 characters, `[http] max_upload_bytes` at its default of 64 MiB) takes one text
file of that size, streamed from disk by the client (curl-like: the client holds no
copy). Printed per size: the wall time of the request, the throughput in MB/s
(decimal megabytes), the chunks written, and the server process's peak RSS growth
(VmHWM after the upload minus VmRSS before it, from /proc), absolute and per MB
of file.

    .venv/bin/python bench/bench_upload.py [--mb 1 10 50]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.servers import ServerProcess, free_port, toml_config  # noqa: E402
from tests.support.toml_writer import dumps  # noqa: E402

LINE = b"The quarterly operations report lists every shipment, invoice and audit of the year.\n"


def config(http_port: int) -> dict[str, object]:
    return {
        "auth": {"mode": "disabled"},
        "logging": {"level": "WARNING"},
        "http": {"address": f"127.0.0.1:{http_port}"},
        "embedders": {"hash": {"kind": "hashing", "dimensions": 32}},
        "indexes": {
            "big": {
                "embedder": "hash",
                "chunking": {"size": 20_000, "overlap": 0},
                "ingestion": {"strategy": "manual", "max_file_bytes": 60 * 1024 * 1024},
            }
        },
    }


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _file(path: Path, size: int) -> None:
    with path.open("wb") as out:
        written = 0
        while written < size:
            piece = LINE[: size - written]
            out.write(piece)
            written += len(piece)


def _chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        while piece := f.read(1 << 20):
            yield piece


def measure(megabytes: float, tmp: Path) -> str:
    size = int(megabytes * 1_000_000)
    path = tmp / f"upload-{megabytes:g}mb.txt"
    _file(path, size)
    http_port = free_port()
    run = tmp / f"run-{megabytes:g}"
    run.mkdir()
    server = ServerProcess(
        toml_config(run, dumps(config(http_port))), free_port(), run / "server.log"
    )
    server.start(timeout=120)
    try:
        before = _status_kib(server.pid, "VmRSS")
        start = time.perf_counter()
        r = httpx.post(
            f"http://127.0.0.1:{http_port}/api/rag/indexes/big/files",
            params={"name": path.name},
            content=_chunks(path),
            headers={"content-type": "text/plain", "content-length": str(size)},
            timeout=600,
        )
        elapsed = time.perf_counter() - start
        peak = _status_kib(server.pid, "VmHWM")
    finally:
        server.stop()
    if r.status_code != 200:
        return f"{megabytes:>6g} MB  HTTP {r.status_code}: {r.text[:200]}"
    answer = r.json()
    growth_mib = (peak - before) / 1024
    return (
        f"{megabytes:>6g} MB  {elapsed:7.2f} s  {size / 1e6 / elapsed:6.2f} MB/s"
        f"  {answer['chunksWritten']:>5} chunks  failures {len(answer['failures'])}"
        f"  peak RSS growth {growth_mib:7.1f} MiB ({growth_mib / megabytes:4.1f} MiB per MB)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, nargs="+", default=[1.0, 10.0, 50.0])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-upload-") as tmp:
        for mb in args.mb:
            print(measure(mb, Path(tmp)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
