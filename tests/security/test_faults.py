"""Fault injection against the PostgreSQL store: no data lost or corrupted, truthful
statuses, recovery without manual action.

Index contents are compared by checksum: the sorted (document_id, chunk_id,
sha256(content)) of every published chunk, read through lexical Retrieve of
each document's unique marker word, plus the exact set of document ids found by
a word every document shares (so a document that should be gone, or a chunk
from an unpublished version, changes the checksum).

- PostgreSQL stopped and restarted under concurrent queries (all three modes):
  during the outage calls fail with UNAVAILABLE/DEADLINE_EXCEEDED and one
  ErrorInfo (never INTERNAL, never a wrong or partial answer); afterwards the
  same queries succeed with no manual step and the checksum is unchanged.
- PostgreSQL stopped during an ingestion run: the run ends FAILED for its
  watcher, the previous version keeps serving (same checksum), the operation
  history and index status say FAILED once the database is back, and the next
  run succeeds and publishes the new content.
- Providers timing out, failing and returning garbage (embedding stand-in in
  ingestion and retrieval; chat model stand-in in executions): failures are
  classified, the published version is intact, and normal service resumes.
- The server process killed (SIGKILL) in the middle of an ingestion run and
  started again on the same data directory: the interrupted operation is FAILED
  with error_code INTERRUPTED, the previous version serves with the same
  checksum, and a new run publishes the new content.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from groundwire.app.config import parse_config
from groundwire_client.v1 import agent_pb2 as ag
from groundwire_client.v1 import agent_pb2_grpc, ingestion_pb2_grpc, retriever_pb2_grpc
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import retriever_pb2 as rt
from tests.security.harness import (
    ERROR_DOMAIN,
    decode_error,
    report,
    summary,
)
from tests.support.chat_completions_standin import Behaviour as ChatBehaviour
from tests.support.chat_completions_standin import ChatCompletionsStandIn
from tests.support.embedders import ControlledEmbedder
from tests.support.openai_embeddings_standin import Behaviour as EmbedBehaviour
from tests.support.openai_embeddings_standin import OpenAIEmbeddingsStandIn
from tests.support.servers import RunningApp, ServerProcess, free_port, serving, toml_config

pytest.importorskip("pgserver")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

# Letters only: the identifier-aware tokenizer splits letter/digit runs into extra
# terms, and a marker must match its own document and nothing else.
_LETTERS = str.maketrans("0123456789", "ghijklmnop")
RUN = uuid.uuid4().hex[:8].translate(_LETTERS)
DOCS = 40
COMMON = f"faultcorpus{RUN}"
SURVIVED: Counter[str] = Counter()


def marker(i: int, rev: int) -> str:
    return f"zq{i:03d}rev{rev}x{RUN}".translate(_LETTERS)


def write_corpus(directory: Path, rev: int, *, drop: tuple[int, ...] = ()) -> dict[str, str]:
    """One small (single-chunk) Markdown file per document; returns doc id -> marker."""
    directory.mkdir(parents=True, exist_ok=True)
    out = {}
    for i in range(DOCS):
        path = directory / f"doc-{i:03d}.md"
        if i in drop:
            path.unlink(missing_ok=True)
            continue
        path.write_text(
            f"# Document {i}\n\nShared words {COMMON}. Unique marker {marker(i, rev)} "
            f"for revision {rev}. Filler text about procedures and policies number {i}.\n"
        )
        out[f"doc-{i:03d}.md"] = marker(i, rev)
    return out


Checksum = tuple[frozenset[str], tuple[tuple[str, str, str], ...]]


async def checksum(
    stub: retriever_pb2_grpc.RetrieverServiceAsyncStub, index: str, markers: dict[str, str]
) -> Checksum:
    everything = await stub.Retrieve(
        rt.RetrieveRequest(
            query=rt.RagQuery(
                index_name=index, text=COMMON, mode=rt.RETRIEVAL_MODE_LEXICAL, top_k=100
            )
        ),
        timeout=30,
    )
    ids = frozenset(r.document_id for r in everything.results)
    rows = []
    for doc_id, mark in sorted(markers.items()):
        resp = await stub.Retrieve(
            rt.RetrieveRequest(
                query=rt.RagQuery(
                    index_name=index, text=mark, mode=rt.RETRIEVAL_MODE_LEXICAL, top_k=100
                )
            ),
            timeout=30,
        )
        for r in resp.results:
            rows.append((r.document_id, r.chunk_id, hashlib.sha256(r.content.encode()).hexdigest()))
        assert [r.document_id for r in resp.results] in ([doc_id], []), (
            mark,
            [r.document_id for r in resp.results],
        )
    return ids, tuple(sorted(rows))


def assert_serves(value: Checksum, markers: dict[str, str]) -> None:
    """Every document of `markers` is served with its marker's revision, and only those."""
    ids, rows = value
    assert ids == frozenset(markers), (sorted(ids ^ frozenset(markers)))[:5]
    assert sorted(r[0] for r in rows) == sorted(markers)


