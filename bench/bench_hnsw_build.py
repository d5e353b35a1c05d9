"""pgvector's HNSW build, serial against parallel: the same vectors, the same graph
parameters, built with 0, 1, 2... parallel maintenance workers (the leader always
builds too), each build timed and its graph's recall@10 checked against exact search,
so a faster build is not a worse graph.

    python bench/bench_hnsw_build.py [--vectors 200000] [--workers 0 1 2]
        [--m 16] [--ef-construction 64] [--vectors-kind latent] [--data-dir D]

One embedded PostgreSQL (bench_million.py's server settings), one table of seeded
384-d vectors (bench/vector_data.py), `maintenance_work_mem` sized as the store sizes
it (stores/postgres/vectors.py build_memory_bytes: a graph that outgrows it is built
on disk, several times slower, whatever the workers). Prints wall seconds, the
server's CPU seconds, and recall@10 / p50 at ef_search 40 and 100 for every build.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from bench_million import server_cpu, start_server
from vector_data import GENERATORS

from groundwire.stores.postgres.vectors import build_memory_bytes


def _literal(v: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in v.tolist()) + "]"


def load(conn: psycopg.Connection, x: np.ndarray) -> None:
    conn.execute("DROP TABLE IF EXISTS bench_vectors")
    conn.execute(f"CREATE TABLE bench_vectors (id bigint, embedding vector({x.shape[1]}))")
    with (
        conn.cursor() as cur,
        cur.copy("COPY bench_vectors (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy,
    ):
        copy.set_types(["int8", "vector"])
        for i, v in enumerate(x):
            copy.write_row((i, v))
    conn.execute("VACUUM ANALYZE bench_vectors")


def build(
    conn: psycopg.Connection, data_dir: Path, workers: int, args: argparse.Namespace, n: int
) -> tuple[float, float]:
    conn.execute("DROP INDEX IF EXISTS bench_vectors_hnsw")
    memory = build_memory_bytes(n, args.dim, args.m, False)
    conn.execute(f"SET maintenance_work_mem = '{max(memory, 64 << 20) >> 20}MB'")
    conn.execute(f"SET max_parallel_maintenance_workers = {workers}")
    cpu0, t0 = server_cpu(data_dir), time.perf_counter()
    conn.execute(
        "CREATE INDEX bench_vectors_hnsw ON bench_vectors USING hnsw "
        f"(embedding vector_cosine_ops) WITH (m = {args.m}, ef_construction = {args.ef_construction})"
    )
    return time.perf_counter() - t0, server_cpu(data_dir) - cpu0


def recall(
    conn: psycopg.Connection, x: np.ndarray, queries: np.ndarray, truth: np.ndarray, ef: int
) -> tuple[float, float]:
    conn.execute(f"SET hnsw.ef_search = {ef}")
    found, times = 0, []
    for q, want in zip(queries, truth, strict=True):
        t = time.perf_counter()
        rows = conn.execute(
            "SELECT id FROM bench_vectors ORDER BY embedding <=> %s::vector LIMIT 10", [_literal(q)]
        ).fetchall()
        times.append(time.perf_counter() - t)
        found += len({r[0] for r in rows} & set(want.tolist()))
    return found / truth.size, statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vectors", type=int, default=200_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construction", type=int, default=64)
    ap.add_argument("--vectors-kind", choices=sorted(GENERATORS), default="latent")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--data-dir", type=Path, default=None)
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    gen = GENERATORS[args.vectors_kind](rng, args.dim)
    # In batches: the latent sampler gathers a topic basis per point (dim x 48 floats).
    x = np.concatenate(
        [gen.sample(rng, min(5_000, args.vectors - i)) for i in range(0, args.vectors, 5_000)]
    )
    queries = gen.sample(np.random.default_rng(8), args.queries)
    sims = queries @ x.T
    truth = np.argsort(-sims, axis=1)[:, :10]
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="gw-hnsw-build-"))
    server = start_server(data_dir / "pg")
    print(
        f"{args.vectors:,} x {args.dim} {args.vectors_kind} vectors, m {args.m}, "
        f"ef_construction {args.ef_construction}, {os.cpu_count()} cores; "
        f"loadavg {' '.join(f'{v:.2f}' for v in os.getloadavg())}",
        flush=True,
    )
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            from pgvector.psycopg import register_vector

            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            register_vector(conn)
            t = time.perf_counter()
            load(conn, x)
            print(f"loaded in {time.perf_counter() - t:.0f} s", flush=True)
            print(
                "| workers | build s (wall) | server CPU s | recall@10 / p50 ms at ef 40 | at ef 100 | loadavg |"
            )
            print("| --- | --- | --- | --- | --- | --- |")
            for workers in args.workers:
                wall, cpu = build(conn, data_dir / "pg", workers, args, args.vectors)
                r40, p40 = recall(conn, x, queries, truth, 40)
                r100, p100 = recall(conn, x, queries, truth, 100)
                print(
                    f"| {workers} | {wall:.1f} | {cpu:.1f} | {r40:.3f} / {p40:.1f} | "
                    f"{r100:.3f} / {p100:.1f} | {os.getloadavg()[0]:.2f} |",
                    flush=True,
                )
    finally:
        server.stop_process()


if __name__ == "__main__":
    main()
