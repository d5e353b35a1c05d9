"""An index on OpenSearch (issue 26, items 1 and 7), through the whole server and
gRPC: `[stores.search] kind = "opensearch"` next to the default store, an index
with `store = "search"`.

- It is ingested and answers LEXICAL, SEMANTIC and HYBRID retrieval with the same
  documents, ranks, provenance and (to Lucene's length-norm rounding) scores as the
  same index on PostgreSQL; each API key's tenant sees only its own documents;
  GetIndex, ListDocuments and GetDocument describe it; an ingestion run after a
  source changed updates and deletes by content hash only what changed.
- A restarted server re-ingests nothing (the content hashes are read back from
  OpenSearch). Its operations live on the default (PostgreSQL) store and survive a
  restart (they are kept by index name: the index has no row there).
- The cluster going away (a loopback gate in front of the shared node is closed,
  so the node itself keeps running for the other tests): health of the store and
  its index turns NOT_SERVING, its calls fail UNAVAILABLE / STORE_UNAVAILABLE, the
  default store's indexes keep serving, and all comes back with the cluster. The
  server's logs, errors and metrics meanwhile carry no query text, document text
  or store password; the errors' ErrorInfo names the store (`store`), as
  PostgreSQL's do.
- An unreachable cluster at startup: the server does not start (STORE_UNAVAILABLE).
- A reload moves an index from the default store onto OpenSearch; re-ingested, it
  answers the same.

Everything runs against the session's one-node cluster (`opensearch_url`), each
test under its own index prefix, deleted afterwards."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import itertools
import json
import logging
import math
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import TypeAlias
from urllib.parse import urlsplit

import grpc
import httpx
import psycopg
import pytest
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2

from groundwire.app.config import load_config, parse_config
from groundwire.app.lifecycle import start_app
from groundwire.app.logs import JsonFormatter
from groundwire.app.telemetry import install_metrics, installed_port
from groundwire.domain.auth import generate_key, hash_key
from groundwire.domain.errors import GroundwireError
from groundwire_client.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    common_pb2,
    ingestion_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
)
from groundwire_client.v1 import ingestion_pb2 as ing
from tests.support.reload_probe import write
from tests.support.servers import RunningApp, free_port, health_stub, serving

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
LEXICAL = retriever_pb2.RETRIEVAL_MODE_LEXICAL
SEMANTIC = retriever_pb2.RETRIEVAL_MODE_SEMANTIC
HYBRID = retriever_pb2.RETRIEVAL_MODE_HYBRID
Mode: TypeAlias = retriever_pb2.RetrievalMode.ValueType
Metadata: TypeAlias = tuple[tuple[str, str], ...]
ON_STARTUP: dict[str, object] = {"ingestion": {"strategy": "on_startup"}}

_session = uuid.uuid4().hex[:6]
_counter = itertools.count()

DSN_ENV = "GW_OS_SERVER_DSN"
PASSWORD_ENV = "GW_OS_SERVER_PASSWORD"

SOURCES = {
    "leave.md": "# Parental leave\n\nPolicy POL-HR-014 grants sixteen weeks of parental leave "
    "to every employee after their probation period.",
    "vpn.md": "# VPN access\n\nConnect through the GlobalProtect client. Error VPN-E42 means the "
    "access token expired: sign in again to renew it.",
    "expenses.md": "# Expenses\n\nSubmit expense reports monthly through the finance portal, "
    "before the fifth working day, with every receipt attached.",
    "retired.md": "# Fax machines\n\nThe fax machine policy FAX-OLD-7 is retired; scan documents "
    "instead.",
}
# (mode, query, the document expected first)
QUERIES: list[tuple[Mode, str, str]] = [
    (LEXICAL, "POL-HR-014 parental leave", "leave.md"),
    (LEXICAL, '"access token expired"', "vpn.md"),
    (SEMANTIC, "Error VPN-E42 means the access token expired", "vpn.md"),
    (SEMANTIC, "Submit expense reports monthly through the finance portal", "expenses.md"),
    (HYBRID, "expense reports finance portal receipt", "expenses.md"),
    (HYBRID, "sixteen weeks parental leave", "leave.md"),
]


# -- helpers ---------------------------------------------------------------------


@pytest.fixture
def prefix(opensearch_url: str) -> Iterator[str]:
    """An index prefix of the test's own on the shared node, its indexes deleted
    afterwards."""
    name = f"gws{_session}{next(_counter)}-"
    yield name
    with contextlib.suppress(httpx.HTTPError):
        httpx.delete(f"{opensearch_url}/{name}*", params={"expand_wildcards": "all"}, timeout=60)


def opensearch_indexes(url: str, prefix: str) -> set[str]:
    """The node's indexes under `prefix` (read directly, to check)."""
    r = httpx.get(
        f"{url}/_cat/indices/{prefix}*",
        params={"format": "json", "h": "index", "expand_wildcards": "all"},
        timeout=30,
    )
    r.raise_for_status()
    return {row["index"] for row in r.json()}


