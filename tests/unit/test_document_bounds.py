"""Titles, sections and metadata have documented maxima (issue 44: a 1 MB title was
accepted, and three results made a 3 MB answer): a push's own fields past them are
refused (INVALID_ARGUMENT, FIELD_OUT_OF_RANGE), configured metadata past them fails
the configuration, and what is extracted from content is cut at the bound."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from groundwire.app.config import GroundwireConfig
from groundwire.domain.chunking import ChunkPolicy
from groundwire.domain.document_bounds import (
    MAX_METADATA_VALUE_BYTES,
    MAX_SECTION_CHARS,
    MAX_TITLE_CHARS,
    bounded,
)
from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.indexes.catalog import IndexHandle
from groundwire.ingestion.loaders import DocumentFormat
from groundwire.ingestion.push import PushDocument, upsert_documents
from groundwire.providers.embeddings.hashing import HashingEmbedder
from groundwire.stores.base import DistanceMetric, IndexSpec
from groundwire.stores.memory import MemoryStore


def handle() -> IndexHandle:
    return IndexHandle(
        name="docs",
        spec=IndexSpec("docs", "hashing/32", 32, DistanceMetric.COSINE, "bounds"),
        store=MemoryStore(),
        embedder=HashingEmbedder(32),
        chunk_policy=ChunkPolicy(4000, 0, True),
    )


def test_bounded_cuts_only_what_is_past_the_bound() -> None:
    assert bounded("short", 10) == "short"
    assert bounded("a" * 20, 10) == "a" * 10
    assert bounded("abc " * 10, 8) == "abc abc"


@pytest.mark.parametrize(
    ("document", "field"),
    [
        (PushDocument("d", "text", title="t" * (MAX_TITLE_CHARS + 1)), "documents[0].title"),
        (
            PushDocument("d", "text", metadata={"k": "v" * (MAX_METADATA_VALUE_BYTES + 1)}),
            "documents[0].metadata",
        ),
        (
            PushDocument("d", "text", metadata={f"k{i}": "v" for i in range(33)}),
            "documents[0].metadata",
        ),
    ],
)
async def test_a_push_past_a_bound_is_refused_naming_the_field(
    document: PushDocument, field: str
) -> None:
    h = handle()
    await h.store.ensure_index(h.spec)
    with pytest.raises(GroundwireError) as refused:
        await upsert_documents(h, [document], "t")
    assert refused.value.kind is ErrorKind.INVALID_ARGUMENT
    assert refused.value.reason == "FIELD_OUT_OF_RANGE"
    assert [v.field for v in refused.value.violations] == [field]
    assert await h.store.tenant_counts("docs", "t") == (0, 0)


async def test_a_title_and_sections_from_content_are_cut_at_their_bounds() -> None:
    h = handle()
    heading = "Heading " + "x" * 5000
    text = f"# {heading}\n\nThe body of the section.\n"
    await upsert_documents(
        h, [PushDocument("m", "", format=DocumentFormat.MARKDOWN, content=text.encode())], "t"
    )
    info = await h.store.get_document("docs", "t", "m")
    assert info is not None and 0 < len(info.title) <= MAX_TITLE_CHARS
    chunks = await h.store.document_chunks("docs", "t", "m", 10)
    assert chunks and all(len(c.section) <= MAX_SECTION_CHARS for c in chunks)
    assert any(c.section for c in chunks)


def test_configured_metadata_past_its_bound_fails_the_configuration() -> None:
    base = {"auth": {"mode": "disabled"}, "embedders": {"h": {"kind": "hashing", "dimensions": 8}}}
    GroundwireConfig.model_validate(
        {**base, "indexes": {"i": {"embedder": "h", "metadata": {"team": "hr"}}}}
    )
    with pytest.raises(ValidationError):
        GroundwireConfig.model_validate(
            {**base, "indexes": {"i": {"embedder": "h", "metadata": {"team": "x" * 300}}}}
        )
