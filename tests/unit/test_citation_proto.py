"""Citations on the wire: the cited sentence as snippet with its document span,
and a PDF chunk's pages."""

from __future__ import annotations

import pytest

from groundwire.agents.events import Citation, ExecutionResult, RagMetadata
from groundwire.api.agent_convert import citations_to_proto
from groundwire.domain.anchors import ANCHORS_KEY
from groundwire.domain.pages import PAGE_STARTS_KEY
from groundwire.domain.retrieval import ChunkHit, Leg, LegRank, RankedResult
from groundwire.domain.scores import Score, ScoreMetric

pytestmark = pytest.mark.timeout(5)

# A document of three pages; the chunk starts at offset 100, on page 1.
CHUNK = "Flights need approval. Hotels are capped at 150 euros. Meals need receipts."
START = 100
PAGES = {PAGE_STARTS_KEY: "1:0,2:130,3:400", "team": "finance"}


def result(answer: str, metadata: dict[str, str]) -> ExecutionResult:
    score = Score.of(ScoreMetric.COSINE_SIMILARITY, 0.9)
    hit = ChunkHit("travel.pdf", "c1", CHUNK, START, START + len(CHUNK), "T", "", metadata, score)
    ranked = RankedResult(hit, 1, score, (LegRank(Leg.SEMANTIC, 1, score),))
    return ExecutionResult(
        "e",
        "a",
        answer=answer,
        rag=RagMetadata(context=[ranked]),
        citations=[Citation(1, "travel.pdf", "c1")],
    )


def test_a_citation_carries_the_cited_sentence_its_span_and_pages() -> None:
    (c,) = citations_to_proto(result("Hotels are capped at 150 euros. [1]", PAGES))
    assert c.snippet == "Hotels are capped at 150 euros."
    assert not c.snippet_truncated
    offset = CHUNK.index("Hotels")
    assert (c.snippet_span.start, c.snippet_span.end) == (
        START + offset,
        START + offset + len(c.snippet),
    )
    assert (c.span.start, c.span.end) == (START, START + len(CHUNK))
    # The chunk runs from offset 100 (page 1) over offset 130 (page 2).
    assert (c.start_page, c.end_page) == (1, 2)


def test_without_overlap_the_snippet_is_the_chunk_start_and_without_pages_none() -> None:
    (c,) = citations_to_proto(result("Unrelated statement here [1].", {}), snippet_chars=20)
    assert c.snippet == "Flights need" and c.snippet_truncated
    assert (c.snippet_span.start, c.snippet_span.end) == (START, START + len("Flights need"))
    assert (c.start_page, c.end_page) == (0, 0)
    (empty,) = citations_to_proto(result("Hotels are capped. [1]", {}), snippet_chars=0)
    assert empty.snippet == "" and not empty.HasField("snippet_span")


def test_an_html_citation_names_the_nearest_anchor_before_the_cited_sentence() -> None:
    # "intro" starts before the chunk, "hotels" inside it before the cited sentence,
    # "meals" after it.
    hotels = START + CHUNK.index("Hotels")
    anchors = {ANCHORS_KEY: f"0:intro,{hotels - 1}:hotels,{START + CHUNK.index('Meals')}:meals"}
    (c,) = citations_to_proto(result("Hotels are capped at 150 euros. [1]", anchors))
    assert c.anchor == "hotels"
    (first,) = citations_to_proto(result("Flights need approval. [1]", anchors))
    assert first.anchor == "intro"
    (none,) = citations_to_proto(result("Hotels are capped. [1]", {}))
    assert none.anchor == ""