def search_store(url: str, prefix: str, **overrides: object) -> dict[str, object]:
    return {
        "kind": "opensearch",
        "hosts": [url],
        "replicas": 0,
        "index_prefix": prefix,
        "superseded_grace_ms": 0,
        "health_check_ms": 200,
        **overrides,
    }


def bearer(key: str) -> Metadata:
    return (("authorization", f"Bearer {key}"),)


def rag(index: str, text: str, mode: Mode, top_k: int = 5) -> retriever_pb2.RetrieveRequest:
    return retriever_pb2.RetrieveRequest(
        query=retriever_pb2.RagQuery(index_name=index, text=text, top_k=top_k, mode=mode)
    )


async def ids(
    stub: retriever_pb2_grpc.RetrieverServiceAsyncStub,
    index: str,
    text: str,
    mode: Mode = LEXICAL,
    md: Metadata = (),
) -> list[str]:
    reply = await stub.Retrieve(rag(index, text, mode), metadata=md, timeout=30)
    return [r.document_id for r in reply.results]


async def run_ingestion(
    stub: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub, index: str, md: Metadata = ()
) -> ing.Operation:
    """Start an ingestion run of `index` (or find the one running) and watch it to
    its end."""
    try:
        started = await stub.StartIngestion(
            ing.StartIngestionRequest(index_name=index), metadata=md, timeout=30
        )
        last = started.operation
    except grpc.aio.AioRpcError as exc:
        # One already runs (a reload that re-places an index starts it): watch that.
        if exc.code() is not grpc.StatusCode.FAILED_PRECONDITION:
            raise
        status = await stub.GetIndexStatus(
            ing.GetIndexStatusRequest(index_name=index), metadata=md, timeout=30
        )
        last = status.status.running_operation
        assert last.id, "no running operation"
    async for update in stub.WatchIngestion(
        ing.WatchIngestionRequest(operation_id=last.id), metadata=md, timeout=120
    ):
        last = update.operation
    assert last.state == ing.OPERATION_STATE_SUCCEEDED, last
    return last


