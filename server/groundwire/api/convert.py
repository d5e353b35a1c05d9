"""Proto <-> domain conversions shared by the servicers."""

from __future__ import annotations

import contextvars
from collections.abc import Sequence

from google.protobuf import duration_pb2

from groundwire.api.usage import usage_to_proto
from groundwire.domain.errors import invalid
from groundwire.domain.profile import ProfilePartKind, RetrievalProfile
from groundwire.domain.retrieval import (
    FusionMethod,
    Leg,
    LegResults,
    RankedResult,
    RetrievalDiagnostics,
    RetrievalMode,
    RetrievalOutcome,
    ScoredHits,
)
from groundwire.domain.scores import Score, ScoreMetric, higher_is_better
from groundwire.retrieval.requests import BoundInput, FilterCondition, RangeInput
from groundwire_client.v1 import common_pb2, retriever_pb2

try:  # compiled by setup.py where a C compiler is available (_wire.c)
    from groundwire.api import _wire
except ImportError:  # pragma: no cover - exercised where no compiler built it
    _wire = None  # type: ignore[assignment]

_METRICS: dict[ScoreMetric, common_pb2.ScoreMetric.ValueType] = {
    ScoreMetric.COSINE_SIMILARITY: common_pb2.SCORE_METRIC_COSINE_SIMILARITY,
    ScoreMetric.COSINE_DISTANCE: common_pb2.SCORE_METRIC_COSINE_DISTANCE,
    ScoreMetric.EUCLIDEAN_DISTANCE: common_pb2.SCORE_METRIC_EUCLIDEAN_DISTANCE,
    ScoreMetric.DOT_PRODUCT: common_pb2.SCORE_METRIC_DOT_PRODUCT,
    ScoreMetric.BM25: common_pb2.SCORE_METRIC_BM25,
    ScoreMetric.TEXT_RANK: common_pb2.SCORE_METRIC_TEXT_RANK,
    ScoreMetric.RECIPROCAL_RANK_FUSION: common_pb2.SCORE_METRIC_RECIPROCAL_RANK_FUSION,
    ScoreMetric.RERANK_RELEVANCE: common_pb2.SCORE_METRIC_RERANK_RELEVANCE,
    ScoreMetric.MIN_MAX_FUSION: common_pb2.SCORE_METRIC_MIN_MAX_FUSION,
}
_LEGS: dict[Leg, common_pb2.RetrievalLeg.ValueType] = {
    Leg.SEMANTIC: common_pb2.RETRIEVAL_LEG_SEMANTIC,
    Leg.LEXICAL: common_pb2.RETRIEVAL_LEG_LEXICAL,
}
_MODES_IN: dict[int, RetrievalMode] = {
    retriever_pb2.RETRIEVAL_MODE_UNSPECIFIED: RetrievalMode.SEMANTIC,
    retriever_pb2.RETRIEVAL_MODE_SEMANTIC: RetrievalMode.SEMANTIC,
    retriever_pb2.RETRIEVAL_MODE_LEXICAL: RetrievalMode.LEXICAL,
    retriever_pb2.RETRIEVAL_MODE_HYBRID: RetrievalMode.HYBRID,
}
_MODES_OUT = {
    RetrievalMode.SEMANTIC: retriever_pb2.RETRIEVAL_MODE_SEMANTIC,
    RetrievalMode.LEXICAL: retriever_pb2.RETRIEVAL_MODE_LEXICAL,
    RetrievalMode.HYBRID: retriever_pb2.RETRIEVAL_MODE_HYBRID,
}


def mode_from_proto(value: int) -> RetrievalMode | None:
    """None for enum values this server does not know."""
    return _MODES_IN.get(value)


def mode_to_proto(mode: RetrievalMode) -> retriever_pb2.RetrievalMode.ValueType:
    return _MODES_OUT[mode]


def score_to_proto(score: Score) -> common_pb2.Score:
    msg = common_pb2.Score(
        raw_score=score.raw, metric=_METRICS[score.metric], higher_is_better=score.higher_is_better
    )
    if score.relevance is not None:
        msg.relevance = score.relevance
    return msg


def filter_from_proto(flt: common_pb2.MetadataFilter) -> list[FilterCondition]:
    out = []
    for cond in flt.conditions:
        which = cond.WhichOneof("match")
        rng: RangeInput | None = None
        values: list[str] | None = None
        if which == "equals":
            values = [cond.equals]
        elif which == "any_of":
            values = list(cond.any_of.values)
        elif which == "range":
            r = cond.range
            rng = RangeInput(
                _bound_from_proto(r.lower) if r.HasField("lower") else None,
                _bound_from_proto(r.upper) if r.HasField("upper") else None,
            )
        out.append(FilterCondition(cond.key, values, rng))
    return out


