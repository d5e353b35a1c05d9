"""Access lists end to end: a directory source's per-path rules, a reload that
changes them, and pushes that change only a document's ACL. An ACL change
publishes a new version and asks the embedder for nothing (every vector comes
from the embedding cache); the new ACL decides what each caller reads at once.

Authentication is disabled here: the `x-groundwire-principals` metadata then
names the caller's principals (tests/security/test_principal_matrix.py covers
keys, `act_for` and every surface)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from groundwire.app.config import load_config
from groundwire.app.lifecycle import RunningApp, start_app
from groundwire_client.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    ingestion_pb2,
    ingestion_pb2_grpc,
    retriever_pb2_grpc,
)
from groundwire_client.v1 import retriever_pb2 as rt
from tests.integration.test_embedding_reuse import CountingEmbedder
from tests.support.reload_probe import write

pytestmark = pytest.mark.timeout(120)

DSN_ENV = "GROUNDWIRE_ACCESS_LISTS_TEST_DSN"
HR = (("x-groundwire-principals", "group:hr"),)
BOARD = (("x-groundwire-principals", "group:board"),)
NOBODY: tuple[tuple[str, str], ...] = ()


def configuration(docs: Path, store: dict[str, object], rule_acl: list[str]) -> dict[str, object]:
    return {
        "auth": {"mode": "disabled"},
        "store": store,
        "embedders": {"hash": {"kind": "hashing", "dimensions": 64}},
        "indexes": {
            "docs": {
                "embedder": "hash",
                "sources": [
                    {
                        "kind": "directory",
                        "path": str(docs),
                        "glob": "**/*.md",
                        "acl_rules": [{"glob": "hr/**", "acl": rule_acl}],
                    }
                ],
                "ingestion": {"strategy": "on_startup"},
            },
            "pushed": {"embedder": "hash"},
        },
    }


@dataclass
class Served:
    app: RunningApp
    path: Path
    docs: Path
    store: dict[str, object]
    channel: grpc.aio.Channel
    counter: CountingEmbedder

    async def found(self, index: str, metadata: tuple[tuple[str, str], ...]) -> set[str]:
        stub = retriever_pb2_grpc.RetrieverServiceStub(self.channel)
        found: set[str] = set()
        for mode in (rt.RETRIEVAL_MODE_SEMANTIC, rt.RETRIEVAL_MODE_LEXICAL):
            resp = await stub.Retrieve(
                rt.RetrieveRequest(
                    query=rt.RagQuery(index_name=index, text="leave policy", mode=mode, top_k=20)
                ),
                metadata=metadata,
            )
            found |= {r.document_id for r in resp.results}
        return found


@pytest.fixture(params=["memory", "postgres"])
async def served(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Served]:
    store: dict[str, object] = {"kind": "memory"}
    if request.param == "postgres":
        os.environ[DSN_ENV] = request.getfixturevalue("fresh_database")
        store = {"kind": "postgres", "dsn": {"env": DSN_ENV}}
    docs = tmp_path / "docs"
    (docs / "hr").mkdir(parents=True)
    (docs / "handbook.md").write_text("# Handbook\n\nThe leave policy for everyone.\n")
    (docs / "hr" / "case.md").write_text("# Case\n\nA confidential leave policy case.\n")
    path = tmp_path / "groundwire.toml"
    write(path, configuration(docs, store, ["group:hr"]))
    app = await start_app(load_config(path), "127.0.0.1:0", config_path=path)
    try:
        counter = CountingEmbedder(app.components.embedders["hash"])
        app.components.embedders["hash"] = counter
        for name in ("docs", "pushed"):
            app.components.catalog.get(name).embedder = counter
        await app.wait_ready()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            yield Served(app, path, docs, store, channel, counter)
    finally:
        await app.stop(0)
        os.environ.pop(DSN_ENV, None)


async def test_directory_rules_decide_who_reads_and_a_rule_change_embeds_nothing(
    served: Served,
) -> None:
    assert await served.found("docs", NOBODY) == {"handbook.md"}
    assert await served.found("docs", HR) == {"handbook.md", "hr/case.md"}
    assert await served.found("docs", BOARD) == {"handbook.md"}
    embedded = served.counter.document_texts
    assert embedded > 0
    stub = ingestion_pb2_grpc.IngestionManagerServiceStub(served.channel)
    started = (
        await stub.GetIndexStatus(ingestion_pb2.GetIndexStatusRequest(index_name="docs"))
    ).status.last_operation.id
    write(served.path, configuration(served.docs, served.store, ["group:board"]))
    await admin_pb2_grpc.AdminServiceStub(served.channel).ReloadConfiguration(
        admin_pb2.ReloadConfigurationRequest(), timeout=30
    )
    # The reload re-ingests the changed source (ON_STARTUP): wait for that run.
    deadline = time.monotonic() + 60
    while True:
        status = (
            await stub.GetIndexStatus(ingestion_pb2.GetIndexStatusRequest(index_name="docs"))
        ).status
        ran = status.last_operation.id not in ("", started)
        if ran and not status.HasField("running_operation") and not status.rebuild_pending:
            break
        assert time.monotonic() < deadline, "the re-ingestion did not finish"
        await asyncio.sleep(0.05)
    final = status.last_operation
    assert final.state == ingestion_pb2.OPERATION_STATE_SUCCEEDED
    # The case's ACL changed (re-staged), the handbook did not (unchanged).
    assert (final.counts.ingested, final.counts.unchanged) == (1, 1)
    assert served.counter.document_texts == embedded, "an ACL change embedded text"
    assert await served.found("docs", HR) == {"handbook.md"}
    assert await served.found("docs", BOARD) == {"handbook.md", "hr/case.md"}
    got = await stub.GetDocument(
        ingestion_pb2.GetDocumentRequest(index_name="docs", document_id="hr/case.md"),
        metadata=BOARD,
    )
    assert list(got.document.acl) == ["group:board"]


async def test_a_pushed_acl_change_publishes_a_version_and_embeds_nothing(served: Served) -> None:
    stub = ingestion_pb2_grpc.IngestionManagerServiceStub(served.channel)

    async def push(acl: list[str]) -> ingestion_pb2.UpsertDocumentsResponse:
        resp: ingestion_pb2.UpsertDocumentsResponse = await stub.UpsertDocuments(
            ingestion_pb2.UpsertDocumentsRequest(
                index_name="pushed",
                documents=[
                    ingestion_pb2.PushedDocument(
                        document_id="minutes", text="Board leave policy minutes.", acl=acl
                    )
                ],
            )
        )
        return resp

    first = await push(["group:hr"])
    embedded = served.counter.document_texts
    assert await served.found("pushed", HR) == {"minutes"}
    assert await served.found("pushed", BOARD) == set()
    same = await push(["group:hr"])
    assert (same.upserted, same.unchanged) == (0, 1)
    changed = await push(["group:board", "user:carol"])
    assert changed.upserted == 1 and changed.published_version > first.published_version
    assert served.counter.document_texts == embedded, "an ACL change embedded text"
    assert await served.found("pushed", HR) == set()
    assert await served.found("pushed", BOARD) == {"minutes"}
    assert await served.found("pushed", (("x-groundwire-principals", "user:carol"),)) == {"minutes"}
    # Removing the ACL makes it the whole tenant's again.
    await push([])
    assert await served.found("pushed", NOBODY) == {"minutes"}
    assert served.counter.document_texts == embedded
