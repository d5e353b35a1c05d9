"""CohereReranker (the official `cohere` SDK) against a local server speaking
Cohere's real `/v2/rerank` protocol, run through the reranking stage: what is
Cohere's own (the request, top_n, model options). The failure table, timeouts and
answerability every remote adapter shares are in test_remote_rerankers.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from groundwire.domain.reranking import RerankFailureCode, RerankOutcome
from groundwire.providers.rerankers.cohere import DEFAULT_MODEL, CohereReranker
from groundwire.reranking.stage import RerankingStage, StageSettings
from tests.support.cohere_standin import CohereStandIn
from tests.support.http_standin import LoopbackStandIn, RecordedRequest, closing_clients
from tests.support.reranking import QUERY, TEXTS, cands, metered_stage

pytestmark = pytest.mark.timeout(30)

API_KEY = "co-standin-secret-7d1e"

Factory = Callable[..., CohereReranker]


@pytest.fixture(scope="module")
def standin() -> Iterator[CohereStandIn]:
    with CohereStandIn(delay=1.5) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(standin: CohereStandIn) -> None:
    standin.reset()


@pytest.fixture
async def make(standin: CohereStandIn) -> AsyncIterator[Factory]:
    def build(**overrides: Any) -> CohereReranker:
        kwargs: dict[str, Any] = {"api_key": API_KEY, "base_url": standin.base_url}
        return CohereReranker(**{**kwargs, **overrides})

    async with closing_clients(build) as factory:
        yield factory


@pytest.fixture
def stage() -> RerankingStage:
    return metered_stage()


async def test_reranks_with_one_request_of_the_real_protocol(
    make: Factory, standin: CohereStandIn, stage: RerankingStage
) -> None:
    result = await stage.run(make(), QUERY, cands(5), StageSettings())

    md = result.metadata
    assert md.outcome is RerankOutcome.SUCCEEDED and md.ran and md.candidate_count == 5
    # Standin relevance = share of query words in the text.
    assert [c.document_id for c in result.order] == ["doc-2", "doc-4", "doc-1", "doc-3", "doc-5"]
    assert result.order[0].rerank_relevance == pytest.approx(5 / 6)
    (request,) = standin.requests
    assert request.path == "/v2/rerank"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.body["model"] == DEFAULT_MODEL == "rerank-v4.0-fast"
    assert request.body["query"] == QUERY
    assert request.body["documents"] == TEXTS[:5]
    assert request.body["top_n"] == 5


async def test_only_maximum_candidates_are_sent_and_top_n_matches(
    make: Factory, standin: CohereStandIn, stage: RerankingStage
) -> None:
    result = await stage.run(make(), QUERY, cands(8), StageSettings(maximum_candidates=5))
    (request,) = standin.requests
    assert request.body["documents"] == TEXTS[:5]
    assert request.body["top_n"] == 5
    assert [c.document_id for c in result.order][5:] == ["doc-6", "doc-7", "doc-8"]
    assert all(TEXTS[5] not in str(r.body) for r in standin.requests)


async def test_model_and_max_tokens_are_configurable(
    make: Factory, standin: CohereStandIn, stage: RerankingStage
) -> None:
    await stage.run(
        make(model="rerank-v3.5", max_tokens_per_doc=512), QUERY, cands(2), StageSettings()
    )
    (request,) = standin.requests
    assert request.body["model"] == "rerank-v3.5"
    assert request.body["max_tokens_per_doc"] == 512


class _Redirector(LoopbackStandIn):
    """Answers every request with a 307 to `target` (which keeps method and body)."""

    def __init__(self, target: str) -> None:
        super().__init__()
        self.target = target

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                outer._record(RecordedRequest("POST", self.path, {}, None))
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(307)
                self.send_header("Location", outer.target + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        return Handler


async def test_redirects_are_not_followed(
    make: Factory, standin: CohereStandIn, stage: RerankingStage
) -> None:
    # Like every remote provider, the adapter never follows a redirect, which
    # could carry the key and the texts elsewhere (the SDK's own client did).
    with _Redirector(standin.base_url) as redirector:
        result = await stage.run(
            make(base_url=redirector.base_url), QUERY, cands(2), StageSettings()
        )
        assert len(redirector.requests) == 1
    assert result.metadata.outcome is RerankOutcome.FALLBACK
    assert result.metadata.failure_code is RerankFailureCode.REJECTED
    assert standin.requests == []


def test_construction_rejects_bad_settings() -> None:
    for kwargs in (
        {"api_key": "  "},
        {"api_key": "k", "model": ""},
        {"api_key": "k", "base_url": "ftp://x"},
        {"api_key": "k", "minimum_answerable_relevance": 1.5},
        {"api_key": "k", "max_tokens_per_doc": 0},
    ):
        with pytest.raises(ValueError):
            CohereReranker(**kwargs)
