"""How a groundwire index lies in OpenSearch: names, mappings, the documents
written, and the scope filters every search applies.

One OpenSearch index per (groundwire index, tenant, version) — a *physical*
index — reached through one alias per (groundwire index, tenant). A tenant's
chunks and document records live in its own physical index, so Lucene's BM25
statistics (kept per index and shard) are the tenant's alone, and a version is
published by moving the aliases of every tenant it touched in one `_aliases`
call (stores/opensearch/versions.py).

Text is indexed as groundwire's own analyzer tokens (domain/analysis.py), not
re-analyzed by OpenSearch: the `terms` field holds the chunk's index terms and
`words` its phrase words, each space-joined under the whitespace analyzer. So
identifiers, stemming and stop words are exactly those of the other two stores
(one analyzer, nothing to keep in step), and a quoted phrase is a `match_phrase`
over the same words the memory store compares.

Metadata is indexed as `key\\x00value` keywords (any key, no mapping growth); a
range condition reads order-preserving encodings of the values that parse as
numbers (exact decimals) or timestamps (microseconds), so a range matches
exactly what domain/metadata_ranges.py admits.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from groundwire.domain import bm25
from groundwire.domain.access import Readers, acl_terms
from groundwire.domain.analysis import Analyzer
from groundwire.domain.metadata_ranges import (
    RangeCondition,
    RangeKind,
    parse_number,
    parse_timestamp,
)
from groundwire.domain.retrieval import Scope
from groundwire.stores.base import DistanceMetric, IndexSpec, StagedDocument

CHUNK = "chunk"
DOCUMENT = "doc"
_SEP = "\x00"
_POOL = re.compile(r"\.pool-[0-9a-f]{8}$")


@dataclass(frozen=True, slots=True)
class Slot:
    """One tenant's version inside a pool (pool.py): its records carry the tenant's
    tag (`tg`) and the version (`tv`), and the tenant's alias admits only those."""

    tag: str
    version: int

    def clauses(self) -> list[dict[str, Any]]:
        return [{"term": {"tg": self.tag}}, {"term": {"tv": self.version}}]

    def alias_filter(self) -> dict[str, Any]:
        return {"bool": {"filter": self.clauses()}}


@dataclass(frozen=True, slots=True)
class Names:
    """Index and alias names under the store's prefix."""

    prefix: str

    @property
    def meta(self) -> str:
        """The index of per-index records (published version, spec)."""
        return f"{self.prefix}meta"

    def tenant_tag(self, tenant: str) -> str:
        # A tenant name may hold anything; index names may not.
        return hashlib.sha256(tenant.encode()).hexdigest()[:20]

    def alias(self, index: str, tenant: str) -> str:
        return f"{self.prefix}{index}.{self.tenant_tag(tenant)}"

    def aliases(self, index: str) -> str:
        """A pattern matching every tenant's alias (and physical index) of `index`."""
        return f"{self.prefix}{index}.*"

    def physical(self, index: str, tenant: str, version: int) -> str:
        return f"{self.alias(index, tenant)}-v{version}"

    def alias_of_tag(self, index: str, tag: str) -> str:
        return f"{self.prefix}{index}.{tag}"

    def pool(self, index: str, spec: IndexSpec) -> str:
        """The physical index small tenants of `index` share (pool.py), one per set of
        descriptors (a version that changes the embedding gets another)."""
        described = f"{spec.embedding}{_SEP}{spec.dimensions}{_SEP}{spec.metric.value}"
        digest = hashlib.sha256(f"{described}{_SEP}{spec.chunking}".encode()).hexdigest()
        return f"{self.prefix}{index}.pool-{digest[:8]}"

    def pools(self, index: str) -> str:
        """A pattern matching every pool of `index`."""
        return f"{self.prefix}{index}.pool-*"

    @staticmethod
    def is_pool(physical: str) -> bool:
        return bool(_POOL.search(physical))

    @staticmethod
    def version_of(physical: str) -> int:
        return int(physical.rsplit("-v", 1)[1])

    @staticmethod
    def alias_of(physical: str) -> str:
        return physical.rsplit("-v", 1)[0]


def space_type(metric: DistanceMetric) -> str:
    if metric is DistanceMetric.EUCLIDEAN:
        return "l2"
    if metric is DistanceMetric.DOT:
        return "innerproduct"
    return "cosinesimil"


