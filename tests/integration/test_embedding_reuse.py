"""Issue 28, item 1: never embed the same text twice. A real in-process server
ingests a folder, then a reload changes the index's tenant, or moves it to another
store, and the re-ingestion that follows asks the embedder for nothing: every
vector comes from the embedding cache of the default store, and search returns
exactly what it returned before. A reload of an unchanged configuration
re-ingests nothing at all."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import numpy as np
import pytest

from groundwire.app.config import load_config
from groundwire.app.lifecycle import RunningApp, start_app
from groundwire.domain.retrieval import ChunkHit, Scope
from groundwire.domain.scores import ScoreMetric
from groundwire.providers.embeddings.base import (
    EmbeddingInfo,
    EmbeddingProvider,
    EmbeddingTask,
    Vectors,
)
from groundwire.stores.base import Store
from groundwire_client.v1 import admin_pb2, admin_pb2_grpc, ingestion_pb2, ingestion_pb2_grpc
from tests.support.reload_probe import write

pytestmark = pytest.mark.timeout(120)

DSN_ENV = "GROUNDWIRE_EMBEDDING_REUSE_TEST_DSN"
DOCUMENTS = 30
QUERY = "retention schedule for archived invoices"


class CountingEmbedder:
    """Delegates to the configured embedder (same descriptor), counting document texts."""

    def __init__(self, inner: EmbeddingProvider) -> None:
        self.inner = inner
        self.document_texts = 0

    @property
    def info(self) -> EmbeddingInfo:
        return self.inner.info

    @property
    def max_batch_size(self) -> int:
        return self.inner.max_batch_size

    async def embed(self, texts: Sequence[str], task: EmbeddingTask) -> Vectors:
        if task is EmbeddingTask.DOCUMENT:
            self.document_texts += len(texts)
        return await self.inner.embed(texts, task)

    async def aclose(self) -> None:
        await self.inner.aclose()


def folder(root: Path) -> Path:
    root.mkdir()
    for i in range(DOCUMENTS):
        paragraphs = [f"# Policy {i}\n"] + [
            f"Section {i}.{j}: invoices of department {i} are archived for {i + j} years; "
            f"the retention schedule names owner {j} and review cycle {i * j}."
            for j in range(6)
        ]
        (root / f"policy-{i:03d}.md").write_text("\n\n".join(paragraphs) + "\n")
    return root


def configuration(
    docs: Path,
    store: dict[str, object],
    b: dict[str, object],
    *,
    tenant: str = "",
    index_store: str = "default",
) -> dict[str, object]:
    return {
        "auth": {"mode": "disabled"},
        "store": store,
        "stores": {"b": b},
        "embedders": {"hash": {"kind": "hashing", "dimensions": 64}},
        "indexes": {
            "docs": {
                "embedder": "hash",
                "store": index_store,
                "tenant": tenant,
                "sources": [{"kind": "directory", "path": str(docs), "glob": "*.md"}],
                "chunking": {"size": 160, "overlap": 0},
                "ingestion": {"strategy": "on_startup", "embed_batch_size": 16},
            }
        },
    }


@dataclass
class Served:
    app: RunningApp
    path: Path
    docs: Path
    store: dict[str, object]
    b: dict[str, object]
    # The store the index starts on ("b" when that is OpenSearch).
    home: str
    channel: grpc.aio.Channel
    counter: CountingEmbedder

    async def reload(self, **kw: Any) -> admin_pb2.ReloadConfigurationResponse:
        kw.setdefault("index_store", self.home)
        write(self.path, configuration(self.docs, self.store, self.b, **kw))
        r: admin_pb2.ReloadConfigurationResponse = await admin_pb2_grpc.AdminServiceStub(
            self.channel
        ).ReloadConfiguration(admin_pb2.ReloadConfigurationRequest(), timeout=30)
        return r

    async def settled(self) -> ingestion_pb2.IndexStatus:
        """The index's status once no ingestion is pending or running."""
        stub = ingestion_pb2_grpc.IngestionManagerServiceStub(self.channel)
        deadline = time.monotonic() + 60
        while True:
            status: ingestion_pb2.IndexStatus = (
                await stub.GetIndexStatus(ingestion_pb2.GetIndexStatusRequest(index_name="docs"))
            ).status
            if not status.rebuild_pending and not status.HasField("running_operation"):
                return status
            assert time.monotonic() < deadline, "re-ingestion did not finish"
            await asyncio.sleep(0.05)

    async def operations(self) -> list[ingestion_pb2.Operation]:
        stub = ingestion_pb2_grpc.IngestionManagerServiceStub(self.channel)
        ops = await stub.ListOperations(ingestion_pb2.ListOperationsRequest(index_name="docs"))
        return list(ops.operations)

    async def hits(self, store: Store, tenant: str, k: int = 40) -> list[ChunkHit]:
        """The index's top vector hits for QUERY in `tenant`, straight from `store`."""
        query = await self.counter.embed([QUERY], EmbeddingTask.QUERY)
        return await store.search_vector("docs", np.asarray(query[0]), k, Scope(tenant))


def ranked(hits: list[ChunkHit]) -> list[tuple[str, str, float]]:
    return [(h.document_id, h.chunk_id, h.score.raw) for h in hits]


def similarities(hits: list[ChunkHit]) -> dict[str, float]:
    """Cosine similarity by chunk id, whichever form the store reports."""
    out = {}
    for h in hits:
        raw = h.score.raw
        if h.score.metric is ScoreMetric.COSINE_DISTANCE:
            raw = 1.0 - raw
        out[h.chunk_id] = raw
    return out


