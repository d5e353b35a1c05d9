"""A Retrieve response's results encoded in C (api/_wire.c) are the message
convert._fill_result writes field by field: the same fields, presence and values,
the same bytes once serialized, and the same refusals."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, replace

import pytest

from groundwire.api import convert
from groundwire.domain.fusion import single_leg
from groundwire.domain.retrieval import (
    ChunkHit,
    Leg,
    LegRank,
    LegResults,
    RankedResult,
    RetrievalDiagnostics,
    RetrievalMode,
    RetrievalOutcome,
    ScoredHits,
)
from groundwire.domain.scores import Score, ScoreMetric, has_relevance, higher_is_better
from groundwire_client.v1 import retriever_pb2

try:
    from groundwire.api import _wire as compiled
except ImportError:  # built without a C compiler
    compiled = None  # type: ignore[assignment]

needs_compiled = pytest.mark.skipif(compiled is None, reason="built without a C compiler")


def test_the_compiled_encoder_is_built() -> None:
    """`make setup` builds it (setup.py); a missing one would cost every Retrieve
    ~30 Python protobuf writes a result."""
    assert compiled is not None


def field_by_field(results: tuple[RankedResult, ...]) -> retriever_pb2.RetrieveResponse:
    resp = retriever_pb2.RetrieveResponse()
    for r in results:
        convert._fill_result(resp.results.add(), r)
    return resp


def encoded(results: tuple[RankedResult, ...]) -> retriever_pb2.RetrieveResponse:
    resp = retriever_pb2.RetrieveResponse()
    resp.MergeFromString(compiled.results(results, convert._METRICS, convert._LEGS))
    return resp


_TEXTS = ["", "a", "doc-7.md", "Ünïcödé ✓ 𝄞", "x" * 127, "y" * 128, "z" * 20_000, "\x00nul"]
_RAWS = [0.0, -0.0, 1.5, -2.25, 1e-300, 3.4e38, math.inf, -math.inf, math.nan, 7.0]
_INTS = [0, 1, 127, 128, 16_383, 16_384, 2**31, 2**32 - 1]


def score(rng: random.Random) -> Score:
    metric = rng.choice(list(ScoreMetric))
    raw = rng.choice(_RAWS)
    if rng.random() < 0.5:
        return Score.of(metric, raw)
    # Any combination the message can hold, relevance 0.0 included.
    relevance = rng.choice([None, 0.0, -0.0, 0.5, 1.0])
    return Score(raw, metric, rng.random() < 0.5, relevance)


def result(rng: random.Random) -> RankedResult:
    main = score(rng)
    metadata = {rng.choice(_TEXTS): rng.choice(_TEXTS) for _ in range(rng.choice([0, 0, 1, 3]))}
    hit = ChunkHit(
        rng.choice(_TEXTS),
        rng.choice(_TEXTS),
        rng.choice(_TEXTS),
        rng.choice(_INTS),
        rng.choice(_INTS),
        rng.choice(_TEXTS),
        rng.choice(_TEXTS),
        metadata,
        main,
    )
    legs = tuple(
        LegRank(
            rng.choice(list(Leg)), rng.choice(_INTS), main if rng.random() < 0.5 else score(rng)
        )
        for _ in range(rng.choice([0, 1, 1, 2, 5]))
    )
    return RankedResult(hit, rng.choice(_INTS), main, legs)


@needs_compiled
@pytest.mark.parametrize("seed", range(150))
def test_the_same_message_as_field_by_field(seed: int) -> None:
    rng = random.Random(seed)
    results = tuple(result(rng) for _ in range(rng.choice([0, 1, 3, 10, 40])))
    want, got = field_by_field(results), encoded(results)
    assert got.SerializeToString(deterministic=True) == want.SerializeToString(deterministic=True)
    for w, g in zip(want.results, got.results, strict=True):
        # Presence, which the serialized forms carry, read back explicitly.
        assert g.HasField("score") and g.HasField("span") and w.HasField("span")
        assert g.score.HasField("relevance") == w.score.HasField("relevance")
        assert [p.score.HasField("relevance") for p in g.provenance] == [
            p.score.HasField("relevance") for p in w.provenance
        ]
        # -0.0 and NaN survive as their bits.
        assert math.copysign(1.0, g.score.raw_score) == math.copysign(1.0, w.score.raw_score)
        assert math.isnan(g.score.raw_score) == math.isnan(w.score.raw_score)


@needs_compiled
def test_the_outcome_converts_through_the_encoder() -> None:
    rng = random.Random(7)
    results = tuple(result(rng) for _ in range(10))
    outcome = RetrievalOutcome(results, RetrievalDiagnostics(RetrievalMode.LEXICAL, 10))
    resp = convert.outcome_to_proto(outcome)
    assert list(resp.results) == list(field_by_field(results).results)
    assert resp.diagnostics.applied_top_k == 10


@needs_compiled
@pytest.mark.parametrize("seed", range(60))
def test_a_single_leg_from_its_hits(seed: int) -> None:
    """leg_results writes what single_leg's results hold, without building them."""
    rng = random.Random(seed)
    hits = [result(rng).hit for _ in range(rng.choice([0, 1, 10, 30]))]
    leg = rng.choice(list(Leg))
    ranked = single_leg(leg, hits, rng.choice([1, 10, 100]))
    assert isinstance(ranked, LegResults)
    want = field_by_field(tuple(ranked))
    got = retriever_pb2.RetrieveResponse()
    got.MergeFromString(compiled.leg_results(ranked.hits, leg, convert._METRICS, convert._LEGS))
    assert got.SerializeToString(deterministic=True) == want.SerializeToString(deterministic=True)
    outcome = RetrievalOutcome(ranked, RetrievalDiagnostics(RetrievalMode.LEXICAL, 10))
    assert list(convert.outcome_to_proto(outcome).results) == list(want.results)