def raw_similarity(metric: DistanceMetric, score: float) -> float:
    """The metric's own value from the k-NN plugin's Lucene score: cosine
    (1 + cos) / 2, dot product 1 / (1 - dot) below 0 and dot + 1 above, L2
    1 / (1 + d^2) (returned as the distance)."""
    if metric is DistanceMetric.EUCLIDEAN:
        return float(max(1.0 / score - 1.0, 0.0) ** 0.5) if score > 0 else float("inf")
    if metric is DistanceMetric.DOT:
        return score - 1.0 if score >= 1.0 else 1.0 - 1.0 / score
    return 2.0 * score - 1.0


# Groundwire's BM25 (domain/bm25.py) keeps Lucene's classic (k1 + 1) factor. It is
# OpenSearch 2.x's `BM25`; 3.x's `BM25` is Lucene 10's, without the factor (scores
# 1 / 2.2 of 2.x's, the same ranking), and 3.x names the classic one `LegacyBM25`.
BM25_SIMILARITY = "groundwire_bm25"


def bm25_similarity(engine_major: int) -> dict[str, Any]:
    """The similarity the `terms` field scores with on an engine of `engine_major`."""
    kind = "LegacyBM25" if engine_major >= 3 else "BM25"
    return {"type": kind, "k1": bm25.K1, "b": bm25.B}


def index_body(
    spec: IndexSpec,
    *,
    shards: int,
    replicas: int,
    hnsw_m: int,
    hnsw_ef_construction: int,
    engine_major: int,
) -> dict[str, Any]:
    """Settings and mappings of one physical index, built with refresh off and the
    given replicas (a first build runs with none: versions.py), for an engine of
    `engine_major` (2 or 3: the BM25 similarity's name differs)."""
    properties: dict[str, Any] = {
        "kind": {"type": "keyword"},
        "document_id": {"type": "keyword"},
        "chunk_id": {"type": "keyword"},
        "start": {"type": "integer"},
        "end": {"type": "integer"},
        "meta_kv": {"type": "keyword"},
        "meta_num": {"type": "keyword"},
        "meta_ts": {"type": "keyword"},
        # The document's access list (domain.access.acl_terms), on chunks and records.
        "acl": {"type": "keyword"},
        # BM25 over groundwire's own terms; no positions needed for scoring.
        "terms": {
            "type": "text",
            "analyzer": "whitespace",
            "index_options": "freqs",
            "similarity": BM25_SIMILARITY,
        },
        # Phrase words with positions, only ever a filter: no norms.
        "words": {
            "type": "text",
            "analyzer": "whitespace",
            "index_options": "positions",
            "norms": False,
        },
        # What hits and listings return; never searched.
        "payload": {"type": "object", "enabled": False},
        # A pooled tenant's records (pool.py): its tag and version, the alias's
        # filter, and each chunk's length in terms (its BM25 is the tenant's own).
        "tg": {"type": "keyword"},
        "tv": {"type": "long"},
        "dl": {"type": "integer"},
    }
    if spec.dimensions:
        properties["vector"] = {
            "type": "knn_vector",
            "dimension": spec.dimensions,
            "method": {
                "name": "hnsw",
                "engine": "lucene",
                "space_type": space_type(spec.metric),
                "parameters": {"m": hnsw_m, "ef_construction": hnsw_ef_construction},
            },
        }
    return {
        "settings": {
            "index": {
                "number_of_shards": shards,
                "number_of_replicas": replicas,
                "refresh_interval": "-1",
                "knn": bool(spec.dimensions),
                # An incremental publish copies a tenant's unchanged documents by
                # excluding the changed ids in one terms query (versions.py).
                "max_terms_count": 10_000_000,
                "max_result_window": 10_000,
                "similarity": {BM25_SIMILARITY: bm25_similarity(engine_major)},
                # Segments searched one after another, as 2.x does by default: 3.x's
                # `auto` searches a k-NN query's segments concurrently, and Lucene's
                # multi-segment k-NN collector shares its bar across them, so an
                # approximate result would hang on thread timing (the same query, a
                # different answer).
                "search": {"concurrent_segment_search": {"mode": "none"}},
            }
        },
        "mappings": {
            "dynamic": "strict",
            "_meta": {
                "embedding": spec.embedding,
                "dimensions": spec.dimensions,
                "chunking": spec.chunking,
            },
            "properties": properties,
        },
    }


