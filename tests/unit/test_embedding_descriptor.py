"""The embedding descriptor: everything that changes a vector is in it, and what
PostgreSQL migration 8 appends to older descriptors is exactly what it writes."""

from __future__ import annotations

import pytest

from groundwire.providers.embeddings.base import EmbeddingInfo
from groundwire.stores.postgres.migrations import LEGACY_LOCAL_ONNX_TASK_MODE, LEGACY_TASK_MODE

BASE = EmbeddingInfo("openai-compatible", "m", 8, False)


@pytest.mark.parametrize(
    "changed",
    [
        EmbeddingInfo("openai-compatible", "m", 8, False, query_prefix="query: "),
        EmbeddingInfo("openai-compatible", "m", 8, False, document_prefix="passage: "),
        EmbeddingInfo("openai-compatible", "m", 8, False, max_input_tokens=512),
        EmbeddingInfo("openai-compatible", "m2", 8, False),
        EmbeddingInfo("openai-compatible", "m", 9, False),
        EmbeddingInfo("openai-compatible", "m", 8, True),
        EmbeddingInfo("hashing", "m", 8, False),
    ],
)
def test_every_setting_that_changes_a_vector_changes_the_descriptor(
    changed: EmbeddingInfo,
) -> None:
    assert changed.descriptor() != BASE.descriptor()


def test_prefixes_that_only_differ_in_how_they_split_are_distinct() -> None:
    # A naive concatenation would make these two equal.
    a = EmbeddingInfo("p", "m", 8, True, query_prefix="a;", document_prefix="b")
    b = EmbeddingInfo("p", "m", 8, True, query_prefix="a", document_prefix=";b")
    assert a.descriptor() != b.descriptor()


def test_migration_8_suffixes_are_what_empty_prefixes_write() -> None:
    hashing = EmbeddingInfo("hashing", "feature-hashing-v1", 256, True)
    local = EmbeddingInfo("local-onnx", "all-MiniLM-L6-v2", 384, True, max_input_tokens=256)
    assert hashing.descriptor() == "hashing/feature-hashing-v1:256:l2" + LEGACY_TASK_MODE
    assert local.descriptor() == "local-onnx/all-MiniLM-L6-v2:384:l2" + LEGACY_LOCAL_ONNX_TASK_MODE


def test_queries_are_served_across_a_document_prefix_change_only() -> None:
    now = EmbeddingInfo("p", "m", 8, True, query_prefix="q: ", document_prefix="d2: ")
    same_queries = EmbeddingInfo("p", "m", 8, True, query_prefix="q: ", document_prefix="d1: ")
    assert now.serves_queries_for(now.descriptor())
    assert now.serves_queries_for(same_queries.descriptor())
    for other in (
        EmbeddingInfo("p", "m", 8, True, query_prefix="", document_prefix="d2: "),
        EmbeddingInfo("p", "m", 8, True, query_prefix="q: ", max_input_tokens=128),
        EmbeddingInfo("p", "m2", 8, True, query_prefix="q: "),
    ):
        assert not now.serves_queries_for(other.descriptor())
    for recorded in (None, "p/m:8:l2", "p/m:8:l2;not json", "p/m:8:l2;[1]"):
        assert not now.serves_queries_for(recorded)