def classified(err: grpc.aio.AioRpcError, allowed: set[grpc.StatusCode]) -> str:
    d = decode_error(err.code(), err.details(), err.trailing_metadata())
    assert d.code in allowed, (d.code, d.message)
    assert len(d.infos) == 1 and d.infos[0].domain == ERROR_DOMAIN, d
    return f"{d.code.name}:{d.infos[0].reason}"


async def wait_op(
    stub: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub, op_id: str, seconds: float = 60
) -> ing.Operation:
    last = None
    async for update in stub.WatchIngestion(
        ing.WatchIngestionRequest(operation_id=op_id), timeout=seconds
    ):
        last = update.operation
    assert last is not None
    return last


async def stored_op(
    stub: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub, index: str, op_id: str
) -> ing.Operation:
    ops = await stub.ListOperations(
        ing.ListOperationsRequest(index_name=index, page_size=100), timeout=30
    )
    found = [o for o in ops.operations if o.id == op_id]
    assert len(found) == 1
    return found[0]


async def eventually(probe: Any, seconds: float = 30.0) -> Any:
    """Retry an async probe until it stops raising (recovery without manual action)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return await probe()
        except (grpc.aio.AioRpcError, AssertionError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.25)


async def wait_for_calls(
    outcomes: Counter[str], prefix: str, n: int, seconds: float = 30.0
) -> None:
    """Wait until at least n calls whose outcome starts with `prefix` are counted."""
    deadline = time.monotonic() + seconds
    while sum(c for k, c in outcomes.items() if k.startswith(prefix)) < n:
        assert time.monotonic() < deadline, (prefix, dict(outcomes))
        await asyncio.sleep(0.05)


# -- in-process server on the embedded PostgreSQL -----------------------------------


@dataclass
class Env:
    app: RunningApp
    corpus: Path
    markers: dict[str, str]
    retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub
    ingestion: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub
    agents: agent_pb2_grpc.AgentServiceAsyncStub
    emb: OpenAIEmbeddingsStandIn
    chat: ChatCompletionsStandIn
    remote_markers: dict[str, str]

    def embedded(self) -> Any:
        store = self.app.components.store
        embedded = getattr(store, "_embedded", None)
        assert embedded is not None, "the store is not the embedded PostgreSQL"
        return embedded

    async def stop_postgres(self) -> None:
        """Fast shutdown (SIGINT to the postmaster, as `pg_ctl -m fast stop` does),
        without forking from this multi-threaded gRPC process."""
        await stop_postmaster(Path(self.embedded().data_dir))

    async def start_postgres(self) -> None:
        """`pg_ctl start` as pgserver would run it, spawned without a Python-level
        fork (forking this gRPC process to switch users crashed the child)."""
        embedded = self.embedded()
        server = embedded._server
        data = Path(embedded.data_dir)
        await start_pg_ctl(data, server.system_user, embedded.dsn, Path(server.log))


@pytest.fixture(scope="module")
def standins() -> Iterator[tuple[OpenAIEmbeddingsStandIn, ChatCompletionsStandIn]]:
    with (
        OpenAIEmbeddingsStandIn(dimensions=16, delay=3.0) as emb,
        ChatCompletionsStandIn(delay=3.0) as chat,
    ):
        yield emb, chat


@pytest.fixture(scope="module")
async def env(
    tmp_path_factory: pytest.TempPathFactory,
    standins: tuple[OpenAIEmbeddingsStandIn, ChatCompletionsStandIn],
) -> AsyncIterator[Env]:
    emb, chat = standins
    tmp = tmp_path_factory.mktemp("faults")
    corpus = tmp / "corpus"
    markers = write_corpus(corpus, 1)
    cfg = {
        "auth": {"mode": "disabled"},
        "store": {
            "kind": "postgres",
            "data_dir": str(tmp / "pgdata"),
            "statement_timeout_ms": 5000,
            # A shared ingestion's coordinator gives up on an unreachable store
            # once its lease would have lapsed (test_postgres_restart_during_ingestion).
            "work_lease_ms": 4000,
            "work_renew_ms": 1000,
        },
        "embedders": {
            "hash": {"kind": "hashing", "dimensions": 256},
            "remote": {
                "kind": "openai-compatible",
                "base_url": emb.base_url,
                "model": "standin",
                "dimensions": 16,
                "timeout_seconds": 1,
            },
        },
        "indexes": {
            "kb": {
                "embedder": "hash",
                "sources": [{"kind": "directory", "path": str(corpus), "glob": "*.md"}],
                "ingestion": {"strategy": "on_startup", "embed_batch_size": 4},
            },
            "remote": {
                "embedder": "remote",
                "sources": [{"kind": "directory", "path": str(corpus), "glob": "*.md"}],
                "ingestion": {"strategy": "on_startup", "embed_batch_size": 8},
            },
        },
        "models": {
            "remote": {"kind": "openai-compatible", "base_url": chat.base_url, "timeout_seconds": 1}
        },
        "agents": {
            "remote": {
                "name": "Remote",
                "model": "remote/standin",
                "rag": {"index": "kb", "retrieval_mode": "lexical"},
            }
        },
    }
    try:
        async with (
            serving(parse_config(cfg)) as app,
            grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch,
        ):
            yield Env(
                app,
                corpus,
                markers,
                retriever_pb2_grpc.RetrieverServiceStub(ch),
                ingestion_pb2_grpc.IngestionManagerServiceStub(ch),
                agent_pb2_grpc.AgentServiceStub(ch),
                emb,
                chat,
                dict(markers),  # what "remote" holds: its runs below all fail
            )
    finally:
        # The server this test restarted itself is not the one pgserver started, so
        # releasing the handle may leave it running: stop it here.
        await stop_postmaster(tmp / "pgdata")


async def start_pg_ctl(data: Path, user: str | None, dsn: str, log: Path) -> None:
    from urllib.parse import parse_qs, urlsplit

    from pgserver._commands import POSTGRES_BIN_PATH

    socket_dir = parse_qs(urlsplit(dsn).query)["host"][0]
    cmd = [
        str(POSTGRES_BIN_PATH / "pg_ctl"),
        "-D",
        str(data),
        "-w",
        "-o",
        '-h ""',
        "-o",
        f"-k {socket_dir}",
        "-l",
        str(log),
        "start",
    ]
    if user:
        cmd = ["runuser", "-u", user, "--", *cmd]
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, f"pg_ctl start failed: {out.decode(errors='replace')[-2000:]}"


async def stop_postmaster(data: Path) -> None:
    """Fast shutdown of the PostgreSQL serving `data`, if one runs."""
    pid_file = data / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, signal.SIGINT)
    except (OSError, ValueError, IndexError):
        return
    for _ in range(600):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("PostgreSQL did not stop")


STORE_DOWN = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}


async def test_postgres_restart_during_queries(env: Env) -> None:
    before = await checksum(env.retriever, "kb", env.markers)
    assert_serves(before, env.markers)
    outcomes: Counter[str] = Counter()
    wrong: list[str] = []
    phase = {"name": "before"}
    stop = asyncio.Event()
    seen_down = asyncio.Event()
    items = sorted(env.markers.items())

    async def worker(w: int) -> None:
        i = w
        while not stop.is_set():
            doc_id, mark = items[i % len(items)]
            mode = (
                rt.RETRIEVAL_MODE_LEXICAL,
                rt.RETRIEVAL_MODE_SEMANTIC,
                rt.RETRIEVAL_MODE_HYBRID,
            )[i % 3]
            i += 4
            started = phase["name"]  # the phase the call began in
            try:
                resp = await env.retriever.Retrieve(
                    rt.RetrieveRequest(
                        query=rt.RagQuery(index_name="kb", text=mark, mode=mode, top_k=5)
                    ),
                    timeout=15,
                )
            except grpc.aio.AioRpcError as err:
                outcomes[f"{started} {classified(err, STORE_DOWN)}"] += 1
                if started == "outage":
                    seen_down.set()
                continue
            outcomes[f"{started} OK"] += 1
            if mode != rt.RETRIEVAL_MODE_SEMANTIC and (
                not resp.results or resp.results[0].document_id != doc_id
            ):
                wrong.append(f"{mark}: {[r.document_id for r in resp.results]}")

    workers = [asyncio.create_task(worker(w)) for w in range(4)]
    await wait_for_calls(outcomes, "before", 8)
    phase["name"] = "outage"
    await env.stop_postgres()
    # The outage lasts until a caller has seen the store down (a fast shutdown
    # drains for a while on a loaded machine), so the fault surely happened.
    await asyncio.wait_for(seen_down.wait(), timeout=60)
    await env.start_postgres()
    phase["name"] = "after"
    await wait_for_calls(outcomes, "after OK", 8, seconds=60)
    stop.set()
    await asyncio.gather(*workers)
    assert not wrong, wrong[:5]
    after_restart = await eventually(lambda: checksum(env.retriever, "kb", env.markers))
    assert after_restart == before
    SURVIVED["PostgreSQL restart under queries"] += 1
    report(
        "faults",
        f"PostgreSQL restart under 4 concurrent callers: {dict(outcomes)}; checksum unchanged",
    )


async def test_postgres_restart_during_ingestion(env: Env) -> None:
    before = await checksum(env.retriever, "kb", env.markers)
    status0 = (
        await env.ingestion.GetIndexStatus(ing.GetIndexStatusRequest(index_name="kb"))
    ).status
    handle = env.app.components.catalog.get("kb")
    original = handle.embedder
    handle.embedder = ControlledEmbedder(256, delay=0.25)  # a slow run: ~10 batches
    new_markers = write_corpus(env.corpus, 2, drop=(0, 1))
    try:
        op = (
            await env.ingestion.StartIngestion(ing.StartIngestionRequest(index_name="kb"))
        ).operation
        watcher = asyncio.create_task(wait_op(env.ingestion, op.id))
        await asyncio.sleep(0.8)
        await env.stop_postgres()
        final = await asyncio.wait_for(watcher, 60)
        assert final.state == ing.OPERATION_STATE_FAILED, final  # truthful to its watcher
        await asyncio.sleep(0.5)
        await env.start_postgres()
        # The previous version still serves, unchanged.
        assert await eventually(lambda: checksum(env.retriever, "kb", env.markers)) == before
        status = (
            await env.ingestion.GetIndexStatus(ing.GetIndexStatusRequest(index_name="kb"))
        ).status
        assert status.published_version == status0.published_version
        assert not status.HasField("running_operation")
        stored = await stored_op(env.ingestion, "kb", op.id)
        OUTAGE_OPERATION["id"] = op.id
        report(
            "faults",
            f"ingestion while PostgreSQL restarts: watcher saw {ing.OperationState.Name(final.state)} "
            f"({final.error_code}); history says {ing.OperationState.Name(stored.state)}",
        )
    finally:
        handle.embedder = original
        env.markers.clear()
        env.markers.update(new_markers)
    # Recovery: the next run publishes the new revision.
    op2 = (
        await eventually(
            lambda: env.ingestion.StartIngestion(ing.StartIngestionRequest(index_name="kb"))
        )
    ).operation
    assert (await wait_op(env.ingestion, op2.id)).state == ing.OPERATION_STATE_SUCCEEDED
    assert_serves(await checksum(env.retriever, "kb", new_markers), new_markers)
    SURVIVED["PostgreSQL restart during ingestion"] += 1


OUTAGE_OPERATION: dict[str, str] = {}


async def test_operation_history_is_truthful_after_a_store_outage(env: Env) -> None:
    assert OUTAGE_OPERATION, "runs after test_postgres_restart_during_ingestion"
    stored = await stored_op(env.ingestion, "kb", OUTAGE_OPERATION["id"])
    watched = await wait_op(env.ingestion, OUTAGE_OPERATION["id"], seconds=10)
    states = (ing.OperationState.Name(stored.state), ing.OperationState.Name(watched.state))
    assert states == ("OPERATION_STATE_FAILED", "OPERATION_STATE_FAILED"), states


EMBED_FAULTS = [
    EmbedBehaviour.SLOW,  # past the embedder's 1 s timeout
    EmbedBehaviour.SERVER_ERROR,
    EmbedBehaviour.RATE_LIMITED,
    EmbedBehaviour.MALFORMED_JSON,
    EmbedBehaviour.WRONG_COUNT,
    EmbedBehaviour.WRONG_DIMENSION,
    EmbedBehaviour.NAN_VALUES,
    EmbedBehaviour.INDEX_OUT_OF_RANGE,
]


@pytest.mark.parametrize("behaviour", EMBED_FAULTS, ids=lambda b: b.value)
async def test_embedding_provider_faults(env: Env, behaviour: EmbedBehaviour) -> None:
    markers = env.remote_markers
    before = await checksum(env.retriever, "remote", markers)
    version = (
        await env.ingestion.GetIndexStatus(ing.GetIndexStatusRequest(index_name="remote"))
    ).status.published_version
    revision = 10 + EMBED_FAULTS.index(behaviour)
    write_corpus(env.corpus, revision, drop=(0, 1))
    env.emb.behaviour = behaviour
    try:
        op = (
            await env.ingestion.StartIngestion(ing.StartIngestionRequest(index_name="remote"))
        ).operation
        final = await wait_op(env.ingestion, op.id)
        assert final.state == ing.OPERATION_STATE_FAILED and final.error_code, final
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await env.retriever.Retrieve(
                rt.RetrieveRequest(
                    query=rt.RagQuery(
                        index_name="remote", text="procedures", mode=rt.RETRIEVAL_MODE_HYBRID
                    )
                ),
                timeout=10,
            )
        reason = classified(
            info.value, {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
        )
    finally:
        env.emb.behaviour = EmbedBehaviour.NORMAL
    assert await checksum(env.retriever, "remote", markers) == before
    status = (
        await env.ingestion.GetIndexStatus(ing.GetIndexStatusRequest(index_name="remote"))
    ).status
    assert status.published_version == version and status.last_operation.id == op.id
    assert (await stored_op(env.ingestion, "remote", op.id)).state == ing.OPERATION_STATE_FAILED
    ok = await env.retriever.Retrieve(
        rt.RetrieveRequest(
            query=rt.RagQuery(index_name="remote", text="procedures", mode=rt.RETRIEVAL_MODE_HYBRID)
        ),
        timeout=10,
    )
    assert ok.results  # serving again
    SURVIVED[f"embedding provider {behaviour.value}"] += 1
    report(
        "faults",
        f"embedding provider {behaviour.value}: ingestion FAILED ({final.error_code}), retrieval {reason}, version {version} intact",
    )


# Executions stream from the model; "MODEL_" means any model failure reason.
CHAT_FAULTS = {
    ChatBehaviour.SLOW: "MODEL_TIMEOUT",
    ChatBehaviour.SERVER_ERROR: "MODEL_UNAVAILABLE",
    ChatBehaviour.RATE_LIMITED: "MODEL_RATE_LIMITED",
    ChatBehaviour.UNAUTHORIZED: "MODEL_REJECTED",
    ChatBehaviour.MALFORMED_CHUNK: "MODEL_INVALID_RESPONSE",
    ChatBehaviour.ERROR_EVENT: "MODEL_",
    ChatBehaviour.STREAM_CUT: "MODEL_",
    ChatBehaviour.STREAM_TRUNCATED: "MODEL_",
}


@pytest.mark.parametrize("behaviour", list(CHAT_FAULTS), ids=lambda b: b.value)
async def test_chat_model_faults(env: Env, behaviour: ChatBehaviour) -> None:
    inp = ag.ExecutionInput(agent_id="remote", message="procedures and policies")
    env.chat.behaviour = behaviour
    try:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await env.agents.Execute(ag.ExecuteRequest(input=inp), timeout=20)
        reason = classified(
            info.value,
            {
                grpc.StatusCode.UNAVAILABLE,
                grpc.StatusCode.DEADLINE_EXCEEDED,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                grpc.StatusCode.FAILED_PRECONDITION,
                grpc.StatusCode.PERMISSION_DENIED,
            },
        )
        events = [
            e
            async for e in env.agents.ExecuteStream(ag.ExecuteStreamRequest(input=inp), timeout=20)
        ]
        assert events[-1].type == ag.EXECUTION_EVENT_TYPE_EXECUTION_FAILED, events[-1]
        assert events[-1].error_code == reason.split(":")[1]
    finally:
        env.chat.reset()
    assert reason.split(":")[1].startswith(CHAT_FAULTS[behaviour]), reason
    ok = await env.agents.Execute(ag.ExecuteRequest(input=inp), timeout=20)
    assert ok.result.answer
    SURVIVED[f"chat model {behaviour.value}"] += 1
    report(
        "faults",
        f"chat model {behaviour.value}: execution failed {reason}, next execution answered",
    )


# -- SIGKILL mid-ingestion, restart on the same data directory ----------------------


async def test_server_killed_mid_ingestion_then_restarted(
    tmp_path: Path, standins: tuple[OpenAIEmbeddingsStandIn, ChatCompletionsStandIn]
) -> None:
    emb, _ = standins
    corpus = tmp_path / "corpus"
    markers_v1 = write_corpus(corpus, 1)
    data_dir = tmp_path / "pgdata"
    config = toml_config(
        tmp_path,
        f"""
