"""ghz load over one and over two `groundwire serve` replicas, client-side round
robin, each host on its own network namespace (issue 17, part 4).

    python bench/bench_ghz.py [--duration 10] [--concurrency 16] [--docs 1000]

Hosts (tests/support/netns.py): a PostgreSQL primary and its streaming hot standby
(the replicas read from it once it replayed the version), two replicas, and a
client host running ghz. Each replica is pinned with `taskset` to its own core
(replica0 on CPU 0, replica1 on CPU 1), as if each were its own small machine;
PostgreSQL and ghz (`--cpus 1`) are not pinned. Two runs of `--duration` s each of
lexical RetrieverService/Retrieve (top_k 10, queries cycling through a fixed set
over a synthetic corpus of `--docs` documents):

1. one replica: ghz targets replica0 alone;
2. two replicas: ghz targets `dns:///replicas:50051` with `--lb-strategy
   round_robin`; `replicas` resolves to both replicas' addresses through the client
   namespace's own hosts file (/etc/netns/<ns>/hosts, which `ip netns exec` mounts
   over /etc/hosts for that namespace only, removed afterwards), so gRPC's own
   round-robin balancer spreads the calls.

For each run: QPS, p50/p95/p99, errors, the share of reads each replica served
(its groundwire_store_reads counter) and the CPU each party used over the run
(from /proc: replica processes, PostgreSQL primary and standby processes, ghz), in
cores: a replica near 1.0 is bound by its core, PostgreSQL near its share of the
machine is the database. Needs root (network namespaces) and ghz
(scripts/install_ops_tools.sh ghz). Traffic stays inside this run's namespaces.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from synthetic import passages, queries  # noqa: E402

from groundwire_client.v1 import ingestion_pb2 as ing  # noqa: E402
from groundwire_client.v1 import ingestion_pb2_grpc, retriever_pb2, retriever_pb2_grpc  # noqa: E402
from tests.support.netns import Host, network, replicated_pair_on, unavailable  # noqa: E402
from tests.support.servers import ServerProcess, toml_config  # noqa: E402

GRPC_PORT = 50051
METRICS_PORT = 9464
GHZ = ROOT / ".tools" / "bin" / "ghz"
TICK = os.sysconf("SC_CLK_TCK")

CONFIG = """
[logging]
level = "WARNING"

[auth]
mode = "disabled"

[metrics]
enabled = true
address = "{metrics}"

[store]
kind = "postgres"
dsn = {{ env = "GW_PRIMARY" }}
read_dsns = [{{ env = "GW_STANDBY" }}]
pool_max_size = 8
connect_timeout_ms = 2000

[embedders.hash]
kind = "hashing"
dimensions = 64