def error_info(err: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo:
    raw = dict(err.trailing_metadata() or ()).get("grpc-status-details-bin")
    assert isinstance(raw, bytes)
    for detail in status_pb2.Status.FromString(raw).details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    raise AssertionError("no ErrorInfo")


async def health(channel: grpc.aio.Channel, service: str) -> int:
    # An index's health answers to a key that sees the index ([auth] index_health);
    # the operator's key sees every index (and no key is needed without auth).
    reply = await health_stub(channel).Check(
        health_pb2.HealthCheckRequest(service=service), timeout=10, metadata=bearer(KEYS["ops"])
    )
    return int(reply.status)


async def until_health(
    channel: grpc.aio.Channel, service: str, status: int, within_s: float = 30
) -> None:
    deadline = time.monotonic() + within_s
    while (now := await health(channel, service)) != status:
        assert time.monotonic() < deadline, f"{service} still {now}, never {status}"
        await asyncio.sleep(0.05)


def comparable(result: retriever_pb2.RetrievalResult) -> tuple[object, ...]:
    """What must be equal between stores (scores compared by `same_score`)."""
    return (
        result.document_id,
        result.chunk_id,
        result.rank,
        result.content,
        (result.span.start, result.span.end),
        result.title,
        result.section,
        dict(result.metadata),
        [(p.leg, p.rank) for p in result.provenance],
    )


COSINE = {common_pb2.SCORE_METRIC_COSINE_SIMILARITY, common_pb2.SCORE_METRIC_COSINE_DISTANCE}


def similarity(score: common_pb2.Score) -> float:
    if score.metric == common_pb2.SCORE_METRIC_COSINE_DISTANCE:
        return 1.0 - score.raw_score
    return score.raw_score


def same_score(got: common_pb2.Score, want: common_pb2.Score) -> bool:
    """One score as two stores give it: BM25 within 3% (Lucene's one-byte length
    norms), the rest to float precision (cosine recovered from the k-NN score, RRF
    over equal ranks). PostgreSQL reports the cosine leg as COSINE_DISTANCE (pgvector's
    `<=>`), memory and OpenSearch as COSINE_SIMILARITY: the same relevance."""
    close = {"rel_tol": 1e-5, "abs_tol": 1e-5}
    if {got.metric, want.metric} == COSINE:
        return math.isclose(similarity(got), similarity(want), **close) and math.isclose(
            got.relevance, want.relevance, **close
        )
    if got.metric != want.metric or got.higher_is_better != want.higher_is_better:
        return False
    if got.HasField("relevance") != want.HasField("relevance"):
        return False
    if got.metric == common_pb2.SCORE_METRIC_BM25:
        return math.isclose(got.raw_score, want.raw_score, rel_tol=0.03)
    return math.isclose(got.raw_score, want.raw_score, **close) and math.isclose(
        got.relevance, want.relevance, **close
    )


def assert_same_answers(
    got: retriever_pb2.RetrieveResponse, want: retriever_pb2.RetrieveResponse, what: str
) -> None:
    assert [comparable(r) for r in got.results] == [comparable(r) for r in want.results], what
    for g, w in zip(got.results, want.results, strict=True):
        assert same_score(g.score, w.score), (what, g.score, w.score)
        for gp, wp in zip(g.provenance, w.provenance, strict=True):
            assert same_score(gp.score, wp.score), (what, gp, wp)
    assert got.diagnostics.applied_mode == want.diagnostics.applied_mode
    assert got.diagnostics.semantic_hits == want.diagnostics.semantic_hits, what
    assert got.diagnostics.lexical_hits == want.diagnostics.lexical_hits, what


def write_sources(root: Path, files: Mapping[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


# -- 1, 2: an index on OpenSearch, served and ingested; operations on the default store


KEYS = {name: generate_key() for name in ("ops", "acme", "globex")}


def placed_config(prefix: str, url: str, sources: Path) -> dict[str, object]:
    directory = [{"kind": "directory", "path": str(sources), "glob": "*.md"}]
    every = ["manage", "ingest", "retrieve"]
    return {
        "auth": {
            "keys": [
                # The cross-tenant operator: index-wide counts.
                {"id": "ops", "hash": hash_key(KEYS["ops"]), "permissions": [*every, "operator"]},
                *(
                    {"id": t, "hash": hash_key(KEYS[t]), "tenant": t, "permissions": every}
                    for t in ("acme", "globex")
                ),
            ]
        },
        "store": {"kind": "postgres", "dsn": {"env": DSN_ENV}, "health_check_ms": 200},
        "stores": {"search": search_store(url, prefix)},
        "embedders": {"hash": {"kind": "hashing", "dimensions": 64}},
        "indexes": {
            # The same sources on both stores: the one on PostgreSQL is the reference.
            name: {
                "store": store,
                "embedder": "hash",
                "sources": directory,
                "ingestion": {"strategy": "on_startup"},
            }
            for name, store in (("docs", "search"), ("docs-pg", "default"))
        },
    }


async def test_an_index_on_opensearch_is_ingested_and_served_like_on_postgres(
    opensearch_url: str,
    prefix: str,
    fresh_database: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(DSN_ENV, fresh_database)
    sources = write_sources(tmp_path / "docs", SOURCES)
    cfg = parse_config(placed_config(prefix, opensearch_url, sources))
    ops, acme, globex = (bearer(KEYS[k]) for k in ("ops", "acme", "globex"))

    async with serving(cfg) as app, grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        ingest = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        retrieve = retriever_pb2_grpc.RetrieverServiceStub(channel)

        for service in ("", "groundwire.store.search", "groundwire.index.docs"):
            assert await health(channel, service) == SERVING
        described = (
            await ingest.GetIndex(ing.GetIndexRequest(index_name="docs"), metadata=ops)
        ).index
        assert (described.store, described.store_name) == ("opensearch", "search")
        assert described.HasField("profile")
        published = (
            await ingest.GetIndexStatus(ing.GetIndexStatusRequest(index_name="docs"), metadata=ops)
        ).status.published_version
        assert published >= 1
        reference = (
            await ingest.GetIndex(ing.GetIndexRequest(index_name="docs-pg"), metadata=ops)
        ).index
        assert (reference.store, reference.store_name) == ("postgres", "default")

        # Every mode: the expected document first, and the very answer the
        # PostgreSQL index gives (ranks, provenance, spans, scores).
        for mode, text, first in QUERIES:
            what = f"{retriever_pb2.RetrievalMode.Name(mode)} {text!r}"
            got = await retrieve.Retrieve(rag("docs", text, mode), metadata=ops, timeout=30)
            want = await retrieve.Retrieve(rag("docs-pg", text, mode), metadata=ops, timeout=30)
            assert got.results and got.results[0].document_id == first, what
            assert got.results[0].rank == 1
            legs = {p.leg for p in got.results[0].provenance}
            assert (
                legs
                == {
                    LEXICAL: {common_pb2.RETRIEVAL_LEG_LEXICAL},
                    SEMANTIC: {common_pb2.RETRIEVAL_LEG_SEMANTIC},
                    HYBRID: {
                        common_pb2.RETRIEVAL_LEG_LEXICAL,
                        common_pb2.RETRIEVAL_LEG_SEMANTIC,
                    },
                }[mode]
            ), what
            assert_same_answers(got, want, what)
            assert got.diagnostics.index_version == published

        # Tenants: each key pushes a document with the same id; each sees only
        # its own, the untenanted key neither, and no tenant the configured ones.
        for md, tenant, code in ((acme, "acme", "QX-ACME-1"), (globex, "globex", "QX-GLB-2")):
            pushed = await ingest.UpsertDocuments(
                ing.UpsertDocumentsRequest(
                    index_name="docs",
                    documents=[
                        ing.PushedDocument(
                            document_id="roadmap",
                            title=f"{tenant} roadmap",
                            text=f"The {tenant} roadmap milestone {code} ships in spring.",
                        )
                    ],
                ),
                metadata=md,
                timeout=60,
            )
            assert pushed.upserted == 1 and not pushed.failures
        for md, code in ((acme, "QX-ACME-1"), (globex, "QX-GLB-2")):
            for mode in (LEXICAL, SEMANTIC, HYBRID):
                reply = await retrieve.Retrieve(
                    rag("docs", "roadmap milestone ships", mode), metadata=md, timeout=30
                )
                assert [r.document_id for r in reply.results] == ["roadmap"]
                assert code in reply.results[0].content
            assert await ids(retrieve, "docs", "POL-HR-014", LEXICAL, md) == []
            listed = await ingest.ListDocuments(
                ing.ListDocumentsRequest(index_name="docs"), metadata=md
            )
            assert [(d.document_id, d.source_id) for d in listed.documents] == [
                ("roadmap", "push:roadmap")
            ]
            got_doc = await ingest.GetDocument(
                ing.GetDocumentRequest(
                    index_name="docs", document_id="roadmap", include_chunks=True
                ),
                metadata=md,
            )
            assert code in "".join(c.text for c in got_doc.chunks)
        assert "roadmap" not in await ids(retrieve, "docs", "roadmap milestone", HYBRID, ops)

        # The configured documents, listed and described from OpenSearch.
        listed = await ingest.ListDocuments(
            ing.ListDocumentsRequest(index_name="docs"), metadata=ops
        )
        before = {d.document_id: d for d in listed.documents}
        assert sorted(before) == sorted(SOURCES)
        assert all(d.tenant == "" and d.chunk_count >= 1 for d in before.values())
        page = await ingest.ListDocuments(
            ing.ListDocumentsRequest(index_name="docs", page_size=2), metadata=ops
        )
        rest = await ingest.ListDocuments(
            ing.ListDocumentsRequest(
                index_name="docs", page_size=2, page_token=page.next_page_token
            ),
            metadata=ops,
        )
        assert [d.document_id for d in [*page.documents, *rest.documents]] == sorted(SOURCES)
        on_pg = await ingest.ListDocuments(
            ing.ListDocumentsRequest(index_name="docs-pg"), metadata=ops
        )
        assert {d.document_id: d.content_hash for d in on_pg.documents} == {
            k: d.content_hash for k, d in before.items()
        }
        vpn = await ingest.GetDocument(
            ing.GetDocumentRequest(index_name="docs", document_id="vpn.md", include_chunks=True),
            metadata=ops,
        )
        assert vpn.document.title == "VPN access"
        assert "VPN-E42" in "".join(c.text for c in vpn.chunks)

        # An ingestion run after the sources changed: by content hash, only the
        # changed document is re-ingested and the removed one deleted.
        (sources / "vpn.md").write_text(
            "# VPN access\n\nConnect through the WireGuard client now. Error VPN-E77 means "
            "the device certificate expired."
        )
        (sources / "retired.md").unlink()
        operation = await run_ingestion(ingest, "docs", ops)
        counts = operation.counts
        assert (counts.ingested, counts.unchanged, counts.deleted) == (1, 2, 1), counts
        assert await ids(retrieve, "docs", "FAX-OLD-7", LEXICAL, ops) == []
        assert await ids(retrieve, "docs", "FAX-OLD-7", HYBRID, ops) != []  # semantic: others
        assert await ids(retrieve, "docs", "VPN-E77 WireGuard", LEXICAL, ops) == ["vpn.md"]
        assert await ids(retrieve, "docs", "GlobalProtect", LEXICAL, ops) == []
        after = {
            d.document_id: d
            for d in (
                await ingest.ListDocuments(
                    ing.ListDocumentsRequest(index_name="docs"), metadata=ops
                )
            ).documents
        }
        assert sorted(after) == ["expenses.md", "leave.md", "vpn.md"]
        assert after["vpn.md"].content_hash != before["vpn.md"].content_hash
        assert after["vpn.md"].version == operation.version > before["vpn.md"].version
        for unchanged in ("expenses.md", "leave.md"):
            assert after[unchanged].version == before[unchanged].version
            assert after[unchanged].content_hash == before[unchanged].content_hash
        with pytest.raises(grpc.aio.AioRpcError) as gone:
            await ingest.GetDocument(
                ing.GetDocumentRequest(index_name="docs", document_id="retired.md"),
                metadata=ops,
            )
        assert gone.value.code() is grpc.StatusCode.NOT_FOUND
        # The tenants' pushed documents are not the sources' to delete.
        assert await ids(retrieve, "docs", "roadmap milestone", LEXICAL, acme) == ["roadmap"]
        status = await ingest.GetIndexStatus(
            ing.GetIndexStatusRequest(index_name="docs"), metadata=ops
        )
        assert status.status.published_version == operation.version
        assert status.status.document_count == 5  # three configured, two tenants' pushed
        reference_version = (
            await ingest.GetIndexStatus(
                ing.GetIndexStatusRequest(index_name="docs-pg"), metadata=ops
            )
        ).status.published_version

    # OpenSearch holds the index's data only: its meta records and the tenants'
    # physical indexes.
    on_node = opensearch_indexes(opensearch_url, prefix)
    assert f"{prefix}meta" in on_node
    assert all(i == f"{prefix}meta" or i.startswith(f"{prefix}docs.") for i in on_node), on_node

    # A restarted server serves what was published, and its startup run re-ingests
    # nothing (the content hashes are read back from OpenSearch).
    async with serving(cfg) as app, grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        ingest = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        retrieve = retriever_pb2_grpc.RetrieverServiceStub(channel)
        # Its startup run did what the same run does on PostgreSQL.
        versions = {
            name: (
                await ingest.GetIndexStatus(
                    ing.GetIndexStatusRequest(index_name=name), metadata=ops
                )
            ).status.published_version
            for name in ("docs", "docs-pg")
        }
        assert versions["docs"] - operation.version == versions["docs-pg"] - reference_version
        listed = await ingest.ListDocuments(
            ing.ListDocumentsRequest(index_name="docs"), metadata=ops
        )
        assert {(d.document_id, d.version, d.content_hash) for d in listed.documents} == {
            (d.document_id, d.version, d.content_hash) for d in after.values()
        }
        assert (await ids(retrieve, "docs", "VPN-E77 WireGuard", HYBRID, ops))[0] == "vpn.md"
        assert await ids(retrieve, "docs", "roadmap milestone", LEXICAL, acme) == ["roadmap"]


async def test_operations_of_an_index_on_opensearch_live_on_the_default_store(
    opensearch_url: str, prefix: str, fresh_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DSN_ENV, fresh_database)
    inline = [{"kind": "inline", "id": "note", "text": "Operations stay on PostgreSQL."}]
    cfg = parse_config(
        {
            "auth": {"mode": "disabled"},
            "store": {"kind": "postgres", "dsn": {"env": DSN_ENV}},
            "stores": {"search": search_store(opensearch_url, prefix)},
            "indexes": {
                "docs": {
                    "store": "search",
                    "sources": inline,
                    "ingestion": {"strategy": "on_startup"},
                }
            },
        }
    )

    async def history(stub: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub) -> list[str]:
        listed = await stub.ListOperations(ing.ListOperationsRequest(index_name="docs"))
        return [o.id for o in listed.operations]

    async with serving(cfg) as app, grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        ingest = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        [startup_run] = await history(ingest)
        operation = await run_ingestion(ingest, "docs")
        assert await history(ingest) == [operation.id, startup_run]
        status = await ingest.GetIndexStatus(ing.GetIndexStatusRequest(index_name="docs"))
        assert status.status.last_operation.id == operation.id

    # Rows of the default store's database (read directly).
    with psycopg.connect(fresh_database) as conn:
        rows = conn.execute("SELECT id FROM gw_operations WHERE index_name = 'docs'").fetchall()
    assert {str(r[0]) for r in rows} == {operation.id, startup_run}

    # They survive a restart, and are read back from the store.
    async with serving(cfg) as app, grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        ingest = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        _startup_again, *older = await history(ingest)
        assert older == [operation.id, startup_run]
        watched = [
            u.operation.state
            async for u in ingest.WatchIngestion(
                ing.WatchIngestionRequest(operation_id=startup_run), timeout=30
            )
        ]
        assert watched == [ing.OPERATION_STATE_SUCCEEDED]


# -- 3, 4: the cluster going away; content-free logs, errors and metrics --------


class Gate:
    """A TCP forwarder on 127.0.0.1 to the OpenSearch node. Closing it refuses new
    connections and resets the open ones, so to the server the cluster is gone,
    while the shared node keeps running; opening it again (same port) brings the
    cluster back."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        assert parts.hostname is not None and parts.port is not None
        self._scheme = parts.scheme
        self._host, self._port = parts.hostname, parts.port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"{self._scheme}://127.0.0.1:{self.port}"

    @property
    def is_open(self) -> bool:
        return self._server is not None

    async def open(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(self._host, self._port)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        pumps = [
            asyncio.create_task(self._pump(reader, up_writer)),
            asyncio.create_task(self._pump(up_reader, writer)),
        ]
        self._tasks.update(pumps)
        try:
            await asyncio.gather(*pumps, return_exceptions=True)
        finally:
            self._tasks.difference_update(pumps)
            self._writers -= {writer, up_writer}

    @staticmethod
    async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65_536):
                dst.write(data)
                await dst.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            dst.transport.abort()


@pytest.fixture
async def gate(opensearch_url: str) -> AsyncIterator[Gate]:
    g = Gate(opensearch_url)
    await g.open()
    try:
        yield g
    finally:
        if g.is_open:
            await g.close()


@contextlib.contextmanager
def json_log() -> Iterator[io.StringIO]:
    """The server's production log lines (groundwire.app.logs.JsonFormatter on the
    root logger) at DEBUG, every logger included, into a buffer."""
    root = logging.getLogger()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.setLevel(logging.DEBUG)
    names = ("", "groundwire", "opensearch", "opensearchpy.trace", "aiohttp")
    saved = {n: logging.getLogger(n).level for n in names}
    root.addHandler(handler)
    for n in names:
        logging.getLogger(n).setLevel(logging.DEBUG)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        for n, level in saved.items():
            logging.getLogger(n).setLevel(level)


def metrics_port() -> int:
    """The process's Prometheus exporter (installed here unless a test before did)."""
    port = installed_port()
    if port is None:
        install_metrics(f"127.0.0.1:{free_port()}")
        port = installed_port()
    assert port is not None
    return port


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        body: bytes = response.read()
    return body.decode()


def engine_errors(body: str, store: str) -> float:
    """groundwire.store.engine.errors of `store` with reason STORE_UNAVAILABLE."""
    total = 0.0
    for line in body.splitlines():
        if (
            line.startswith("groundwire_store_engine_errors")
            and f'store="{store}"' in line
            and 'reason="STORE_UNAVAILABLE"' in line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


# Distinctive texts that must never reach a log line, an error or a metric.
QUERY_CANARY = "zebrafinch quokkamarmot"
DOC_CANARY = "ocelotharbor"
PASSWORD = f"pw-{uuid.uuid4().hex}"


async def test_a_cluster_gone_fails_only_its_indexes_and_leaks_nothing(
    gate: Gate, prefix: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    port = metrics_port()
    inline = [
        {"kind": "inline", "id": "far-1", "text": f"The {DOC_CANARY} procedure for zebrafinch."},
        {"kind": "inline", "id": "far-2", "text": "Quarterly budget planning and forecasts."},
    ]
    cfg = parse_config(
        {
            "auth": {"mode": "disabled"},
            "store": {"kind": "memory", "health_check_ms": 200},
            "stores": {
                "search": search_store(
                    gate.url,
                    prefix,
                    username="groundwire",
                    password={"env": PASSWORD_ENV},
                    request_timeout_ms=5_000,
                )
            },
            "embedders": {"hash": {"kind": "hashing", "dimensions": 64}},
            "indexes": {
                "far": {"store": "search", "embedder": "hash", "sources": inline, **ON_STARTUP},
                "near": {
                    "embedder": "hash",
                    "sources": [{"kind": "inline", "id": "near-1", "text": "nearby kiosk"}],
                    **ON_STARTUP,
                },
            },
        }
    )
    caplog.set_level(logging.DEBUG, logger="groundwire")
    with json_log() as log:
        async with (
            serving(cfg) as app,
            grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
        ):
            retrieve = retriever_pb2_grpc.RetrieverServiceStub(channel)
            ingest = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
            services = ("groundwire.store.search", "groundwire.index.far")
            for service in ("", "groundwire.store.default", "groundwire.index.near", *services):
                assert await health(channel, service) == SERVING
            assert await ids(retrieve, "far", DOC_CANARY) == ["far-1"]
            errors_before = engine_errors(await asyncio.to_thread(scrape, port), "search")

            await gate.close()
            failures: list[grpc.aio.AioRpcError] = []
            for mode in (LEXICAL, SEMANTIC, HYBRID):
                with pytest.raises(grpc.aio.AioRpcError) as failed:
                    await retrieve.Retrieve(rag("far", QUERY_CANARY, mode), timeout=30)
                failures.append(failed.value)
            with pytest.raises(grpc.aio.AioRpcError) as pushing:
                await ingest.UpsertDocuments(
                    ing.UpsertDocumentsRequest(
                        index_name="far",
                        documents=[
                            ing.PushedDocument(
                                document_id="late", text=f"{DOC_CANARY} {QUERY_CANARY}"
                            )
                        ],
                    ),
                    timeout=30,
                )
            failures.append(pushing.value)
            named: list[str] = []
            for failure in failures:
                assert failure.code() is grpc.StatusCode.UNAVAILABLE
                info = error_info(failure)
                assert info.reason == "STORE_UNAVAILABLE"
                named.append(info.metadata.get("store", ""))
                said = f"{failure.details()} {failure.trailing_metadata()} {info}"
                for secret in (QUERY_CANARY, "zebrafinch", DOC_CANARY, PASSWORD):
                    assert secret not in said

            # Readiness names the store and its index; the rest keeps serving.
            for service in services:
                await until_health(channel, service, NOT_SERVING)
            for service in ("", "groundwire.store.default", "groundwire.index.near"):
                assert await health(channel, service) == SERVING
            for mode in (LEXICAL, SEMANTIC, HYBRID):
                assert await ids(retrieve, "near", "nearby kiosk", mode) == ["near-1"]
            described = await ingest.GetIndex(ing.GetIndexRequest(index_name="far"))
            assert described.index.store_name == "search"
            assert not described.index.HasField("profile")

            body = await asyncio.to_thread(scrape, port)
            assert engine_errors(body, "search") > errors_before
            assert "groundwire_store_engine_duration" in body

            # The cluster back: so is everything.
            await gate.open()
            for service in services:
                await until_health(channel, service, SERVING)
            deadline = time.monotonic() + 30
            while True:
                try:
                    assert await ids(retrieve, "far", DOC_CANARY, HYBRID) == ["far-1", "far-2"]
                    break
                except grpc.aio.AioRpcError:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.1)

    lines = log.getvalue().splitlines()
    # Controls: the outage was logged (the access log's failed calls) and its
    # failures carry their reason.
    assert any('"msg": "rpc"' in line and "UNAVAILABLE" in line for line in lines)
    credentials = base64.b64encode(f"groundwire:{PASSWORD}".encode()).decode()
    texts = [
        *lines,
        *(r.getMessage() for r in caplog.records if r.name.startswith("groundwire")),
        *(
            json.dumps(vars(r), default=str)
            for r in caplog.records
            if r.name.startswith("groundwire")
        ),
        body,
    ]
    for secret in (QUERY_CANARY, "zebrafinch", "quokkamarmot", DOC_CANARY, PASSWORD, credentials):
        leaks = [t for t in texts if secret in t]
        assert not leaks, (secret, leaks[:5])
    # README: a failed store's errors name it in the ErrorInfo metadata (`store`), as
    # PostgreSQL's do (stores/postgres/connection.py `translate`).
    assert named == ["search"] * len(failures)


async def test_an_unreachable_cluster_at_startup_keeps_the_server_from_starting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """app/factories.py build_stores opens every store before serving; an OpenSearch
    store pings the cluster when it opens, so a cluster down at startup stops the
    start (the stores opened meanwhile are closed) rather than serving without it."""
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    closed = f"http://127.0.0.1:{free_port()}"
    cfg = parse_config(
        {
            "auth": {"mode": "disabled"},
            "stores": {
                "search": search_store(
                    closed, "gw-closed-", username="groundwire", password={"env": PASSWORD_ENV}
                )
            },
            "indexes": {"far": {"store": "search"}, "near": {}},
        }
    )
    started = time.monotonic()
    with pytest.raises(GroundwireError) as refused:
        await start_app(cfg, "127.0.0.1:0")
    assert time.monotonic() - started < 30
    assert refused.value.reason == "STORE_UNAVAILABLE"
    assert PASSWORD not in str(refused.value) and closed not in str(refused.value)


# -- 5: a reload moves an index onto OpenSearch ----------------------------------


async def test_a_reload_moves_an_index_onto_opensearch(
    opensearch_url: str, prefix: str, tmp_path: Path
) -> None:
    sources = write_sources(tmp_path / "docs", SOURCES)
    index: dict[str, object] = {
        "embedder": "hash",
        # Ingested when asked (a start-up strategy would re-ingest on the reload, at
        # once; this way the empty new store is observable first).
        "sources": [{"kind": "directory", "path": str(sources), "glob": "*.md"}],
    }
    base: dict[str, object] = {
        "auth": {"mode": "disabled"},
        "stores": {"search": search_store(opensearch_url, prefix)},
        "embedders": {"hash": {"kind": "hashing", "dimensions": 64}},
        "indexes": {"moving": index},
    }
    path = tmp_path / "groundwire.toml"
    write(path, base)
    app: RunningApp = await start_app(load_config(path), "127.0.0.1:0", config_path=path)
    try:
        await app.wait_ready()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            ingest = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
            retrieve = retriever_pb2_grpc.RetrieverServiceStub(channel)
            admin = admin_pb2_grpc.AdminServiceStub(channel)

            async def answers() -> list[retriever_pb2.RetrieveResponse]:
                return [
                    await retrieve.Retrieve(rag("moving", text, mode), timeout=30)
                    for mode, text, _ in QUERIES
                ]

            described = (await ingest.GetIndex(ing.GetIndexRequest(index_name="moving"))).index
            assert (described.store, described.store_name) == ("memory", "default")
            first = await run_ingestion(ingest, "moving")
            on_memory = await answers()
            assert [a.results[0].document_id for a in on_memory] == [q[2] for q in QUERIES]

            write(path, {**base, "indexes": {"moving": {**index, "store": "search"}}})
            report = await admin.ReloadConfiguration(
                admin_pb2.ReloadConfigurationRequest(), timeout=60
            )
            assert report.applied and list(report.reingest_indexes) == ["moving"]
            described = (await ingest.GetIndex(ing.GetIndexRequest(index_name="moving"))).index
            assert (described.store, described.store_name) == ("opensearch", "search")
            # Nothing is copied: OpenSearch starts empty until the index is re-ingested.
            status = await ingest.GetIndexStatus(ing.GetIndexStatusRequest(index_name="moving"))
            assert status.status.rebuild_pending or status.status.published_version == 0
            assert await ids(retrieve, "moving", "POL-HR-014") == []
            operation = await run_ingestion(ingest, "moving")
            assert operation.counts.ingested == len(SOURCES)

            on_opensearch = await answers()
            for (mode, text, _), got, want in zip(QUERIES, on_opensearch, on_memory, strict=True):
                assert_same_answers(got, want, f"{retriever_pb2.RetrievalMode.Name(mode)} {text!r}")
            assert opensearch_indexes(opensearch_url, prefix) >= {f"{prefix}meta"}
            assert any(
                i.startswith(f"{prefix}moving.") for i in opensearch_indexes(opensearch_url, prefix)
            )
            # The index's operations stay on the default store, under its name.
            history = await ingest.ListOperations(ing.ListOperationsRequest(index_name="moving"))
            assert [o.id for o in history.operations] == [operation.id, first.id]
    finally:
        await app.stop(0)
