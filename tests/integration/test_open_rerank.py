"""OpenRerankReranker against a local server speaking the open `/rerank` protocol
(TEI and Jina/vLLM/Infinity flavours), run through the reranking stage."""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from groundwire.domain.reranking import (
    Answerability,
    RerankCandidate,
    RerankerError,
    RerankFailureCode,
    RerankOutcome,
    validate_output,
)
from groundwire.providers.rerankers.open_rerank import OpenRerankReranker
from groundwire.reranking.stage import RerankingMetrics, RerankingStage, StageSettings
from tests.support.rerank_standin import Behaviour, OpenRerankStandIn

pytestmark = pytest.mark.timeout(30)

API_KEY = "tei-standin-secret-93af"
QUERY = "parental leave weeks for new parents"
TEXTS = [
    "Employees accrue vacation monthly; patient 7731 record.",
    "New parents get sixteen weeks of parental leave.",
    "The VPN client must be updated before remote work.",
    "Parental leave requests go to HR four weeks ahead.",
    "Expense reports are due at the end of each month.",
    "Leave for new parents can be split into two blocks.",
    "Account recovery requires two-factor verification.",
]
FLAVOURS = ["tei", "jina"]

Factory = Callable[..., OpenRerankReranker]


def cands(n: int = 5) -> list[RerankCandidate]:
    return [RerankCandidate(f"doc-{i}", "c0", TEXTS[i - 1], i) for i in range(1, n + 1)]


@pytest.fixture(scope="module", params=FLAVOURS)
def standin(request: pytest.FixtureRequest) -> Iterator[OpenRerankStandIn]:
    with OpenRerankStandIn(flavour=request.param, delay=1.5) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(standin: OpenRerankStandIn) -> None:
    standin.reset()


@pytest.fixture
async def make(standin: OpenRerankStandIn) -> AsyncIterator[Factory]:
    created: list[OpenRerankReranker] = []

    def factory(**overrides: Any) -> OpenRerankReranker:
        kwargs: dict[str, Any] = {
            "base_url": standin.base_url,
            "flavour": standin.flavour,
            "api_key": API_KEY,
        }
        kwargs.update(overrides)
        reranker = OpenRerankReranker(**kwargs)
        created.append(reranker)
        return reranker

    yield factory
    for reranker in created:
        await reranker.aclose()


@pytest.fixture
def stage() -> RerankingStage:
    meter = MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("groundwire")
    return RerankingStage(metrics=RerankingMetrics(meter))


def assert_content_free(text: str) -> None:
    assert API_KEY not in text and QUERY not in text
    for t in TEXTS:
        assert t not in text


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


async def test_threshold_answerability(make: Factory, stage: RerankingStage) -> None:
    result = await stage.run(
        make(minimum_answerable_relevance=0.8), QUERY, cands(5), StageSettings()
    )
    by_doc = {c.document_id: c.answerability for c in result.order}
    assert by_doc["doc-2"] is Answerability.ANSWERABLE  # 5/6
    assert by_doc["doc-4"] is Answerability.NOT_ANSWERABLE  # 3/6
    assert result.metadata.answerability is Answerability.ANSWERABLE


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


FAILURES = [
    (Behaviour.RATE_LIMITED, RerankFailureCode.RATE_LIMITED),
    (Behaviour.SERVER_ERROR, RerankFailureCode.UNAVAILABLE),
    (Behaviour.UNAVAILABLE, RerankFailureCode.UNAVAILABLE),
    (Behaviour.BAD_REQUEST, RerankFailureCode.REJECTED),
    (Behaviour.UNAUTHORIZED, RerankFailureCode.REJECTED),
    (Behaviour.MALFORMED_JSON, RerankFailureCode.INVALID_RESPONSE),
    (Behaviour.WRONG_SHAPE, RerankFailureCode.INVALID_RESPONSE),
    (Behaviour.MISSING_INDEX, RerankFailureCode.INVALID_RESPONSE),
    (Behaviour.DUPLICATE_INDEX, RerankFailureCode.INVALID_RESPONSE),
    (Behaviour.INDEX_OUT_OF_RANGE, RerankFailureCode.INVALID_RESPONSE),
    (Behaviour.MISSING_RESULT, RerankFailureCode.INVALID_RESPONSE),
    (Behaviour.NAN_SCORE, RerankFailureCode.INVALID_RESPONSE),
    (Behaviour.SCORE_ABOVE_ONE, RerankFailureCode.INVALID_RESPONSE),
]


@pytest.mark.parametrize(("behaviour", "code"), FAILURES, ids=lambda v: getattr(v, "value", ""))
async def test_failures_fall_back_without_retrying_or_leaking(
    make: Factory,
    standin: OpenRerankStandIn,
    stage: RerankingStage,
    behaviour: Behaviour,
    code: RerankFailureCode,
    caplog: pytest.LogCaptureFixture,
) -> None:
    standin.behaviour = behaviour
    with caplog.at_level(logging.DEBUG):
        result = await stage.run(make(), QUERY, cands(5), StageSettings())
    md = result.metadata
    assert md.outcome is RerankOutcome.FALLBACK and md.failure_code is code
    assert [c.document_id for c in result.order] == [f"doc-{i}" for i in range(1, 6)]
    assert len(standin.requests) == 1
    assert_content_free(repr(result))
    assert_content_free(" ".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records))

    standin.reset()
    standin.behaviour = behaviour
    with pytest.raises(RerankerError) as info:
        validate_output(cands(5), await make().rerank(QUERY, cands(5)))
    err = info.value
    assert err.failure_code is code
    assert err.__cause__ is None and err.__context__ is None
    assert_content_free("".join(traceback.format_exception(err)) + repr(err))


async def test_slow_response_past_the_timeout_is_cut_off(
    make: Factory, standin: OpenRerankStandIn, stage: RerankingStage
) -> None:
    standin.behaviour = Behaviour.SLOW
    started = time.perf_counter()
    result = await stage.run(make(), QUERY, cands(5), StageSettings(timeout_seconds=0.3))
    assert time.perf_counter() - started < 0.3 + 0.2
    assert result.metadata.timed_out
    assert result.metadata.failure_code is RerankFailureCode.TIMEOUT
    assert result.metadata.outcome is RerankOutcome.FALLBACK


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
            OpenRerankReranker(**kwargs)  # type: ignore[arg-type]