def _with_hit(r: RankedResult, **changes: object) -> RankedResult:
    fields = {name: getattr(r.hit, name) for name in ChunkHit.__dataclass_fields__}
    fields.update(changes)
    return RankedResult(ChunkHit(**fields), r.rank, r.score, r.provenance)


@needs_compiled
@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"start": -1}, ValueError),
        ({"end": 2**32}, ValueError),
        ({"end": 2**70}, ValueError),
        ({"content": None}, TypeError),
        ({"start": 1.5}, TypeError),
        ({"metadata": {"k": 1}}, TypeError),
        ({"metadata": {1: "v"}}, TypeError),
        ({"title": "\ud800"}, UnicodeEncodeError),
    ],
)
def test_refuses_what_field_by_field_refuses(change: dict[str, object], error: type) -> None:
    good = result(random.Random(1))
    bad = (good, _with_hit(good, **change))
    with pytest.raises(error):
        field_by_field(bad)
    with pytest.raises(error):
        compiled.results(bad, convert._METRICS, convert._LEGS)


@needs_compiled
def test_a_bytes_string_is_refused() -> None:
    """Stricter than upb, which takes UTF-8 bytes for a string field: the domain's
    strings are str, so bytes there is a bug to surface, not to encode."""
    good = result(random.Random(1))
    with pytest.raises(TypeError):
        compiled.results((_with_hit(good, document_id=b"doc"),), convert._METRICS, convert._LEGS)


@needs_compiled
def test_refuses_bad_arguments() -> None:
    good = (result(random.Random(2)),)
    with pytest.raises(TypeError):
        compiled.results(good, convert._METRICS)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        compiled.results(good, list(convert._METRICS), convert._LEGS)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        compiled.results(5, convert._METRICS, convert._LEGS)  # type: ignore[arg-type]
    with pytest.raises(KeyError):
        compiled.results(good, {}, convert._LEGS)
    with pytest.raises(AttributeError):
        compiled.results((object(),), convert._METRICS, convert._LEGS)  # type: ignore[arg-type]
    bad_rank = RankedResult(good[0].hit, -3, good[0].score, good[0].provenance)
    with pytest.raises(ValueError):
        compiled.results((bad_rank,), convert._METRICS, convert._LEGS)


@dataclass(frozen=True)
class Record:
    """A store's record of a chunk: a hit's fields but its score, `text` under
    another name (as the memory store's rows hold it)."""

    document_id: str
    chunk_id: str
    text: str
    start: int
    end: int
    title: str
    section: str
    metadata: Mapping[str, str]

    @property
    def content(self) -> str:
        return self.text


def records(rng: random.Random, n: int) -> list[Record]:
    """Records holding random hits' fields (result's, without their scores)."""
    hits = [result(rng).hit for _ in range(n)]
    return [
        Record(h.document_id, h.chunk_id, h.content, h.start, h.end, h.title, h.section, h.metadata)
        for h in hits
    ]


_NO_RELEVANCE = [m for m in ScoreMetric if not has_relevance(m)]


@needs_compiled
@pytest.mark.parametrize("seed", range(60))
def test_a_single_leg_from_a_stores_records(seed: int) -> None:
    """record_results writes what single_leg's results of ScoredHits hold, without
    building a hit or a result."""
    rng = random.Random(seed)
    rows = records(rng, rng.choice([0, 1, 10, 30]))
    raws = [rng.choice(_RAWS) for _ in rows]
    metric, leg = rng.choice(_NO_RELEVANCE), rng.choice(list(Leg))
    ranked = single_leg(leg, ScoredHits(rows, raws, metric), rng.choice([1, 10, 100]))
    assert type(ranked.hits) is ScoredHits  # kept as records, not copied into hits
    want = field_by_field(tuple(ranked))
    hits = ranked.hits
    got = retriever_pb2.RetrieveResponse()
    got.MergeFromString(
        compiled.record_results(
            hits.records,
            hits.raws,
            convert._METRICS[metric],
            higher_is_better(metric),
            convert._LEGS[leg],
        )
    )
    assert got.SerializeToString(deterministic=True) == want.SerializeToString(deterministic=True)
    outcome = RetrievalOutcome(ranked, RetrievalDiagnostics(RetrievalMode.LEXICAL, 10))
    assert list(convert.outcome_to_proto(outcome).results) == list(want.results)


@needs_compiled
def test_record_results_refuses_bad_arguments() -> None:
    rows = records(random.Random(4), 3)
    bm25 = convert._METRICS[ScoreMetric.BM25]
    lexical = convert._LEGS[Leg.LEXICAL]
    with pytest.raises(ValueError):
        compiled.record_results(rows, [1.0, 2.0], bm25, True, lexical)
    with pytest.raises(TypeError):
        compiled.record_results(rows, [1.0, 2.0, "x"], bm25, True, lexical)  # type: ignore[list-item]
    with pytest.raises(TypeError):
        compiled.record_results(rows, [1.0] * 3, "BM25", True, lexical)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        compiled.record_results(rows, [1.0] * 3, bm25, True)  # type: ignore[call-arg]
    with pytest.raises(AttributeError):
        compiled.record_results([object()], [1.0], bm25, True, lexical)  # type: ignore[list-item]
    with pytest.raises(ValueError):
        compiled.record_results([replace(rows[0], start=-1)], [1.0], bm25, True, lexical)
