"""Helpers shared by the store contract suites (test_contract.py,
test_contract_lexical.py): index specs, vectors, staged documents and publishing."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from groundwire.domain.indexes import StoreKind
from groundwire.stores.base import (
    ChunkRecord,
    DistanceMetric,
    DocumentKey,
    DocumentRecord,
    IndexSpec,
    StagedDocument,
    Store,
)

DIM = 4


def spec(
    name: str, metric: DistanceMetric = DistanceMetric.COSINE, dims: int | None = DIM
) -> IndexSpec:
    return IndexSpec(name, "test/model:4:l2" if dims else None, dims, metric, "chars:size=800")


def vec(*values: float) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


def doc(
    doc_id: str,
    texts: list[str],
    vectors: list[np.ndarray] | None,
    *,
    tenant: str = "",
    metadata: dict[str, str] | None = None,
    content_hash: str = "h",
    acl: frozenset[str] = frozenset(),
) -> StagedDocument:
    chunks = []
    pos = 0
    for i, t in enumerate(texts):
        chunks.append(ChunkRecord(f"c{i:05d}", i, pos, pos + len(t), t, "Section"))
        pos += len(t) + 1
    record = DocumentRecord(
        doc_id, f"config:{doc_id}", content_hash, f"Title {doc_id}", tenant, metadata or {}, acl
    )
    emb = None if vectors is None else np.stack(vectors).astype(np.float32)
    return StagedDocument(record, chunks, emb)


def K(doc_id: str, tenant: str = "") -> DocumentKey:
    return DocumentKey(tenant, doc_id)


async def publish(
    store: Store, name: str, docs: list[StagedDocument], s: IndexSpec | None = None
) -> int:
    sp = s or spec(name)
    await store.ensure_index(sp)
    v = await store.begin_version(name)
    await store.stage_documents(name, v, docs)
    await store.publish_version(name, v, sp)
    return v


def bm25_approx(store: Store, expected: Any, rel: float) -> Any:
    """Expected BM25 scores as the store should report them: to `rel` for the
    stores that evaluate domain/bm25.py themselves; within 3% for OpenSearch,
    whose Lucene stores each chunk's length in one byte (quantized norms), so the
    suite checks its rankings exactly and its scores approximately."""
    if store.kind is StoreKind.OPENSEARCH:
        return pytest.approx(expected, rel=0.03)
    return pytest.approx(expected, rel=rel)
