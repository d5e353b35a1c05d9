"""Hostile files cannot stop the service (issue 25): one tenant's valid key (ingest +
retrieve) pushes the files of tests/security/hostile_files.py through
`IngestionManagerService.UpsertDocuments` into an index it shares with another tenant,
against a real `groundwire serve` subprocess on both stores, with small parser limits
(`[ingestion] parser_cpu_seconds = 5`, `parser_memory_mib = 768`; the keys are written
only when the server's configuration has them).

a. Each file pushed alone gets a clear outcome within CASE_BOUND seconds: a refusal
   in the response's failures (TOO_COMPLEX, TOO_LARGE, PARSE_FAILED: never an RPC
   error) or, for a file a fixed parser reads quickly, OK. The server stays up (health
   answers within 1 s), nothing of a refused document is stored (ListDocuments and a
   lexical Retrieve of the attacker's tenant), and neither the caller's errors nor the
   server's log lines written meanwhile hold the document's text (its canary) or a file
   path (a traceback, a temporary file).
b. The whole corpus pushed concurrently (ATTACKERS callers in a process of their own,
   for ATTACK_SECONDS) while the victim tenant times its lexical Retrieve and a loop
   times grpc.health.v1.Health/Check: the victim's p99 stays within 10x its quiet p99
   plus 1 s, every health check answers within HEALTH_BOUND, and the server process's RSS
   (sampled from /proc during the attack) stays under SERVER_RSS_CEILING_MIB; its
   child processes' RSS is reported, each child held under the parser memory limit.
c. SIGTERM during hostile parsing: the server exits within its grace period plus
   EXIT_SLACK seconds and no process it started (a parser worker) survives it.
d. A victim tenant's one-page PDF pushes, one after another while another tenant pushes
   the corpus four at a time (issue 44: a median 9.0 s, up to 43.3 s, on one parser
   worker): their p99 stays within PDF_PUSH_BOUND (2 s), over at least PDF_MIN_PUSHES
   pushes, none failing. The small-file parser lane makes it hold: a small file waits at
   most one slice of each other tenant's small jobs, never a hostile file's CPU limit.

Every wait is bounded (RPC deadlines, polling with deadlines), so a server that wedges
fails the test instead of hanging it. When a case leaves the server unhealthy, the
module's server is killed and restarted before the next case (counted in the figures).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import multiprocessing
import multiprocessing.synchronize
import os
import random
import re
import signal
import statistics
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2

from groundwire.app.config import GroundwireConfig
from groundwire.domain.auth import hash_key
from groundwire_client.v1 import (
    ingestion_pb2,
    ingestion_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
)
from tests.security.harness import details_of, postgres_available, report
from tests.security.hostile_files import CANARY, NAMES, HostileCase, attack_corpus, case
from tests.support.databases import create_database, drop_database
from tests.support.servers import ServerProcess, free_port, health_stub

MODULE = "hostile files"
VICTIM_KEY = "gw-victim-" + "v" * 24
ATTACKER_KEY = "gw-attacker-" + "a" * 22
LEXICAL = retriever_pb2.RETRIEVAL_MODE_LEXICAL
INDEX = "shared"

# The server's parser limits (small, so refusals come quickly) and shutdown grace.
PARSER_LIMITS = {
    "parser_workers": 1,
    "parser_cpu_seconds": 5,
    "parser_memory_mib": 768,
    "parser_timeout_seconds": 15,
}
GRACE_SECONDS = 5.0
# One hostile push: its deadline, and the bound its answer must come within.
PUSH_TIMEOUT = 40.0
CASE_BOUND = 30.0
# A health check must answer within this (the assertion), and is given this deadline.
# The stall it guards against lasted a parse (seconds to minutes); on a loaded 2-core
# machine (load 7-10) a healthy server's check took up to 1.9 s, and a check failed
# the old 3 s bound beside a parallel suite: 6 s, still far below a stalled parse.
HEALTH_BOUND = 6.0
# The concurrent attack.
ATTACKERS = 4
ATTACK_SECONDS = 12.0
ATTACK_PUSH_TIMEOUT = 20.0
VICTIM_QUERIES = 100
VICTIM_TIMEOUT = 15.0
SERVER_RSS_CEILING_MIB = 1536
# SIGTERM: the process must be gone within the grace period plus this (a loaded
# machine reaps and exits slowly; a parser that ignores the stop runs for minutes).
EXIT_SLACK = 10.0
# The victim's p99 under attack may be this much above 10 x its quiet p99: other work
# on a loaded machine moves both samples by up to a second.
VICTIM_P99_SLACK = 1.0

# A file path in a log line or an error: a traceback frame, a temporary file.
PATH_SHAPES = re.compile(r'File "/|Traceback|/tmp/|site-packages|/work/|\.py", line')


# ------------------------------------------------------------------ processes


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat after the command name (field 3, the state, first)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()


def process_alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (children, their children, ...)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if fields is None or fields[0] in ("Z", "X"):
            continue
        parents.setdefault(int(fields[1]), []).append(int(entry))
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of one process (0 when it is gone)."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def tree_cpu_seconds(pid: int) -> float:
    return cpu_seconds(pid) + sum(cpu_seconds(c) for c in descendants(pid))


@dataclass
class RssSampler:
    """Samples the RSS of a server and of each of its descendants in a thread."""

    pid: int
    period: float = 0.2
    server_max: float = 0.0
    children_max: dict[int, float] = field(default_factory=dict)
    children_total_max: float = 0.0
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sample(self) -> None:
        server = rss_mib(self.pid)
        if server is None:
            return
        self.server_max = max(self.server_max, server)
        total = 0.0
        for child in descendants(self.pid):
            rss = rss_mib(child) or 0.0
            total += rss
            self.children_max[child] = max(self.children_max.get(child, 0.0), rss)
        self.children_total_max = max(self.children_total_max, total)
        self.samples += 1

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.sample()

    def __enter__(self) -> RssSampler:
        self.sample()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def line(self) -> str:
        per_child = ", ".join(f"{v:.0f}" for v in sorted(self.children_max.values(), reverse=True))
        return (
            f"server RSS max {self.server_max:.0f} MiB; children: {len(self.children_max)} seen, "
            f"max RSS each [{per_child}] MiB, max total {self.children_total_max:.0f} MiB "
            f"({self.samples} samples)"
        )


# ---------------------------------------------------------------------- server


def parser_section() -> str:
    """The `[ingestion]` parser limits, when this server's configuration has them
    (before the parser sandbox, it has not: the server runs with no such limits)."""
    section = GroundwireConfig.model_fields.get("ingestion")
    model = section.annotation if section is not None else None
    fields = getattr(model, "model_fields", {})
    if "parser_cpu_seconds" not in fields:
        return ""
    return "[ingestion]\n" + "".join(f"{k} = {v}\n" for k, v in PARSER_LIMITS.items())


def toml(store: str, dsn_env: str) -> str:
    store_section = (
        f'[store]\nkind = "postgres"\ndsn = {{ env = "{dsn_env}" }}\n'
        if store == "postgres"
        else '[store]\nkind = "memory"\n'
    )
    return f"""
