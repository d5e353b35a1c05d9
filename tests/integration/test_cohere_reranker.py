"""CohereReranker (the official `cohere` SDK) against a local server speaking
Cohere's real `/v2/rerank` protocol, run through the reranking stage."""

from __future__ import annotations

import logging
import socket
import time
import traceback
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from groundwire.domain.reranking import (
    Answerability,
    FailurePolicy,
    RerankCandidate,
    RerankerError,
    RerankFailureCode,
    RerankOutcome,
    validate_output,
)
from groundwire.providers.rerankers.cohere import DEFAULT_MODEL, CohereReranker
from groundwire.reranking.stage import RerankingMetrics, RerankingStage, StageSettings
from tests.support.cohere_standin import Behaviour, CohereStandIn
from tests.support.http_standin import LoopbackStandIn, RecordedRequest

pytestmark = pytest.mark.timeout(30)

API_KEY = "co-standin-secret-7d1e"
QUERY = "parental leave weeks for new parents"
TEXTS = [
    "Employees accrue vacation monthly; patient 7731 record.",
    "New parents get sixteen weeks of parental leave.",
    "The VPN client must be updated before remote work.",
    "Parental leave requests go to HR four weeks ahead.",
    "Expense reports are due at the end of each month.",
    "Leave for new parents can be split into two blocks.",
    "Account recovery requires two-factor verification.",
    "Weeks of onboarding cover security training.",
]

Factory = Callable[..., CohereReranker]


def cands(n: int = 5) -> list[RerankCandidate]:
    return [RerankCandidate(f"doc-{i}", "c0", TEXTS[i - 1], i) for i in range(1, n + 1)]


@pytest.fixture(scope="module")
def standin() -> Iterator[CohereStandIn]:
    with CohereStandIn(delay=1.5) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(standin: CohereStandIn) -> None:
    standin.reset()


@pytest.fixture
async def make(standin: CohereStandIn) -> AsyncIterator[Factory]:
    created: list[CohereReranker] = []

    def factory(**overrides: Any) -> CohereReranker:
        kwargs: dict[str, Any] = {"api_key": API_KEY, "base_url": standin.base_url}
        kwargs.update(overrides)
        reranker = CohereReranker(**kwargs)
        created.append(reranker)
        return reranker

    yield factory
    for reranker in created:
        await reranker.aclose()


@pytest.fixture
def stage() -> RerankingStage:
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("groundwire")
    return RerankingStage(metrics=RerankingMetrics(meter))


def assert_content_free(text: str) -> None:
    assert API_KEY not in text
    assert QUERY not in text
    for t in TEXTS:
        assert t not in text
    assert "patient 7731" not in text


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


async def test_minimum_answerable_relevance_decides_answerability(
    make: Factory, stage: RerankingStage
) -> None:
    result = await stage.run(
        make(minimum_answerable_relevance=0.5), QUERY, cands(5), StageSettings()
    )
    by_doc = {c.document_id: c.answerability for c in result.order}
    # doc-2: 5/6, doc-4: 3/6 (exactly at the threshold), doc-1: 0.
    assert by_doc["doc-2"] is Answerability.ANSWERABLE
    assert by_doc["doc-4"] is Answerability.ANSWERABLE
    assert by_doc["doc-1"] is Answerability.NOT_ANSWERABLE
    assert result.metadata.answerability is Answerability.ANSWERABLE

    strict = await stage.run(
        make(minimum_answerable_relevance=0.9), QUERY, cands(5), StageSettings()
    )
    assert strict.metadata.answerability is Answerability.NOT_ANSWERABLE
    assert {c.answerability for c in strict.order} == {Answerability.NOT_ANSWERABLE}


async def test_model_and_max_tokens_are_configurable(
    make: Factory, standin: CohereStandIn, stage: RerankingStage
) -> None:
    await stage.run(
        make(model="rerank-v3.5", max_tokens_per_doc=512), QUERY, cands(2), StageSettings()
    )
    (request,) = standin.requests
    assert request.body["model"] == "rerank-v3.5"
    assert request.body["max_tokens_per_doc"] == 512


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
async def test_failures_fall_back_to_the_original_order_without_retrying(
    make: Factory,
    standin: CohereStandIn,
    stage: RerankingStage,
    behaviour: Behaviour,
    code: RerankFailureCode,
    caplog: pytest.LogCaptureFixture,
) -> None:
    standin.behaviour = behaviour
    with caplog.at_level(logging.DEBUG):
        result = await stage.run(make(), QUERY, cands(5), StageSettings())

    md = result.metadata
    assert md.outcome is RerankOutcome.FALLBACK
    assert md.failure_code is code and not md.timed_out
    assert [c.document_id for c in result.order] == [f"doc-{i}" for i in range(1, 6)]
    assert all(c.rerank_relevance is None for c in result.order)
    # No retries inside the adapter: one request, even for 429 and 5xx.
    assert len(standin.requests) == 1
    assert_content_free(repr(result))
    assert_content_free(" ".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records))


@pytest.mark.parametrize(("behaviour", "code"), FAILURES, ids=lambda v: getattr(v, "value", ""))
async def test_adapter_errors_carry_no_key_body_or_text(
    make: Factory, standin: CohereStandIn, behaviour: Behaviour, code: RerankFailureCode
) -> None:
    standin.behaviour = behaviour
    with pytest.raises(RerankerError) as info:
        output = await make().rerank(QUERY, cands(5))
        # Output-rule violations are caught by the stage's validation.
        validate_output(cands(5), output)
    err = info.value
    assert err.failure_code is code
    assert err.__cause__ is None and err.__context__ is None
    rendered = "".join(traceback.format_exception(err)) + repr(err) + str(err.metadata)
    assert_content_free(rendered)


async def test_slow_response_past_the_timeout_is_cut_off(
    make: Factory, standin: CohereStandIn, stage: RerankingStage
) -> None:
    standin.behaviour = Behaviour.SLOW
    started = time.perf_counter()
    result = await stage.run(make(), QUERY, cands(5), StageSettings(timeout_seconds=0.3))
    elapsed = time.perf_counter() - started

    assert elapsed < 0.3 + 0.2
    md = result.metadata
    assert md.outcome is RerankOutcome.FALLBACK and md.timed_out
    assert md.failure_code is RerankFailureCode.TIMEOUT
    assert len(standin.requests) == 1


async def test_slow_response_under_fail_policy_fails(
    make: Factory, standin: CohereStandIn, stage: RerankingStage
) -> None:
    standin.behaviour = Behaviour.SLOW
    result = await stage.run(
        make(),
        QUERY,
        cands(3),
        StageSettings(timeout_seconds=0.3, failure_policy=FailurePolicy.FAIL),
    )
    assert result.metadata.outcome is RerankOutcome.FAILED and result.metadata.timed_out


async def test_unreachable_server_is_unavailable(make: Factory, stage: RerankingStage) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Nothing listens on `port` any more.
    result = await stage.run(
        make(base_url=f"http://127.0.0.1:{port}"), QUERY, cands(2), StageSettings()
    )
    assert result.metadata.outcome is RerankOutcome.FALLBACK
    assert result.metadata.failure_code is RerankFailureCode.UNAVAILABLE


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
            CohereReranker(**kwargs)  # type: ignore[arg-type]
