"""Over-long chunks with the local ONNX embedder, over real gRPC on the memory and
PostgreSQL stores: truncation is counted per operation and reported for the
query in the diagnostics; an index with `ingestion.overlong_chunks = "reject"`
fails such documents with CHUNK_TOO_LONG (ingestion and pushes) instead of
embedding their beginning. The option is validated with its key named."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from groundwire.app.config import parse_config
from groundwire.app.config_base import ConfigError
from groundwire.app.ingest_cli import ingest
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import ingestion_pb2_grpc, retriever_pb2, retriever_pb2_grpc
from tests.support.servers import serving

pytestmark = pytest.mark.timeout(90)

WINDOW = 16  # tokens, special tokens included
SHORT = "Remote work needs approval."
LONG = " ".join(f"clause{i} of the travel policy" for i in range(20))


def _config(docs: Path, store: dict[str, object], overlong: str) -> dict[str, Any]:
    return {
        "auth": {"mode": "disabled"},
        "store": store,
        "embedders": {"local": {"kind": "local-onnx", "max_seq_length": WINDOW, "threads": 1}},
        "indexes": {
            "docs": {
                "embedder": "local",
                "sources": [{"kind": "directory", "path": str(docs)}],
                "chunking": {"size": 2000, "overlap": 0},
                "ingestion": {"overlong_chunks": overlong},
            }
        },
    }


@pytest.fixture(params=["memory", "postgres"])
async def store(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[dict[str, object]]:
    if request.param == "memory":
        yield {"kind": "memory"}
        return
    monkeypatch.setenv("GW_TEST_DSN", request.getfixturevalue("fresh_database"))
    yield {"kind": "postgres", "dsn": {"env": "GW_TEST_DSN"}, "pool_max_size": 4}


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "short1.txt").write_text(SHORT)
    (root / "short2.txt").write_text(SHORT + " Ask your manager.")
    (root / "long1.txt").write_text(LONG)
    (root / "long2.txt").write_text(LONG + " And more.")
    return root


async def _ingest(stub: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub) -> Any:
    op = (await stub.StartIngestion(ing.StartIngestionRequest(index_name="docs"))).operation
    last = op
    async for msg in stub.WatchIngestion(ing.WatchIngestionRequest(operation_id=op.id), timeout=60):
        last = msg.operation
    return last


async def test_truncation_is_counted_per_operation_and_query(
    docs: Path, store: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    async with (
        serving(parse_config(_config(docs, store, "truncate"))) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        # Ingested with the CLI, whose summary says it (not only `operations --json`).
        assert await ingest(f"127.0.0.1:{app.port}", "docs") == 0
        out = capsys.readouterr().out
        assert "2 of 4 chunks longer than the embedding model's window were embedded" in out
        stub = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        listed = await stub.ListOperations(ing.ListOperationsRequest(index_name="docs"))
        op = listed.operations[0]
        assert op.state == ing.OPERATION_STATE_SUCCEEDED and op.counts.ingested == 4
        assert op.counts.truncated_chunks == 2
        assert op.counts.embedding_usage.truncated_texts == 2
        # Every chunk's tokens, but none beyond the window.
        usage = op.counts.embedding_usage
        assert usage.texts == 4 and 4 * 5 < usage.input_tokens <= 4 * WINDOW
        # A push reports its own truncated chunks.
        pushed = await stub.UpsertDocuments(
            ing.UpsertDocumentsRequest(
                index_name="docs",
                documents=[
                    ing.PushedDocument(document_id="p-long", text=LONG + " Pushed."),
                    ing.PushedDocument(document_id="p-short", text=SHORT + " Pushed."),
                ],
            )
        )
        assert (pushed.upserted, pushed.chunks_written, pushed.truncated_chunks) == (2, 2, 1)
        ret = retriever_pb2_grpc.RetrieverServiceStub(channel)
        for text, truncated in ((SHORT, False), (LONG, True)):
            resp = await ret.Retrieve(
                retriever_pb2.RetrieveRequest(
                    query=retriever_pb2.RagQuery(index_name="docs", text=text)
                )
            )
            d = resp.diagnostics
            assert d.query_truncated is truncated
            assert d.embedding_usage.truncated_texts == int(truncated)
            assert d.embedding_usage.input_tokens <= WINDOW


async def test_reject_fails_overlong_documents_instead_of_truncating(
    docs: Path, store: dict[str, object]
) -> None:
    async with (
        serving(parse_config(_config(docs, store, "reject"))) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        stub = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        op = await _ingest(stub)
        assert op.state == ing.OPERATION_STATE_SUCCEEDED
        assert (op.counts.ingested, op.counts.failed, op.counts.truncated_chunks) == (2, 2, 0)
        assert sorted((f.document_id, f.reason) for f in op.failures) == [
            ("long1.txt", "CHUNK_TOO_LONG"),
            ("long2.txt", "CHUNK_TOO_LONG"),
        ]
        # Nothing over-long was even embedded.
        assert op.counts.embedding_usage.texts == 2
        pushed = await stub.UpsertDocuments(
            ing.UpsertDocumentsRequest(
                index_name="docs",
                documents=[
                    ing.PushedDocument(document_id="p-long", text=LONG),
                    ing.PushedDocument(document_id="p-short", text=SHORT),
                ],
            )
        )
        assert (pushed.upserted, pushed.truncated_chunks) == (1, 0)
        assert [(f.document_id, f.reason) for f in pushed.failures] == [
            ("p-long", "CHUNK_TOO_LONG")
        ]


@pytest.mark.parametrize(
    "embedders, embedder",
    [
        ({"hash": {"kind": "hashing"}}, "hash"),
        ({}, None),
    ],
)
def test_reject_needs_an_embedder_that_knows_its_window(
    tmp_path: Path, embedders: dict[str, object], embedder: str | None
) -> None:
    cfg = _config(tmp_path, {"kind": "memory"}, "reject")
    cfg["embedders"] = embedders
    cfg["indexes"]["docs"]["embedder"] = embedder
    with pytest.raises(ConfigError, match=r"indexes\.docs\.ingestion\.overlong_chunks"):
        parse_config(cfg)


def test_unknown_overlong_policy_is_refused_with_its_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"indexes\.docs\.ingestion\.overlong_chunks"):
        parse_config(_config(tmp_path, {"kind": "memory"}, "shorten"))
