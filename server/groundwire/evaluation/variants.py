"""Retrieval variants: the configurations a run evaluates, read from TOML
(`[[variant]]` tables, optionally a `[defaults]` table merged under each one)."""

from __future__ import annotations

import tomllib
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from groundwire.evaluation.common import EvalError, StrictFile

__all__ = ["FeedbackSpec", "RerankSpec", "Variant", "load_variants"]


class RerankSpec(StrictFile):
    """Second stage over the first-stage chunk candidates."""

    reranker: str = ""  # configured reranker name; "" = the server's default
    candidates: int = Field(20, ge=1, le=1000)  # first-stage chunks sent
    timeout_seconds: float | None = Field(None, gt=0, le=300)
    failure_policy: Literal["fail", "use_original_order"] | None = None
    # Keep only reranked candidates with rerank relevance >= this (a threshold
    # variant); the rest, and candidates beyond `candidates`, are dropped.
    minimum_relevance: float | None = Field(None, ge=0, le=1)

    def descriptor(self) -> dict[str, Any]:
        return {
            "reranker": self.reranker or "(server default)",
            "candidates": self.candidates,
            "timeout_seconds": self.timeout_seconds,
            "failure_policy": self.failure_policy or "(server default)",
            "minimum_relevance": self.minimum_relevance,
        }


class FeedbackSpec(StrictFile):
    """RM3 pseudo-relevance feedback for the lexical leg (RagQuery.lexical_feedback);
    an absent field is the server's default."""

    documents: int | None = Field(None, ge=1, le=100)
    terms: int | None = Field(None, ge=1, le=100)
    original_query_weight: float | None = Field(None, ge=0, le=1)

    def descriptor(self) -> dict[str, Any]:
        return {
            "documents": self.documents,
            "terms": self.terms,
            "original_query_weight": self.original_query_weight,
        }


class Variant(StrictFile):
    """One retrieval configuration to evaluate."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+=-]{0,63}$")
    mode: Literal["semantic", "lexical", "hybrid"]
    top_k: int = Field(100, ge=1, le=10_000)  # chunks asked for
    rrf_k: int | None = Field(None, ge=1, le=1000)
    semantic_weight: float | None = Field(None, ge=0, le=10)
    lexical_weight: float | None = Field(None, ge=0, le=10)
    leg_depth: int | None = Field(None, ge=1, le=10_000)
    fusion_method: Literal["rrf", "min-max"] | None = None
    # Drop chunk results whose normalized relevance is absent or below this (as
    # an agent's acceptance threshold does); None keeps everything.
    minimum_relevance: float | None = Field(None, ge=0, le=1)
    rerank: RerankSpec | None = None
    # RM3 feedback for the lexical leg (lexical and hybrid modes); None = off.
    lexical_feedback: FeedbackSpec | None = None
    # BEIR query text is natural language: its double quotes are not phrase
    # operators, so they are replaced by spaces unless "keep" is set.
    query_quotes: Literal["strip", "keep"] = "strip"

    @model_validator(mode="after")
    def _hybrid_only(self) -> Variant:
        fusion = (
            self.rrf_k,
            self.semantic_weight,
            self.lexical_weight,
            self.leg_depth,
            self.fusion_method,
        )
        if self.mode != "hybrid" and any(v is not None for v in fusion):
            raise ValueError(
                "fusion settings (rrf_k, weights, leg_depth, fusion_method) need mode 'hybrid'"
            )
        if self.mode == "semantic" and self.lexical_feedback is not None:
            raise ValueError("lexical_feedback needs mode 'lexical' or 'hybrid'")
        return self

    def descriptor(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "top_k": self.top_k}
        if self.mode == "hybrid":
            out["fusion_requested"] = {
                "rrf_k": self.rrf_k,
                "semantic_weight": self.semantic_weight,
                "lexical_weight": self.lexical_weight,
                "leg_depth": self.leg_depth,
                "method": self.fusion_method,
            }
        out["minimum_relevance"] = self.minimum_relevance
        out["reranker"] = self.rerank.descriptor() if self.rerank else None
        if self.lexical_feedback is not None:
            out["lexical_feedback"] = self.lexical_feedback.descriptor()
        out["query_quotes"] = self.query_quotes
        return out

    def query_text(self, text: str) -> str:
        if self.query_quotes == "strip":
            return " ".join(text.replace('"', " ").split())
        return text


class VariantFile(StrictFile):
    defaults: dict[str, Any] = Field(default_factory=dict)
    variant: list[dict[str, Any]] = Field(min_length=1)


def load_variants(path: Path) -> list[Variant]:
    """Variants from TOML: `[[variant]]` tables, optionally a `[defaults]` table
    merged under each one. Names must be unique."""
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        doc = VariantFile.model_validate(raw)
        variants = [Variant.model_validate({**doc.defaults, **v}) for v in doc.variant]
    except (OSError, tomllib.TOMLDecodeError, ValidationError) as exc:
        raise EvalError(f"invalid variants file {path}: {exc}") from None
    names = [v.name for v in variants]
    dup = [n for n, c in Counter(names).items() if c > 1]
    if dup:
        raise EvalError(f"variant names must be unique: {', '.join(dup)}")
    return variants
