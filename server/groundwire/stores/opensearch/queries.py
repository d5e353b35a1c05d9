"""The OpenSearch store's request bodies and the records it reads back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from groundwire.domain.retrieval import ChunkHit
from groundwire.domain.scores import Score
from groundwire.stores.base import ChunkRecord, DocumentInfo, LiveDocument
from groundwire.stores.opensearch.layout import CHUNK, DOCUMENT, sorted_hits

# The hit fields every search returns besides the payload.
IDS = ["document_id", "chunk_id"]
# `tv`: a pooled tenant's version (pool.py), which a search checks its hits against.
SOURCE = ["payload", *IDS, "start", "end", "tv"]


def bm25_body(
    terms: Sequence[str],
    weights: Mapping[str, float],
    filters: list[dict[str, Any]],
    k: int,
    *,
    by_ids: bool = False,
) -> dict[str, Any]:
    """The BM25 search of `terms` (each boosted by its query weight) among the
    chunks `filters` admit: in score order, or (`by_ids`) score then ids."""
    body: dict[str, Any] = {
        "size": k,
        "query": {
            "bool": {
                "should": [{"term": {"terms": {"value": t, "boost": weights[t]}}} for t in terms],
                "minimum_should_match": 1,
                "filter": filters,
            }
        },
        "track_total_hits": False,
        "_source": SOURCE,
    }
    if by_ids:
        body["sort"] = sorted_hits(IDS)
        body["track_scores"] = True
    return body


def live_document(src: Mapping[str, Any]) -> LiveDocument:
    p = src["payload"]
    return LiveDocument(src["document_id"], p["source_id"], p["content_hash"], p["tenant"])


def document_info(src: Mapping[str, Any]) -> DocumentInfo:
    p = src["payload"]
    return DocumentInfo(
        src["document_id"],
        p["source_id"],
        p["content_hash"],
        p["title"],
        p["tenant"],
        dict(p["metadata"]),
        int(p["chunk_count"]),
        int(p["characters"]),
        int(p["version"]),
        float(p["ingested_at"]),
        frozenset(p.get("acl", ())),
    )


def chunk_hit(src: Mapping[str, Any], score: Score) -> ChunkHit:
    p = src["payload"]
    return ChunkHit(
        src["document_id"],
        src["chunk_id"],
        p["text"],
        int(src["start"]),
        int(src["end"]),
        p["title"],
        p["section"],
        dict(p["metadata"]),
        score,
    )


def documents_body(filters: list[dict[str, Any]], size: int) -> dict[str, Any]:
    """A page of document records matching `filters`, in document id order."""
    return {
        "size": size,
        "query": {"bool": {"filter": filters}},
        "sort": [{"document_id": "asc"}],
        "_source": ["payload", "document_id"],
    }


def chunks_body(filters: list[dict[str, Any]], size: int) -> dict[str, Any]:
    """A document's chunk records matching `filters`, in text order."""
    return {
        "size": size,
        "query": {"bool": {"filter": filters}},
        "sort": [{"start": "asc"}, {"end": "asc"}],
        "_source": ["payload", "chunk_id", "start", "end"],
    }


def chunk_records(hits: Sequence[Mapping[str, Any]]) -> list[ChunkRecord]:
    """`chunks_body`'s hits as chunk records, numbered in order."""
    out = []
    for i, h in enumerate(hits):
        s = h["_source"]
        p = s["payload"]
        out.append(ChunkRecord(s["chunk_id"], i, s["start"], s["end"], p["text"], p["section"]))
    return out


# A tenant's characters of chunk text (domain.quotas): sum(end) - sum(start) over its
# chunks, two sums of doc values (exact: doubles hold integers to 2^53).
CHARACTERS_BODY: dict[str, Any] = {
    "size": 0,
    "query": {"bool": {"filter": [{"term": {"kind": CHUNK}}]}},
    "aggs": {"ends": {"sum": {"field": "end"}}, "starts": {"sum": {"field": "start"}}},
}


def characters_in(found: Mapping[str, Any]) -> int:
    aggs = found.get("aggregations", {})
    ends = int(aggs.get("ends", {}).get("value") or 0)
    return ends - int(aggs.get("starts", {}).get("value") or 0)


def counts_body(filters: list[dict[str, Any]]) -> dict[str, Any]:
    """Documents and chunks (a terms aggregation on `kind`) among what `filters`
    admit (none: every record)."""
    body: dict[str, Any] = {"size": 0, "aggs": {"kinds": {"terms": {"field": "kind", "size": 2}}}}
    if filters:
        body["query"] = {"bool": {"filter": filters}}
    return body


def kind_counts(found: Mapping[str, Any]) -> tuple[int, int]:
    """(documents, chunks) from a counts_body search."""
    buckets = {
        b["key"]: int(b["doc_count"])
        for b in found.get("aggregations", {}).get("kinds", {}).get("buckets", [])
    }
    return buckets.get(DOCUMENT, 0), buckets.get(CHUNK, 0)
