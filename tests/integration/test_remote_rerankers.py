"""The contract every remote reranker adapter keeps, run over each of them against
its local stand-in through the reranking stage: Cohere's `/v2/rerank` (the
official SDK) and the open `/rerank` protocol in its TEI and Jina flavours.

- every HTTP failure and every broken response maps to one failure code, falls
  back to the original order, is never retried, and carries no key, query or text
  (in the result, the logs, or the adapter's error and its traceback);
- a response past the stage's timeout is cut off (FALLBACK, or FAILED under the
  FAIL policy);
- an unreachable server is UNAVAILABLE;
- `minimum_answerable_relevance` decides answerability, a relevance exactly at
  the threshold included.

What differs between adapters (request shapes, model options, logits) stays in
test_cohere_reranker.py and test_open_rerank.py.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from groundwire.domain.reranking import (
    Answerability,
    FailurePolicy,
    RerankerError,
    RerankFailureCode,
    RerankOutcome,
    validate_output,
)
from groundwire.providers.rerankers.base import Reranker
from groundwire.providers.rerankers.cohere import CohereReranker
from groundwire.providers.rerankers.open_rerank import OpenRerankReranker
from groundwire.reranking.stage import RerankingStage, StageSettings
from tests.support.cohere_standin import CohereStandIn
from tests.support.http_standin import closing_clients
from tests.support.rerank_standin import Behaviour, JsonStandIn, OpenRerankStandIn
from tests.support.reranking import QUERY, TEXTS, cands, metered_stage
from tests.support.servers import free_port

pytestmark = pytest.mark.timeout(30)

API_KEY = "remote-standin-secret-5c2e"


@dataclass(frozen=True)
class Remote:
    """One adapter and the stand-in that speaks its protocol."""

    name: str
    standin: Callable[[], JsonStandIn]
    build: Callable[[str, dict[str, Any]], Reranker]  # (base_url, overrides)


def _cohere(base_url: str, overrides: dict[str, Any]) -> Reranker:
    kwargs: dict[str, Any] = {"api_key": API_KEY, "base_url": base_url, **overrides}
    return CohereReranker(**kwargs)


def _open(flavour: str) -> Callable[[str, dict[str, Any]], Reranker]:
    def build(base_url: str, overrides: dict[str, Any]) -> Reranker:
        kwargs: dict[str, Any] = {
            "base_url": base_url,
            "flavour": flavour,
            "api_key": API_KEY,
            **overrides,
        }
        return OpenRerankReranker(**kwargs)

    return build


# A SLOW stand-in answers after this long (or when it stops): far past any timeout
# below, so a result that came back well before it was cut off, however loaded
# the machine.
SLOW_ANSWER_SECONDS = 20.0

REMOTES = [
    Remote("cohere", lambda: CohereStandIn(delay=SLOW_ANSWER_SECONDS), _cohere),
    Remote(
        "open-tei",
        lambda: OpenRerankStandIn(flavour="tei", delay=SLOW_ANSWER_SECONDS),
        _open("tei"),
    ),
    Remote(
        "open-jina",
        lambda: OpenRerankStandIn(flavour="jina", delay=SLOW_ANSWER_SECONDS),
        _open("jina"),
    ),
]

# One table for every adapter: the stand-ins share the failure behaviours.
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

Factory = Callable[..., Reranker]


@pytest.fixture(scope="module", params=REMOTES, ids=lambda remote: remote.name)
def remote(request: pytest.FixtureRequest) -> Remote:
    chosen: Remote = request.param
    return chosen


@pytest.fixture(scope="module")
def standin(remote: Remote) -> Iterator[JsonStandIn]:
    with remote.standin() as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(standin: JsonStandIn) -> None:
    standin.reset()


@pytest.fixture
async def make(remote: Remote, standin: JsonStandIn) -> AsyncIterator[Factory]:
    """Adapters pointed at the stand-in (`base_url=` overrides it); closed after."""

    def build(**overrides: Any) -> Reranker:
        base_url = overrides.pop("base_url", standin.base_url)
        return remote.build(base_url, overrides)

    async with closing_clients(build) as factory:
        yield factory


@pytest.fixture
def stage() -> RerankingStage:
    return metered_stage()


def assert_content_free(text: str) -> None:
    assert API_KEY not in text
    assert QUERY not in text
    for t in TEXTS:
        assert t not in text
    assert "patient 7731" not in text


@pytest.mark.parametrize(("behaviour", "code"), FAILURES, ids=lambda v: getattr(v, "value", ""))
async def test_failures_fall_back_to_the_original_order_without_retrying(
    make: Factory,
    standin: JsonStandIn,
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
    make: Factory, standin: JsonStandIn, behaviour: Behaviour, code: RerankFailureCode
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
    make: Factory, standin: JsonStandIn, stage: RerankingStage
) -> None:
    standin.behaviour = Behaviour.SLOW
    started = time.perf_counter()
    result = await stage.run(make(), QUERY, cands(5), StageSettings(timeout_seconds=0.3))
    elapsed = time.perf_counter() - started

    # Timed out (not an answer), and the stage did not wait for the answer either.
    assert elapsed < SLOW_ANSWER_SECONDS / 2
    md = result.metadata
    assert md.outcome is RerankOutcome.FALLBACK and md.timed_out
    assert md.failure_code is RerankFailureCode.TIMEOUT
    assert len(standin.requests) == 1


async def test_slow_response_under_fail_policy_fails(
    make: Factory, standin: JsonStandIn, stage: RerankingStage
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
    # Nothing listens on a port free_port() just released.
    reranker = make(base_url=f"http://127.0.0.1:{free_port()}")
    result = await stage.run(reranker, QUERY, cands(2), StageSettings())
    assert result.metadata.outcome is RerankOutcome.FALLBACK
    assert result.metadata.failure_code is RerankFailureCode.UNAVAILABLE


async def test_minimum_answerable_relevance_decides_answerability(
    make: Factory, stage: RerankingStage
) -> None:
    result = await stage.run(
        make(minimum_answerable_relevance=0.5), QUERY, cands(5), StageSettings()
    )
    by_doc = {c.document_id: c.answerability for c in result.order}
    # Stand-in relevance = share of query words: doc-2 5/6, doc-4 3/6 (exactly at
    # the threshold), doc-1 0.
    assert by_doc["doc-2"] is Answerability.ANSWERABLE
    assert by_doc["doc-4"] is Answerability.ANSWERABLE
    assert by_doc["doc-1"] is Answerability.NOT_ANSWERABLE
    assert result.metadata.answerability is Answerability.ANSWERABLE

    strict = await stage.run(
        make(minimum_answerable_relevance=0.9), QUERY, cands(5), StageSettings()
    )
    assert strict.metadata.answerability is Answerability.NOT_ANSWERABLE
    assert {c.answerability for c in strict.order} == {Answerability.NOT_ANSWERABLE}
