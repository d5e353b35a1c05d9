"""Validation of retrieval requests against the server's bounds. Transport-neutral:
the api layer passes plain values and gets a RetrievalRequest or a
GroundwireError whose field violations name the request field."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from groundwire.domain.access import PUBLIC_READERS, Readers
from groundwire.domain.auth import check_tenant
from groundwire.domain.errors import invalid
from groundwire.domain.metadata_ranges import (
    RangeBound,
    RangeCondition,
    RangeKind,
    number_bound,
    parse_timestamp,
)
from groundwire.domain.query import split_phrases, validate_query_text
from groundwire.domain.retrieval import (
    FEEDBACK_DEFAULT_DOCUMENTS,
    FEEDBACK_DEFAULT_ORIGINAL_WEIGHT,
    FEEDBACK_DEFAULT_TERMS,
    FEEDBACK_MAX_DOCUMENTS,
    FEEDBACK_MAX_TERMS,
    FeedbackSettings,
    FusionMethod,
    FusionSettings,
    MetadataFilter,
    RetrievalMode,
    RetrievalRequest,
    Scope,
)
from groundwire.retrieval.engine import RetrievalLimits

_KEY = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
MAX_CONDITIONS = 32
MAX_VALUES = 100
MAX_VALUE_BYTES = 256
MAX_TIMESTAMP_CHARS = 64
# Cost bounds, checked before any store work and refused with the reason of the
# field they bound (the wire's ErrorReason set: INVALID_FILTER, FIELD_OUT_OF_RANGE);
# measured in bench/bench_heavy_options.py. A filter's values across all its keys
# (each key's values are one IN-list the store checks per candidate row):
MAX_FILTER_VALUES = 256
# RM3: feedback documents x expansion terms (the second run scores up to `terms`
# more terms over the first run's `documents` chunks' vocabulary).
MAX_FEEDBACK_PRODUCT = 1_000
# Hybrid: each leg reads leg_depth rows; the depth may be at most this multiple of
# top_k, or HYBRID_DEPTH_FLOOR, whichever is larger (and never past max_leg_depth).
HYBRID_DEPTH_PER_TOP_K = 10
HYBRID_DEPTH_FLOOR = 250


@dataclass(frozen=True, slots=True)
class BoundInput:
    """One end of a range as the caller sent it: a number, a timestamp string, or
    neither (which is invalid)."""

    number: float | None = None
    timestamp: str | None = None
    inclusive: bool = False


@dataclass(frozen=True, slots=True)
class RangeInput:
    """A range as the caller sent it; a missing bound is None."""

    lower: BoundInput | None = None
    upper: BoundInput | None = None


@dataclass(frozen=True, slots=True)
class FilterCondition:
    """One condition as the caller sent it; `values` is None when no exact match
    was set, `range` None when no range was."""

    key: str
    values: Sequence[str] | None
    range: RangeInput | None = None


def _bound(bound: BoundInput, where: str) -> tuple[RangeKind, RangeBound]:
    if bound.number is not None:
        number = number_bound(bound.number)
        if number is None:
            raise invalid(
                "INVALID_FILTER", f"{where}.number", "a number bound must be finite, within 1e300"
            )
        return RangeKind.NUMBER, RangeBound(number, bound.inclusive)
    if bound.timestamp is not None:
        instant = None
        if len(bound.timestamp) <= MAX_TIMESTAMP_CHARS:
            instant = parse_timestamp(bound.timestamp)
        if instant is None:
            raise invalid(
                "INVALID_FILTER",
                f"{where}.timestamp",
                "a timestamp bound must be RFC 3339 with an offset, e.g. 2024-05-01T00:00:00Z",
            )
        return RangeKind.TIMESTAMP, RangeBound(instant, bound.inclusive)
    raise invalid("INVALID_FILTER", where, "a bound needs 'number' or 'timestamp'")


def build_range(rng: RangeInput, where: str) -> RangeCondition:
    """Validate a range: at least one bound, both of one kind, not empty."""
    if rng.lower is None and rng.upper is None:
        raise invalid("INVALID_FILTER", where, "a range needs a lower or an upper bound")
    lower = _bound(rng.lower, f"{where}.lower") if rng.lower is not None else None
    upper = _bound(rng.upper, f"{where}.upper") if rng.upper is not None else None
    kinds = {b[0] for b in (lower, upper) if b is not None}
    if len(kinds) > 1:
        raise invalid("INVALID_FILTER", where, "both bounds must be numbers, or both timestamps")
    try:
        return RangeCondition(
            kinds.pop(),
            lower[1] if lower is not None else None,
            upper[1] if upper is not None else None,
        )
    except ValueError as exc:
        # RangeCondition's remaining rule: the range must not be empty.
        raise invalid("INVALID_FILTER", where, str(exc)) from None


def build_filter(conditions: Sequence[FilterCondition], path: str) -> MetadataFilter:
    """Validate metadata conditions (unique keys, bounded values, well-formed
    non-empty ranges) into a filter."""
    if len(conditions) > MAX_CONDITIONS:
        raise invalid("INVALID_FILTER", path, f"at most {MAX_CONDITIONS} conditions are allowed")
    out: dict[str, frozenset[str]] = {}
    ranges: dict[str, tuple[RangeCondition, ...]] = {}
    for i, cond in enumerate(conditions):
        where = f"{path}.conditions[{i}]"
        if not _KEY.match(cond.key):
            raise invalid(
                "INVALID_FILTER", f"{where}.key", "key must be 1-128 chars of [A-Za-z0-9_.:-]"
            )
        if cond.key in out or cond.key in ranges:
            raise invalid("INVALID_FILTER", f"{where}.key", "keys must be unique within a filter")
        if cond.range is not None and cond.values is None:
            ranges[cond.key] = (build_range(cond.range, f"{where}.range"),)
            continue
        if cond.values is None:
            raise invalid(
                "INVALID_FILTER", where, "a condition needs 'equals', 'any_of' or 'range'"
            )
        if not 1 <= len(cond.values) <= MAX_VALUES:
            raise invalid("INVALID_FILTER", where, f"a condition needs 1 to {MAX_VALUES} values")
        for v in cond.values:
            if not v or len(v.encode()) > MAX_VALUE_BYTES:
                raise invalid(
                    "INVALID_FILTER", where, f"values must be 1 to {MAX_VALUE_BYTES} bytes"
                )
        out[cond.key] = frozenset(cond.values)
    total = sum(len(v) for v in out.values())
    if total > MAX_FILTER_VALUES:
        raise invalid(
            "INVALID_FILTER",
            path,
            f"a filter may hold at most {MAX_FILTER_VALUES} values across all its keys",
        )
    return MetadataFilter(out, ranges)


def hybrid_depth_limit(top_k: int, max_leg_depth: int) -> int:
    """The deepest hybrid leg for `top_k` results."""
    return min(max_leg_depth, max(HYBRID_DEPTH_FLOOR, HYBRID_DEPTH_PER_TOP_K * top_k))


@dataclass(frozen=True, slots=True)
class FeedbackInput:
    """Pseudo-relevance feedback as the caller asked for it; None = the default."""

    documents: int | None = None
    terms: int | None = None
    original_weight: float | None = None


def build_feedback(feedback: FeedbackInput, path: str) -> FeedbackSettings:
    """Validate RM3 settings, naming the offending field."""
    documents = FEEDBACK_DEFAULT_DOCUMENTS if feedback.documents is None else feedback.documents
    if not 1 <= documents <= FEEDBACK_MAX_DOCUMENTS:
        raise invalid(
            "FIELD_OUT_OF_RANGE",
            f"{path}.documents",
            f"documents must be in [1, {FEEDBACK_MAX_DOCUMENTS}]",
        )
    terms = FEEDBACK_DEFAULT_TERMS if feedback.terms is None else feedback.terms
    if not 1 <= terms <= FEEDBACK_MAX_TERMS:
        raise invalid(
            "FIELD_OUT_OF_RANGE", f"{path}.terms", f"terms must be in [1, {FEEDBACK_MAX_TERMS}]"
        )
    weight = (
        FEEDBACK_DEFAULT_ORIGINAL_WEIGHT
        if feedback.original_weight is None
        else feedback.original_weight
    )
    if not (math.isfinite(weight) and 0.0 <= weight <= 1.0):
        raise invalid(
            "FIELD_OUT_OF_RANGE",
            f"{path}.original_query_weight",
            "original_query_weight must be finite, in [0, 1]",
        )
    if documents * terms > MAX_FEEDBACK_PRODUCT:
        raise invalid(
            "FIELD_OUT_OF_RANGE",
            path,
            f"documents x terms may be at most {MAX_FEEDBACK_PRODUCT} (e.g. 10 x 100)",
        )
    return FeedbackSettings(documents, terms, weight)


def build_retrieval_request(
    *,
    index_name: str,
    text: str,
    mode: RetrievalMode | None,
    top_k: int | None,
    conditions: Sequence[FilterCondition],
    tenant: str,
    rrf_k: int | None,
    semantic_weight: float | None,
    lexical_weight: float | None,
    leg_depth: int | None,
    limits: RetrievalLimits,
    fusion_defaults: FusionSettings,
    prefix: str = "query",
    min_version: int = 0,
    feedback: FeedbackInput | None = None,
    fusion_method: FusionMethod | None = None,
    readers: Readers = PUBLIC_READERS,
) -> RetrievalRequest:
    """Validate every field; the first violation raises INVALID_ARGUMENT. `readers`
    (the caller's, from authentication) join the tenant in the scope."""
    if not index_name:
        raise invalid("FIELD_REQUIRED", f"{prefix}.index_name", "index_name is required")
    if len(index_name) > 128:
        raise invalid("FIELD_TOO_LONG", f"{prefix}.index_name", "index_name exceeds 128 characters")
    clean = validate_query_text(text, limits.max_query_chars, f"{prefix}.text")
    split_phrases(clean, f"{prefix}.text")
    if mode is None:
        raise invalid("UNKNOWN_ENUM_VALUE", f"{prefix}.mode", "unknown retrieval mode")
    k = limits.default_top_k if top_k is None else top_k
    if not 1 <= k <= limits.max_top_k:
        raise invalid(
            "FIELD_OUT_OF_RANGE", f"{prefix}.top_k", f"top_k must be in [1, {limits.max_top_k}]"
        )
    check_tenant(tenant, f"{prefix}.tenant")
    fusion = fusion_defaults
    if rrf_k is not None:
        if not 1 <= rrf_k <= 1000:
            raise invalid(
                "FIELD_OUT_OF_RANGE", f"{prefix}.fusion.rrf_k", "rrf_k must be in [1, 1000]"
            )
        fusion = FusionSettings(rrf_k, fusion.semantic_weight, fusion.lexical_weight, fusion.method)
    for name, value in (("semantic_weight", semantic_weight), ("lexical_weight", lexical_weight)):
        if value is None:
            continue
        if not math.isfinite(value) or not 0.0 <= value <= 10.0:
            raise invalid(
                "FIELD_OUT_OF_RANGE",
                f"{prefix}.fusion.{name}",
                f"{name} must be finite, in [0, 10]",
            )
    if semantic_weight is not None or lexical_weight is not None or fusion_method is not None:
        fusion = FusionSettings(
            fusion.k,
            fusion.semantic_weight if semantic_weight is None else semantic_weight,
            fusion.lexical_weight if lexical_weight is None else lexical_weight,
            fusion.method if fusion_method is None else fusion_method,
        )
    if fusion.semantic_weight == 0 and fusion.lexical_weight == 0:
        raise invalid(
            "FIELD_OUT_OF_RANGE", f"{prefix}.fusion", "at least one leg weight must be > 0"
        )
    depth = limits.leg_depth if leg_depth is None else leg_depth
    if leg_depth is not None and not k <= leg_depth <= limits.max_leg_depth:
        raise invalid(
            "FIELD_OUT_OF_RANGE",
            f"{prefix}.fusion.leg_depth",
            f"leg_depth must be in [top_k, {limits.max_leg_depth}]",
        )
    # A caller's leg_depth only: the configured default is the operator's choice.
    if (
        leg_depth is not None
        and mode is RetrievalMode.HYBRID
        and depth > hybrid_depth_limit(k, limits.max_leg_depth)
    ):
        limit = hybrid_depth_limit(k, limits.max_leg_depth)
        raise invalid(
            "FIELD_OUT_OF_RANGE",
            f"{prefix}.fusion.leg_depth",
            f"a hybrid leg_depth may be at most max({HYBRID_DEPTH_FLOOR}, "
            f"{HYBRID_DEPTH_PER_TOP_K} x top_k) = {limit} for this top_k",
        )
    scope = Scope(tenant, build_filter(conditions, f"{prefix}.filter"), readers)
    settings = None if feedback is None else build_feedback(feedback, f"{prefix}.lexical_feedback")
    return RetrievalRequest(
        index_name,
        clean,
        mode,
        k,
        scope,
        fusion,
        depth,
        min_version=min_version,
        feedback=settings,
    )