def _bound_from_proto(bound: common_pb2.MetadataRangeBound) -> BoundInput:
    kind = bound.WhichOneof("value")
    return BoundInput(
        number=bound.number if kind == "number" else None,
        timestamp=bound.timestamp if kind == "timestamp" else None,
        inclusive=bound.inclusive,
    )


def duration(seconds: float) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    _set_duration(d, seconds)
    return d


def result_to_proto(result: RankedResult) -> retriever_pb2.RetrievalResult:
    msg = retriever_pb2.RetrievalResult()
    _fill_result(msg, result)
    return msg


def _fill_score(msg: common_pb2.Score, score: Score) -> None:
    msg.raw_score = score.raw
    msg.metric = _METRICS[score.metric]
    msg.higher_is_better = score.higher_is_better
    if score.relevance is not None:
        msg.relevance = score.relevance


def _fill_result(msg: retriever_pb2.RetrievalResult, result: RankedResult) -> None:
    """Write `result` into `msg` in place: on the Retrieve path a result is built
    inside the response (a message passed to a constructor is copied, content and
    all), its fields set directly rather than through keyword dictionaries (a
    keyword constructor or add(**fields) costs more than the writes), the score
    copied to the provenance leg that shares it."""
    hit = result.hit
    score = result.score
    msg.document_id = hit.document_id
    msg.chunk_id = hit.chunk_id
    msg.rank = result.rank
    written = msg.score
    _fill_score(written, score)
    for p in result.provenance:
        leg = msg.provenance.add()
        leg.leg = _LEGS[p.leg]
        leg.rank = p.rank
        if p.score is score:
            leg.score.CopyFrom(written)
        else:
            _fill_score(leg.score, p.score)
    msg.content = hit.content
    span = msg.span
    span.start = hit.start
    span.end = hit.end
    msg.title = hit.title
    msg.section = hit.section
    if hit.metadata:
        msg.metadata.update(hit.metadata)


FUSION_METHODS: dict[FusionMethod, retriever_pb2.FusionMethod.ValueType] = {
    FusionMethod.RRF: retriever_pb2.FUSION_METHOD_RRF,
    FusionMethod.MIN_MAX: retriever_pb2.FUSION_METHOD_MIN_MAX,
}


def fusion_method_from_proto(value: int) -> FusionMethod | None:
    """The requested fusion method; None for UNSPECIFIED (the server's default)."""
    if value == retriever_pb2.FUSION_METHOD_UNSPECIFIED:
        return None
    for method, wire in FUSION_METHODS.items():
        if wire == value:
            return method
    raise invalid("UNKNOWN_ENUM_VALUE", "query.fusion.method", "unknown fusion method")


def diagnostics_to_proto(d: RetrievalDiagnostics) -> retriever_pb2.RetrievalDiagnostics:
    msg = retriever_pb2.RetrievalDiagnostics()
    _fill_diagnostics(msg, d)
    return msg


def _nanos(seconds: float) -> int:
    return max(0, int(seconds * 1e9))


def _set_duration(msg: duration_pb2.Duration, seconds: float) -> None:
    """FromNanoseconds(_nanos(seconds)) for a non-negative span, with two field
    writes instead of protobuf's Python helper (four per Retrieve)."""
    msg.seconds, msg.nanos = divmod(_nanos(seconds), 1_000_000_000)


def _fill_diagnostics(msg: retriever_pb2.RetrievalDiagnostics, d: RetrievalDiagnostics) -> None:
    """Write `d` into `msg` in place (see _fill_result)."""
    msg.applied_mode = mode_to_proto(d.mode)
    msg.applied_top_k = d.top_k
    msg.semantic_hits = d.semantic_hits
    msg.lexical_hits = d.lexical_hits
    _set_duration(msg.embedding_duration, d.embedding_seconds)
    _set_duration(msg.semantic_duration, d.semantic_seconds)
    _set_duration(msg.lexical_duration, d.lexical_seconds)
    _set_duration(msg.total_duration, d.total_seconds)
    msg.index_version = d.index_version
    msg.phrase_count = d.phrase_count
    msg.applied_leg_depth = d.leg_depth
    msg.lexical_terms_scored = d.lexical_terms_scored
    msg.lexical_terms_pruned = d.lexical_terms_pruned
    msg.tenant_scope_empty = d.tenant_scope_empty
    msg.embedding_usage.CopyFrom(usage_to_proto(d.embedding_usage))
    msg.query_truncated = d.embedding_usage.truncated_texts > 0
    msg.feedback_terms = d.feedback_terms
    msg.feedback_documents = d.feedback_documents
    if d.fusion is not None:
        msg.applied_fusion_method = FUSION_METHODS[d.fusion.method]
        msg.applied_rrf_k = d.fusion.k
        msg.applied_semantic_weight = d.fusion.semantic_weight
        msg.applied_lexical_weight = d.fusion.lexical_weight


