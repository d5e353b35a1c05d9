"""`kind = "url"` sources over real gRPC, on the memory and PostgreSQL stores, against
a loopback web server admitted by the allow-list: pages in every text format and a
DOCX are ingested; an unchanged page is not re-downloaded (304 to a conditional
request) nor re-embedded; a changed one is; the validators survive a restart on
PostgreSQL; a refused redirect and a failing page are per-document failures that
keep the previously published version serving, while a page whose media type,
content encoding or charset no loader reads is skipped and leaves the index."""

from __future__ import annotations

import io
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import docx
import grpc
import pytest

from groundwire.app.config import ConfigError, parse_config
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import ingestion_pb2_grpc, retriever_pb2, retriever_pb2_grpc
from tests.support.servers import RunningApp, serving
from tests.support.web_standin import Page, WebStandIn

pytestmark = pytest.mark.timeout(90)

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def docx_bytes(heading: str, body: str) -> bytes:
    d = docx.Document()
    d.add_heading(heading, 1)
    d.add_paragraph(body)
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


@pytest.fixture
def web() -> Iterator[WebStandIn]:
    with WebStandIn() as server:
        server.pages["/a.html"] = Page(
            b"<html><head><title>Page A</title></head><body><p>ALPHATOKEN here</p></body></html>",
            etag='"a1"',
        )
        server.pages["/b.md"] = Page(
            b"# Bee\n\nBRAVOTOKEN in markdown.\n",
            "text/markdown",
            last_modified="Mon, 30 Nov 2026 10:00:00 GMT",
        )
        server.pages["/moved"] = Page(status=301, location="/c.txt")
        server.pages["/c.txt"] = Page(b"CHARLIETOKEN plain text", "text/plain; charset=utf-8")
        server.pages["/latin1"] = Page(
            "DELTATOKEN café".encode("latin-1"), "text/plain; charset=iso-8859-1"
        )
        server.pages["/report.docx"] = Page(
            docx_bytes("Report", "ECHOTOKEN in a docx"), DOCX, etag='"d1"'
        )
        server.pages["/escape"] = Page(
            status=302, location="http://169.254.169.254/latest/meta-data/"
        )
        yield server


def config(web: WebStandIn, store: dict[str, object]) -> dict[str, object]:
    return {
        "auth": {"mode": "disabled"},
        "store": store,
        "embedders": {"hash": {"kind": "hashing"}},
        "indexes": {
            "web": {
                "embedder": "hash",
                "sources": [
                    {
                        "kind": "url",
                        "urls": [
                            web.url("/a.html"),
                            web.url("/b.md"),
                            {"url": web.url("/moved?session=secret"), "id": "moved"},
                            web.url("/latin1"),
                            web.url("/report.docx"),
                            web.url("/escape"),
                        ],
                        "allow_cidrs": ["127.0.0.1/32"],
                        "read_timeout_seconds": 5,
                    }
                ],
                "ingestion": {
                    "extensions": [".md", ".txt", ".html", ".docx"],
                    "embed_batch_size": 4,
                },
            }
        },
    }


class Client:
    def __init__(self, app: RunningApp) -> None:
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
        self.ing = ingestion_pb2_grpc.IngestionManagerServiceStub(self.channel)
        self.ret = retriever_pb2_grpc.RetrieverServiceStub(self.channel)

    async def run(self) -> ing.Operation:
        op = (await self.ing.StartIngestion(ing.StartIngestionRequest(index_name="web"))).operation
        last = op
        async for msg in self.ing.WatchIngestion(
            ing.WatchIngestionRequest(operation_id=op.id), timeout=60
        ):
            last = msg.operation
        assert last.state == ing.OPERATION_STATE_SUCCEEDED, last
        return last

    async def find(self, text: str) -> list[str]:
        resp = await self.ret.Retrieve(
            retriever_pb2.RetrieveRequest(
                query=retriever_pb2.RagQuery(
                    index_name="web", text=text, mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL, top_k=10
                )
            )
        )
        return [r.document_id for r in resp.results]


@asynccontextmanager
async def running(cfg: dict[str, Any]) -> AsyncIterator[Client]:
    async with serving(parse_config(cfg)) as app:
        client = Client(app)
        try:
            yield client
        finally:
            await client.channel.close()


