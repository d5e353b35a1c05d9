"""An index on the embedded Qdrant engine (issue 47), through the whole server and
gRPC: `[stores.vectors] kind = "qdrant"` next to the default PostgreSQL store, an
index with `store = "vectors"` and the same sources on PostgreSQL as the reference.

- It is ingested and answers LEXICAL, SEMANTIC and HYBRID retrieval with the same
  documents, ranks, provenance and scores as the index on PostgreSQL (BM25 to float
  precision: the store rescores with groundwire's BM25); each API key's tenant sees
  only its own pushed documents; GetIndex, ListDocuments (paged) and GetDocument
  describe it; a run after the sources changed re-ingests and deletes by content
  hash only what changed.
- A restarted server serves what was published from the engine's files and its
  startup run re-ingests nothing; the operations live on the default store."""

from __future__ import annotations

import math
from pathlib import Path

import grpc
import pytest

from groundwire.app.config import parse_config
from groundwire.domain.auth import hash_key
from groundwire_client.v1 import common_pb2, ingestion_pb2_grpc, retriever_pb2, retriever_pb2_grpc
from groundwire_client.v1 import ingestion_pb2 as ing
from tests.integration.test_opensearch_server import (
    HYBRID,
    KEYS,
    LEXICAL,
    QUERIES,
    SOURCES,
    bearer,
    comparable,
    ids,
    rag,
    run_ingestion,
    similarity,
    write_sources,
)
from tests.support.servers import serving

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

DSN_ENV = "GW_QD_SERVER_DSN"


def config(path: Path, sources: Path) -> dict[str, object]:
    directory = [{"kind": "directory", "path": str(sources), "glob": "*.md"}]
    every = ["manage", "ingest", "retrieve"]
    return {
        "auth": {
            "keys": [
                {"id": "ops", "hash": hash_key(KEYS["ops"]), "permissions": [*every, "operator"]},
                *(
                    {"id": t, "hash": hash_key(KEYS[t]), "tenant": t, "permissions": every}
                    for t in ("acme", "globex")
                ),
            ]
        },
        "store": {"kind": "postgres", "dsn": {"env": DSN_ENV}, "health_check_ms": 200},
        "stores": {"vectors": {"kind": "qdrant", "path": str(path), "search_threads": 1}},
        "embedders": {"hash": {"kind": "hashing", "dimensions": 64}},
        "indexes": {
            name: {
                "store": store,
                "embedder": "hash",
                "sources": directory,
                "ingestion": {"strategy": "on_startup"},
            }
            for name, store in (("docs", "vectors"), ("docs-pg", "default"))
        },
    }


def same_score(got: common_pb2.Score, want: common_pb2.Score) -> bool:
    """One score as both stores give it: PostgreSQL reports cosine as a distance,
    Qdrant as a similarity (the same relevance); BM25 and RRF to float precision."""
    close = {"rel_tol": 1e-5, "abs_tol": 1e-5}
    if got.metric != want.metric:
        return math.isclose(similarity(got), similarity(want), **close)
    return math.isclose(got.raw_score, want.raw_score, **close)


