"""Citations an application can render, over real gRPC: each citation and
context item carries title, section, span and a bounded snippet; citations are
numbered in order of first appearance; a citation's snippet is the cited
sentence(s) with its span; Execute and ExecuteStream agree."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import grpc
import pytest

from groundwire.app.config import parse_config
from groundwire.app.defaults import HANDBOOK_DIR
from groundwire.providers.chat.base import ChatResponse, Usage
from groundwire_client.v1 import agent_pb2 as ag
from groundwire_client.v1 import agent_pb2_grpc, retriever_pb2_grpc
from groundwire_client.v1 import retriever_pb2 as rt
from tests.support.chat import ScriptedModel
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(60)

SNIPPET_CHARS = 60
QUESTION = "How many weeks of parental leave under POL-HR-014?"
# The model cites source 3 first, then 1, then 3 again.
ANSWER = "Sixteen weeks [3]. Eligibility is described too [1]. Again [3]."


def config() -> dict[str, object]:
    return {
        "auth": {"mode": "disabled"},
        "indexes": {
            "demo": {
                "sources": [{"kind": "directory", "path": str(HANDBOOK_DIR), "glob": "**/*.md"}],
                "ingestion": {"strategy": "on_startup"},
            }
        },
        "models": {"offline": {"kind": "offline"}},
        "agent_limits": {"citation_snippet_chars": SNIPPET_CHARS},
        "agents": {
            "cites": {
                "name": "Cites",
                "model": "offline/extractive-v1",
                "rag": {"index": "demo", "retrieval_mode": "lexical", "mode": "grounded"},
            },
            "extractive": {
                "name": "Extractive",
                "model": "offline/extractive-v1",
                "rag": {"index": "demo", "retrieval_mode": "lexical", "mode": "grounded"},
            },
        },
    }


@pytest.fixture(scope="module")
async def app() -> AsyncIterator[RunningApp]:
    async with serving(parse_config(config())) as running:
        registry = running.components.agents
        model = ScriptedModel(default=ChatResponse(ANSWER, usage=Usage(5, 5), model="s-1"))
        registry.register(replace(registry.get("cites"), model=model))
        yield running


@pytest.fixture(scope="module")
async def channel(app: RunningApp) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        yield ch


def request_input() -> ag.ExecutionInput:
    return ag.ExecutionInput(agent_id="cites", message=QUESTION)


async def chunk_texts(channel: grpc.aio.Channel) -> dict[tuple[str, str], rt.RetrievalResult]:
    stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
    query = rt.RagQuery(index_name="demo", text=QUESTION, mode=rt.RETRIEVAL_MODE_LEXICAL, top_k=100)
    response = await stub.Retrieve(rt.RetrieveRequest(query=query), timeout=30)
    return {(r.document_id, r.chunk_id): r for r in response.results}


async def test_citations_carry_title_span_and_a_bounded_snippet(
    channel: grpc.aio.Channel,
) -> None:
    stub = agent_pb2_grpc.AgentServiceStub(channel)
    result = (await stub.Execute(ag.ExecuteRequest(input=request_input()), timeout=30)).result
    assert result.answer == ANSWER  # verbatim: markers are never rewritten server-side
    assert [c.source_number for c in result.citations] == [3, 1]
    assert [c.display_number for c in result.citations] == [1, 2]
    chunks = await chunk_texts(channel)
    for c in result.citations:
        item = result.rag.context[c.source_number - 1]
        assert (c.document_id, c.chunk_id) == (item.document_id, item.chunk_id)
        full = chunks[(c.document_id, c.chunk_id)]
        assert c.title == item.title == full.title and c.title
        assert c.section == item.section == full.section
        assert (c.span.start, c.span.end) == (item.span.start, item.span.end)
        assert c.span.end > c.span.start
        # The snippet is the cited sentence(s), or the chunk's beginning when no
        # sentence shares a word with the citing one; snippet_span locates it.
        assert 0 < len(c.snippet) <= SNIPPET_CHARS
        assert c.span.start <= c.snippet_span.start < c.snippet_span.end <= c.span.end
        offset = c.snippet_span.start - c.span.start
        assert full.content[offset : offset + len(c.snippet)] == c.snippet
        assert c.snippet_span.end - c.snippet_span.start == len(c.snippet)
        rest = full.content[offset + len(c.snippet) :]
        if c.snippet_truncated and len(c.snippet) < SNIPPET_CHARS:
            assert rest[0].isspace()  # cut at a word boundary
        assert c.start_page == c.end_page == 0  # Markdown has no pages
        # Context items keep the chunk's beginning.
        body = full.content.lstrip()
        assert body.startswith(item.snippet) and 0 < len(item.snippet) <= SNIPPET_CHARS
        assert item.snippet_truncated == (len(body.rstrip()) > len(item.snippet))
    assert any(i.snippet_truncated for i in result.rag.context)
    # Only the evidence carries content: candidates and the rest stay content-free.
    rag = result.rag
    for item in [*rag.candidates, *rag.accepted, *rag.rejected, *rag.context_excluded]:
        assert item.snippet == item.title == item.section == ""


async def test_execute_and_stream_report_identical_citations(
    channel: grpc.aio.Channel,
) -> None:
    stub = agent_pb2_grpc.AgentServiceStub(channel)
    unary = (await stub.Execute(ag.ExecuteRequest(input=request_input()), timeout=30)).result
    events = [
        e
        async for e in stub.ExecuteStream(
            ag.ExecuteStreamRequest(input=request_input()), timeout=30
        )
    ]
    streamed = events[-1].result
    assert events[-1].type == ag.EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED
    # Non-empty, so the comparison cannot pass on two empty lists.
    assert [c.source_number for c in unary.citations] == [3, 1]
    assert list(streamed.citations) == list(unary.citations)
    assert list(streamed.rag.context) == list(unary.rag.context)
    deltas = "".join(e.text_delta for e in events)
    assert deltas.strip() == streamed.answer == unary.answer  # the model text, as streamed


def folded(text: str) -> str:
    return " ".join(text.split()).lower()


async def test_an_extractive_answer_cites_the_sentences_it_copied(
    channel: grpc.aio.Channel,
) -> None:
    """The offline model copies evidence sentences verbatim: each citation's
    snippet is (the beginning of) a sentence the answer holds."""
    stub = agent_pb2_grpc.AgentServiceStub(channel)
    inp = ag.ExecutionInput(agent_id="extractive", message=QUESTION)
    result = (await stub.Execute(ag.ExecuteRequest(input=inp), timeout=30)).result
    assert result.citations, result.answer
    chunks = await chunk_texts(channel)
    answer = folded(result.answer)
    for c in result.citations:
        full = chunks[(c.document_id, c.chunk_id)]
        offset = c.snippet_span.start - c.span.start
        assert full.content[offset : offset + len(c.snippet)] == c.snippet
        assert folded(c.snippet) in answer, (c.snippet, result.answer)


HTML_PAGE = """<html><head><title>Travel policy</title></head><body><main>
<h1 id="travel">Travel policy</h1>
<p>Trips are booked through the portal.</p>
<h2 id="hotels">Hotels</h2>
<p>Hotel stays are capped at 150 euros per night in every city.</p>
<h2 id="meals">Meals</h2>
<p>Meals are reimbursed with receipts only.</p>
</main></body></html>"""


async def test_an_html_citation_links_to_the_section_it_cites(tmp_path: Path) -> None:
    (tmp_path / "travel.html").write_text(HTML_PAGE)
    cfg = config()
    cfg["indexes"] = {
        "demo": {
            "sources": [{"kind": "directory", "path": str(tmp_path), "glob": "*.html"}],
            "ingestion": {"strategy": "on_startup"},
        }
    }
    async with (
        serving(parse_config(cfg)) as running,
        grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as ch,
    ):
        stub = agent_pb2_grpc.AgentServiceStub(ch)
        inp = ag.ExecutionInput(agent_id="extractive", message="What is the cap for hotel stays?")
        result = (await stub.Execute(ag.ExecuteRequest(input=inp), timeout=30)).result
    assert result.citations, result.answer
    (c,) = [c for c in result.citations if "150 euros" in c.snippet]
    assert c.document_id == "travel.html" and c.anchor == "hotels"
    assert c.start_page == c.end_page == 0
