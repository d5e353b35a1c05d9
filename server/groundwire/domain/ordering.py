"""Deterministic result order shared by every store and engine."""

from __future__ import annotations

from collections.abc import Iterable

from groundwire.domain.retrieval import ChunkHit


def rank_hits(hits: Iterable[ChunkHit]) -> list[ChunkHit]:
    """Best score first (respecting the metric's direction), ties by ordinal
    document id then chunk id, so equal scores always come out in the same order."""
    return sorted(hits, key=lambda h: (h.score.sort_key(), h.document_id, h.chunk_id))