# -- metadata encodings ------------------------------------------------------------

_EXP_OFFSET = 50_000


def number_key(value: Decimal) -> str:
    """An order-preserving string for an exact decimal: compared as strings, two
    keys order as their numbers do (equal numbers, e.g. 0.10 and 0.1, are equal)."""
    if value.is_zero():
        return "1"
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    stripped = "".join(map(str, digits)).lstrip("0")
    # value = 0.<mantissa> x 10^adjusted (trailing zeros change nothing)
    adjusted = exponent + len(stripped)
    mantissa = stripped.rstrip("0")
    adjusted = max(0, min(2 * _EXP_OFFSET - 1, adjusted + _EXP_OFFSET))
    if not sign:
        return f"2{adjusted:06d}{mantissa}"
    # Negative: larger magnitudes sort first; the digits complemented and a
    # terminator above every digit so a longer mantissa sorts before its prefix.
    flipped = "".join(str(9 - int(d)) for d in mantissa)
    return f"0{2 * _EXP_OFFSET - 1 - adjusted:06d}{flipped}~"


_TS_OFFSET = 100_000_000_000_000_000  # years 1-9999 in microseconds fit above 0


def timestamp_key(micros: int) -> str:
    return f"{micros + _TS_OFFSET:019d}"


def metadata_fields(metadata: Mapping[str, str]) -> dict[str, list[str]]:
    """A chunk's metadata as the keywords its filters match."""
    kv, num, ts = [], [], []
    for key, value in metadata.items():
        kv.append(f"{key}{_SEP}{value}")
        number = parse_number(value)
        if number is not None:
            num.append(f"{key}{_SEP}{number_key(number)}")
        instant = parse_timestamp(value)
        if instant is not None:
            ts.append(f"{key}{_SEP}{timestamp_key(instant)}")
    return {"meta_kv": kv, "meta_num": num, "meta_ts": ts}


def _range_clause(key: str, cond: RangeCondition) -> dict[str, Any]:
    field = "meta_num" if cond.kind is RangeKind.NUMBER else "meta_ts"

    def encode(value: Decimal | int) -> str:
        if cond.kind is RangeKind.NUMBER:
            assert isinstance(value, Decimal)
            return f"{key}{_SEP}{number_key(value)}"
        assert isinstance(value, int)
        return f"{key}{_SEP}{timestamp_key(value)}"

    bounds: dict[str, str] = {}
    if cond.lower is not None:
        bounds["gte" if cond.lower.inclusive else "gt"] = encode(cond.lower.value)
    else:
        bounds["gte"] = f"{key}{_SEP}"
    if cond.upper is not None:
        bounds["lte" if cond.upper.inclusive else "lt"] = encode(cond.upper.value)
    else:
        bounds["lt"] = f"{key}\x01"
    return {"range": {field: bounds}}


def scope_filters(scope: Scope, *, readers: bool = True) -> list[dict[str, Any]]:
    """The filter clauses of a chunk search in `scope` (the tenant is the alias
    searched): every exact condition (any of its values), every range and, unless
    `readers` is False (the caller knows the index holds no restricted chunk:
    vectors.TenantSizes), the access-list clause. No clause
    on the record kind: only chunks have `terms` and `vector`, so a document record
    never matches a BM25 or k-NN query, and a needless clause over every chunk kept
    Lucene from skipping non-competitive blocks (common-word queries at 1M chunks:
    124 ms p99 with it, 16 ms without, server time; bench/bench_million_stores.py)."""
    clauses: list[dict[str, Any]] = []
    for key, accepted in sorted(scope.filter.conditions.items()):
        clauses.append({"terms": {"meta_kv": [f"{key}{_SEP}{v}" for v in sorted(accepted)]}})
    for key, ranges in sorted(scope.filter.ranges.items()):
        clauses.extend(_range_clause(key, cond) for cond in ranges)
    if readers:
        clauses.extend(readers_filters(scope.readers))
    return clauses