@pytest.fixture(params=["memory", "postgres", "opensearch"])
async def served(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Served]:
    """A server whose default store is memory or PostgreSQL, and store "b" memory;
    with "opensearch", "b" is OpenSearch and the index starts there (its vectors
    still cached on the default store)."""
    store: dict[str, object] = {"kind": "memory"}
    b: dict[str, object] = {"kind": "memory"}
    home = "default"
    prefix = ""
    if request.param == "postgres":
        os.environ[DSN_ENV] = request.getfixturevalue("fresh_database")
        store = {"kind": "postgres", "dsn": {"env": DSN_ENV}}
    opensearch = ""
    if request.param == "opensearch":
        opensearch = request.getfixturevalue("opensearch_url")
        prefix = f"gwreuse{uuid.uuid4().hex[:8]}-"
        b = {
            "kind": "opensearch",
            "hosts": [opensearch],
            "replicas": 0,
            "index_prefix": prefix,
            "superseded_grace_ms": 0,
        }
        home = "b"
    docs = folder(tmp_path / "docs")
    path = tmp_path / "groundwire.toml"
    write(path, configuration(docs, store, b, index_store=home))
    app = await start_app(load_config(path), "127.0.0.1:0", config_path=path)
    try:
        # start_app returns before the start-up ingestion first runs: count from the
        # first chunk on. A reload reuses the unchanged embedder, so the wrapper too.
        counter = CountingEmbedder(app.components.embedders["hash"])
        app.components.embedders["hash"] = counter
        app.components.catalog.get("docs").embedder = counter
        await app.wait_ready()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            yield Served(app, path, docs, store, b, home, channel, counter)
    finally:
        await app.stop(0)
        os.environ.pop(DSN_ENV, None)
        if opensearch:
            with contextlib.suppress(httpx.HTTPError):
                async with httpx.AsyncClient(timeout=60) as client:
                    await client.delete(
                        f"{opensearch}/{prefix}*", params={"expand_wildcards": "all"}
                    )


async def test_a_tenant_change_re_ingests_the_folder_without_embedding_anything(
    served: Served,
) -> None:
    first = await served.settled()
    chunks = first.last_operation.counts.chunks_written
    assert first.last_operation.state == ingestion_pb2.OPERATION_STATE_SUCCEEDED
    assert chunks >= 3 * DOCUMENTS and served.counter.document_texts == chunks
    store = served.app.components.stores[served.home]
    before = ranked(await served.hits(store, ""))
    assert len(before) == 40

    r = await served.reload(tenant="acme")
    assert list(r.reingest_indexes) == ["docs"]
    second = await served.settled()
    op = second.last_operation
    assert op.state == ingestion_pb2.OPERATION_STATE_SUCCEEDED
    assert op.trigger == ingestion_pb2.OPERATION_TRIGGER_RELOAD
    # Every document again, under the new tenant; the old tenant's copies gone.
    assert op.counts.ingested == DOCUMENTS and op.counts.deleted == DOCUMENTS
    assert op.counts.chunks_written == chunks
    # Target <= 5% of the first ingestion; nothing at all is what it costs.
    assert served.counter.document_texts == chunks
    assert ranked(await served.hits(store, "acme")) == before
    assert await served.hits(store, "") == []

    # A changed document embeds its new chunks only.
    changed = served.docs / "policy-000.md"
    changed.write_text(changed.read_text() + "\n\nA brand new closing paragraph.\n")
    ingest = ingestion_pb2_grpc.IngestionManagerServiceStub(served.channel)
    await ingest.StartIngestion(ingestion_pb2.StartIngestionRequest(index_name="docs"))
    third = await served.settled()
    assert third.last_operation.counts.ingested == 1
    assert 0 < served.counter.document_texts - chunks <= 2


async def test_an_index_moved_to_another_store_reuses_its_vectors(served: Served) -> None:
    first = await served.settled()
    chunks = first.last_operation.counts.chunks_written
    stores = served.app.components.stores
    before = await served.hits(stores[served.home], "", chunks)
    target = "default" if served.home == "b" else "b"
    r = await served.reload(index_store=target)
    assert list(r.reingest_indexes) == ["docs"]
    moved = await served.settled()
    assert moved.last_operation.counts.ingested == DOCUMENTS
    assert served.app.components.catalog.get("docs").store_name == target
    assert served.counter.document_texts == chunks
    # Every chunk scores as before (stores report cosine similarity or distance;
    # near-ties may order differently across stores).
    after = similarities(await served.hits(stores[target], "", chunks))
    want = similarities(before)
    assert after.keys() == want.keys()
    assert all(abs(after[c] - want[c]) < 1e-5 for c in want)


async def test_a_reload_of_an_unchanged_configuration_re_ingests_nothing(
    served: Served,
) -> None:
    await served.settled()
    handle = served.app.components.catalog.get("docs")
    ops = await served.operations()
    texts = served.counter.document_texts
    r = await served.reload()
    assert r.applied and list(r.reingest_indexes) == []
    # The handle itself is kept (its embedding cache included).
    assert served.app.components.catalog.get("docs") is handle
    await asyncio.sleep(0.3)
    assert [o.id for o in await served.operations()] == [o.id for o in ops]
    assert served.counter.document_texts == texts
