"""What a version's shard holds: point ids, payload fields and their indexes,
the dense and sparse vectors, and how records are read back.

One shard per published version of a groundwire index holds every tenant's
points: a point per chunk (the dense vector, the lexical sparse vector and the
chunk's payload) and a vector-less point per document (its attribution and hash,
for change detection and listing). The tenant is a keyword field indexed as
Qdrant's tenant key, so its points are stored together and every search filters
on it before ranking.

Point ids are UUIDv5 of (tenant, document, chunk): stable across versions and
replicas, so a restaged chunk overwrites its own point."""

from __future__ import annotations

import functools
import hashlib
import math
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import qdrant_edge as q

from groundwire.domain.access import PUBLIC, Readers
from groundwire.domain.metadata_ranges import parse_number, parse_timestamp
from groundwire.domain.retrieval import ChunkHit
from groundwire.domain.scores import Score
from groundwire.stores.base import (
    ChunkRecord,
    DistanceMetric,
    DocumentInfo,
    IndexSpec,
    LiveDocument,
)
from groundwire.stores.qdrant.engine import QdrantSettings

DENSE = "dense"
SPARSE = "lexical"
CHUNK = "c"
DOCUMENT = "d"
# Separates a metadata key from its value in the keyword `meta_kv` (as in the
# OpenSearch store: a control character no key contains).
SEP = "\x1f"
# A number or an instant beyond a double's range is stored as the largest
# double (JSON has no infinity); bounds never get near it (|bound| <= 1e300).
_MAX_DOUBLE = 1.7976931348623157e308

# Anything a filter's must/should lists hold.
Condition = (
    q.FieldCondition
    | q.NestedCondition
    | q.Filter
    | q.IsEmptyCondition
    | q.IsNullCondition
    | q.HasIdCondition
    | q.HasVectorCondition
)

_NAMESPACE = uuid.UUID("6f1c7a4e-2f0e-5b7b-9d55-0b8f8f0a4a47")

# The payload every chunk hit reads (the lexical leg adds the term statistics).
HIT_FIELDS = [
    "document_id",
    "chunk_id",
    "text",
    "start",
    "end",
    "title",
    "section",
    "metadata",
]
LEXICAL_FIELDS = [*HIT_FIELDS, "terms", "tf", "dl", "a0"]
DOCUMENT_FIELDS = [
    "acl",
    "document_id",
    "source_id",
    "content_hash",
    "title",
    "tenant",
    "metadata",
    "chunk_count",
    "characters",
    "version",
    "ingested_at",
]


def chunk_point_id(tenant: str, document_id: str, chunk_id: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, f"{CHUNK}{SEP}{tenant}{SEP}{document_id}{SEP}{chunk_id}"))


def document_point_id(tenant: str, document_id: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, f"{DOCUMENT}{SEP}{tenant}{SEP}{document_id}"))


@functools.lru_cache(maxsize=1 << 18)
def term_index(term: str) -> int:
    """A term's dimension in the sparse vector: 32 bits of its hash. Two terms
    sharing one (rare) only widen the candidates the exact BM25 rescoring reads
    (lexical.py); scores come from the terms themselves."""
    return int.from_bytes(hashlib.blake2b(term.encode(), digest_size=4).digest(), "little")


def _distance(metric: DistanceMetric) -> q.Distance:
    return {
        DistanceMetric.EUCLIDEAN: q.Distance.Euclid,
        DistanceMetric.DOT: q.Distance.Dot,
    }.get(metric, q.Distance.Cosine)


def edge_config(spec: IndexSpec, settings: QdrantSettings) -> q.EdgeConfig:
    """A version shard's configuration: the dense vector of the index's metric
    (none for a lexical-only index) and the sparse lexical vector with the IDF
    modifier (the IDF is computed over the searching tenant's chunks)."""
    vectors: dict[str, q.EdgeVectorParams] = {}
    if spec.dimensions:
        vectors[DENSE] = q.EdgeVectorParams(
            size=spec.dimensions,
            distance=_distance(spec.metric),
        )
    return q.EdgeConfig(
        vectors=vectors,
        sparse_vectors={SPARSE: q.EdgeSparseVectorParams(modifier=q.Modifier.Idf)},
        # Qdrant's multitenant layout (hnsw_params).
        hnsw_config=q.HnswIndexConfig(**hnsw_params(settings)),
        optimizers=q.EdgeOptimizersConfig(indexing_threshold=settings.indexing_threshold_kb),
        max_search_threads=settings.search_threads or None,
    )


def hnsw_params(settings: QdrantSettings) -> dict[str, Any]:
    """Qdrant's multitenant HNSW layout, for a shard or a server collection: no
    graph over every tenant's points (m 0), a graph per tenant (payload_m) that
    only its own points shape, so no tenant's results or latency depend on
    another's vectors. Every search filters by tenant, so the global graph would
    never be used."""
    return {
        "m": 0,
        "ef_construct": settings.hnsw_ef_construction,
        "full_scan_threshold": settings.full_scan_threshold_kb,
        "payload_m": settings.hnsw_m,
    }