def readers_filters(readers: Readers) -> list[dict[str, Any]]:
    """The access-list clause for `readers` (none when unrestricted): the record's
    `acl` terms share one with the readers' (PUBLIC included), or the record was
    written before access lists existed (no `acl` field: readable like PUBLIC)."""
    if readers.unrestricted:
        return []
    return [
        {
            "bool": {
                "should": [
                    {"terms": {"acl": list(readers.terms())}},
                    {"bool": {"must_not": {"exists": {"field": "acl"}}}},
                ],
                "minimum_should_match": 1,
            }
        }
    ]


def chunk_id_of(tenant: str, document_id: str, chunk_id: str, slot: Slot | None = None) -> str:
    """The OpenSearch _id of a chunk: stable, so a retried bulk request overwrites
    instead of duplicating; in a pool, the tenant's tag and version make it unique
    among every tenant and version the pool holds."""
    owner = tenant if slot is None else f"{slot.tag}{_SEP}{slot.version}"
    raw = f"{CHUNK}{_SEP}{owner}{_SEP}{document_id}{_SEP}{chunk_id}".encode()
    return hashlib.sha256(raw).hexdigest()


def document_id_of(tenant: str, document_id: str, slot: Slot | None = None) -> str:
    owner = tenant if slot is None else f"{slot.tag}{_SEP}{slot.version}"
    raw = f"{DOCUMENT}{_SEP}{owner}{_SEP}{document_id}".encode()
    return hashlib.sha256(raw).hexdigest()


def document_actions(
    physical: str,
    item: StagedDocument,
    parts: list[tuple[str, str]],
    version: int,
    staged_at: float,
    slot: Slot | None = None,
) -> list[dict[str, Any]]:
    """The `_bulk` actions staging one document into `physical` (into a pool:
    `slot`): its chunks (with their analyzed terms and words, `parts`), then its
    record."""
    d = item.document
    meta = metadata_fields(d.metadata)
    acl = list(acl_terms(d.acl))
    owner: dict[str, Any] = {} if slot is None else {"tg": slot.tag, "tv": slot.version}
    actions: list[dict[str, Any]] = []
    for i, (chunk, (terms, words)) in enumerate(zip(item.chunks, parts, strict=True)):
        _id = chunk_id_of(d.tenant, d.document_id, chunk.chunk_id, slot)
        source: dict[str, Any] = {
            "kind": CHUNK,
            "document_id": d.document_id,
            "chunk_id": chunk.chunk_id,
            "start": chunk.start,
            "end": chunk.end,
            "terms": terms,
            "words": words,
            **meta,
            "acl": acl,
            "payload": {
                "text": chunk.text,
                "section": chunk.section,
                "title": d.title,
                "metadata": dict(d.metadata),
                "ordinal": chunk.ordinal,
            },
        }
        if slot is not None:
            source.update(owner, dl=len(terms.split()))
        if item.embeddings is not None:
            source["vector"] = item.embeddings[i].tolist()
        actions.append({"_op_type": "index", "_index": physical, "_id": _id, **source})
    actions.append(
        {
            "_op_type": "index",
            "_index": physical,
            "_id": document_id_of(d.tenant, d.document_id, slot),
            "kind": DOCUMENT,
            "document_id": d.document_id,
            **owner,
            **meta,
            "acl": acl,
            "payload": {
                "source_id": d.source_id,
                "content_hash": d.content_hash,
                "title": d.title,
                "tenant": d.tenant,
                "metadata": dict(d.metadata),
                "chunk_count": len(item.chunks),
                "characters": max((c.end for c in item.chunks), default=0),
                "version": version,
                "ingested_at": staged_at,
                "acl": sorted(d.acl),
            },
        }
    )
    return actions


def sorted_hits(fields: Sequence[str]) -> list[dict[str, Any]]:
    """Sort clauses: score first, then the ids, the order every store ties in."""
    return [{"_score": "desc"}, *({f: "asc"} for f in fields)]


def analyze_documents(
    documents: Sequence[StagedDocument], analyzer: Analyzer
) -> list[list[tuple[str, str]]]:
    """Each staged chunk's indexed fields: its analyzer terms and its words (for
    phrases), space-joined."""
    out = []
    for item in documents:
        parts = []
        for chunk in item.chunks:
            analyzed = analyzer.analyze(chunk.text)
            parts.append((" ".join(analyzed.terms), " ".join(analyzed.words)))
        out.append(parts)
    return out