[indexes.kb]
embedder = "hash"
ingestion = {{ strategy = "manual" }}
"""


def cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a live process (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICK


class CpuMeter:
    """CPU seconds per group of processes over a run, sampled every 0.25 s (a
    process that ends between samples loses at most that much)."""

    def __init__(self, groups: dict[str, Any]) -> None:
        # group -> callable returning the group's current pids
        self._groups = groups
        self._first: dict[tuple[str, int], float] = {}
        self._last: dict[tuple[str, int], float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        for name, pids in self._groups.items():
            for pid in pids():
                t = cpu_s(pid)
                if t is None:
                    continue
                self._first.setdefault((name, pid), t)
                self._last[(name, pid)] = t

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(0.25)

    def __enter__(self) -> CpuMeter:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def used(self) -> dict[str, float]:
        out = dict.fromkeys(self._groups, 0.0)
        for key, last in self._last.items():
            out[key[0]] += last - self._first[key]
        return out


def reads_served(host: Host) -> float:
    url = f"http://{host.address}:{METRICS_PORT}/metrics"
    with urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("groundwire_store_reads") and re.search(r'outcome="OK"', line):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def load_corpus(targets: list[str], docs: int) -> None:
    texts = passages(docs)
    async with grpc.aio.insecure_channel(targets[0]) as ch:
        push = ingestion_pb2_grpc.IngestionManagerServiceStub(ch)
        for start in range(0, docs, 100):
            await push.UpsertDocuments(
                ing.UpsertDocumentsRequest(
                    index_name="kb",
                    documents=[
                        ing.PushedDocument(document_id=f"d{i:05d}", text=texts[i])
                        for i in range(start, min(docs, start + 100))
                    ],
                ),
                timeout=120,
            )
    # Warm both replicas (their standby routing and caches) before measuring.
    for target in targets:
        async with grpc.aio.insecure_channel(target) as ch:
            read = retriever_pb2_grpc.RetrieverServiceStub(ch)
            for q in queries(20):
                await read.Retrieve(
                    retriever_pb2.RetrieveRequest(
                        query=retriever_pb2.RagQuery(
                            index_name="kb", text=q, mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL
                        )
                    ),
                    timeout=30,
                )


@contextlib.contextmanager
def hosts_file(netns: str, name: str, addresses: list[str]) -> Iterator[None]:
    """`name` resolving to `addresses` inside `netns` only (see module docstring)."""
    folder = Path("/etc/netns") / netns
    folder.mkdir(parents=True, exist_ok=False)
    try:
        (folder / "hosts").write_text(
            "127.0.0.1 localhost\n" + "".join(f"{a} {name}\n" for a in addresses)
        )
        yield
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(OSError):
            Path("/etc/netns").rmdir()  # only when empty (no other run's)


def run_ghz(
    client: Host,
    target: str,
    lb: str | None,
    args: argparse.Namespace,
    meter_groups: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, float]]:
    data = [
        {"query": {"index_name": "kb", "text": q, "mode": "RETRIEVAL_MODE_LEXICAL", "top_k": 10}}
        for q in queries(64)
    ]
    cmd = [
        *client.prefix,
        str(GHZ),
        "--insecure",
        "--proto", str(ROOT / "proto/groundwire/v1/retriever.proto"),
        "--import-paths", str(ROOT / "proto"),
        "--call", "groundwire.v1.RetrieverService/Retrieve",
        "--data", json.dumps(data),
        "--concurrency", str(args.concurrency),
        "--connections", "2",
        "--duration", f"{args.duration}s",
        "--timeout", "20s",
        "--cpus", "1",
        "--duration-stop", "wait",
        "--format", "json",
    ]  # fmt: skip
    if lb is not None:
        cmd += ["--lb-strategy", lb]
    cmd.append(target)
    ghz_pids: list[int] = []
    groups = {**meter_groups, "ghz": lambda: ghz_pids}
    with CpuMeter(groups) as meter:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        ghz_pids.append(proc.pid)
        out, err = proc.communicate(timeout=args.duration + 60)
    if proc.returncode != 0:
        raise SystemExit(f"ghz failed ({proc.returncode}): {err.decode()[-2000:]}")
    report: dict[str, Any] = json.loads(out)
    return report, {k: v / args.duration for k, v in meter.used().items()}


def percentile(report: dict[str, Any], p: int) -> float:
    for entry in report.get("latencyDistribution") or []:
        if entry["percentage"] == p:
            return float(entry["latency"]) / 1e6
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=10, help="seconds per run (max 30)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--docs", type=int, default=1000)
    args = parser.parse_args()
    args.duration = min(args.duration, 30)
    reason = unavailable()
    if reason is not None:
        raise SystemExit(f"needs network namespaces: {reason}")
    if not GHZ.exists():
        raise SystemExit("ghz missing: run scripts/install_ops_tools.sh ghz")
    roles = ["primary", "standby", "replica0", "replica1", "client"]
    tmp = Path(tempfile.mkdtemp(prefix="gw-bench-ghz-"))
    with network(roles) as net, replicated_pair_on(net["primary"], net["standby"]) as pair:
        primary, standby = pair
        reps = [net["replica0"], net["replica1"]]
        servers: list[ServerProcess] = []
        try:
            for core, host in enumerate(reps):
                cfg = toml_config(
                    tmp, CONFIG.format(metrics=f"{host.address}:{METRICS_PORT}"), f"r{core}.toml"
                )
                server = ServerProcess(
                    cfg,
                    GRPC_PORT,
                    tmp / f"r{core}.log",
                    env={"GW_PRIMARY": primary.dsn, "GW_STANDBY": standby.dsn},
                    host=host.address,
                    prefix=(*host.prefix, "taskset", "-c", str(core % (os.cpu_count() or 1))),
                )
                servers.append(server)
                server.start(wait=False)
            for server in servers:
                server.wait_serving(120)
            t0 = time.perf_counter()
            asyncio.run(load_corpus([s.target for s in servers], args.docs))
            print(f"corpus: {args.docs} documents pushed in {time.perf_counter() - t0:.1f} s")
            groups: dict[str, Any] = {
                "replica0": lambda: [servers[0].pid],
                "replica1": lambda: [servers[1].pid],
                "pg primary": net["primary"].pids,
                "pg standby": net["standby"].pids,
            }
            client = net["client"]
            rows = []
            load_before = Path("/proc/loadavg").read_text().split()[:3]
            with hosts_file(client.netns, "replicas", [h.address for h in reps]):
                for label, target, lb in (
                    ("1 replica", f"{reps[0].address}:{GRPC_PORT}", None),
                    ("2 replicas (round robin)", f"dns:///replicas:{GRPC_PORT}", "round_robin"),
                ):
                    served0 = [reads_served(h) for h in reps]
                    report, cores = run_ghz(client, target, lb, args, groups)
                    served = [reads_served(h) - s for h, s in zip(reps, served0, strict=True)]
                    rows.append((label, report, cores, served))
        finally:
            for server in servers:
                server.stop(10)
            shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"\nghz: lexical Retrieve, concurrency {args.concurrency}, {args.duration} s per run, "
        f"{os.cpu_count()} cores; replicas pinned to CPU 0 / CPU 1"
    )
    print(
        f"{'':26} {'QPS':>7} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} {'errors':>6}  reads r0/r1"
    )
    for label, report, _cores, served in rows:
        codes = report.get("statusCodeDistribution") or {}
        errors = sum(int(v) for k, v in codes.items() if k != "OK")
        print(
            f"{label:26} {float(report['rps']):7.0f} {percentile(report, 50):7.1f} "
            f"{percentile(report, 95):7.1f} {percentile(report, 99):7.1f} {errors:6d}  "
            f"{served[0]:.0f}/{served[1]:.0f}" + (f"  {dict(codes)}" if errors else "")
        )
    print(f"load average before the runs: {load_before}")
    print("\nCPU over each run, in cores (1.0 = one core busy for the whole run):")
    for label, _, cores, _ in rows:
        print(f"  {label:26} " + ", ".join(f"{k} {v:.2f}" for k, v in cores.items()))
    for label, _, cores, _ in rows:
        busiest = max(cores, key=lambda k: cores[k])
        print(f"  bottleneck, {label}: {busiest} ({cores[busiest]:.2f} cores)")


if __name__ == "__main__":
    main()