[logging]
level = "INFO"

[auth]
mode = "disabled"

[store]
kind = "postgres"
data_dir = "{data_dir}"
# Unshared: a killed replica's operation is recorded INTERRUPTED at its restart.
# (Shared, the default, another replica or the restarted one adopts and finishes
# it: tests/integration/test_shared_ingestion.py.)
shared_ingestion = false

[embedders.remote]
kind = "openai-compatible"
base_url = "{emb.base_url}"
model = "standin"
dimensions = 16
timeout_seconds = 10

[indexes.kb]
embedder = "remote"
sources = [{{ kind = "directory", path = "{corpus}", glob = "*.md" }}]
ingestion = {{ strategy = "manual", embed_batch_size = 2 }}
""",
    )
    server = ServerProcess(config, free_port(), tmp_path / "server.log")
    try:
        server.start(timeout=120)
        async with grpc.aio.insecure_channel(server.target) as ch:
            ret = retriever_pb2_grpc.RetrieverServiceStub(ch)
            ingestion = ingestion_pb2_grpc.IngestionManagerServiceStub(ch)
            first = (
                await ingestion.StartIngestion(ing.StartIngestionRequest(index_name="kb"))
            ).operation
            assert (await wait_op(ingestion, first.id)).state == ing.OPERATION_STATE_SUCCEEDED
            v1 = await checksum(ret, "kb", markers_v1)
            assert_serves(v1, markers_v1)
            version1 = (
                await ingestion.GetIndexStatus(ing.GetIndexStatusRequest(index_name="kb"))
            ).status.published_version
            # A slow second run (19 batches x 0.4 s), killed once it has staged some
            # documents (progress reaches the operation log every 2 s).
            markers_v2 = write_corpus(corpus, 2, drop=(5, 6, 7))
            emb.delay, emb.behaviour = 0.4, EmbedBehaviour.SLOW
            second = (
                await ingestion.StartIngestion(ing.StartIngestionRequest(index_name="kb"))
            ).operation
            snap = second
            for _ in range(60):
                snap = await stored_op(ingestion, "kb", second.id)
                if snap.counts.ingested >= 4 or snap.state != ing.OPERATION_STATE_RUNNING:
                    break
                await asyncio.sleep(0.1)
            assert snap.state == ing.OPERATION_STATE_RUNNING, "the run ended before the kill"
        server.kill()
        emb.behaviour = EmbedBehaviour.NORMAL
        server.start(timeout=120)
        async with grpc.aio.insecure_channel(server.target) as ch:
            ret = retriever_pb2_grpc.RetrieverServiceStub(ch)
            ingestion = ingestion_pb2_grpc.IngestionManagerServiceStub(ch)
            interrupted = await stored_op(ingestion, "kb", second.id)
            assert (interrupted.state, interrupted.error_code) == (
                ing.OPERATION_STATE_FAILED,
                "INTERRUPTED",
            ), interrupted
            status = (
                await ingestion.GetIndexStatus(ing.GetIndexStatusRequest(index_name="kb"))
            ).status
            assert status.published_version == version1 and not status.HasField("running_operation")
            assert await checksum(ret, "kb", markers_v1) == v1  # no partial publish, nothing lost
            third = (
                await ingestion.StartIngestion(ing.StartIngestionRequest(index_name="kb"))
            ).operation
            done = await wait_op(ingestion, third.id)
            assert done.state == ing.OPERATION_STATE_SUCCEEDED, done
            assert_serves(await checksum(ret, "kb", markers_v2), markers_v2)
            report(
                "faults",
                f"SIGKILL mid-ingestion (killed after {interrupted.counts.ingested} of {DOCS - 3} documents): "
                f"operation FAILED/INTERRUPTED, version {version1} served unchanged, rerun SUCCEEDED",
            )
        errors = [line for line in server.log_lines() if '"level": "ERROR"' in line]
        assert not errors, errors[:3]
    finally:
        emb.behaviour, emb.delay = EmbedBehaviour.NORMAL, 3.0
        server.stop()
        await stop_postmaster(data_dir)  # if the killed server's PostgreSQL outlived it
    SURVIVED["server SIGKILL mid-ingestion"] += 1


@summary("faults")
def faults_survived() -> str | None:
    if not SURVIVED:
        return None
    listed = ", ".join(f"{k} x{v}" for k, v in SURVIVED.items())
    return f"faults survived: {sum(SURVIVED.values())} ({listed})"
