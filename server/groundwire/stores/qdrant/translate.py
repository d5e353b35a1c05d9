"""One description, two engines: the store builds its filters, queries, points
and payload selectors as qdrant-edge-py models (filters.py, layout.py,
lexical.py, vectors.py); this module turns those into qdrant-client's models
for a Qdrant server. The two libraries mirror the same server types (the edge
binding's classes are Rust structs, the client's pydantic models of the REST
API), so the mapping is one to one and holds no rule of its own: a condition,
range, nested filter, sparse vector or IDF corpus means the same on both."""

from __future__ import annotations

from typing import Any

import qdrant_edge as q
from qdrant_client import models as m


def condition(c: Any) -> Any:
    """An edge condition (FieldCondition, NestedCondition or Filter) as the client's."""
    if isinstance(c, q.Filter):
        return filter_(c)
    if isinstance(c, q.NestedCondition):
        return m.NestedCondition(nested=m.Nested(key=c.key, filter=filter_(c.filter)))
    if isinstance(c, q.FieldCondition):
        if c.range is not None:
            r = c.range
            return m.FieldCondition(
                key=c.key, range=m.Range(gt=r.gt, gte=r.gte, lt=r.lt, lte=r.lte)
            )
        return m.FieldCondition(key=c.key, match=_match(c.match))
    raise TypeError(f"no server form for {type(c).__name__}")


def _match(match: Any) -> Any:
    if isinstance(match, q.MatchValue):
        return m.MatchValue(value=match.value)
    if isinstance(match, q.MatchAny):
        return m.MatchAny(any=list(match.value))
    if isinstance(match, q.MatchText):
        return m.MatchText(text=match.text)
    if isinstance(match, q.MatchTextAny):
        return m.MatchTextAny(text_any=match.text_any)
    raise TypeError(f"no server form for {type(match).__name__}")


def filter_(f: q.Filter | None) -> m.Filter | None:
    if f is None:
        return None

    def each(items: Any) -> list[Any] | None:
        return None if items is None else [condition(c) for c in items]

    return m.Filter(must=each(f.must), should=each(f.should), must_not=each(f.must_not))


def selector(s: Any) -> Any:
    """A payload selector: True/False, or the keys an Include names."""
    if isinstance(s, bool):
        return s
    if isinstance(s, q.PayloadSelector.Include):  # type: ignore[arg-type]  # a class (stubs: a function)
        return list(s.keys)
    raise TypeError(f"no server form for {type(s).__name__}")


def vector(v: Any) -> Any:
    if isinstance(v, q.SparseVector):
        return m.SparseVector(indices=list(v.indices), values=list(v.values))
    return list(v)


def point(p: q.Point) -> m.PointStruct:
    """A point (named vectors only, as layout.py builds them)."""
    named: dict[str, Any] = p.vector or {}  # type: ignore[assignment]
    return m.PointStruct(
        id=str(p.id),
        vector={name: vector(v) for name, v in named.items()},
        payload=p.payload,
    )


def search_params(p: q.SearchParams | None) -> m.SearchParams | None:
    if p is None:
        return None
    acorn = None
    if p.acorn is not None:
        acorn = m.AcornSearchParams(enable=p.acorn.enable, max_selectivity=p.acorn.max_selectivity)
    idf = None
    if p.idf is not None:
        idf = m.IdfCorpusParams(corpus=filter_(p.idf.corpus))
    return m.SearchParams(hnsw_ef=p.hnsw_ef, exact=p.exact, acorn=acorn, idf=idf)


def index_schema(s: Any) -> Any:
    """A payload index's parameters (layout.payload_indexes) as the client's."""
    if isinstance(s, q.KeywordIndexParams):
        return m.KeywordIndexParams(
            type=m.KeywordIndexType.KEYWORD, is_tenant=s.is_tenant, enable_hnsw=s.enable_hnsw
        )
    if isinstance(s, q.TextIndexParams):
        assert s.tokenizer == q.TokenizerType.Whitespace
        return m.TextIndexParams(
            type=m.TextIndexType.TEXT,
            tokenizer=m.TokenizerType.WHITESPACE,
            lowercase=s.lowercase,
            ascii_folding=s.ascii_folding,
            phrase_matching=s.phrase_matching,
            enable_hnsw=s.enable_hnsw,
        )
    if isinstance(s, q.IntegerIndexParams):
        return m.IntegerIndexParams(
            type=m.IntegerIndexType.INTEGER,
            lookup=s.lookup,
            range=s.range,
            enable_hnsw=s.enable_hnsw,
        )
    if isinstance(s, q.FloatIndexParams):
        return m.FloatIndexParams(type=m.FloatIndexType.FLOAT, enable_hnsw=s.enable_hnsw)
    raise TypeError(f"no server form for {type(s).__name__}")
