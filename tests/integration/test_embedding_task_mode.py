"""The embedding descriptor covers the task mode (query and document prefixes): a
prefix change schedules a rebuild, pushes are refused until it ran, and no
retrieval ever compares vectors of two configurations. Over real gRPC, on the
memory and PostgreSQL stores, against the OpenAI-compatible stand-in (whose
vectors are a hash of the exact text sent, prefix included, so every score
tells which configuration made the vectors it compares)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import psycopg
import pytest

from groundwire.app.config import GroundwireConfig, OpenAICompatibleEmbedderConfig, parse_config
from groundwire.app.factories import build_embedder
from groundwire_client.v1 import common_pb2, ingestion_pb2_grpc, retriever_pb2, retriever_pb2_grpc
from groundwire_client.v1 import ingestion_pb2 as ing
from tests.support.errors import rich_error
from tests.support.openai_embeddings_standin import OpenAIEmbeddingsStandIn, standin_vector
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(60)

DIMS = 16
QUERY = "shared words about the policy"


@pytest.fixture(scope="module")
def standin() -> Iterator[OpenAIEmbeddingsStandIn]:
    with OpenAIEmbeddingsStandIn(dimensions=DIMS) as server:
        yield server


def _config(
    docs: Path, store: dict[str, object], base_url: str, **prefixes: str
) -> GroundwireConfig:
    return parse_config(
        {
            "auth": {"mode": "disabled"},
            "store": store,
            "embedders": {
                "remote": {
                    "kind": "openai-compatible",
                    "base_url": base_url,
                    "model": "standin-embed",
                    "dimensions": DIMS,
                    **prefixes,
                }
            },
            "indexes": {
                "docs": {
                    "embedder": "remote",
                    "sources": [{"kind": "directory", "path": str(docs)}],
                    "chunking": {"size": 200, "overlap": 0},
                    "ingestion": {"embed_batch_size": 2},
                }
            },
        }
    )


def _write_corpus(root: Path, count: int = 12) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (root / f"doc{i:02d}.txt").write_text(f"Document {i} has shared words about the policy.")


def _cosine(a: list[float], b: list[float]) -> float:
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


@dataclass
class Harness:
    app: RunningApp
    channel: grpc.aio.Channel
    ing: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub
    ret: retriever_pb2_grpc.RetrieverServiceAsyncStub

    def reconfigure(self, **prefixes: str) -> None:
        """What a restart with an edited embedder section builds: the same index
        bound to an embedder with other prefixes (and so another descriptor)."""
        handle = self.app.components.catalog.get("docs")
        cfg = self.app.components.config.embedders["remote"]
        assert isinstance(cfg, OpenAICompatibleEmbedderConfig)
        embedder = build_embedder(cfg.model_copy(update=prefixes))
        handle.embedder = embedder
        handle.spec = replace(handle.spec, embedding=embedder.info.descriptor())

    async def ingest(self) -> Any:
        op = (await self.ing.StartIngestion(ing.StartIngestionRequest(index_name="docs"))).operation
        last = op
        async for msg in self.ing.WatchIngestion(
            ing.WatchIngestionRequest(operation_id=op.id), timeout=30
        ):
            last = msg.operation
        return last

    async def rebuild_pending(self) -> bool:
        status = await self.ing.GetIndexStatus(ing.GetIndexStatusRequest(index_name="docs"))
        return bool(status.status.rebuild_pending)

    async def retrieve(
        self, mode: retriever_pb2.RetrievalMode.ValueType = retriever_pb2.RETRIEVAL_MODE_SEMANTIC
    ) -> Any:
        return await self.ret.Retrieve(
            retriever_pb2.RetrieveRequest(
                query=retriever_pb2.RagQuery(index_name="docs", text=QUERY, mode=mode, top_k=50)
            )
        )


def classify(response: Any, query_prefix: str, document_prefixes: dict[str, str]) -> str:
    """Which document prefix made the vectors of every result: the name of the one
    whose scores all match, or "mixed"/"unknown"."""
    assert response.results, "semantic retrieval returned nothing"
    query = standin_vector(query_prefix + QUERY, DIMS)
    verdicts = set()
    for result in response.results:
        raw = result.score.raw_score
        similarity = (
            1.0 - raw if result.score.metric == common_pb2.SCORE_METRIC_COSINE_DISTANCE else raw
        )
        matches = [
            name
            for name, prefix in document_prefixes.items()
            if abs(_cosine(query, standin_vector(prefix + result.content, DIMS)) - similarity)
            < 1e-4
        ]
        verdicts.add(matches[0] if len(matches) == 1 else "unknown")
    return verdicts.pop() if len(verdicts) == 1 else "mixed"


@pytest.fixture(params=["memory", "postgres"])
async def h(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    standin: OpenAIEmbeddingsStandIn,
) -> AsyncIterator[Harness]:
    standin.reset()
    docs = tmp_path / "docs"
    _write_corpus(docs)
    store: dict[str, object] = {"kind": "memory"}
    if request.param == "postgres":
        monkeypatch.setenv("GW_TEST_DSN", request.getfixturevalue("fresh_database"))
        store = {"kind": "postgres", "dsn": {"env": "GW_TEST_DSN"}, "pool_max_size": 4}
    async with serving(_config(docs, store, standin.base_url)) as app:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
        yield Harness(
            app,
            channel,
            ingestion_pb2_grpc.IngestionManagerServiceStub(channel),
            retriever_pb2_grpc.RetrieverServiceStub(channel),
        )
        await channel.close()


async def _refused(call: Any) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    err = rich_error(info.value)
    assert (err.code, err.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "INDEX_REBUILD_REQUIRED")


async def test_document_prefix_change_rebuilds_and_never_serves_a_mix(h: Harness) -> None:
    prefixes = {"old": "", "new": "passage: "}
    first = await h.ingest()
    assert first.state == ing.OPERATION_STATE_SUCCEEDED and first.counts.ingested == 12
    assert classify(await h.retrieve(), "", prefixes) == "old"

    h.reconfigure(document_prefix="passage: ")
    assert await h.rebuild_pending()
    # A push now would stage vectors of the new prefix beside the old ones.
    await _refused(
        h.ing.UpsertDocuments(
            ing.UpsertDocumentsRequest(
                index_name="docs",
                documents=[ing.PushedDocument(document_id="pushed", text="shared words")],
            )
        )
    )
    # Queries are embedded exactly as before, so the old version keeps serving.
    assert classify(await h.retrieve(), "", prefixes) == "old"

    # Query continuously while the rebuild runs: every answer is wholly old or
    # wholly new, and once new, never old again.
    seen: list[str] = []
    op = (await h.ing.StartIngestion(ing.StartIngestionRequest(index_name="docs"))).operation
    watch = asyncio.ensure_future(_last(h, op.id))
    while not watch.done():
        seen.append(classify(await h.retrieve(), "", prefixes))
    final = await watch
    for _ in range(3):
        seen.append(classify(await h.retrieve(), "", prefixes))
    assert final.rebuild and final.counts.ingested == 12 and final.counts.unchanged == 0
    assert set(seen) <= {"old", "new"}, seen
    assert seen[-1] == "new" and "old" not in seen[seen.index("new") :], seen
    assert not await h.rebuild_pending()
    pushed = await h.ing.UpsertDocuments(
        ing.UpsertDocumentsRequest(
            index_name="docs", documents=[ing.PushedDocument(document_id="pushed", text="words")]
        )
    )
    assert pushed.upserted == 1


async def _last(h: Harness, op_id: str) -> Any:
    last = None
    async for msg in h.ing.WatchIngestion(
        ing.WatchIngestionRequest(operation_id=op_id), timeout=30
    ):
        last = msg.operation
    assert last is not None
    return last


async def test_query_prefix_change_refuses_semantic_search_until_rebuilt(h: Harness) -> None:
    await h.ingest()
    h.reconfigure(query_prefix="query: ")
    assert await h.rebuild_pending()
    # A query vector made with the new prefix must not be compared with documents
    # embedded for the old one; lexical search never embeds and keeps serving.
    await _refused(h.retrieve())
    await _refused(h.retrieve(retriever_pb2.RETRIEVAL_MODE_HYBRID))
    lexical = await h.retrieve(retriever_pb2.RETRIEVAL_MODE_LEXICAL)
    assert len(lexical.results) == 12
    final = await h.ingest()
    assert final.rebuild
    assert classify(await h.retrieve(), "query: ", {"current": ""}) == "current"


async def test_descriptors_recorded_before_the_task_mode_still_match(
    tmp_path: Path,
    fresh_database: str,
    monkeypatch: pytest.MonkeyPatch,
    standin: OpenAIEmbeddingsStandIn,
) -> None:
    """An index published by a server that did not record prefixes (descriptor
    without the task-mode suffix) keeps serving after migration 8, with no rebuild,
    when today's configuration has empty prefixes; a configuration with a prefix
    then schedules a rebuild."""
    standin.reset()
    docs = tmp_path / "docs"
    _write_corpus(docs, 4)
    monkeypatch.setenv("GW_TEST_DSN", fresh_database)
    store: dict[str, object] = {"kind": "postgres", "dsn": {"env": "GW_TEST_DSN"}}
    plain = _config(docs, store, standin.base_url)
    async with serving(plain) as app:
        await _harness_ingest(app)
    legacy = f"openai-compatible/standin-embed:{DIMS}:raw"
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        # What a server before migration 8 wrote, and its migration record undone.
        conn.execute(
            "UPDATE gw_indexes SET embedding = %s, published_embedding = %s",
            [legacy, legacy],
        )
        conn.execute("UPDATE gw_index_versions SET embedding = %s", [legacy])
        conn.execute("DELETE FROM gw_schema_migrations WHERE version = 8")
    async with serving(plain) as app:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
        stub = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        status = await stub.GetIndexStatus(ing.GetIndexStatusRequest(index_name="docs"))
        assert status.status.published_version >= 1 and not status.status.rebuild_pending
        resp = await retriever_pb2_grpc.RetrieverServiceStub(channel).Retrieve(
            retriever_pb2.RetrieveRequest(
                query=retriever_pb2.RagQuery(index_name="docs", text=QUERY)
            )
        )
        assert classify(resp, "", {"old": ""}) == "old"
        await channel.close()
    with psycopg.connect(fresh_database) as conn:
        row = conn.execute("SELECT published_embedding FROM gw_indexes").fetchone()
    assert row is not None and row[0] == legacy + ';{"document_prefix":"","query_prefix":""}'
    async with serving(_config(docs, store, standin.base_url, document_prefix="p: ")) as app:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
        stub = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        status = await stub.GetIndexStatus(ing.GetIndexStatusRequest(index_name="docs"))
        assert status.status.rebuild_pending
        await channel.close()


async def _harness_ingest(app: RunningApp) -> None:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    h = Harness(
        app,
        channel,
        ingestion_pb2_grpc.IngestionManagerServiceStub(channel),
        retriever_pb2_grpc.RetrieverServiceStub(channel),
    )
    op = await h.ingest()
    assert op.state == ing.OPERATION_STATE_SUCCEEDED
    await channel.close()
