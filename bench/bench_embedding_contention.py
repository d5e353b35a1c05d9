"""Query embedding latency while ingestion embeds documents with the same local model.

Usage: python bench/bench_embedding_contention.py [--seconds S] [--batch-size B]

One `LocalOnnxEmbedder` (int8 all-MiniLM-L6-v2) serves both: a background thread
embeds document batches of `--batch-size` passages back to back (what an ingestion
run does), while the foreground embeds one short query every 50 ms and times it.
Two arrangements, measured in the same process one after the other:

* one lock: every run of the model is serialized behind one lock, document and
  query alike (the provider's design before queries got their own lock; emulated
  here by an external lock around every call);
* per task (the provider as it is): runs of one task are serialized, but a query
  never waits behind a document batch.

Printed per arrangement: query latency alone (no ingestion) and under ingestion
(p50 / p99 / max over the queries of the window), and document throughput while
the queries run, which is what the second arrangement may cost ingestion.
Passages are the SciFact corpus when present locally, synthetic otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from groundwire.providers.embeddings.base import EmbeddingTask
from groundwire.providers.embeddings.onnx_local import LocalOnnxEmbedder

sys.path.insert(0, str(Path(__file__).parent))
from bench_embeddings import SCIFACT, load_passages

QUERIES = [
    "how long is parental leave",
    "vpn error after password change",
    "does vitamin d reduce fracture risk",
    "expense report deadline",
]


def percentile(sorted_ms: list[float], q: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(q * len(sorted_ms)))]


def measure(
    embedder: LocalOnnxEmbedder,
    passages: list[str],
    batch_size: int,
    seconds: float,
    one_lock: threading.Lock | None,
) -> dict[str, float]:
    @contextlib.contextmanager
    def gate() -> Iterator[None]:
        if one_lock is None:
            yield
        else:
            with one_lock:
                yield

    def query(i: int) -> float:
        start = time.perf_counter()
        with gate():
            embedder.embed_sync([QUERIES[i % len(QUERIES)]], EmbeddingTask.QUERY)
        return (time.perf_counter() - start) * 1000

    alone = sorted(query(i) for i in range(40))
    stop = threading.Event()
    embedded = 0

    def ingest() -> None:
        nonlocal embedded
        i = 0
        while not stop.is_set():
            batch = passages[i : i + batch_size] or passages[:batch_size]
            i = (i + batch_size) % len(passages)
            with gate():
                embedder.embed_sync(batch, EmbeddingTask.DOCUMENT)
            embedded += len(batch)

    worker = threading.Thread(target=ingest)
    worker.start()
    time.sleep(0.5)  # the first batch is running
    began, before = time.perf_counter(), embedded
    loaded: list[float] = []
    n = 0
    while time.perf_counter() - began < seconds:
        loaded.append(query(n))
        n += 1
        time.sleep(0.05)
    elapsed, done = time.perf_counter() - began, embedded - before
    stop.set()
    worker.join()
    loaded.sort()
    return {
        "alone_p50": percentile(alone, 0.5),
        "p50": percentile(loaded, 0.5),
        "p99": percentile(loaded, 0.99),
        "max": loaded[-1],
        "queries": len(loaded),
        "docs_per_s": done / elapsed,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--synthetic", action="store_true", help="ignore the SciFact corpus")
    args = parser.parse_args(argv)
    passages, source = load_passages(256, None if args.synthetic else SCIFACT)
    embedder = LocalOnnxEmbedder(max_batch_size=args.batch_size)
    print(
        f"machine: {os.cpu_count()} cores; model {embedder.info.model}, "
        f"{embedder.intra_op_threads} intra-op threads; passages: {source}; "
        f"document batches of {args.batch_size}; {args.seconds:.0f} s per arrangement"
    )
    rows = {
        "one lock (before)": measure(
            embedder, passages, args.batch_size, args.seconds, threading.Lock()
        ),
        "per task (now)": measure(embedder, passages, args.batch_size, args.seconds, None),
    }
    print(
        f"{'arrangement':<20}{'alone p50':>11}{'p50':>10}{'p99':>10}{'max':>10}"
        f"{'queries':>9}{'docs/s':>9}"
    )
    for name, r in rows.items():
        print(
            f"{name:<20}{r['alone_p50']:>9.1f}ms{r['p50']:>8.1f}ms{r['p99']:>8.1f}ms"
            f"{r['max']:>8.1f}ms{r['queries']:>9.0f}{r['docs_per_s']:>9.1f}"
        )
    before, now = rows["one lock (before)"], rows["per task (now)"]
    print(
        f"query p99 under ingestion: {before['p99'] / now['p99']:.0f}x lower; "
        f"document throughput {now['docs_per_s'] / before['docs_per_s']:.3f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
