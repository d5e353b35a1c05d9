"""Pushed files (UpsertDocuments `content` + `media_type`) are chunked by the index's
policy for their format's file extension, exactly like a file a source finds: an
office file (turned into Markdown by its loader) takes the ".docx" policy, not the
".md" one, and a text-like media type takes its own extension's (".csv")."""

from __future__ import annotations

import io

import docx

from groundwire.domain.chunking import ChunkPolicy
from groundwire.indexes.catalog import IndexHandle
from groundwire.ingestion.loaders import DocumentFormat, LoadedDocument, load_bytes, push_format
from groundwire.ingestion.pipeline import chunk_document
from groundwire.ingestion.push import PushDocument, upsert_documents
from groundwire.providers.embeddings.hashing import HashingEmbedder
from groundwire.stores.base import DistanceMetric, IndexSpec
from groundwire.stores.memory import MemoryStore

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PARAGRAPHS = [f"Paragraph {i} of the pushed handbook says something." for i in range(12)]
ROWS = "".join(f"{i},row number {i} of the table\n" for i in range(20))


def docx_bytes() -> bytes:
    document = docx.Document()
    document.add_heading("Handbook", 1)
    for p in PARAGRAPHS:
        document.add_paragraph(p)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def handle() -> IndexHandle:
    # The default (and ".md") policy keeps each document whole; ".docx" and ".csv"
    # have small windows of their own.
    return IndexHandle(
        name="docs",
        spec=IndexSpec("docs", "hashing/64", 64, DistanceMetric.COSINE, "policies"),
        store=MemoryStore(),
        embedder=HashingEmbedder(64),
        chunk_policy=ChunkPolicy(4000, 0, True),
        chunk_policies={".docx": ChunkPolicy(120, 0, False), ".csv": ChunkPolicy(64, 0, False)},
    )


def test_push_media_types_name_their_format_and_extension() -> None:
    assert push_format(DOCX) == (DocumentFormat.DOCX, ".docx")
    assert push_format("Text/CSV; charset=utf-8") == (DocumentFormat.TEXT, ".csv")
    assert push_format("text/markdown") == (DocumentFormat.MARKDOWN, ".md")
    assert push_format("application/pdf") == (DocumentFormat.PDF, ".pdf")
    assert push_format("image/png") is None


async def test_pushed_files_take_their_extensions_chunking_policy() -> None:
    h = handle()
    docs = []
    for doc_id, data, media_type in (
        ("h.docx", docx_bytes(), DOCX),
        ("t.csv", ROWS.encode(), "text/csv"),
    ):
        found = push_format(media_type)
        assert found is not None
        fmt, ext = found
        docs.append(PushDocument(doc_id, "", format=fmt, content=data, extension=ext))
    result = await upsert_documents(h, docs, "")
    assert result.failures == () and result.upserted == 2
    for doc_id, limit in (("h.docx", 120), ("t.csv", 64)):
        chunks = await h.store.document_chunks("docs", "", doc_id, 1000)
        # Under the default policy each document would be one chunk.
        assert len(chunks) > 3, doc_id
        assert all(len(c.text) <= limit for c in chunks), doc_id


async def test_a_pushed_office_file_is_chunked_like_the_same_file_from_a_source() -> None:
    h = handle()
    data = docx_bytes()
    await upsert_documents(
        h, [PushDocument("h.docx", "", format=DocumentFormat.DOCX, content=data)], ""
    )
    pushed = [c.text for c in await h.store.document_chunks("docs", "", "h.docx", 1000)]
    loaded = load_bytes("h.docx", "s", data, DocumentFormat.DOCX, max_bytes=1 << 20)
    assert isinstance(loaded, LoadedDocument)
    assert pushed == [c.text for c in chunk_document(loaded, h, ".docx")]
