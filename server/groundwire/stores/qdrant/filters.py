"""A search scope as a Qdrant filter: the tenant, chunks only, every exact
metadata condition (any of its values) and every range, applied by the engine
before ranking on both legs.

Ranges: the engine compares doubles, groundwire exact decimals and instants
(domain/metadata_ranges.py). Rounding to a double is monotonic, so a value whose
double lies strictly between the bounds' doubles lies between the bounds; only
values whose double equals a bound's double are undecided. Those few (read from
the index by `band`) are settled with the domain's own comparison and admitted
by their exact text, so a range matches exactly what the other stores match."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import qdrant_edge as q

from groundwire.domain.metadata_ranges import RangeCondition, RangeKind
from groundwire.domain.retrieval import Scope
from groundwire.stores.qdrant.layout import (
    CHUNK,
    SEP,
    Condition,
    match,
    match_any,
    readers_condition,
)

# (field, key, double) -> the metadata values under `key` whose double is that one.
Band = Callable[[str, str, float], Awaitable[list[str]]]


def tenant_chunks(tenant: str) -> list[Condition]:
    """The scope's tenant, chunk points only (the IDF corpus of the lexical leg)."""
    return [match("tenant", tenant), match("kind", CHUNK)]


def _double(value: object) -> float:
    return float(value)  # type: ignore[arg-type]


async def _range(key: str, cond: RangeCondition, band: Band) -> q.Filter:
    field = "meta_num" if cond.kind is RangeKind.NUMBER else "meta_ts"
    open_range: dict[str, float] = {}
    edges: list[float] = []
    if cond.lower is not None:
        open_range["gt"] = lo = _double(cond.lower.value)
        edges.append(lo)
    if cond.upper is not None:
        open_range["lt"] = hi = _double(cond.upper.value)
        edges.append(hi)
    inner = q.Filter(
        must=[
            q.FieldCondition("k", match=q.MatchValue(key)),
            q.FieldCondition("v", range=q.RangeFloat(**open_range)),
        ]
    )
    should: list[Condition] = [q.NestedCondition(field, inner)]
    exact: list[str] = []
    for edge in dict.fromkeys(edges):
        exact.extend(v for v in await band(field, key, edge) if cond.admits(v))
    if exact:
        should.append(match_any("meta_kv", [f"{key}{SEP}{v}" for v in dict.fromkeys(exact)]))
    return q.Filter(should=should)


async def scope_filter(scope: Scope, band: Band, *extra: q.FieldCondition) -> q.Filter:
    """The engine filter of a chunk search in `scope` (plus `extra` conditions):
    tenant, readers, metadata."""
    must: list[Condition] = [
        *tenant_chunks(scope.tenant),
        *readers_condition(scope.readers),
        *extra,
    ]
    for key, accepted in sorted(scope.filter.conditions.items()):
        must.append(match_any("meta_kv", [f"{key}{SEP}{v}" for v in sorted(accepted)]))
    for key, ranges in sorted(scope.filter.ranges.items()):
        for cond in ranges:
            must.append(await _range(key, cond, band))
    return q.Filter(must=must)


def band_filter(tenant: str, field: str, key: str, value: float) -> q.Filter:
    """The tenant's chunks holding a `field` value of `key` whose double is `value`."""
    inner = q.Filter(
        must=[
            q.FieldCondition("k", match=q.MatchValue(key)),
            q.FieldCondition("v", range=q.RangeFloat(gte=value, lte=value)),
        ]
    )
    return q.Filter(must=[*tenant_chunks(tenant), q.NestedCondition(field, inner)])
