"""The dashboard API's upload answered as it goes (`Accept: application/x-ndjson`):
the push's operation id comes first, while the push runs (WatchIngestion
follows it), then one last line with the result or the error; a refusal
before the push began keeps its status and JSON error."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import httpx
import pytest

from groundwire.app.config import parse_config
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import ingestion_pb2_grpc
from tests.support.embedders import ControlledEmbedder
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(120)

NDJSON = {"accept": "application/x-ndjson", "content-type": "text/plain"}


@pytest.fixture
async def app() -> AsyncIterator[RunningApp]:
    cfg = {
        "auth": {"mode": "disabled"},
        "store": {"kind": "memory"},
        "embedders": {"hash": {"kind": "hashing"}},
        "indexes": {"docs": {"embedder": "hash", "ingestion": {"max_file_bytes": 1024 * 1024}}},
    }
    async with serving(parse_config(cfg), http=True) as running:
        yield running


async def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


def _url(app: RunningApp, name: str) -> str:
    return f"http://127.0.0.1:{app.http_port}/api/rag/indexes/docs/files?name={name}"


async def test_the_answer_names_the_running_push_then_its_result(app: RunningApp) -> None:
    gate = ControlledEmbedder(gated=True)
    app.components.catalog.get("docs").embedder = gate
    body = "\n".join(f"Line {i} of a streamed upload." for i in range(2000)).encode()
    async with (
        httpx.AsyncClient(timeout=60) as http,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        stub = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        async with http.stream("POST", _url(app, "notes.txt"), content=body, headers=NDJSON) as r:
            assert r.status_code == 200
            assert r.headers["content-type"] == "application/x-ndjson"
            assert r.headers["x-request-id"]
            lines = r.aiter_lines()
            first: dict[str, Any] = json.loads(await anext(lines))
            op_id = first["operationId"]
            await _until(gate.entered.is_set)
            watch = stub.WatchIngestion(ing.WatchIngestionRequest(operation_id=op_id))
            running: Any = await watch.read()
            assert running is not grpc.aio.EOF
            assert running.operation.state == ing.OPERATION_STATE_RUNNING
            assert running.operation.trigger == ing.OPERATION_TRIGGER_PUSH
            gate.release.set()
            last: dict[str, Any] = json.loads(await anext(lines))
            assert [line async for line in lines if line] == []
        result = last["result"]
        assert result["upserted"] == 1 and result["chunksWritten"] > 0
        ops = await stub.ListOperations(ing.ListOperationsRequest(index_name="docs"))
        assert (ops.operations[0].id, ops.operations[0].state) == (
            op_id,
            ing.OPERATION_STATE_SUCCEEDED,
        )


async def test_failures_and_refusals_keep_their_shape(app: RunningApp) -> None:
    async with httpx.AsyncClient(timeout=60) as http:
        # A file no loader reads: the push ran, its failure is in the result.
        png = await http.post(
            _url(app, "photo.png"),
            content=b"\x89PNG\r\n\x1a\n",
            headers={**NDJSON, "content-type": "image/png"},
        )
        assert png.status_code == 200
        lines = [json.loads(line) for line in png.text.splitlines()]
        assert list(lines[0]) == ["operationId"] and len(lines) == 2
        assert lines[1]["result"]["failures"][0]["reason"] == "UNSUPPORTED_FORMAT"
        # Over the bound: refused before the push began, as without progress.
        big = await http.post(
            _url(app, "big.txt"), content=b"x" * (1024 * 1024 + 1), headers=NDJSON
        )
        assert big.status_code == 413
        assert big.headers["content-type"] == "application/json"
        assert big.json()["reason"] == "FILE_TOO_LARGE"