@pytest.fixture(params=["memory", "postgres"])
def store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    if request.param == "postgres":
        monkeypatch.setenv("GW_TEST_DSN", request.getfixturevalue("fresh_database"))
        return {"kind": "postgres", "dsn": {"env": "GW_TEST_DSN"}, "pool_max_size": 4}
    return {"kind": "memory"}


def reasons(op: ing.Operation) -> dict[str, str]:
    return {f.document_id: f.reason for f in op.failures}


async def test_url_pages_are_ingested_and_unchanged_ones_are_not_refetched(
    web: WebStandIn, store: dict[str, object], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="groundwire.ingestion")
    base = f"http://127.0.0.1:{web.port}"
    async with running(config(web, store)) as c:
        desc = (await c.ing.GetIndex(ing.GetIndexRequest(index_name="web"))).index
        assert list(desc.source_kinds) == ["url"]
        assert "127.0.0.1" not in str(desc)

        first = await c.run()
        assert (first.counts.discovered, first.counts.ingested, first.counts.failed) == (6, 5, 1)
        # The redirect to the metadata service was refused, never followed.
        assert reasons(first) == {f"{base}/escape": "URL_REFUSED"}
        assert await c.find("ALPHATOKEN") == [f"{base}/a.html"]
        assert await c.find("BRAVOTOKEN") == [f"{base}/b.md"]
        assert await c.find("CHARLIETOKEN") == ["moved"]
        assert await c.find("DELTATOKEN") == [f"{base}/latin1"]
        assert await c.find("ECHOTOKEN") == [f"{base}/report.docx"]
        assert "secret" not in str(first)
        # The refusal is logged with the origin it was refused at, never a path.
        (refused,) = [r for r in caplog.records if r.getMessage() == "url source fetch failed"]
        assert vars(refused)["url_origin"] == "http://169.254.169.254"
        assert vars(refused)["refusal"] == "METADATA_ADDRESS"
        assert "latest" not in caplog.text and "secret" not in caplog.text

        second = await c.run()
        # a.html, b.md and the docx answer 304; c.txt and latin1 have no validators,
        # are downloaded again and found unchanged by their content hash.
        assert (second.counts.ingested, second.counts.unchanged) == (0, 5)
        assert web.hits("/a.html")[-1]["if-none-match"] == '"a1"'
        assert web.hits("/b.md")[-1]["if-modified-since"] == "Mon, 30 Nov 2026 10:00:00 GMT"
        assert web.hits("/report.docx")[-1]["if-none-match"] == '"d1"'
        assert "if-none-match" not in web.hits("/c.txt")[-1]

        web.pages["/a.html"] = Page(b"<p>ALPHANEW replaced</p>", etag='"a2"')
        web.pages["/b.md"] = Page(b"server error", "text/plain", status=500)
        third = await c.run()
        assert (third.counts.ingested, third.counts.unchanged, third.counts.failed) == (1, 3, 2)
        assert reasons(third)[f"{base}/b.md"] == "FETCH_FAILED"
        assert await c.find("ALPHANEW") == [f"{base}/a.html"]
        assert await c.find("ALPHATOKEN") == []
        # A page that failed to fetch keeps its published version.
        assert await c.find("BRAVOTOKEN") == [f"{base}/b.md"]


