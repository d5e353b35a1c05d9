"""Deterministic result order shared by every store and engine."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from groundwire.domain.retrieval import ChunkHit


def rank_hits(hits: Iterable[ChunkHit]) -> list[ChunkHit]:
    """Best score first (respecting the metric's direction), ties by ordinal
    document id then chunk id, so equal scores always come out in the same order."""
    return sorted(hits, key=lambda h: (h.score.sort_key(), h.document_id, h.chunk_id))


def rank_order(
    sort_keys: Sequence[float], document_ids: Sequence[str], chunk_ids: Sequence[str]
) -> list[int]:
    """The positions of candidates in rank_hits' order, from their scores' sort
    keys (Score.sort_key) and ids: a store orders its rows so before it builds a
    hit for each (the tuples compare in C, without a Python key call per hit)."""
    ranked = sorted(zip(sort_keys, document_ids, chunk_ids, range(len(sort_keys)), strict=True))
    return [entry[3] for entry in ranked]
