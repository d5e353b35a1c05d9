"""A bounded soak: mixed load against one `groundwire serve` process on loopback.

    python bench/soak.py [--minutes 10] [--embedder hashing|minilm] [--store memory|postgres]

The server (a subprocess on 127.0.0.1, auth disabled) serves the demo handbook
(`handbook`, ingested on startup), a push-only index (`pushed`) and an agent
(`assistant`: offline extractive model, hybrid retrieval, offline reranker). For
`--minutes` minutes, at bounded rates:

- Retrieve: `--retrieve-callers` callers, each at most `--retrieve-rate` calls/s,
  cycling through semantic, lexical and hybrid; a lexical query for an identifier
  that is always in the handbook must never come back empty (an empty answer is
  counted as an error: it would mean a reader saw a gap during a re-ingestion);
- ExecuteStream: `--stream-callers` callers at `--stream-rate` each (every
  stream must end with exactly one terminal event, EXECUTION_COMPLETED);
- background ingestion: every `--push-interval` s an UpsertDocuments of new
  documents into `pushed` plus a DeleteDocuments of the oldest ones (the index
  stays at about `--push-window` documents, so memory has no reason to grow),
  and every `--reingest-interval` s a StartIngestion of `handbook` watched to its
  end with WatchIngestion (it must SUCCEED); before each run a small second
  source of the index is changed (two files rewritten, one deleted, one added)
  so every run really ingests, deletes and publishes.

Each minute it prints, per RPC, the calls, errors and p50/p99 latency, and the
server's RSS (VmRSS from /proc/<pid>/status). The summary compares the last
minute with the first: p99 drift per RPC and RSS growth. Exit status 1 when any
error occurred.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2

from groundwire.app.defaults import HANDBOOK_DIR
from groundwire_client.v1 import agent_pb2 as ag
from groundwire_client.v1 import agent_pb2_grpc, ingestion_pb2_grpc, retriever_pb2_grpc
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import retriever_pb2 as rt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.servers import free_port, health_stub

MODES = {
    "semantic": rt.RETRIEVAL_MODE_SEMANTIC,
    "lexical": rt.RETRIEVAL_MODE_LEXICAL,
    "hybrid": rt.RETRIEVAL_MODE_HYBRID,
}
QUESTIONS = [
    "how do I get back into my account?",
    "parental leave policy POL-HR-014",
    "what is the expense limit for client dinners",
    "VPN keeps disconnecting on hotel wifi",
    "error CS1503 cannot convert argument",
    "how should I report a security incident",
    "remote work from another country",
    "code review approval rules",
    '"account recovery" reset',
    "POL-SEC-011",
]
# Always present in the handbook: a lexical search for it must never be empty.
SENTINEL = "POL-HR-014"
WORDS = [
    "ledger",
    "quarterly",
    "vendor",
    "onboarding",
    "laptop",
    "badge",
    "escalation",
    "rotation",
    "invoice",
    "audit",
    "travel",
    "per-diem",
    "approval",
    "sandbox",
    "deploy",
    "rollback",
    "incident",
    "pager",
    "runbook",
    "backlog",
    "sprint",
]


def rss_kib(pid: int) -> int:
    """Resident set size of a process in KiB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def pct(values: list[float], p: float) -> float:
    """The p-quantile (nearest rank) in milliseconds; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1e3


@dataclass
class Minute:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter[str] = field(default_factory=Counter)
    error_codes: Counter[str] = field(default_factory=Counter)
    rss_kib: int = 0


class Recorder:
    """Per-minute latencies and errors, keyed by RPC name."""

    def __init__(self, started: float, minutes: float) -> None:
        self.started = started
        self.last = max(0, int(minutes * 60 - 1e-9) // 60)
        self.minutes: dict[int, Minute] = defaultdict(Minute)

    def minute(self, at: float | None = None) -> int:
        """The minute a call belongs to: the one it started in (calls still
        running at the end count in the last minute)."""
        elapsed = (time.monotonic() if at is None else at) - self.started
        return min(self.last, int(elapsed // 60))

    def ok(self, rpc: str, seconds: float, started: float) -> None:
        self.minutes[self.minute(started)].latencies[rpc].append(seconds)

    def error(self, rpc: str, code: str, started: float) -> None:
        m = self.minutes[self.minute(started)]
        m.errors[rpc] += 1
        m.error_codes[f"{rpc}:{code}"] += 1


def churn(directory: Path, run: int, rng: random.Random) -> None:
    """Change the churn source before a re-ingestion: rewrite two files, delete
    one and add one, so every run has documents to ingest and to delete."""
    directory.mkdir(exist_ok=True)
    files = sorted(directory.glob("*.md"))
    for f in files[:1]:
        f.unlink()
    for f in files[1:3]:
        f.write_text(f"# {f.stem} revision {run}\n\n" + " ".join(rng.choices(WORDS, k=300)))
    new = directory / f"churn-{run:05d}.md"
    new.write_text(f"# churn {run}\n\n" + " ".join(rng.choices(WORDS, k=300)))


def write_config(tmp: Path, embedder: str, store: str) -> Path:
    emb = (
        '{ kind = "hashing", dimensions = 256 }'
        if embedder == "hashing"
        else '{ kind = "local-onnx" }'
    )
    store_block = (
        'kind = "memory"'
        if store == "memory"
        else f'kind = "postgres"\ndata_dir = "{tmp / "pgdata"}"'
    )
    cfg = tmp / "soak.toml"
    cfg.write_text(
        f"""