[server]
grace_period_seconds = {GRACE_SECONDS}

{store_section}
[auth]
mode = "api_keys"
[[auth.keys]]
id = "victim"
hash = "{hash_key(VICTIM_KEY)}"
tenant = "victim"
permissions = ["retrieve", "ingest"]
[[auth.keys]]
id = "attacker"
hash = "{hash_key(ATTACKER_KEY)}"
tenant = "attacker"
permissions = ["retrieve", "ingest"]

[logging]
level = "INFO"

{parser_section()}
[embedders.hash]
kind = "hashing"
dimensions = 64

[indexes.{INDEX}]
embedder = "hash"
"""


@dataclass
class Served:
    """One store's server for the module, restarted when a case leaves it unhealthy."""

    store: str
    directory: Path
    env: dict[str, str]
    proc: ServerProcess | None = None
    restarts: int = 0
    # The last case may still be running inside the server (its caller gave up):
    # restart, so each case is measured on a server of its own.
    dirty: bool = False

    def start(self) -> ServerProcess:
        config = self.directory / "groundwire.toml"
        config.write_text(toml(self.store, "GW_HOSTILE_DSN"))
        self.proc = ServerProcess(
            config, free_port(), self.directory / "server.log", env=self.env
        ).start()
        return self.proc

    def ensure_up(self) -> ServerProcess:
        proc = self.proc
        dirty, self.dirty = self.dirty, False
        if (
            proc is not None
            and not dirty
            and proc.alive()
            and health_answers(proc.target, 5.0) is not None
        ):
            return proc
        if proc is not None:
            stop_tree(proc, kill=True)
            self.restarts += 1
        return self.start()

    def stop(self) -> None:
        if self.proc is not None:
            stop_tree(self.proc)


