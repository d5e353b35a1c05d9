"""The OpenSearch store's request bodies and the records it reads back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from groundwire.domain.retrieval import ChunkHit
from groundwire.domain.scores import Score
from groundwire.stores.base import DocumentInfo, LiveDocument
from groundwire.stores.opensearch.layout import CHUNK, sorted_hits

# The hit fields every search returns besides the payload.
IDS = ["document_id", "chunk_id"]
SOURCE = ["payload", *IDS, "start", "end"]


def df_body(terms: list[str]) -> dict[str, Any]:
    """Each term's document frequency among the tenant's chunks (what term
    selection ranks by), counted from the term dictionary."""
    return {
        "size": 0,
        "query": {"term": {"kind": CHUNK}},
        "aggs": {
            "df": {
                "filters": {
                    "filters": {str(i): {"term": {"terms": t}} for i, t in enumerate(terms)}
                }
            }
        },
    }


def frequencies(found: Mapping[str, Any], terms: list[str]) -> dict[str, int]:
    buckets = found.get("aggregations", {}).get("df", {}).get("buckets", {})
    return {t: int(buckets.get(str(i), {}).get("doc_count", 0)) for i, t in enumerate(terms)}


def bm25_body(
    terms: Sequence[str], weights: Mapping[str, float], filters: list[dict[str, Any]], k: int
) -> dict[str, Any]:
    return {
        "size": k,
        "query": {
            "bool": {
                "should": [{"term": {"terms": {"value": t, "boost": weights[t]}}} for t in terms],
                "minimum_should_match": 1,
                "filter": filters,
            }
        },
        "sort": sorted_hits(IDS),
        "track_scores": True,
        "_source": SOURCE,
    }


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