[logging]
level = "WARNING"

[auth]
mode = "disabled"

[store]
{store_block}

[embedders]
emb = {emb}

[indexes.handbook]
embedder = "emb"
sources = [
  {{ kind = "directory", path = "{HANDBOOK_DIR}", glob = "**/*.md" }},
  {{ kind = "directory", path = "{tmp / "churn"}", glob = "*.md" }},
]
ingestion = {{ strategy = "on_startup" }}

[indexes.pushed]
embedder = "emb"

[rerankers.overlap]
kind = "offline"

[models.offline]
kind = "offline"

[agents.assistant]
name = "Soak assistant"
model = "offline/extractive-v1"

[agents.assistant.rag]
index = "handbook"
retrieval_mode = "hybrid"
mode = "grounded"
no_context_behavior = "return_not_found"
acceptance = {{ candidate_count = 20, maximum_accepted_results = 5 }}
reranking = {{ enabled = true, reranker = "overlap", maximum_candidates = 5 }}
"""
    )
    return cfg


async def paced(
    rate: float, until: float, body: Callable[[int], Awaitable[None]], offset: int
) -> None:
    """Call `body(i)` at most `rate` times per second until `until`."""
    period = 1.0 / rate
    i = offset
    nxt = time.monotonic() + random.random() * period
    while True:
        now = time.monotonic()
        if now >= until:
            return
        if nxt > now:
            await asyncio.sleep(min(nxt - now, until - now))
            continue
        nxt += period
        if nxt < now:
            nxt = now + period  # never burst to catch up
        await body(i)
        i += 1


async def timed(rec: Recorder, rpc: str, call: Callable[[], Awaitable[bool]]) -> None:
    """Run one call; `call` returns False for a wrong-but-OK answer (an error too)."""
    started = time.monotonic()
    t0 = time.perf_counter()
    try:
        good = await call()
    except grpc.aio.AioRpcError as err:
        rec.error(rpc, err.code().name, started)
        return
    if good:
        rec.ok(rpc, time.perf_counter() - t0, started)
    else:
        rec.error(rpc, "WRONG_ANSWER", started)


async def wait_serving(channel: grpc.aio.Channel, server: asyncio.subprocess.Process) -> float:
    health = health_stub(channel)
    t0 = time.perf_counter()
    while True:
        if server.returncode is not None:
            raise SystemExit("the server exited during startup")
        with contextlib.suppress(grpc.aio.AioRpcError):
            r = await health.Check(health_pb2.HealthCheckRequest(), timeout=2)
            if r.status == health_pb2.HealthCheckResponse.SERVING:
                return time.perf_counter() - t0
        if time.perf_counter() - t0 > 600:
            raise SystemExit("the server did not become SERVING within 10 minutes")
        await asyncio.sleep(0.2)


async def soak(args: argparse.Namespace) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="gw-soak-"))
    cfg = write_config(tmp, args.embedder, args.store)
    seed = random.Random(args.seed)
    for run in range(-4, 0):
        churn(tmp / "churn", run, seed)
    port = free_port()
    server_log = tmp / "server.log"
    with server_log.open("wb") as log_file:
        server = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).parent / "groundwire"),
            "serve",
            "--config",
            str(cfg),
            "--address",
            f"127.0.0.1:{port}",
            stderr=log_file,
            stdout=subprocess.DEVNULL,
        )
        try:
            return await drive(args, port, server, server_log)
        finally:
            if server.returncode is None:
                server.terminate()
                try:
                    await asyncio.wait_for(server.wait(), 30)
                except TimeoutError:
                    server.kill()
                    await server.wait()
            shutil.rmtree(tmp, ignore_errors=True)


async def drive(
    args: argparse.Namespace, port: int, server: asyncio.subprocess.Process, server_log: Path
) -> int:
    rng = random.Random(args.seed)
    churn_dir = server_log.parent / "churn"
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
        startup = await wait_serving(ch, server)
        retriever = retriever_pb2_grpc.RetrieverServiceStub(ch)
        agents = agent_pb2_grpc.AgentServiceStub(ch)
        ingestion = ingestion_pb2_grpc.IngestionManagerServiceStub(ch)
        rss_start = rss_kib(server.pid)
        print(
            f"soak: {args.minutes:g} min, embedder={args.embedder}, store={args.store}, "
            f"{os.cpu_count()} cores (client and server share them); server pid {server.pid}, "
            f"startup+ingest {startup:.1f} s, RSS at start {rss_start / 1024:.1f} MiB",
            flush=True,
        )
        print(
            f"load: Retrieve {args.retrieve_callers} x {args.retrieve_rate:g}/s, ExecuteStream "
            f"{args.stream_callers} x {args.stream_rate:g}/s, push every {args.push_interval:g} s, "
            f"StartIngestion every {args.reingest_interval:g} s",
            flush=True,
        )
        started = time.monotonic()
        until = started + args.minutes * 60
        rec = Recorder(started, args.minutes)
        counters: Counter[str] = Counter()

        async def retrieve(i: int) -> None:
            mode = list(MODES)[i % 3]
            sentinel = i % 10 == 0
            text = SENTINEL if sentinel else QUESTIONS[i % len(QUESTIONS)]
            req = rt.RetrieveRequest(
                query=rt.RagQuery(
                    index_name="handbook",
                    text=text,
                    mode=rt.RETRIEVAL_MODE_LEXICAL if sentinel else MODES[mode],
                    top_k=10,
                )
            )

            async def call() -> bool:
                resp = await retriever.Retrieve(req, timeout=args.timeout)
                return bool(resp.results) or not sentinel

            await timed(rec, f"Retrieve/{'lexical' if sentinel else mode}", call)

        async def execute_stream(i: int) -> None:
            req = ag.ExecuteStreamRequest(
                input=ag.ExecutionInput(agent_id="assistant", message=QUESTIONS[i % len(QUESTIONS)])
            )

            async def call() -> bool:
                terminal = []
                async for ev in agents.ExecuteStream(req, timeout=args.timeout):
                    if ev.type in (
                        ag.EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED,
                        ag.EXECUTION_EVENT_TYPE_EXECUTION_FAILED,
                    ):
                        terminal.append(ev.type)
                return terminal == [ag.EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED]

            await timed(rec, "ExecuteStream", call)

        pushed: list[str] = []

        async def push(i: int) -> None:
            docs = []
            for j in range(args.push_batch):
                doc_id = f"soak/{i:06d}-{j}"
                words = " ".join(rng.choice(WORDS) for _ in range(120))
                docs.append(ing.PushedDocument(document_id=doc_id, title=f"Soak {i}", text=words))
            upsert = ing.UpsertDocumentsRequest(index_name="pushed", documents=docs)

            async def do_upsert() -> bool:
                resp = await ingestion.UpsertDocuments(upsert, timeout=args.timeout)
                return resp.upserted == len(docs) and not resp.failures

            await timed(rec, "UpsertDocuments", do_upsert)
            pushed.extend(d.document_id for d in docs)
            if len(pushed) > args.push_window:
                old = pushed[: len(pushed) - args.push_window]
                del pushed[: len(old)]
                delete = ing.DeleteDocumentsRequest(index_name="pushed", document_ids=old)

                async def do_delete() -> bool:
                    resp = await ingestion.DeleteDocuments(delete, timeout=args.timeout)
                    return resp.deleted == len(old)

                await timed(rec, "DeleteDocuments", do_delete)

        async def reingest(i: int) -> None:
            if i == 0:
                return  # the startup run just finished
            churn(churn_dir, i, rng)

            async def call() -> bool:
                try:
                    op = (
                        await ingestion.StartIngestion(
                            ing.StartIngestionRequest(index_name="handbook"), timeout=args.timeout
                        )
                    ).operation
                except grpc.aio.AioRpcError as err:
                    if err.code() == grpc.StatusCode.FAILED_PRECONDITION:
                        counters["StartIngestion conflicts"] += 1
                        return True
                    raise
                state = op.state
                async for update in ingestion.WatchIngestion(
                    ing.WatchIngestionRequest(operation_id=op.id), timeout=120
                ):
                    state = update.operation.state
                counters[ing.OperationState.Name(state)] += 1
                return state == ing.OPERATION_STATE_SUCCEEDED

            await timed(rec, "StartIngestion+Watch", call)

        async def sample_rss() -> None:
            while time.monotonic() < until:
                rec.minutes[rec.minute()].rss_kib = rss_kib(server.pid)
                await asyncio.sleep(1.0)

        async def report() -> None:
            shown = 0
            while True:
                await asyncio.sleep(1.0)
                now = time.monotonic()
                if now >= until:
                    return
                while shown < int((now - started) // 60):
                    print_minute(shown, rec.minutes[shown])
                    shown += 1

        tasks = [
            *(
                paced(args.retrieve_rate, until, retrieve, w * 1000)
                for w in range(args.retrieve_callers)
            ),
            *(
                paced(args.stream_rate, until, execute_stream, w * 1000)
                for w in range(args.stream_callers)
            ),
            paced(1.0 / args.push_interval, until, push, 0),
            paced(1.0 / args.reingest_interval, until, reingest, 0),
            sample_rss(),
        ]
        reporter = asyncio.create_task(report())
        await asyncio.gather(*tasks)
        await reporter
        # Calls still running at the end were counted in the last minute.
        for index in sorted(rec.minutes):
            if index >= int((until - started) // 60) or index == rec.last:
                print_minute(index, rec.minutes[index])
        alive = server.returncode is None
        health_ok = False
        with contextlib.suppress(grpc.aio.AioRpcError):
            r = await health_stub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5)
            health_ok = r.status == health_pb2.HealthCheckResponse.SERVING
    text = await asyncio.to_thread(server_log.read_text, errors="replace")
    server_lines = text.splitlines()
    warnings = sum(1 for line in server_lines if '"level": "WARNING"' in line)
    errors_logged = sum(1 for line in server_lines if '"level": "ERROR"' in line)
    return summarize(rec, rss_start, counters, alive and health_ok, warnings, errors_logged)


def print_minute(index: int, m: Minute) -> None:
    parts = []
    for rpc in sorted(set(m.latencies) | set(m.errors)):
        lat = m.latencies.get(rpc, [])
        parts.append(
            f"{rpc} n={len(lat) + m.errors[rpc]} err={m.errors[rpc]} "
            f"p50={pct(lat, 0.5):.1f} p99={pct(lat, 0.99):.1f}"
        )
    print(f"[minute {index + 1:2d}] RSS {m.rss_kib / 1024:7.1f} MiB | " + " | ".join(parts))
    if m.error_codes:
        print(f"            errors: {dict(m.error_codes)}")
    sys.stdout.flush()


def summarize(
    rec: Recorder,
    rss_start: int,
    counters: Counter[str],
    serving_at_end: bool,
    warnings: int,
    errors_logged: int,
) -> int:
    indexes = sorted(rec.minutes)
    rpcs = sorted({r for m in rec.minutes.values() for r in (*m.latencies, *m.errors)})
    total_calls = sum(len(v) for m in rec.minutes.values() for v in m.latencies.values())
    total_errors = sum(sum(m.errors.values()) for m in rec.minutes.values())
    total_calls += total_errors
    codes: Counter[str] = Counter()
    for m in rec.minutes.values():
        codes.update(m.error_codes)
    rss = [m.rss_kib for m in rec.minutes.values() if m.rss_kib]
    print("\n==================== soak summary ====================")
    print(f"minutes: {len(indexes)}   calls: {total_calls}   errors: {total_errors}")
    if codes:
        print(f"errors by rpc:code: {dict(codes)}")
    print(f"ingestion runs: {dict(counters)}")
    print(
        f"{'rpc':<24}{'calls':>8}{'err':>6}{'p50 first':>11}{'p50 last':>10}"
        f"{'p99 first':>11}{'p99 last':>10}{'p99 drift':>11}"
    )
    for rpc in rpcs:
        calls = sum(len(m.latencies.get(rpc, [])) + m.errors[rpc] for m in rec.minutes.values())
        errs = sum(m.errors[rpc] for m in rec.minutes.values())
        # First and last minute in which this RPC completed calls.
        with_data = [
            rec.minutes[i].latencies[rpc] for i in indexes if rec.minutes[i].latencies.get(rpc)
        ]
        first = with_data[0] if with_data else []
        last = with_data[-1] if with_data else []
        f99, l99 = pct(first, 0.99), pct(last, 0.99)
        drift = (l99 / f99 - 1) * 100 if with_data and f99 > 0 else float("nan")
        print(
            f"{rpc:<24}{calls:>8}{errs:>6}{pct(first, 0.5):>11.1f}"
            f"{pct(last, 0.5):>10.1f}{f99:>11.1f}{l99:>10.1f}{drift:>+10.1f}%"
        )
    if rss:
        growth = rss[-1] - rss[0]
        print(
            f"server RSS: start {rss_start / 1024:.1f} MiB, minute 1 {rss[0] / 1024:.1f} MiB, "
            f"last minute {rss[-1] / 1024:.1f} MiB, max {max(rss) / 1024:.1f} MiB; growth "
            f"minute 1 -> last {growth / 1024:+.1f} MiB ({growth / rss[0] * 100:+.1f}%)"
        )
    print(f"server log lines: {warnings} WARNING, {errors_logged} ERROR")
    print(f"server alive and SERVING at the end: {serving_at_end}")
    print("======================================================")
    return 0 if total_errors == 0 and serving_at_end else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--embedder", choices=("hashing", "minilm"), default="minilm")
    ap.add_argument("--store", choices=("memory", "postgres"), default="memory")
    ap.add_argument("--retrieve-callers", type=int, default=4)
    ap.add_argument("--retrieve-rate", type=float, default=10.0, help="calls/s per caller")
    ap.add_argument("--stream-callers", type=int, default=2)
    ap.add_argument("--stream-rate", type=float, default=2.0, help="calls/s per caller")
    ap.add_argument("--push-interval", type=float, default=3.0, help="seconds")
    ap.add_argument("--push-batch", type=int, default=5, help="documents per upsert")
    ap.add_argument("--push-window", type=int, default=200, help="documents kept in 'pushed'")
    ap.add_argument("--reingest-interval", type=float, default=60.0, help="seconds")
    ap.add_argument("--timeout", type=float, default=30.0, help="per-call deadline (s)")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    return asyncio.run(soak(args))


if __name__ == "__main__":
    raise SystemExit(main())