def stop_tree(proc: ServerProcess, *, kill: bool = False) -> None:
    """Stop a server (SIGTERM and its grace, or SIGKILL with `kill`), then SIGKILL
    whatever of its descendants outlived it (parser workers of a wedged server)."""
    if proc.process is None:
        return
    children = descendants(proc.pid) if proc.alive() else []
    if kill:
        proc.kill()
    else:
        proc.stop(GRACE_SECONDS + 10)
    for pid in children:
        if process_alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def health_answers(target: str, timeout: float = HEALTH_BOUND) -> float | None:
    """Seconds Health/Check took to answer SERVING, None when it did not."""
    with grpc.insecure_channel(target) as ch:
        t0 = time.perf_counter()
        try:
            r = health_stub(ch).Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)
        except grpc.RpcError:
            return None
        took = time.perf_counter() - t0
        return took if r.status == health_pb2.HealthCheckResponse.SERVING else None


@pytest.fixture(scope="module", params=["memory", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """The module's server on one store (a new PostgreSQL database, as fresh_database
    makes, for the postgres one)."""
    store = str(request.param)
    env: dict[str, str] = {}
    admin_dsn = dsn = None
    if store == "postgres":
        if not postgres_available():
            pytest.fail("the PostgreSQL store is not installed")
        admin_dsn = str(request.getfixturevalue("postgres_dsn"))
        dsn = create_database(admin_dsn)
        env["GW_HOSTILE_DSN"] = dsn
    holder = Served(store, tmp_path_factory.mktemp(f"hostile-{store}"), env)
    try:
        holder.start()
        yield holder
    finally:
        holder.stop()
        report(
            MODULE,
            f"{store}: server restarted {holder.restarts} times after a case left it "
            "unhealthy or still parsing",
        )
        if admin_dsn is not None and dsn is not None:
            drop_database(admin_dsn, dsn)


@pytest.fixture(params=["memory", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, ServerProcess]]:
    store = str(request.param)
    env = {}
    if store == "postgres":
        if not postgres_available():
            pytest.fail("the PostgreSQL store is not installed")
        env["GW_HOSTILE_DSN"] = request.getfixturevalue("fresh_database")
    config = tmp_path / "groundwire.toml"
    config.write_text(toml(store, "GW_HOSTILE_DSN"))
    proc = ServerProcess(config, free_port(), tmp_path / "server.log", env=env).start()
    try:
        yield store, proc
    finally:
        stop_tree(proc)


# ---------------------------------------------------------------------- calls


def metadata(key: str) -> tuple[tuple[str, str | bytes], ...]:
    return (("authorization", f"Bearer {key}"),)


@contextlib.asynccontextmanager
async def stubs(
    target: str,
) -> AsyncIterator[
    tuple[
        ingestion_pb2_grpc.IngestionManagerServiceAsyncStub,
        retriever_pb2_grpc.RetrieverServiceAsyncStub,
    ]
]:
    options = [("grpc.max_send_message_length", 8 * 1024 * 1024)]
    async with grpc.aio.insecure_channel(target, options=options) as channel:
        ingest: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub = (
            ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        )
        retrieve: retriever_pb2_grpc.RetrieverServiceAsyncStub = (
            retriever_pb2_grpc.RetrieverServiceStub(channel)
        )
        yield ingest, retrieve


@dataclass
class Outcome:
    """What one push answered: "OK", a failure reason, or "RPC <code>"; the texts the
    caller received with an error."""

    outcome: str
    seconds: float
    error_texts: list[str] = field(default_factory=list)


async def push_file(
    ingest: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub,
    hostile: HostileCase,
    document_id: str,
    deadline: float,
) -> Outcome:
    return await push_file_as(ingest, hostile, document_id, deadline, ATTACKER_KEY)


async def push_file_as(
    ingest: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub,
    hostile: HostileCase,
    document_id: str,
    deadline: float,
    key: str,
) -> Outcome:
    t0 = time.perf_counter()
    request = ingestion_pb2.UpsertDocumentsRequest(
        index_name=INDEX,
        documents=[
            ingestion_pb2.PushedDocument(
                document_id=document_id, content=hostile.data, media_type=hostile.media_type
            )
        ],
    )
    try:
        response = await ingest.UpsertDocuments(request, metadata=metadata(key), timeout=deadline)
    except grpc.aio.AioRpcError as err:
        return Outcome(f"RPC {err.code().name}", time.perf_counter() - t0, details_of(err).texts())
    took = time.perf_counter() - t0
    if response.failures:
        return Outcome(response.failures[0].reason, took)
    return Outcome("OK", took)


async def attacker_documents(
    ingest: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub,
) -> set[str]:
    ids: set[str] = set()
    token = ""
    for _ in range(100):
        page = await ingest.ListDocuments(
            ingestion_pb2.ListDocumentsRequest(index_name=INDEX, page_size=100, page_token=token),
            metadata=metadata(ATTACKER_KEY),
            timeout=30,
        )
        ids.update(d.document_id for d in page.documents)
        token = page.next_page_token
        if not token:
            break
    return ids


async def canary_hits(retrieve: retriever_pb2_grpc.RetrieverServiceAsyncStub) -> set[str]:
    """Document ids the attacker's lexical search for the canary finds."""
    response = await retrieve.Retrieve(
        retriever_pb2.RetrieveRequest(
            query=retriever_pb2.RagQuery(index_name=INDEX, text=CANARY, mode=LEXICAL, top_k=100)
        ),
        metadata=metadata(ATTACKER_KEY),
        timeout=30,
    )
    return {r.document_id for r in response.results}


def leaks(texts: list[str]) -> list[str]:
    """Texts holding the document's canary or a file path."""
    return [t[:300] for t in texts if CANARY in t.lower() or PATH_SHAPES.search(t)]


# ------------------------------------------------------------ a. each file alone


@pytest.mark.timeout(PUSH_TIMEOUT + 120)
@pytest.mark.parametrize("name", NAMES)
async def test_each_hostile_file_alone_is_answered_and_leaves_nothing(
    served: Served, name: str
) -> None:
    hostile = case(name)
    proc = await asyncio.to_thread(served.ensure_up)
    log_start = len(proc.log_lines())
    document_id = f"hostile-{name}"
    async with stubs(proc.target) as (ingest, retrieve):
        outcome = await push_file(ingest, hostile, document_id, PUSH_TIMEOUT)
        report(
            MODULE,
            f"{served.store} {name} ({len(hostile.data):,} B): {outcome.outcome} "
            f"in {outcome.seconds:.2f} s",
        )
        health = await asyncio.to_thread(health_answers, proc.target, HEALTH_BOUND)
        problems: list[str] = []
        served.dirty = health is None or outcome.outcome.startswith("RPC")
        if health is None:
            problems.append(f"health did not answer SERVING within {HEALTH_BOUND} s after the push")
        if not proc.alive():
            problems.append(f"server exited ({proc.process and proc.process.returncode})")
        accepted = set(hostile.reasons) | ({"OK"} if hostile.may_ingest else set())
        if outcome.outcome not in accepted:
            problems.append(f"outcome {outcome.outcome}, expected one of {sorted(accepted)}")
        if outcome.seconds > CASE_BOUND:
            problems.append(f"answered in {outcome.seconds:.1f} s > {CASE_BOUND} s")
        if proc.alive() and health is not None and outcome.outcome != "OK":
            stored = await attacker_documents(ingest)
            found = await canary_hits(retrieve)
            if document_id in stored or document_id in found:
                problems.append(
                    f"refused document stored: listed {document_id in stored}, "
                    f"retrieved {document_id in found}"
                )
        leaked = leaks(outcome.error_texts) + leaks(proc.log_lines()[log_start:])
        if leaked:
            problems.append(f"content or paths leaked: {leaked[:3]}")
    assert not problems, f"{served.store} {name}: " + "; ".join(problems)


# ------------------------------------------------- b. the whole corpus at once


def attack(
    target: str,
    files: list[tuple[str, str, bytes]],
    seconds: float,
    started: multiprocessing.synchronize.Event,
    results: multiprocessing.Queue[object],
) -> None:
    """The attacker's process: ATTACKERS callers pushing the corpus round and round."""
    results.put(asyncio.run(_attack(target, files, seconds, started)))


async def _attack(
    target: str,
    files: list[tuple[str, str, bytes]],
    seconds: float,
    started: multiprocessing.synchronize.Event,
) -> dict[str, int]:
    outcomes: dict[str, int] = {}
    stop = time.monotonic() + seconds
    async with stubs(target) as (ingest, _):

        async def caller(n: int) -> None:
            i = n * len(files) // ATTACKERS
            while time.monotonic() < stop:
                name, media_type, data = files[i % len(files)]
                hostile = HostileCase(name, media_type, data, frozenset(), True, "")
                started.set()
                left = max(1.0, min(ATTACK_PUSH_TIMEOUT, stop - time.monotonic() + 5))
                result = await push_file(ingest, hostile, f"attack-{n}-{i}", left)
                outcomes[result.outcome] = outcomes.get(result.outcome, 0) + 1
                if result.outcome == "RPC RESOURCE_EXHAUSTED":
                    await asyncio.sleep(0.05)
                i += 1

        await asyncio.gather(*(caller(n) for n in range(ATTACKERS)))
    return outcomes


@dataclass
class RunningAttack:
    """The attacker process of `corpus_attack`: `done` is set once it reported (or
    gave up); `outcomes()` waits for its report."""

    done: threading.Event
    waiter: asyncio.Task[object]

    async def outcomes(self) -> object:
        return await self.waiter


@contextlib.asynccontextmanager
async def corpus_attack(
    target: str, files: list[tuple[str, str, bytes]], seconds: float
) -> AsyncIterator[RunningAttack]:
    """The corpus pushed by ATTACKERS callers in a process of their own for `seconds`;
    the block runs once the attacker has started, and the process is gone after it."""
    ctx = multiprocessing.get_context("spawn")
    results: multiprocessing.Queue[object] = ctx.Queue()
    started = ctx.Event()
    attacker = ctx.Process(target=attack, args=(target, files, seconds, started, results))
    done = threading.Event()
    attacker.start()
    try:
        assert await asyncio.to_thread(started.wait, 60), "the attacker never started"

        async def wait_attacker() -> object:
            try:
                return await asyncio.to_thread(
                    results.get, True, seconds + ATTACK_PUSH_TIMEOUT + 60
                )
            finally:
                done.set()

        yield RunningAttack(done, asyncio.create_task(wait_attacker()))
    finally:
        done.set()
        attacker.join(30)
        if attacker.is_alive():
            attacker.kill()


def p50_p99(samples: list[float]) -> tuple[float, float]:
    """Median and 99th percentile (nearest rank)."""
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


async def victim_latencies(
    retrieve: retriever_pb2_grpc.RetrieverServiceAsyncStub,
    queries: list[str],
    until: threading.Event | None = None,
    seconds: float = 120.0,
    max_queries: int = 10_000,
) -> tuple[list[float], int]:
    """Latencies of the victim's lexical queries (a failed call counts as its
    deadline), with the count of failed calls: `queries` once back to back, or round
    and round 5 ms apart until `until` is set (so they span the whole attack); never
    more than `max_queries` nor past `seconds`."""
    out: list[float] = []
    failed = 0
    i = 0
    end = time.monotonic() + seconds
    while i < max_queries and time.monotonic() < end:
        if until is None and i >= len(queries):
            break
        if until is not None and until.is_set() and i >= len(queries) // 4:
            break
        q = queries[i % len(queries)]
        i += 1
        t0 = time.perf_counter()
        try:
            await retrieve.Retrieve(
                retriever_pb2.RetrieveRequest(
                    query=retriever_pb2.RagQuery(index_name=INDEX, text=q, mode=LEXICAL, top_k=10)
                ),
                metadata=metadata(VICTIM_KEY),
                timeout=VICTIM_TIMEOUT,
            )
            out.append(time.perf_counter() - t0)
        except grpc.aio.AioRpcError:
            failed += 1
            out.append(max(VICTIM_TIMEOUT, time.perf_counter() - t0))
        if until is not None:
            await asyncio.sleep(0.005)
    return out, failed


def health_loop(target: str, stop: threading.Event, out: list[float | None]) -> None:
    """Health/Check every 100 ms until `stop`: each latency, None for no answer."""
    while not stop.is_set():
        out.append(health_answers(target, HEALTH_BOUND + 2.0))
        stop.wait(0.1)


def victim_texts() -> tuple[list[str], list[str]]:
    rng = random.Random(11)
    syllables = ["ka", "lo", "mi", "ne", "ro", "ta", "vi", "su", "pe", "da", "go", "ri"]
    vocab = sorted(
        {"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(3000)}
    )
    texts = [" ".join(rng.choices(vocab, k=80)) for _ in range(300)]
    queries = [" ".join(rng.sample(vocab, 3)) for _ in range(VICTIM_QUERIES)]
    return texts, queries


@pytest.mark.timeout(600)
async def test_the_whole_corpus_at_once_does_not_stall_another_tenant(
    server: tuple[str, ServerProcess],
) -> None:
    store, proc = server
    files = [(c.name, c.media_type, c.data) for c in await asyncio.to_thread(attack_corpus)]
    texts, queries = victim_texts()
    async with stubs(proc.target) as (ingest, retrieve):
        for start in range(0, len(texts), 100):
            await ingest.UpsertDocuments(
                ingestion_pb2.UpsertDocumentsRequest(
                    index_name=INDEX,
                    documents=[
                        ingestion_pb2.PushedDocument(document_id=f"v-{start + i}", text=t)
                        for i, t in enumerate(texts[start : start + 100])
                    ],
                ),
                metadata=metadata(VICTIM_KEY),
                timeout=60,
            )
        await victim_latencies(retrieve, queries[:10])  # warm-up
        quiet, quiet_failed = await victim_latencies(retrieve, queries)

        health: list[float | None] = []
        stop = threading.Event()
        checker = threading.Thread(target=health_loop, args=(proc.target, stop, health))
        try:
            async with corpus_attack(proc.target, files, ATTACK_SECONDS) as running:
                with RssSampler(proc.pid) as rss:
                    checker.start()
                    loud, loud_failed = await victim_latencies(
                        retrieve,
                        queries,
                        until=running.done,
                        seconds=ATTACK_SECONDS + ATTACK_PUSH_TIMEOUT + 30,
                    )
                    outcomes = await running.outcomes()
                    stop.set()
                    checker.join(10)
        finally:
            stop.set()
    q50, q99 = p50_p99(quiet)
    a50, a99 = p50_p99(loud)
    pushed: dict[str, int] = dict(outcomes) if isinstance(outcomes, dict) else {}
    answered = [h for h in health if h is not None]
    slowest = max(answered) if answered else float("nan")
    report(
        MODULE,
        f"{store} corpus x{ATTACKERS} callers for {ATTACK_SECONDS:.0f} s: victim lexical "
        f"p50/p99 quiet {1000 * q50:.1f}/{1000 * q99:.1f} ms ({quiet_failed} failed), under attack "
        f"{1000 * a50:.1f}/{1000 * a99:.1f} ms over {len(loud)} queries ({loud_failed} failed); "
        f"health checks {len(health)}, unanswered {len(health) - len(answered)}, slowest "
        f"{1000 * slowest:.0f} ms; attacker pushes {dict(sorted(pushed.items()))}",
    )
    report(MODULE, f"{store} during the attack: {rss.line()}")
    problems = []
    if not proc.alive():
        problems.append("the server exited")
    if a99 > 10 * q99 + VICTIM_P99_SLACK:
        problems.append(
            f"victim p99 {1000 * a99:.0f} ms > 10 x {1000 * q99:.1f} ms"
            f" + {1000 * VICTIM_P99_SLACK:.0f} ms"
        )
    if loud_failed:
        problems.append(f"{loud_failed} victim queries failed")
    if len(answered) < len(health) or (answered and slowest > HEALTH_BOUND):
        problems.append(
            f"health: {len(health) - len(answered)} of {len(health)} unanswered, slowest "
            f"{1000 * slowest:.0f} ms"
        )
    if rss.server_max > SERVER_RSS_CEILING_MIB:
        problems.append(f"server RSS {rss.server_max:.0f} MiB > {SERVER_RSS_CEILING_MIB} MiB")
    child_ceiling = PARSER_LIMITS["parser_memory_mib"] + 64
    fat = {pid: v for pid, v in rss.children_max.items() if v > child_ceiling}
    if fat:
        problems.append(f"children over {child_ceiling} MiB: {fat}")
    if not pushed:
        problems.append(f"the attacker reported nothing: {outcomes!r}")
    else:
        crashes = ("RPC INTERNAL", "RPC UNAVAILABLE", "RPC UNKNOWN")
        wrong = {k: v for k, v in pushed.items() if k in crashes}
        if wrong:
            problems.append(f"attacker pushes crashed: {wrong}")
    assert not problems, f"{store}: " + "; ".join(problems)


# ------------------------------ d. a victim's small file under the corpus attack

# Issue 44: on one parser worker, a victim tenant's one-page PDF push (0.05-0.18 s quiet)
# took a median 9.0 s and up to 43.3 s while another tenant pushed the corpus four at a
# time. The bound: p99 <= 2 s (the small-file lane: it waits at most one slice per
# other tenant, never a hostile file's CPU limit). The victim pushes one file after
# another for the whole attack; a failed push counts as its deadline.
PDF_ATTACK_SECONDS = 60.0
PDF_PUSH_BOUND = 2.0
PDF_PUSH_TIMEOUT = 30.0
PDF_MIN_PUSHES = 50


def victim_pdf(i: int) -> bytes:
    from tests.security.hostile_files import _one_page_pdf, _text_content

    lines = [f"Travel policy revision {i}: economy class for flights under six hours."] * 3
    return _one_page_pdf(_text_content(lines))


async def victim_pdf_pushes(
    ingest: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub,
    count: int | None = None,
    until: threading.Event | None = None,
    seconds: float = 300.0,
) -> tuple[list[float], list[str]]:
    """The victim's one-page PDF pushes, one after another: `count` of them, or until
    `until` is set (never past `seconds`); their latencies and failed outcomes."""
    out: list[float] = []
    failed: list[str] = []
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        if count is not None and i >= count:
            break
        if until is not None and until.is_set():
            break
        pdf = HostileCase("victim-pdf", "application/pdf", victim_pdf(i), frozenset(), True, "")
        i += 1
        result = await push_file_as(
            ingest, pdf, f"victim-pdf-{i % 10}", PDF_PUSH_TIMEOUT, VICTIM_KEY
        )
        if result.outcome != "OK":
            failed.append(result.outcome)
            out.append(max(PDF_PUSH_TIMEOUT, result.seconds))
        else:
            out.append(result.seconds)
    return out, failed


@pytest.mark.timeout(900)
async def test_a_victims_small_file_is_not_delayed_by_another_tenants_hostile_files(
    server: tuple[str, ServerProcess],
) -> None:
    store, proc = server
    files = [(c.name, c.media_type, c.data) for c in await asyncio.to_thread(attack_corpus)]
    async with stubs(proc.target) as (ingest, _):
        await victim_pdf_pushes(ingest, count=3)  # warm-up
        quiet, quiet_failed = await victim_pdf_pushes(ingest, count=20)
        async with corpus_attack(proc.target, files, PDF_ATTACK_SECONDS) as running:
            loud, loud_failed = await victim_pdf_pushes(
                ingest, until=running.done, seconds=PDF_ATTACK_SECONDS + ATTACK_PUSH_TIMEOUT + 30
            )
            outcomes = await running.outcomes()
    q50, q99 = p50_p99(quiet)
    a50, a99 = p50_p99(loud)
    pushed: dict[str, int] = dict(outcomes) if isinstance(outcomes, dict) else {}
    report(
        MODULE,
        f"{store} victim one-page PDF push p50/p99 quiet {1000 * q50:.0f}/{1000 * q99:.0f} ms, "
        f"under the corpus x{ATTACKERS} {1000 * a50:.0f}/{1000 * a99:.0f} ms "
        f"(max {1000 * max(loud):.0f} ms) over {len(loud)} pushes, failed {loud_failed}; "
        f"attacker pushes {dict(sorted(pushed.items()))}",
    )
    assert not quiet_failed and not loud_failed, (quiet_failed, loud_failed)
    assert pushed, f"the attacker reported nothing: {outcomes!r}"
    assert len(loud) >= PDF_MIN_PUSHES, len(loud)
    assert a99 <= PDF_PUSH_BOUND, f"{store}: victim PDF push p99 {a99:.2f} s > {PDF_PUSH_BOUND} s"


# ------------------------------------------------ c. SIGTERM during parsing

# Slow on the old code (the first three), or still seconds of parsing with the sandbox.
SLOW = (
    "pdf-long-word",
    "xlsx-dimension",
    "docx-inflated",
    "pdf-page-tree-wide",
    "pdf-font-huge",
    "epub-deep-chapter",
)


@pytest.mark.timeout(300)
async def test_sigterm_during_hostile_parsing_exits_within_grace_and_leaves_no_parser(
    server: tuple[str, ServerProcess],
) -> None:
    store, proc = server
    assert proc.process is not None
    hostile = [case(n) for n in SLOW]
    seen: set[int] = set()
    async with stubs(proc.target) as (ingest, _):
        before = tree_cpu_seconds(proc.pid)
        pushes = [asyncio.create_task(push_file(ingest, h, f"term-{h.name}", 120)) for h in hostile]
        # Parsing is under way: the server's process tree burns CPU while pushes wait.
        # On a loaded machine (load 10+ on 2 cores) the tree gets a small share of a
        # core, so the window is long; it ends as soon as the CPU is spent.
        deadline = time.monotonic() + 90
        busy = False
        while time.monotonic() < deadline:
            seen.update(descendants(proc.pid))
            if tree_cpu_seconds(proc.pid) - before >= 1.0 and not all(p.done() for p in pushes):
                busy = True
                break
            await asyncio.sleep(0.1)
        seen.update(descendants(proc.pid))
        proc.process.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        bound = GRACE_SECONDS + EXIT_SLACK
        while proc.alive() and time.monotonic() - t0 < bound + 30:
            seen.update(descendants(proc.pid))
            await asyncio.sleep(0.05)
        took = time.monotonic() - t0
        exited = not proc.alive()
        # Survivors: give the kernel a bounded moment to reap what the server killed.
        settle = time.monotonic() + 2
        survivors = [p for p in seen if process_alive(p)]
        while survivors and time.monotonic() < settle:
            await asyncio.sleep(0.05)
            survivors = [p for p in seen if process_alive(p)]
        if not exited:
            proc.kill()
        for pid in survivors:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for p in pushes:
            p.cancel()
        outcomes = await asyncio.gather(*pushes, return_exceptions=True)
    report(
        MODULE,
        f"{store} SIGTERM during {len(hostile)} hostile parses: "
        f"{'exited' if exited else 'still running'} after {took:.1f} s "
        f"(grace {GRACE_SECONDS:.0f} s), exit status {proc.process.returncode}; "
        f"{len(seen)} descendants seen, {len(survivors)} survived; pushes "
        f"{[o.outcome if isinstance(o, Outcome) else type(o).__name__ for o in outcomes]}",
    )
    assert busy, "hostile parsing never started (no CPU spent while pushes were pending)"
    assert exited and took <= bound, f"{store}: not gone {bound:.0f} s after SIGTERM ({took:.1f} s)"
    assert not survivors, f"{store}: processes of the server survived it: {survivors}"
