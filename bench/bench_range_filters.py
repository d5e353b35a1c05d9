"""Range filters next to equality filters, on both stores, same data, same queries.

    .venv/bin/python bench/bench_range_filters.py [--chunks 20000] [--dsn DSN]

The corpus is bench_stores.py's (Zipfian text, clustered 384-d vectors, 10 chunks
per document), each document also carrying `year` (40 values, uniform) and
`published_at` (a distinct RFC 3339 timestamp per document, with one of four
offsets). Every filter below admits about 10% of the chunks:

- equality: `dept` = one of its 10 values (the GIN-indexed `@>` path);
- number range: 2026 <= year < 2030;
- timestamp range: the last tenth of the publication instants (> some instant).

Reported: p50/p99 of vector (top 10) and lexical (top 10) store calls, one at a
time after a warm-up pass, and whether every call returned 10 admitted hits.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import partial
from pathlib import Path

from groundwire.domain.metadata_ranges import (
    RangeBound,
    RangeCondition,
    RangeKind,
    parse_timestamp,
)
from groundwire.domain.retrieval import MetadataFilter, Scope
from groundwire.stores.base import DistanceMetric, IndexSpec, StagedDocument
from groundwire.stores.memory import MemoryStore
from groundwire.stores.postgres import PostgresSettings, open_postgres_store

sys.path.insert(0, str(Path(__file__).parent))
from bench_stores import Corpus, K, load, pct, timed

_OFFSETS = ["Z", "+02:00", "-05:00", "+09:30"]


def with_ranges(corpus: Corpus) -> str:
    """Adds year and published_at to every document; returns the timestamp bound
    that admits the last tenth of the documents."""
    start = datetime(2015, 1, 1, tzinfo=UTC)
    docs: list[StagedDocument] = []
    for d, staged in enumerate(corpus.docs):
        instant = start + timedelta(hours=7 * d, seconds=d % 61)
        offset = _OFFSETS[d % len(_OFFSETS)]
        local = instant
        if offset != "Z":
            sign = 1 if offset[0] == "+" else -1
            delta = timedelta(hours=int(offset[1:3]), minutes=int(offset[4:6])) * sign
            local = instant + delta
        stamp = local.replace(tzinfo=None).isoformat() + offset
        assert parse_timestamp(stamp) is not None
        meta = {**staged.document.metadata, "year": str(1990 + d % 40), "published_at": stamp}
        docs.append(replace(staged, document=replace(staged.document, metadata=meta)))
    corpus.docs = docs
    cut = start + timedelta(hours=7 * (len(docs) * 9 // 10))
    return cut.isoformat()


async def run(args: argparse.Namespace) -> None:
    corpus = Corpus(args.chunks)
    cut = with_ranges(corpus)
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    tmp: Path | None = None
    data_dir = Path(tempfile.gettempdir()) / "unused"
    if args.dsn is None:
        tmp = Path(tempfile.mkdtemp(prefix="gw-bench-"))
        data_dir = tmp / "pgdata"
    pg = await open_postgres_store(PostgresSettings(dsn=args.dsn, data_dir=data_dir))
    mem = MemoryStore()
    name = f"benchrange{int(time.time())}"
    spec = IndexSpec(name, "bench/clustered:384", 384, DistanceMetric.COSINE, "bench")
    instant = parse_timestamp(cut)
    assert instant is not None
    scopes = {
        "none": Scope(),
        "equality dept (10%)": Scope(filter=MetadataFilter({"dept": frozenset({"d3"})})),
        "number range year (10%)": Scope(
            filter=MetadataFilter(
                ranges={
                    "year": (
                        RangeCondition(
                            RangeKind.NUMBER,
                            RangeBound(Decimal(2026), True),
                            RangeBound(Decimal(2030), False),
                        ),
                    )
                }
            )
        ),
        "timestamp range (10%)": Scope(
            filter=MetadataFilter(
                ranges={
                    "published_at": (
                        RangeCondition(RangeKind.TIMESTAMP, RangeBound(instant, False)),
                    )
                }
            )
        ),
    }
    try:
        await load(mem, spec, corpus)
        await load(pg, spec, corpus)
        print(f"loaded {len(corpus.docs) * 10} chunks", flush=True)
        vec_q = corpus.vectors(args.queries)
        lex_q = corpus.lexical_queries(args.queries)
        print(f"| filter | store | vector p50 / p99 (ms) | lexical p50 / p99 (ms) | full top {K} |")
        print("| --- | --- | --- | --- | --- |")
        for label, scope in scopes.items():
            for store_label, store in (("postgres", pg), ("memory", mem)):
                vcalls: list[Callable[[], Awaitable[object]]] = [
                    partial(store.search_vector, name, v, K, scope) for v in vec_q
                ]
                lcalls: list[Callable[[], Awaitable[object]]] = [
                    partial(store.search_lexical, name, q, K, scope) for q in lex_q
                ]
                await timed(vcalls)
                await timed(lcalls)
                vt, vres = await timed(vcalls)
                lt, _ = await timed(lcalls)
                full = all(len(r) == K for r in vres)  # type: ignore[arg-type]
                print(
                    f"| {label} | {store_label} | {pct(vt, 50):.1f} / {pct(vt, 99):.1f} "
                    f"| {pct(lt, 50):.1f} / {pct(lt, 99):.1f} | {'yes' if full else 'NO'} |",
                    flush=True,
                )
    finally:
        await pg.close()
        await mem.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--dsn", default=None)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