async def test_validators_survive_a_restart_on_postgres(
    web: WebStandIn, fresh_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GW_TEST_DSN", fresh_database)
    cfg = config(web, {"kind": "postgres", "dsn": {"env": "GW_TEST_DSN"}, "pool_max_size": 4})
    async with running(cfg) as c:
        assert (await c.run()).counts.ingested == 5
    hits = len(web.hits("/report.docx"))
    async with running(cfg) as c:
        again = await c.run()
        assert (again.counts.ingested, again.counts.unchanged) == (0, 5)
        assert len(web.hits("/report.docx")) == hits + 1
        assert web.hits("/report.docx")[-1]["if-none-match"] == '"d1"'
        assert await c.find("ECHOTOKEN") == [f"http://127.0.0.1:{web.port}/report.docx"]


async def test_without_the_allow_list_loopback_is_refused(web: WebStandIn) -> None:
    cfg = config(web, {"kind": "memory"})
    source = cfg["indexes"]["web"]["sources"][0]  # type: ignore[index]
    source.pop("allow_cidrs")
    # A literal loopback address is refused by the configuration already...
    with pytest.raises(ConfigError) as info:
        parse_config(cfg)
    assert "indexes.web.sources.0" in str(info.value) and "LOOPBACK_ADDRESS" in str(info.value)
    assert "secret" not in str(info.value)
    # ...and a name is refused by the address it resolves to, at fetch time.
    source["urls"] = [web.url("/a.html", host="localhost"), web.url("/b.md", host="localhost")]
    before = len(web.requests)
    async with running(cfg) as c:
        op = await c.run()
        assert op.counts.failed == 2 and set(reasons(op).values()) == {"URL_REFUSED"}
    assert len(web.requests) == before


async def test_a_url_document_takes_the_chunking_policy_of_its_media_type(
    web: WebStandIn,
) -> None:
    long_text = " ".join(f"word{i}" for i in range(120))
    web.pages["/long.docx"] = Page(docx_bytes("Long", long_text), DOCX)
    web.pages["/long-page"] = Page(f"<p>{long_text}</p>".encode(), "text/html")
    cfg = config(web, {"kind": "memory"})
    index: Any = cfg["indexes"]["web"]  # type: ignore[index]
    index["sources"][0]["urls"] = [web.url("/long.docx"), web.url("/long-page")]
    index["chunking"] = {"size": 2000, "overlap": 0, "extensions": {".docx": {"size": 100}}}
    async with running(cfg) as c:
        op = await c.run()
        assert op.counts.ingested == 2
        status = (await c.ing.GetIndexStatus(ing.GetIndexStatusRequest(index_name="web"))).status
        # The HTML page is one chunk under the default policy; the DOCX, known by
        # its media type, is split by the .docx policy.
        assert status.chunk_count > 2 + 5


async def test_a_page_no_loader_reads_leaves_the_index_and_a_failing_one_stays(
    web: WebStandIn,
) -> None:
    # README: a page whose media type, content encoding or charset no loader reads
    # is skipped and leaves the index (like a file no loader reads); a page that
    # fails to fetch keeps its published version.
    base = f"http://127.0.0.1:{web.port}"
    web.pages["/gz.txt"] = Page(b"FOXTROTTOKEN text", "text/plain")
    cfg = config(web, {"kind": "memory"})
    index: Any = cfg["indexes"]["web"]  # type: ignore[index]
    index["sources"][0]["urls"] = [
        web.url("/a.html"),
        web.url("/b.md"),
        web.url("/latin1"),
        web.url("/gz.txt"),
        web.url("/c.txt"),
    ]
    async with running(cfg) as c:
        assert (await c.run()).counts.ingested == 5
        web.pages["/a.html"] = Page(b"\x89PNG\r\n\x1a\n", "image/png")
        web.pages["/latin1"] = Page(b"DELTATOKEN", "text/plain; charset=x-no-such-charset")
        web.pages["/gz.txt"] = Page(
            b"\x1f\x8b\x08\x00", "text/plain", headers={"Content-Encoding": "gzip"}
        )
        web.pages["/b.md"] = Page(b"unavailable", "text/plain", status=503)
        web.pages["/c.txt"] = Page(status=404)
        op = await c.run()
        skipped = {f.document_id: f.reason for f in op.skipped}
        assert skipped == {
            f"{base}/a.html": "UNSUPPORTED_FORMAT",
            f"{base}/latin1": "UNSUPPORTED_FORMAT",
            f"{base}/gz.txt": "UNSUPPORTED_FORMAT",
        }
        assert reasons(op) == {f"{base}/b.md": "FETCH_FAILED", f"{base}/c.txt": "FETCH_FAILED"}
        assert op.counts.deleted == 3
        for token in ("ALPHATOKEN", "DELTATOKEN", "FOXTROTTOKEN"):
            assert await c.find(token) == [], token
        assert await c.find("BRAVOTOKEN") == [f"{base}/b.md"]
        assert await c.find("CHARLIETOKEN") == [f"{base}/c.txt"]
