"""A deterministic offline reranker for tests and demos.

Relevance is the share of the query's distinct words that occur in the
candidate (word sets after lowercasing), so it is always in [0, 1], needs no
model and gives the same answer every time. Candidates at or above
`minimum_answerable_relevance` are ANSWERABLE; the aggregate is ANSWERABLE when
any candidate is.

`behaviour` makes it misbehave the way real providers do, so every failure path
of the stage can be exercised (and demonstrated over grpcurl):

- "unavailable" / "rate_limited" / "rejected": the matching provider failure;
- "error": an unexpected exception (classified RerankerFailed by the stage);
- "hang": never answers (until cancelled); "slow": answers after `delay_seconds`;
- "duplicate" / "missing" / "unknown" / "non_finite" / "out_of_range": a
  response that breaks one output validation rule (`validate_output`).

It records the identities (never the texts) it was asked about, and how often a
call was cancelled, for tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal, get_args

from groundwire.domain.reranking import (
    Answerability,
    CandidateKey,
    RerankCandidate,
    RerankerOutput,
    RerankFailureCode,
    reranker_failure,
)
from groundwire.domain.text import phrase_words
from groundwire.providers.rerankers.base import output_from_scores, validate_threshold

__all__ = ["Behaviour", "OfflineReranker", "term_overlap"]

PROVIDER = "offline"
Behaviour = Literal[
    "normal",
    "unavailable",
    "rate_limited",
    "rejected",
    "error",
    "hang",
    "slow",
    "duplicate",
    "missing",
    "unknown",
    "non_finite",
    "out_of_range",
]
BEHAVIOURS: tuple[Behaviour, ...] = get_args(Behaviour)
_FAILURES: dict[str, RerankFailureCode] = {
    "unavailable": RerankFailureCode.UNAVAILABLE,
    "rate_limited": RerankFailureCode.RATE_LIMITED,
    "rejected": RerankFailureCode.REJECTED,
}


def term_overlap(query: str, text: str) -> float:
    """Share of the query's distinct words found in `text`, in [0, 1]."""
    wanted = set(phrase_words(query))
    if not wanted:
        return 0.0
    return len(wanted & set(phrase_words(text))) / len(wanted)


class OfflineReranker:
    """Query-term-overlap reranker with optional misbehaviour (see module docstring)."""

    def __init__(
        self,
        *,
        behaviour: Behaviour = "normal",
        delay_seconds: float = 1.0,
        minimum_answerable_relevance: float = 0.5,
        model: str = "term-overlap-v1",
    ) -> None:
        if behaviour not in BEHAVIOURS:
            raise ValueError("unknown offline reranker behaviour")
        if delay_seconds < 0:
            raise ValueError("delay_seconds must not be negative")
        self.behaviour: Behaviour = behaviour
        self.delay_seconds = delay_seconds
        self._threshold = validate_threshold(minimum_answerable_relevance)
        self._model = model
        self.calls: list[tuple[CandidateKey, ...]] = []
        self.cancelled = 0

    @property
    def name(self) -> str:
        return PROVIDER

    @property
    def model(self) -> str:
        return self._model

    async def rerank(self, query: str, candidates: Sequence[RerankCandidate]) -> RerankerOutput:
        """Term-overlap relevance, or the configured misbehaviour."""
        self.calls.append(tuple(c.key for c in candidates))
        behaviour = self.behaviour
        if behaviour in _FAILURES:
            raise reranker_failure(_FAILURES[behaviour], "offline reranker failure (configured)")
        if behaviour == "error":
            raise RuntimeError("offline reranker exploded (configured)")
        if behaviour in ("hang", "slow"):
            try:
                await asyncio.sleep(86_400 if behaviour == "hang" else self.delay_seconds)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        if not candidates:
            return RerankerOutput((), Answerability.UNKNOWN)
        output = output_from_scores(
            candidates, [term_overlap(query, c.content) for c in candidates], self._threshold
        )
        return _corrupt(output, behaviour)

    async def aclose(self) -> None:
        return None


def _corrupt(output: RerankerOutput, behaviour: Behaviour) -> RerankerOutput:
    items = list(output.judgements)
    if behaviour == "duplicate":
        items.append(items[0])
    elif behaviour == "missing":
        items.pop()
    elif behaviour == "unknown":
        items[-1] = replace(items[-1], document_id=items[-1].document_id + "#unknown")
    elif behaviour == "non_finite":
        items[0] = replace(items[0], relevance=float("nan"))
    elif behaviour == "out_of_range":
        items[0] = replace(items[0], relevance=1.5)
    else:
        return output
    return RerankerOutput(tuple(items), output.answerability)