def outcome_to_proto(outcome: RetrievalOutcome) -> retriever_pb2.RetrieveResponse:
    resp = retriever_pb2.RetrieveResponse()
    if _wire is not None:
        resp.MergeFromString(_encoded_results(outcome.results))  # (parsed by upb)
    else:
        add = resp.results.add
        for r in outcome.results:
            _fill_result(add(), r)
    _fill_diagnostics(resp.diagnostics, outcome.diagnostics)
    resp.profile.CopyFrom(_profile_entry(outcome.diagnostics.profile)[2])
    return resp


def _encoded_results(results: Sequence[RankedResult]) -> bytes:
    """RetrieveResponse.results' wire form in one C call (_wire.c: what _fill_result
    writes, without a Python call per field); a single leg's read from its hits,
    or from the store's records standing for them, so neither the results nor the
    hits are built."""
    if type(results) is not LegResults:
        return _wire.results(results, _METRICS, _LEGS)
    hits = results.hits
    if type(hits) is not ScoredHits:
        return _wire.leg_results(hits, results.leg, _METRICS, _LEGS)
    metric = hits.metric
    return _wire.record_results(
        hits.records, hits.raws, _METRICS[metric], higher_is_better(metric), _LEGS[results.leg]
    )


_PART_KINDS: dict[ProfilePartKind, common_pb2.ProfilePartKind.ValueType] = {
    kind: common_pb2.ProfilePartKind.Value(f"PROFILE_PART_KIND_{kind.name}")
    for kind in ProfilePartKind
}


def profile_to_proto(profile: RetrievalProfile) -> common_pb2.RetrievalProfile:
    """The profile with its fingerprint and every part's (a new message)."""
    msg = common_pb2.RetrievalProfile()
    msg.CopyFrom(_profile_entry(profile)[2])
    return msg


def profile_fingerprint(profile: RetrievalProfile) -> str:
    """`profile.fingerprint`, hashed once per profile object (see _profile_entry)."""
    return _profile_entry(profile)[1]


# Profiles are immutable and the engines hand out one object per index version and
# configuration (retrieval/engine.py): their fingerprints (SHA-256 over every part)
# and messages are computed once per object, not once per call. Keyed by identity,
# the object kept beside its entry so an id is never reused while cached.
_PROFILES: dict[int, tuple[RetrievalProfile, str, common_pb2.RetrievalProfile]] = {}
_MAX_PROFILES = 256


def _profile_entry(
    profile: RetrievalProfile,
) -> tuple[RetrievalProfile, str, common_pb2.RetrievalProfile]:
    entry = _PROFILES.get(id(profile))
    if entry is not None and entry[0] is profile:
        return entry
    msg = common_pb2.RetrievalProfile(
        fingerprint=profile.fingerprint,
        parts=[
            common_pb2.ProfilePart(
                kind=_PART_KINDS[p.kind], settings=p.descriptor, fingerprint=p.fingerprint
            )
            for p in profile.parts
        ],
    )
    entry = (profile, msg.fingerprint, msg)
    if len(_PROFILES) >= _MAX_PROFILES:
        _PROFILES.clear()
    _PROFILES[id(profile)] = entry
    return entry


# The fingerprint of the profile a call reported, for its access-log line (the
# interceptor takes it once the call ends); never the descriptors.
_profile_fingerprint: contextvars.ContextVar[str] = contextvars.ContextVar(
    "profile_fingerprint", default=""
)


def note_profile(profile: RetrievalProfile) -> RetrievalProfile:
    """Record `profile`'s fingerprint for this call's access log; returns it."""
    _profile_fingerprint.set(profile_fingerprint(profile))
    return profile


def take_profile_fingerprint() -> str:
    """The fingerprint noted by this call ("" when none), cleared for the next."""
    fingerprint = _profile_fingerprint.get()
    if fingerprint:
        _profile_fingerprint.set("")
    return fingerprint
