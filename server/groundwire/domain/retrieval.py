"""Retrieval value types: queries, filters, hits and results."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from groundwire.domain.analysis import PLAIN, Analyzer
from groundwire.domain.bm25 import DEFAULT_MAX_TERMS
from groundwire.domain.metadata_ranges import RangeCondition
from groundwire.domain.scores import Score
from groundwire.domain.usage import NO_USAGE, EmbeddingUsage


class RetrievalMode(enum.Enum):
    """How candidates are retrieved."""

    SEMANTIC = "SEMANTIC"
    LEXICAL = "LEXICAL"
    HYBRID = "HYBRID"


class Leg(enum.Enum):
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
    """What a search may see: one tenant ("" = untenanted) and metadata conditions.

    Applied inside the store, before ranking, on every path."""

    tenant: str = ""
    filter: MetadataFilter = field(default_factory=MetadataFilter)


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


@dataclass(frozen=True, slots=True)
class LexicalResult:
    """What a store's lexical search returns: the hits in rank order and how many
    distinct query terms were scored and pruned by the term limit."""

    hits: list[ChunkHit]
    terms_scored: int = 0
    terms_pruned: int = 0


@dataclass(frozen=True, slots=True)
class LegRank:
    """A leg's rank (one-based) and score for one fused result."""

    leg: Leg
    rank: int
    score: Score


@dataclass(frozen=True, slots=True)
class RankedResult:
    """A final retrieval result: the hit, the score it is ranked by and its provenance."""

    hit: ChunkHit
    rank: int
    score: Score
    provenance: tuple[LegRank, ...]


@dataclass(frozen=True, slots=True)
class FusionSettings:
    """Weighted RRF settings."""

    k: int = 20
    semantic_weight: float = 1.0
    lexical_weight: float = 1.0


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


@dataclass(frozen=True, slots=True)
class RetrievalOutcome:
    """Results in rank order plus diagnostics."""

    results: tuple[RankedResult, ...]
    diagnostics: RetrievalDiagnostics
