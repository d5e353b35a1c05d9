"""Every file accounted for, over real gRPC: a mixed folder like a new user's (Markdown,
text, HTML, PDF, reStructuredText, CSV, JSON, a log, ODT, EPUB, a gzip, an image, a
README without an extension, an empty, a too-large and a non-UTF-8 file) is ingested
and each file is either searchable or listed with its reason, in WatchIngestion, the
operation record, the CLI summary and the metric; an index whose sources give no
document says so; sources name their own extensions; pushed files (PDF, DOCX, HTML)
run through the same loaders."""

from __future__ import annotations

import asyncio
import errno
import gzip
import io
import re
import urllib.request
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import docx
import grpc
import pytest
from fpdf import FPDF

from groundwire.app.config import ConfigError, parse_config
from groundwire.app.ingest_cli import ingest
from groundwire.app.telemetry import installed_port
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import ingestion_pb2_grpc, retriever_pb2, retriever_pb2_grpc
from tests.support.errors import rich_error
from tests.support.servers import RunningApp, free_port, serving

pytestmark = pytest.mark.timeout(60)
MAX_BYTES = 64 * 1024


def pdf_bytes(*lines: str) -> bytes:
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    for line in lines:
        pdf.cell(0, 6, line, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def odt_bytes(text: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(
            "content.xml",
            '<?xml version="1.0"?><office:document-content '
            'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
            'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body>'
            f"<office:text><text:p>{text}</text:p></office:text></office:body>"
            "</office:document-content>",
        )
    return buf.getvalue()


def docx_bytes(text: str) -> bytes:
    document = docx.Document()
    document.add_heading("Pushed handbook", 1)
    document.add_paragraph(text)
    buf = io.BytesIO()
    document.save(buf)
    return buf.getvalue()


# name -> None when it must be ingested (and found by its token), else its reason.
MIXED: dict[str, tuple[bytes, str | None]] = {
    "guide.md": (b"# Guide\n\nTOKGUIDE setup steps.\n", None),
    "notes.txt": (b"TOKNOTES plain notes.\n", None),
    "page.html": (b"<nav>menu</nav><main><p>TOKHTML <code>x()</code> page</p></main>", None),
    "paper.pdf": (pdf_bytes("TOKPDF robust data manip-", "ulation."), None),
    "design.rst": (b"Design\n======\n\nTOKRST text.\n", None),
    "table.csv": (b"id,token\n1,TOKCSV\n", None),
    "config.json": (b'{"key": "TOKJSON"}\n', None),
    "server.log": (b"2026-01-01 INFO TOKLOG started\n", None),
    "letter.odt": (odt_bytes("TOKODT letter"), None),
    "README": (b"TOKREADME project readme without an extension\n", None),
    "sub/deep.md": (b"TOKDEEP nested\n", None),
    "archive.gz": (b"\x1f\x8b\x08\x00binary", "UNSUPPORTED_FORMAT"),
    "manual.md.gz": (gzip.compress(b"# Manual\n\nTOKGZIP compressed page\n"), None),
    "bomb.txt.gz": (gzip.compress(b"\0" * (4 * MAX_BYTES)), "TOO_LARGE"),
    "photo.png": (b"\x89PNG\r\n\x1a\n", "UNSUPPORTED_FORMAT"),
    "LICENSE-blob": (b"\x00\x01\x02\x03" * 10, "UNSUPPORTED_FORMAT"),
    "empty.md": (b"  \n", "EMPTY"),
    "huge.txt": (b"x" * (MAX_BYTES + 1), "TOO_LARGE"),
    "latin1.txt": ("caf\xe9".encode("latin-1"), "NOT_UTF8"),
    "broken.pdf": (b"%PDF-1.4 not really", "PARSE_FAILED"),
}
SKIPPED = {"UNSUPPORTED_FORMAT"}


def write_files(root: Path, files: dict[str, tuple[bytes, str | None]]) -> None:
    for name, (data, _) in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    hidden = root / ".git"
    hidden.mkdir(exist_ok=True)
    (hidden / "config").write_text("not a document")


def config(indexes: dict[str, Any]) -> dict[str, Any]:
    return {
        "auth": {"mode": "disabled"},
        "store": {"kind": "memory"},
        "embedders": {"hash": {"kind": "hashing"}},
        "indexes": indexes,
    }


class Client:
    def __init__(self, app: RunningApp) -> None:
        self.address = f"127.0.0.1:{app.port}"
        self.channel = grpc.aio.insecure_channel(self.address)
        self.ing = ingestion_pb2_grpc.IngestionManagerServiceStub(self.channel)
        self.ret = retriever_pb2_grpc.RetrieverServiceStub(self.channel)
        self.root: Path | None = None  # where the fixture wrote the sources

    async def run(self, index: str) -> list[ing.Operation]:
        op = (await self.ing.StartIngestion(ing.StartIngestionRequest(index_name=index))).operation
        return [
            m.operation
            async for m in self.ing.WatchIngestion(
                ing.WatchIngestionRequest(operation_id=op.id), timeout=30
            )
        ]

    async def found(self, index: str, text: str) -> list[str]:
        resp = await self.ret.Retrieve(
            retriever_pb2.RetrieveRequest(
                query=retriever_pb2.RagQuery(
                    index_name=index, text=text, mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL, top_k=5
                )
            )
        )
        return [r.document_id for r in resp.results]


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    mixed = tmp_path / "mixed"
    write_files(mixed, MIXED)
    (tmp_path / "unsupported").mkdir()
    (tmp_path / "unsupported" / "a.gz").write_bytes(b"\x1f\x8b")
    (tmp_path / "unsupported" / "b.png").write_bytes(b"\x89PNG")
    own = tmp_path / "own"
    write_files(
        own,
        {
            "a.rst": (b"TOKOWNRST\n", None),
            "b.mdx": (b"# MDX\n\nTOKOWNMDX\n", None),
            "c.txt": (b"TOKOWNTXT\n", None),
        },
    )
    cfg = config(
        {
            "mixed": {
                "embedder": "hash",
                "sources": [{"kind": "directory", "path": str(mixed)}],
                "ingestion": {"max_file_bytes": MAX_BYTES},
            },
            "nothing": {
                "embedder": "hash",
                "sources": [{"kind": "directory", "path": str(tmp_path / "unsupported")}],
            },
            "own": {
                "embedder": "hash",
                "sources": [
                    {
                        "kind": "directory",
                        "path": str(own),
                        "extensions": {".rst": "text", ".mdx": "markdown"},
                    }
                ],
            },
        }
    )
    async with serving(parse_config(cfg)) as app:
        c = Client(app)
        c.root = tmp_path
        yield c
        await c.channel.close()


async def test_a_mixed_folder_has_every_file_accounted_for(
    client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshots = await client.run("mixed")
    final = snapshots[-1]
    assert final.state == ing.OPERATION_STATE_SUCCEEDED and not final.warnings
    c = final.counts
    expected_ingested = sorted(n for n, (_, r) in MIXED.items() if r is None)
    expected_failed = {n: r for n, (_, r) in MIXED.items() if r and r not in SKIPPED}
    expected_skipped = {n: r for n, (_, r) in MIXED.items() if r in SKIPPED}
    # Every file found (hidden ones are not documents), each in exactly one bucket.
    assert c.discovered == len(MIXED)
    assert c.ingested == len(expected_ingested)
    assert {f.document_id: f.reason for f in final.failures} == expected_failed
    assert {f.document_id: f.reason for f in final.skipped} == expected_skipped
    assert c.failed == len(expected_failed) and c.skipped == len(expected_skipped)
    assert c.ingested + c.failed + c.skipped == c.discovered
    assert dict(c.not_ingested_by_reason) == {
        "UNSUPPORTED_FORMAT": 3,
        "EMPTY": 1,
        "TOO_LARGE": 2,  # huge.txt, and bomb.txt.gz refused at the bound while inflating
        "NOT_UTF8": 1,
        "PARSE_FAILED": 1,
    }
    # Each ingested file is searchable by its own token.
    tokens = {
        "guide.md": "TOKGUIDE",
        "notes.txt": "TOKNOTES",
        "page.html": "TOKHTML",
        "paper.pdf": "TOKPDF",
        "design.rst": "TOKRST",
        "table.csv": "TOKCSV",
        "config.json": "TOKJSON",
        "server.log": "TOKLOG",
        "letter.odt": "TOKODT",
        "README": "TOKREADME",
        "sub/deep.md": "TOKDEEP",
        "manual.md.gz": "TOKGZIP",
    }
    assert sorted(tokens) == expected_ingested
    for name, token in tokens.items():
        assert (await client.found("mixed", token))[:1] == [name], name
    assert await client.found("mixed", "manipulation") == ["paper.pdf"]
    # The record read back (ListOperations) carries the same accounting.
    listed = await client.ing.ListOperations(ing.ListOperationsRequest(index_name="mixed"))
    assert listed.operations[0].skipped == final.skipped
    assert listed.operations[0].counts == final.counts

    # The CLI summary names every file not ingested and why.
    code = await ingest(client.address, "mixed")
    out = capsys.readouterr().out
    assert code == 0
    assert ", 0 failed" not in out and f"{len(expected_skipped)} skipped" in out
    assert "3 unsupported type (UNSUPPORTED_FORMAT)" in out
    for name in [*expected_failed, *expected_skipped]:
        assert f": {name}\n" in out


async def test_an_index_whose_sources_give_no_document_says_so(
    client: Client, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    final = (await client.run("nothing"))[-1]
    assert final.state == ing.OPERATION_STATE_SUCCEEDED
    assert list(final.warnings) == ["NO_DOCUMENTS"]
    assert final.counts.skipped == 2 and final.counts.ingested == 0
    assert any("no document to ingest" in r.getMessage() for r in caplog.records)
    code = await ingest(client.address, "nothing")
    err = capsys.readouterr().err
    assert code == 0 and "WARNING: the index's sources yielded no document" in err


async def test_a_source_names_its_own_extensions(client: Client) -> None:
    final = (await client.run("own"))[-1]
    assert final.counts.ingested == 2
    assert {f.document_id: f.reason for f in final.skipped} == {"c.txt": "UNSUPPORTED_FORMAT"}
    assert await client.found("own", "TOKOWNMDX") == ["b.mdx"]
    assert await client.found("own", "TOKOWNRST") == ["a.rst"]


def test_a_source_extension_no_loader_reads_is_refused_with_its_key(tmp_path: Path) -> None:
    bad = config(
        {"x": {"sources": [{"kind": "directory", "path": str(tmp_path), "extensions": [".zzz"]}]}}
    )
    with pytest.raises(ConfigError, match=r"indexes\.x.*sources\.0\.extensions.*'\.zzz'"):
        parse_config(bad)
    unknown_format = config(
        {
            "x": {
                "sources": [
                    {"kind": "directory", "path": str(tmp_path), "extensions": {".a": "word"}}
                ]
            }
        }
    )
    with pytest.raises(ConfigError, match=r"extensions"):
        parse_config(unknown_format)


async def test_pushed_files_run_through_the_loaders(client: Client) -> None:
    pdf = pdf_bytes("TOKPUSHPDF quarterly manip-", "ulation report")
    resp = await client.ing.UpsertDocuments(
        ing.UpsertDocumentsRequest(
            index_name="mixed",
            documents=[
                ing.PushedDocument(document_id="q.pdf", content=pdf, media_type="application/pdf"),
                ing.PushedDocument(
                    document_id="h.docx",
                    content=docx_bytes("TOKPUSHDOCX body"),
                    media_type=(
                        "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
                    ),
                ),
                ing.PushedDocument(
                    document_id="p.html",
                    content=b"<nav>TOKNAV</nav><main><p>TOKPUSHHTML</p></main>",
                    media_type="text/html; charset=utf-8",
                ),
                ing.PushedDocument(
                    document_id="big.pdf",
                    content=b"%PDF" + b"0" * MAX_BYTES,
                    media_type="application/pdf",
                ),
                ing.PushedDocument(
                    document_id="bad.pdf", content=b"not a pdf", media_type="application/pdf"
                ),
            ],
        )
    )
    assert resp.upserted == 3
    assert {f.document_id: f.reason for f in resp.failures} == {
        "big.pdf": "TOO_LARGE",
        "bad.pdf": "PARSE_FAILED",
    }
    assert await client.found("mixed", "TOKPUSHPDF") == ["q.pdf"]
    assert await client.found("mixed", "manipulation") == ["q.pdf"]
    assert await client.found("mixed", "TOKPUSHDOCX") == ["h.docx"]
    assert await client.found("mixed", "TOKPUSHHTML") == ["p.html"]
    assert await client.found("mixed", "TOKNAV") == []
    # What the index holds for a pushed PDF: its extracted, de-hyphenated text.
    got = await client.ing.GetDocument(
        ing.GetDocumentRequest(index_name="mixed", document_id="q.pdf", include_chunks=True)
    )
    assert [c.text for c in got.chunks] == ["TOKPUSHPDF quarterly manipulation report"]
    assert got.chunks_omitted == 0 and got.chunks[0].start == 0
    assert got.document.size_characters == got.chunks[-1].end


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (
            ing.PushedDocument(document_id="a", text="x", content=b"y", media_type="text/plain"),
            "documents[0].content",
        ),
        (ing.PushedDocument(document_id="a", content=b"y"), "documents[0].media_type"),
        (
            ing.PushedDocument(
                document_id="a",
                content=b"y",
                media_type="text/plain",
                format=ing.DOCUMENT_FORMAT_HTML,
            ),
            "documents[0].format",
        ),
    ],
)
async def test_pushed_file_bad_input(client: Client, doc: ing.PushedDocument, field: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await client.ing.UpsertDocuments(
            ing.UpsertDocumentsRequest(index_name="mixed", documents=[doc])
        )
    err = rich_error(info.value)
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT and err.fields == [field]


async def test_pushed_file_of_an_unknown_media_type_fails_alone(client: Client) -> None:
    """A media type no loader reads fails its document (UNSUPPORTED_FORMAT, in the
    response's failures); the request's other documents are written."""
    resp = await client.ing.UpsertDocuments(
        ing.UpsertDocumentsRequest(
            index_name="mixed",
            documents=[
                ing.PushedDocument(
                    document_id="photo.png", content=b"\x89PNG", media_type="image/png"
                ),
                ing.PushedDocument(
                    document_id="kept.txt", content=b"TOKKEPT plain", media_type="text/plain"
                ),
            ],
        )
    )
    assert resp.upserted == 1
    assert [(f.document_id, f.reason) for f in resp.failures] == [
        ("photo.png", "UNSUPPORTED_FORMAT")
    ]


@pytest.fixture(params=["memory", "postgres"])
async def listed(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Client]:
    docs = tmp_path / "docs"
    write_files(
        docs,
        {f"d{i:02d}.md": (f"# Doc {i}\n\nbody {i}\n".encode(), None) for i in range(7)},
    )
    (docs / "archive.gz").write_bytes(b"\x1f\x8b\x08\x00")
    store: dict[str, object] = {"kind": "memory"}
    if request.param == "postgres":
        monkeypatch.setenv("GW_TEST_DSN", request.getfixturevalue("fresh_database"))
        store = {"kind": "postgres", "dsn": {"env": "GW_TEST_DSN"}, "pool_max_size": 4}
    cfg = config(
        {
            "docs": {
                "embedder": "hash",
                "metadata": {"team": "docs"},
                "sources": [{"kind": "directory", "path": str(docs)}],
            }
        }
    )
    cfg["store"] = store
    async with serving(parse_config(cfg)) as app:
        c = Client(app)
        yield c
        await c.channel.close()


async def test_list_and_get_documents_per_tenant_paginated_content_free(listed: Client) -> None:
    final = (await listed.run("docs"))[-1]
    # The operation record, read back from the store's operation log (PostgreSQL
    # too), keeps the accounting.
    record = (
        await listed.ing.ListOperations(ing.ListOperationsRequest(index_name="docs"))
    ).operations[0]
    assert [(f.document_id, f.reason) for f in record.skipped] == [
        ("archive.gz", "UNSUPPORTED_FORMAT")
    ]
    assert record.counts.skipped == 1 and record.counts.discovered == 8
    assert dict(record.counts.not_ingested_by_reason) == {"UNSUPPORTED_FORMAT": 1}
    await listed.ing.UpsertDocuments(
        ing.UpsertDocumentsRequest(
            index_name="docs",
            tenant="acme",
            documents=[ing.PushedDocument(document_id="acme-only", text="secret body")],
        )
    )
    ids: list[str] = []
    token = ""
    pages = 0
    while True:
        resp = await listed.ing.ListDocuments(
            ing.ListDocumentsRequest(index_name="docs", page_size=3, page_token=token)
        )
        ids.extend(d.document_id for d in resp.documents)
        pages += 1
        token = resp.next_page_token
        if not token:
            break
    assert ids == [f"d{i:02d}.md" for i in range(7)] and pages == 3
    first = (
        await listed.ing.GetDocument(
            ing.GetDocumentRequest(index_name="docs", document_id="d00.md")
        )
    ).document
    assert first.title == "Doc 0" and first.source_id == "config:d00.md"
    assert first.size_characters == len("# Doc 0\n\nbody 0")
    assert first.chunk_count == 1 and first.version == final.version
    assert len(first.content_hash) == 64 and first.ingest_time.seconds > 0
    assert dict(first.metadata) == {"team": "docs"} and first.tenant == ""
    # Content-free by default: no field carries the text; include_chunks asks for it.
    assert "body 0" not in str(first)
    with_text = await listed.ing.GetDocument(
        ing.GetDocumentRequest(index_name="docs", document_id="d00.md", include_chunks=True)
    )
    assert [(c.ordinal, c.text) for c in with_text.chunks] == [(0, "# Doc 0\n\nbody 0")]
    # Tenant-scoped: another tenant's document is not listed nor found.
    acme = await listed.ing.ListDocuments(
        ing.ListDocumentsRequest(index_name="docs", tenant="acme")
    )
    assert [d.document_id for d in acme.documents] == ["acme-only"]
    assert acme.documents[0].source_id == "push:acme-only"
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await listed.ing.GetDocument(
            ing.GetDocumentRequest(index_name="docs", document_id="acme-only")
        )
    assert rich_error(info.value).reason == "DOCUMENT_NOT_FOUND"
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    # A token is bound to its listing: another tenant's, another index's or a
    # forged one is refused.
    page = await listed.ing.ListDocuments(ing.ListDocumentsRequest(index_name="docs", page_size=1))
    for bad in (
        ing.ListDocumentsRequest(index_name="docs", tenant="acme", page_token=page.next_page_token),
        ing.ListDocumentsRequest(index_name="docs", page_token=page.next_page_token + "x"),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await listed.ing.ListDocuments(bad)
        assert rich_error(info.value).reason == "INVALID_PAGE_TOKEN"
    for bad_call in (
        listed.ing.ListDocuments(ing.ListDocumentsRequest(index_name="nope")),
        listed.ing.GetDocument(ing.GetDocumentRequest(index_name="nope", document_id="x")),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await bad_call
        assert rich_error(info.value).reason == "INDEX_NOT_FOUND"
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await listed.ing.ListDocuments(ing.ListDocumentsRequest(index_name="docs", page_size=101))
    assert rich_error(info.value).fields == ["page_size"]


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        body: bytes = response.read()
    return body.decode()


def _not_ingested(body: str) -> dict[str, float]:
    return {
        reason: float(value)
        for reason, value in re.findall(
            r'groundwire_ingestion_documents_not_ingested_total\{index="mixed",[^}]*reason="(\w+)"\}'
            r" ([0-9.]+)",
            body,
        )
    }


async def test_documents_not_ingested_are_counted_in_metrics_by_reason(tmp_path: Path) -> None:
    mixed = tmp_path / "mixed"
    write_files(mixed, MIXED)
    # The exporter and its counters are the process's: an earlier test may have
    # started them and counted ingestions of an index named "mixed". This run's
    # counts are the difference.
    already = installed_port()
    before = _not_ingested(await asyncio.to_thread(scrape, already)) if already else {}
    for _ in range(5):
        port = free_port()
        cfg = config(
            {
                "mixed": {
                    "embedder": "hash",
                    "sources": [{"kind": "directory", "path": str(mixed)}],
                    "ingestion": {"max_file_bytes": MAX_BYTES},
                }
            }
        )
        cfg["metrics"] = {"enabled": True, "address": f"127.0.0.1:{port}"}
        try:
            async with serving(parse_config(cfg)) as app:
                # One exporter per process: an earlier test may have started it.
                port = installed_port() or port
                c = Client(app)
                await c.run("mixed")
                await c.channel.close()
                # Counted just after the terminal snapshot is published: poll briefly.
                for _ in range(50):
                    body = await asyncio.to_thread(scrape, port)
                    if "documents_not_ingested_total{" in body:
                        break
                    await asyncio.sleep(0.1)
            break
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
    else:
        pytest.fail("no free loopback port for the metrics exporter in 5 tries")
    after = _not_ingested(body)
    counts = {reason: f"{value - before.get(reason, 0.0):.1f}" for reason, value in after.items()}
    assert counts == {
        "EMPTY": "1.0",
        "NOT_UTF8": "1.0",
        "PARSE_FAILED": "1.0",
        "TOO_LARGE": "2.0",  # huge.txt, and bomb.txt.gz refused while inflating
        "UNSUPPORTED_FORMAT": "3.0",
    }
    # Never a document id as a label.
    assert "guide.md" not in body and "archive.gz" not in body


async def test_document_listing_with_api_keys_is_the_keys_tenant(tmp_path: Path) -> None:
    from groundwire.domain.auth import hash_key

    keys = {"acme": "gw_acme_manage_key_0123456789", "plain": "gw_plain_manage_key_0123456789"}
    cfg = config({"docs": {"embedder": "hash"}})
    cfg["auth"] = {
        "keys": [
            {
                "id": "acme-ops",
                "hash": hash_key(keys["acme"]),
                "tenant": "acme",
                "permissions": ["manage", "ingest", "retrieve"],
            },
            {
                "id": "ops",
                "hash": hash_key(keys["plain"]),
                "permissions": ["manage", "ingest", "retrieve"],
            },
        ]
    }
    async with serving(parse_config(cfg)) as app:
        c = Client(app)

        def auth(name: str) -> tuple[tuple[str, str]]:
            return (("authorization", f"Bearer {keys[name]}"),)

        for name, doc_id in (("acme", "acme-doc"), ("plain", "untenanted-doc")):
            await c.ing.UpsertDocuments(
                ing.UpsertDocumentsRequest(
                    index_name="docs", documents=[ing.PushedDocument(document_id=doc_id, text="t")]
                ),
                metadata=auth(name),
            )
        acme = await c.ing.ListDocuments(
            ing.ListDocumentsRequest(index_name="docs"), metadata=auth("acme")
        )
        assert [(d.document_id, d.tenant) for d in acme.documents] == [("acme-doc", "acme")]
        plain = await c.ing.ListDocuments(
            ing.ListDocumentsRequest(index_name="docs"), metadata=auth("plain")
        )
        assert [d.document_id for d in plain.documents] == ["untenanted-doc"]
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await c.ing.ListDocuments(
                ing.ListDocumentsRequest(index_name="docs", tenant="globex"), metadata=auth("acme")
            )
        assert rich_error(info.value).reason == "TENANT_MISMATCH"
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await c.ing.GetDocument(
                ing.GetDocumentRequest(index_name="docs", document_id="untenanted-doc"),
                metadata=auth("acme"),
            )
        assert rich_error(info.value).reason == "DOCUMENT_NOT_FOUND"
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await c.ing.ListDocuments(ing.ListDocumentsRequest(index_name="docs"))
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        await c.channel.close()


async def test_a_file_that_is_no_longer_a_document_leaves_the_index(client: Client) -> None:
    first = (await client.run("mixed"))[-1]
    assert first.counts.deleted == 0
    assert await client.found("mixed", "TOKREADME") == ["README"]
    assert client.root is not None
    readme = client.root / "mixed" / "README"
    readme.write_bytes(b"\x00\x01binary now")
    second = (await client.run("mixed"))[-1]
    assert {f.document_id for f in second.skipped} >= {"README"}
    assert second.counts.deleted == 1
    assert await client.found("mixed", "TOKREADME") == []