async def test_an_index_on_qdrant_is_ingested_and_served_like_on_postgres(
    fresh_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DSN_ENV, fresh_database)
    sources = write_sources(tmp_path / "docs", SOURCES)
    cfg = parse_config(config(tmp_path / "qdrant", sources))
    ops, acme, globex = (bearer(KEYS[k]) for k in ("ops", "acme", "globex"))

    async with serving(cfg) as app, grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        ingest = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        retrieve = retriever_pb2_grpc.RetrieverServiceStub(channel)
        described = (
            await ingest.GetIndex(ing.GetIndexRequest(index_name="docs"), metadata=ops)
        ).index
        assert (described.store, described.store_name) == ("qdrant", "vectors")

        for mode, text, first in QUERIES:
            what = f"{retriever_pb2.RetrievalMode.Name(mode)} {text!r}"
            got = await retrieve.Retrieve(rag("docs", text, mode), metadata=ops, timeout=30)
            want = await retrieve.Retrieve(rag("docs-pg", text, mode), metadata=ops, timeout=30)
            assert got.results and got.results[0].document_id == first, what
            assert [comparable(r) for r in got.results] == [comparable(r) for r in want.results], (
                what
            )
            for g, w in zip(got.results, want.results, strict=True):
                assert same_score(g.score, w.score), (what, g.score, w.score)
                for gp, wp in zip(g.provenance, w.provenance, strict=True):
                    assert same_score(gp.score, wp.score), (what, gp, wp)

        for md, tenant in ((acme, "acme"), (globex, "globex")):
            pushed = await ingest.UpsertDocuments(
                ing.UpsertDocumentsRequest(
                    index_name="docs",
                    documents=[
                        ing.PushedDocument(
                            document_id="roadmap",
                            title=f"{tenant} roadmap",
                            text=f"The {tenant} roadmap milestone ships in spring.",
                        )
                    ],
                ),
                metadata=md,
                timeout=60,
            )
            assert pushed.upserted == 1 and not pushed.failures
        for md, tenant in ((acme, "acme"), (globex, "globex")):
            reply = await retrieve.Retrieve(
                rag("docs", "roadmap milestone ships", HYBRID), metadata=md, timeout=30
            )
            assert [r.document_id for r in reply.results] == ["roadmap"]
            assert tenant in reply.results[0].content
            assert await ids(retrieve, "docs", "POL-HR-014", LEXICAL, md) == []
        assert "roadmap" not in await ids(retrieve, "docs", "roadmap milestone", HYBRID, ops)

        page = await ingest.ListDocuments(
            ing.ListDocumentsRequest(index_name="docs", page_size=3), metadata=ops
        )
        rest = await ingest.ListDocuments(
            ing.ListDocumentsRequest(
                index_name="docs", page_size=3, page_token=page.next_page_token
            ),
            metadata=ops,
        )
        before = {d.document_id: d for d in [*page.documents, *rest.documents]}
        assert list(before) == sorted(SOURCES)
        vpn = await ingest.GetDocument(
            ing.GetDocumentRequest(index_name="docs", document_id="vpn.md", include_chunks=True),
            metadata=ops,
        )
        assert "VPN-E42" in "".join(c.text for c in vpn.chunks)

        (sources / "vpn.md").write_text(
            "# VPN access\n\nConnect through the WireGuard client now. Error VPN-E77 means "
            "the device certificate expired."
        )
        (sources / "retired.md").unlink()
        operation = await run_ingestion(ingest, "docs", ops)
        counts = operation.counts
        assert (counts.ingested, counts.unchanged, counts.deleted) == (1, 2, 1), counts
        assert await ids(retrieve, "docs", "FAX-OLD-7", LEXICAL, ops) == []
        assert await ids(retrieve, "docs", "VPN-E77 WireGuard", LEXICAL, ops) == ["vpn.md"]
        status = await ingest.GetIndexStatus(
            ing.GetIndexStatusRequest(index_name="docs"), metadata=ops
        )
        assert status.status.published_version == operation.version
        assert status.status.document_count == 5  # three configured, two tenants' pushed

    async with serving(cfg) as app, grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        ingest = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        retrieve = retriever_pb2_grpc.RetrieverServiceStub(channel)
        status = await ingest.GetIndexStatus(
            ing.GetIndexStatusRequest(index_name="docs"), metadata=ops
        )
        assert status.status.document_count == 5
        history = await ingest.ListOperations(
            ing.ListOperationsRequest(index_name="docs"), metadata=ops
        )
        latest = history.operations[0]
        assert latest.counts.ingested == 0 and latest.counts.unchanged == 3, latest.counts
        assert (await ids(retrieve, "docs", "VPN-E77 WireGuard", HYBRID, ops))[0] == "vpn.md"
        assert await ids(retrieve, "docs", "roadmap milestone", LEXICAL, acme) == ["roadmap"]
