"""Retrieval value types: queries, filters, hits and results."""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from groundwire.domain.access import PUBLIC_READERS, Readers
from groundwire.domain.analysis import PLAIN, Analyzer
from groundwire.domain.bm25 import DEFAULT_MAX_TERMS
from groundwire.domain.metadata_ranges import RangeCondition
from groundwire.domain.profile import RetrievalProfile
from groundwire.domain.scores import Score
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


@fast_init
@dataclass(frozen=True, slots=True)
class LexicalResult:
    """What a store's lexical search returns: the hits in rank order and how many
    distinct query terms were scored and pruned by the term limit."""

    hits: list[ChunkHit]
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
    profile: RetrievalProfile = field(default_factory=RetrievalProfile)


@fast_init
@dataclass(frozen=True, slots=True)
class RetrievalOutcome:
    """Results in rank order plus diagnostics."""

    results: tuple[RankedResult, ...]
    diagnostics: RetrievalDiagnostics
