"""OpenRerankReranker against a local server speaking the open `/rerank` protocol
(TEI and Jina/vLLM/Infinity flavours), run through the reranking stage: what is
the protocol's own (request shapes, no key, logits, a custom path). The failure
table, timeouts and answerability every remote adapter shares are in
test_remote_rerankers.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from groundwire.domain.reranking import RerankFailureCode, RerankOutcome
from groundwire.providers.rerankers.open_rerank import OpenRerankReranker
from groundwire.reranking.stage import RerankingStage, StageSettings
from tests.support.http_standin import closing_clients
from tests.support.rerank_standin import Behaviour, OpenRerankStandIn
from tests.support.reranking import QUERY, TEXTS, cands, metered_stage

pytestmark = pytest.mark.timeout(30)

API_KEY = "tei-standin-secret-93af"
FLAVOURS = ["tei", "jina"]

Factory = Callable[..., OpenRerankReranker]


@pytest.fixture(scope="module", params=FLAVOURS)
def standin(request: pytest.FixtureRequest) -> Iterator[OpenRerankStandIn]:
    with OpenRerankStandIn(flavour=request.param, delay=1.5) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(standin: OpenRerankStandIn) -> None:
    standin.reset()


@pytest.fixture
async def make(standin: OpenRerankStandIn) -> AsyncIterator[Factory]:
    def build(**overrides: Any) -> OpenRerankReranker:
        kwargs: dict[str, Any] = {
            "base_url": standin.base_url,
            "flavour": standin.flavour,
            "api_key": API_KEY,
        }
        return OpenRerankReranker(**{**kwargs, **overrides})

    async with closing_clients(build) as factory:
        yield factory


@pytest.fixture
def stage() -> RerankingStage:
    return metered_stage()


async def test_reranks_with_the_flavours_request_shape(
    make: Factory, standin: OpenRerankStandIn, stage: RerankingStage
) -> None:
    result = await stage.run(make(model="bge-reranker-v2-m3"), QUERY, cands(7), StageSettings())

    assert result.metadata.outcome is RerankOutcome.SUCCEEDED
    assert [c.document_id for c in result.order] == [
        "doc-2",
        "doc-4",
        "doc-1",
        "doc-3",
        "doc-5",
        "doc-6",
        "doc-7",
    ]
    (request,) = standin.requests
    assert request.path == "/rerank"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    body = request.body
    if standin.flavour == "tei":
        assert body == {
            "query": QUERY,
            "texts": TEXTS[:5],
            "raw_scores": False,
            "return_text": False,
            "truncate": True,
        }
    else:
        assert body == {
            "model": "bge-reranker-v2-m3",
            "query": QUERY,
            "documents": TEXTS[:5],
            "top_n": 5,
            "return_documents": False,
        }


async def test_no_authorization_header_without_a_key(
    make: Factory, standin: OpenRerankStandIn, stage: RerankingStage
) -> None:
    await stage.run(make(api_key=None), QUERY, cands(2), StageSettings())
    assert "authorization" not in standin.requests[0].headers


async def test_logits_are_invalid_unless_the_sigmoid_is_configured(
    make: Factory, standin: OpenRerankStandIn, stage: RerankingStage
) -> None:
    standin.behaviour = Behaviour.LOGITS
    plain = await stage.run(make(), QUERY, cands(5), StageSettings())
    assert plain.metadata.outcome is RerankOutcome.FALLBACK
    assert plain.metadata.failure_code is RerankFailureCode.INVALID_RESPONSE

    squashed = await stage.run(make(apply_sigmoid=True), QUERY, cands(5), StageSettings())
    assert squashed.metadata.outcome is RerankOutcome.SUCCEEDED
    assert [c.document_id for c in squashed.order][:2] == ["doc-2", "doc-4"]
    relevances = [c.rerank_relevance for c in squashed.order]
    assert all(r is not None and 0 < r < 1 for r in relevances)


async def test_a_custom_path_is_used(standin: OpenRerankStandIn, stage: RerankingStage) -> None:
    reranker = OpenRerankReranker(
        base_url=standin.base_url, flavour=standin.flavour, path="/v1/rerank"
    )
    try:
        result = await stage.run(reranker, QUERY, cands(2), StageSettings())
    finally:
        await reranker.aclose()
    # The stand-in serves /rerank only: a 404 is a rejected request.
    assert standin.requests[0].path == "/v1/rerank"
    assert result.metadata.failure_code is RerankFailureCode.REJECTED


def test_construction_rejects_bad_settings() -> None:
    for kwargs in (
        {"base_url": "localhost:8080"},
        {"base_url": "http://h", "flavour": "cohere"},
        {"base_url": "http://h", "path": "rerank"},
        {"base_url": "http://h", "api_key": " "},
        {"base_url": "http://h", "minimum_answerable_relevance": -0.1},
    ):
        with pytest.raises(ValueError):
            OpenRerankReranker(**kwargs)
