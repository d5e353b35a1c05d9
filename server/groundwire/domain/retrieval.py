"""Retrieval value types: queries, filters, hits and results."""

from __future__ import annotations

import enum
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, overload

from groundwire.domain.access import PUBLIC_READERS, Readers
from groundwire.domain.analysis import PLAIN, Analyzer
from groundwire.domain.bm25 import DEFAULT_MAX_TERMS
from groundwire.domain.metadata_ranges import RangeCondition
from groundwire.domain.profile import EMPTY_PROFILE, RetrievalProfile
from groundwire.domain.scores import Score, ScoreMetric, has_relevance
from groundwire.domain.usage import NO_USAGE, EmbeddingUsage
from groundwire.domain.values import IdentityEnum, fast_init


class RetrievalMode(enum.Enum):
    """How candidates are retrieved."""

    SEMANTIC = "SEMANTIC"
    LEXICAL = "LEXICAL"
    HYBRID = "HYBRID"


class Leg(IdentityEnum):
    """A retrieval leg."""

    SEMANTIC = "SEMANTIC"
    LEXICAL = "LEXICAL"


@dataclass(frozen=True, slots=True)
class MetadataFilter:
    """Conjunction of exact-match conditions (key -> accepted values, any of) and
    range conditions (key -> ranges the value must lie in, all of them;
    domain.metadata_ranges says how values are read)."""

    conditions: Mapping[str, frozenset[str]] = field(default_factory=dict)
    ranges: Mapping[str, tuple[RangeCondition, ...]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.conditions and not self.ranges


@dataclass(frozen=True, slots=True)
class Scope:
    """What a search may see: one tenant ("" = untenanted), metadata conditions and
    the caller's readers (which documents' access lists it passes: domain.access).

    Applied inside the store, before ranking, on every path. The default readers
    are least privilege: documents without an access list only."""

    tenant: str = ""
    filter: MetadataFilter = field(default_factory=MetadataFilter)
    readers: Readers = PUBLIC_READERS


@fast_init
@dataclass(frozen=True, slots=True)
class LexicalQuery:
    """A parsed lexical query: loose terms plus exact phrases (each a token list)."""

    text: str
    terms: tuple[str, ...]
    phrases: tuple[tuple[str, ...], ...]
    # At most this many distinct terms are scored, the rarest first (bm25.select_terms).
    max_terms: int = DEFAULT_MAX_TERMS
    # The analyzer that produced `terms` and `phrases` (the index's): a store that
    # verifies a phrase on a chunk's text analyzes the text with it.
    analyzer: Analyzer = PLAIN
    # Explicit BM25 query-term weights (term, weight > 0), one per distinct term, in
    # place of the terms' counts: set by pseudo-relevance feedback (domain.feedback).
    # Empty means each term weighs its count in `terms` (qtf).
    weights: tuple[tuple[str, float], ...] = ()

    def term_weights(self) -> dict[str, float]:
        """Each distinct term's BM25 query weight, in query order: `weights` when
        set, else the term's count in `terms`. Both stores score with these."""
        if self.weights:
            return dict(self.weights)
        counts: dict[str, float] = {}
        for term in self.terms:
            counts[term] = counts.get(term, 0.0) + 1.0
        return counts


@fast_init
@dataclass(frozen=True, slots=True)
class ChunkHit:
    """One chunk as a store returns it from one leg: its identity, text and leg score."""

    document_id: str
    chunk_id: str
    content: str
    start: int
    end: int
    title: str
    section: str
    metadata: Mapping[str, str]
    score: Score

    @property
    def key(self) -> tuple[str, str]:
        return (self.document_id, self.chunk_id)


class HitFields(Protocol):
    """A store's record of a chunk with a hit's fields, but its score (ScoredHits)."""

    @property
    def document_id(self) -> str: ...
    @property
    def chunk_id(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def title(self) -> str: ...
    @property
    def section(self) -> str: ...
    @property
    def metadata(self) -> Mapping[str, str]: ...


class ScoredHits(Sequence[ChunkHit]):
    """Hits in rank order kept as a store's records and their raw scores under one
    metric that has no relevance (BM25, dot product, ...): each ChunkHit, with the
    Score that Score.of gives, is built when read. A store returns hits so where it
    holds its chunks as objects, and a single-leg Retrieve writes them to the wire
    from the records (api/convert.py) without building a hit. Immutable; equal to a
    list or tuple of the same hits (as the list of hits it stands for)."""

    __slots__ = ("metric", "raws", "records")

    def __init__(
        self, records: Sequence[HitFields], raws: Sequence[float], metric: ScoreMetric
    ) -> None:
        if len(records) != len(raws):
            raise ValueError("one score a record")
        if has_relevance(metric):
            raise ValueError("ScoredHits holds scores without a relevance")
        self.records = tuple(records)
        self.raws = tuple(raws)
        self.metric = metric

    def _hit(self, position: int) -> ChunkHit:
        r = self.records[position]
        score = Score.of(self.metric, self.raws[position])
        return ChunkHit(
            r.document_id,
            r.chunk_id,
            r.content,
            r.start,
            r.end,
            r.title,
            r.section,
            r.metadata,
            score,
        )

    def __len__(self) -> int:
        return len(self.records)

    @overload
    def __getitem__(self, index: int) -> ChunkHit: ...

    @overload
    def __getitem__(self, index: slice) -> ScoredHits: ...

    def __getitem__(self, index: int | slice) -> ChunkHit | ScoredHits:
        if isinstance(index, slice):
            return ScoredHits(self.records[index], self.raws[index], self.metric)
        if not -len(self.records) <= index < len(self.records):
            raise IndexError("hit index out of range")
        return self._hit(index % len(self.records))

    def __iter__(self) -> Iterator[ChunkHit]:
        return map(self._hit, range(len(self.records)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (ScoredHits, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # (as a list of hits)

    def __repr__(self) -> str:
        return f"ScoredHits({list(self)!r})"


@fast_init
@dataclass(frozen=True, slots=True)
class LexicalResult:
    """What a store's lexical search returns: the hits in rank order and how many
    distinct query terms were scored and pruned by the term limit."""

    hits: Sequence[ChunkHit]
    terms_scored: int = 0
    terms_pruned: int = 0


@fast_init
@dataclass(frozen=True, slots=True)
class LegRank:
    """A leg's rank (one-based) and score for one fused result."""

    leg: Leg
    rank: int
    score: Score


@fast_init
@dataclass(frozen=True, slots=True)
class RankedResult:
    """A final retrieval result: the hit, the score it is ranked by and its provenance."""

    hit: ChunkHit
    rank: int
    score: Score
    provenance: tuple[LegRank, ...]


class LegResults(Sequence[RankedResult]):
    """One leg's hits as the final results, in the order given: the i-th hit (from
    1) ranks i by its own score, with that leg alone as its provenance (what a
    single-leg retrieval returns, fusion.single_leg). Each RankedResult is built
    when read, so a single-leg Retrieve, whose response is written from the hits
    (api/convert.py), builds none. Immutable; equal to a tuple of the same results
    (and hashed as that tuple), as the tuple of results it stands for."""

    __slots__ = ("hits", "leg")

    def __init__(self, leg: Leg, hits: Sequence[ChunkHit]) -> None:
        self.leg = leg
        # (ScoredHits is immutable and kept as it is: read, not copied)
        self.hits: Sequence[ChunkHit] = hits if type(hits) is ScoredHits else tuple(hits)

    def _result(self, position: int) -> RankedResult:
        hit = self.hits[position]
        rank = position + 1
        return RankedResult(hit, rank, hit.score, (LegRank(self.leg, rank, hit.score),))

    def __len__(self) -> int:
        return len(self.hits)

    @overload
    def __getitem__(self, index: int) -> RankedResult: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[RankedResult, ...]: ...

    def __getitem__(self, index: int | slice) -> RankedResult | tuple[RankedResult, ...]:
        if isinstance(index, slice):
            return tuple(map(self._result, range(*index.indices(len(self.hits)))))
        if not -len(self.hits) <= index < len(self.hits):
            raise IndexError("result index out of range")
        return self._result(index % len(self.hits))

    def __iter__(self) -> Iterator[RankedResult]:
        return map(self._result, range(len(self.hits)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LegResults):
            return self.leg is other.leg and list(self.hits) == list(other.hits)
        if isinstance(other, tuple):
            return tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"LegResults({self.leg!r}, {self.hits!r})"


class FusionMethod(enum.Enum):
    """How HYBRID combines its legs (domain.fusion)."""

    # Weighted reciprocal rank fusion: sum of weight / (k + rank).
    RRF = "rrf"
    # Convex combination of each leg's min-max normalized scores, the weights
    # normalized to sum to 1.
    MIN_MAX = "min-max"


@fast_init
@dataclass(frozen=True, slots=True)
class FusionSettings:
    """Fusion settings: the method, RRF's k, and the leg weights (both methods)."""

    k: int = 20
    semantic_weight: float = 1.0
    lexical_weight: float = 1.0
    method: FusionMethod = FusionMethod.RRF


# RM3 defaults (domain.feedback): Anserini's fbDocs 10, fbTerms 10, originalQueryWeight 0.5.
FEEDBACK_DEFAULT_DOCUMENTS = 10
FEEDBACK_DEFAULT_TERMS = 10
FEEDBACK_DEFAULT_ORIGINAL_WEIGHT = 0.5
FEEDBACK_MAX_DOCUMENTS = 100
FEEDBACK_MAX_TERMS = 100


@dataclass(frozen=True, slots=True)
class FeedbackSettings:
    """Pseudo-relevance feedback (RM3, domain.feedback) settings: how many of the
    first run's best chunks are read, how many expansion terms are kept, and the
    original query's weight lambda in [0, 1]."""

    documents: int = FEEDBACK_DEFAULT_DOCUMENTS
    terms: int = FEEDBACK_DEFAULT_TERMS
    original_weight: float = FEEDBACK_DEFAULT_ORIGINAL_WEIGHT

    def __post_init__(self) -> None:
        if not 1 <= self.documents <= FEEDBACK_MAX_DOCUMENTS:
            raise ValueError(f"feedback documents must be in [1, {FEEDBACK_MAX_DOCUMENTS}]")
        if not 1 <= self.terms <= FEEDBACK_MAX_TERMS:
            raise ValueError(f"feedback terms must be in [1, {FEEDBACK_MAX_TERMS}]")
        if not (math.isfinite(self.original_weight) and 0.0 <= self.original_weight <= 1.0):
            raise ValueError("the original query weight must be in [0, 1]")


@fast_init
@dataclass(frozen=True, slots=True)
class RetrievalRequest:
    """A validated retrieval request."""

    index_name: str
    text: str
    mode: RetrievalMode
    top_k: int
    scope: Scope
    fusion: FusionSettings
    leg_depth: int
    # What the lexical leg parses instead of `text` (a keyword query), if set.
    lexical_text: str | None = None
    # The lowest published index version the caller accepts (read-your-writes
    # across replicas); 0 accepts any.
    min_version: int = 0
    # RM3 pseudo-relevance feedback for the lexical leg (lexical and hybrid); None = off.
    feedback: FeedbackSettings | None = None


@dataclass(slots=True)
class RetrievalDiagnostics:
    """Content-free timings and counts of one retrieval."""

    mode: RetrievalMode
    top_k: int
    semantic_hits: int = 0
    lexical_hits: int = 0
    embedding_seconds: float = 0.0
    semantic_seconds: float = 0.0
    lexical_seconds: float = 0.0
    total_seconds: float = 0.0
    index_version: int = 0
    phrase_count: int = 0
    lexical_terms_scored: int = 0
    lexical_terms_pruned: int = 0
    fusion: FusionSettings | None = None
    leg_depth: int = 0
    # Whether the tenant searched holds no published document at all (checked
    # only when nothing was found).
    tenant_scope_empty: bool = False
    # The query embedding's usage; truncated_texts > 0 means the query was longer
    # than the model's token window.
    embedding_usage: EmbeddingUsage = NO_USAGE
    # Terms pseudo-relevance feedback added to the lexical query (0 when it was off
    # or found nothing to add), and the chunks it read.
    feedback_terms: int = 0
    feedback_documents: int = 0
    # What decided the results (domain/profile.py); set by the engine.
    profile: RetrievalProfile = EMPTY_PROFILE


@fast_init
@dataclass(frozen=True, slots=True)
class RetrievalOutcome:
    """Results in rank order plus diagnostics."""

    # A tuple, or a single leg's LegResults (equal to the tuple it stands for).
    results: Sequence[RankedResult]
    diagnostics: RetrievalDiagnostics