def payload_indexes() -> list[tuple[str, Any]]:
    """The payload indexes every version shard has: what filters and statistics
    read. Only the tenant gets HNSW links of its own (the graph is per tenant);
    the rest are filters, not graphs."""
    keyword = q.KeywordIndexParams(enable_hnsw=False)
    return [
        ("tenant", q.KeywordIndexParams(is_tenant=True, enable_hnsw=True)),
        ("kind", keyword),
        ("document_id", keyword),
        # A chunk's distinct terms, space-separated (a list converts per item, ~60x
        # slower to stage): the whitespace tokenizer gives back exactly the terms.
        (
            "terms",
            q.TextIndexParams(
                tokenizer=q.TokenizerType.Whitespace,
                lowercase=False,
                ascii_folding=False,
                phrase_matching=False,
                enable_hnsw=False,
            ),
        ),
        ("meta_kv", keyword),
        # The document's access list (domain.access.acl_terms), on chunks and records.
        ("acl", keyword),
        ("dl", q.IntegerIndexParams(lookup=True, range=False, enable_hnsw=False)),
        ("meta_num[].k", keyword),
        ("meta_num[].v", q.FloatIndexParams(enable_hnsw=False)),
        ("meta_ts[].k", keyword),
        ("meta_ts[].v", q.FloatIndexParams(enable_hnsw=False)),
    ]


def _double(value: float) -> float:
    if math.isnan(value):
        return 0.0
    return max(-_MAX_DOUBLE, min(_MAX_DOUBLE, value))


def metadata_payload(metadata: Mapping[str, str]) -> dict[str, Any]:
    """A record's metadata as its filters match it: `key SEP value` keywords, and
    each value that reads as a number or an instant as a double under its key
    (ranges compare doubles, and values whose double equals a bound's are
    settled exactly: filters.py)."""
    kv, num, ts = [], [], []
    for key, value in metadata.items():
        kv.append(f"{key}{SEP}{value}")
        number = parse_number(value)
        if number is not None:
            num.append({"k": key, "v": _double(float(number))})
        instant = parse_timestamp(value)
        if instant is not None:
            ts.append({"k": key, "v": float(instant)})
    return {"meta_kv": kv, "meta_num": num, "meta_ts": ts}


def chunk_payload(
    tenant: str,
    document_id: str,
    title: str,
    metadata: Mapping[str, str],
    meta: Mapping[str, Any],
    acl: list[str],
    chunk: ChunkRecord,
    counts: Mapping[str, int],
    dl: int,
    a0: float,
) -> dict[str, Any]:
    return {
        "kind": CHUNK,
        "tenant": tenant,
        "document_id": document_id,
        "chunk_id": chunk.chunk_id,
        "ordinal": chunk.ordinal,
        "start": chunk.start,
        "end": chunk.end,
        "text": chunk.text,
        "section": chunk.section,
        "title": title,
        "metadata": dict(metadata),
        **meta,
        "acl": acl,
        "terms": " ".join(counts),
        "tf": " ".join(map(str, counts.values())),
        "dl": dl,
        "a0": a0,
    }


def sparse_weights(
    counts: Mapping[str, int], dl: int, a0: float, k1: float, b: float
) -> q.SparseVector:
    """A chunk's lexical vector: each term's BM25 term-frequency factor with the
    tenant's average length `a0` as known at staging (the engine multiplies in
    the IDF, the query the term weights). Terms sharing a dimension add up."""
    norm = k1 * (1.0 - b + b * dl / a0)
    merged: dict[int, float] = {}
    for term, tf in counts.items():
        i = term_index(term)
        merged[i] = merged.get(i, 0.0) + tf * (k1 + 1.0) / (tf + norm)
    indices = sorted(merged)
    return q.SparseVector(indices, [merged[i] for i in indices])


def chunk_hit(payload: Mapping[str, Any], score: Score) -> ChunkHit:
    return ChunkHit(
        payload["document_id"],
        payload["chunk_id"],
        payload["text"],
        int(payload["start"]),
        int(payload["end"]),
        payload["title"],
        payload["section"],
        dict(payload["metadata"]),
        score,
    )


def chunk_record(payload: Mapping[str, Any]) -> ChunkRecord:
    return ChunkRecord(
        payload["chunk_id"],
        int(payload["ordinal"]),
        int(payload["start"]),
        int(payload["end"]),
        payload["text"],
        payload["section"],
    )


def live_document(payload: Mapping[str, Any]) -> LiveDocument:
    return LiveDocument(
        payload["document_id"], payload["source_id"], payload["content_hash"], payload["tenant"]
    )


def document_info(payload: Mapping[str, Any]) -> DocumentInfo:
    return DocumentInfo(
        payload["document_id"],
        payload["source_id"],
        payload["content_hash"],
        payload["title"],
        payload["tenant"],
        dict(payload["metadata"]),
        int(payload["chunk_count"]),
        int(payload["characters"]),
        int(payload["version"]),
        float(payload["ingested_at"]),
        document_acl(payload),
    )


def document_acl(payload: Mapping[str, Any]) -> frozenset[str]:
    """A record's access list from its `acl` terms (PUBLIC: none)."""
    return frozenset(t for t in payload.get("acl", ()) if t != PUBLIC)


def readers_condition(readers: Readers) -> list[Condition]:
    """The access-list condition for `readers` (none when unrestricted): the
    point's `acl` terms share one with the readers' (PUBLIC included)."""
    if readers.unrestricted:
        return []
    return [match_any("acl", list(readers.terms()))]


def match(key: str, value: str) -> q.FieldCondition:
    return q.FieldCondition(key, match=q.MatchValue(value))


def match_any(key: str, values: Sequence[str]) -> q.FieldCondition:
    return q.FieldCondition(key, match=q.MatchAny(list(values)))


def has_term(term: str) -> q.FieldCondition:
    """Chunks holding `term` (the whitespace-tokenized text index of `terms`)."""
    return q.FieldCondition("terms", match=q.MatchText(term))


def has_any_term(terms: Sequence[str]) -> q.FieldCondition:
    return q.FieldCondition("terms", match=q.MatchTextAny(" ".join(terms)))


def term_counts(payload: Mapping[str, Any]) -> dict[str, int]:
    """A chunk's stored term counts."""
    return dict(zip(payload["terms"].split(" "), map(int, payload["tf"].split(" ")), strict=True))
