"""OpenAICompatibleEmbedder against a local server speaking the real protocol."""

from __future__ import annotations

import time
import traceback
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import numpy as np
import pytest

from groundwire.domain.errors import ErrorKind
from groundwire.providers.embeddings.base import (
    EmbeddingError,
    EmbeddingProvider,
    EmbeddingTask,
    embed_all,
)
from groundwire.providers.embeddings.openai_compat import OpenAICompatibleEmbedder
from tests.support.http_standin import closing_clients
from tests.support.openai_embeddings_standin import (
    Behaviour,
    OpenAIEmbeddingsStandIn,
    standin_vector,
)

pytestmark = pytest.mark.timeout(15)

DIMS = 8
API_KEY = "sk-standin-secret-4242"
SECRET_TEXTS = ["patient 7731 has diabetes", "account pin is 0042", "third private note"]

Factory = Callable[..., OpenAICompatibleEmbedder]


@pytest.fixture(scope="module")
def standin() -> Iterator[OpenAIEmbeddingsStandIn]:
    with OpenAIEmbeddingsStandIn(dimensions=DIMS, delay=1.0) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_standin(standin: OpenAIEmbeddingsStandIn) -> None:
    standin.reset()


@pytest.fixture
async def make(standin: OpenAIEmbeddingsStandIn) -> AsyncIterator[Factory]:
    def build(**overrides: Any) -> OpenAICompatibleEmbedder:
        kwargs: dict[str, Any] = {
            "base_url": standin.base_url,
            "model": "standin-embed-v1",
            "dimensions": DIMS,
            "timeout": 5.0,
        }
        return OpenAICompatibleEmbedder(**{**kwargs, **overrides})

    async with closing_clients(build) as factory:
        yield factory


def expected(texts: list[str], dims: int = DIMS) -> np.ndarray[Any, np.dtype[np.float32]]:
    return np.asarray([standin_vector(t, dims) for t in texts], dtype=np.float32)


async def test_embeds_in_order_with_the_protocol_request(
    make: Factory, standin: OpenAIEmbeddingsStandIn
) -> None:
    embedder = make()
    texts = ["alpha", "beta", "gamma"]

    vectors = await embedder.embed(texts, EmbeddingTask.DOCUMENT)

    assert vectors.dtype == np.float32 and vectors.shape == (3, DIMS)
    assert np.array_equal(vectors, expected(texts))
    (request,) = standin.requests
    assert request.method == "POST" and request.path == "/v1/embeddings"
    assert request.body == {"model": "standin-embed-v1", "input": texts, "encoding_format": "float"}
    assert "authorization" not in request.headers
    assert isinstance(embedder, EmbeddingProvider)
    assert embedder.info.provider == "openai-compatible"
    assert embedder.info.model == "standin-embed-v1"
    assert embedder.info.dimensions == DIMS
    assert embedder.info.normalized is False


async def test_orders_results_by_index_not_position(
    make: Factory, standin: OpenAIEmbeddingsStandIn
) -> None:
    standin.behaviour = Behaviour.SHUFFLED
    texts = ["one", "two", "three", "four"]

    vectors = await make().embed(texts, EmbeddingTask.DOCUMENT)

    assert np.array_equal(vectors, expected(texts))


async def test_sends_bearer_api_key(make: Factory, standin: OpenAIEmbeddingsStandIn) -> None:
    await make(api_key=API_KEY).embed(["x"], EmbeddingTask.QUERY)

    (request,) = standin.requests
    assert request.headers["authorization"] == f"Bearer {API_KEY}"


async def test_embed_all_splits_into_ordered_batches(
    make: Factory, standin: OpenAIEmbeddingsStandIn
) -> None:
    texts = ["t0", "t1", "t2", "t3", "t4"]

    vectors = await embed_all(make(max_batch_size=2), texts, EmbeddingTask.DOCUMENT)

    assert [r.body["input"] for r in standin.requests] == [["t0", "t1"], ["t2", "t3"], ["t4"]]
    assert np.array_equal(vectors, expected(texts))


async def test_oversized_batch_is_split_by_the_adapter_too(
    make: Factory, standin: OpenAIEmbeddingsStandIn
) -> None:
    texts = [f"t{i}" for i in range(5)]

    vectors = await make(max_batch_size=3).embed(texts, EmbeddingTask.DOCUMENT)

    assert [len(r.body["input"]) for r in standin.requests] == [3, 2]
    assert np.array_equal(vectors, expected(texts))


async def test_task_prefixes(make: Factory, standin: OpenAIEmbeddingsStandIn) -> None:
    embedder = make(query_prefix="query: ", document_prefix="passage: ")

    await embedder.embed(["find me"], EmbeddingTask.QUERY)
    docs = await embedder.embed(["a doc"], EmbeddingTask.DOCUMENT)

    assert [r.body["input"] for r in standin.requests] == [["query: find me"], ["passage: a doc"]]
    assert np.array_equal(docs, expected(["passage: a doc"]))


async def test_sends_dimensions_only_when_asked(
    make: Factory, standin: OpenAIEmbeddingsStandIn
) -> None:
    await make().embed(["x"], EmbeddingTask.DOCUMENT)
    vectors = await make(dimensions=4, send_dimensions=True).embed(["x"], EmbeddingTask.DOCUMENT)

    first, second = standin.requests
    assert "dimensions" not in first.body
    assert second.body["dimensions"] == 4
    assert vectors.shape == (1, 4)


async def test_normalize(make: Factory) -> None:
    texts = ["alpha", "beta"]
    embedder = make(normalize=True)

    vectors = await embedder.embed(texts, EmbeddingTask.DOCUMENT)

    assert embedder.info.normalized is True
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    raw = expected(texts)
    assert np.allclose(vectors, raw / np.linalg.norm(raw, axis=1, keepdims=True), atol=1e-6)


async def test_empty_input_sends_nothing(make: Factory, standin: OpenAIEmbeddingsStandIn) -> None:
    vectors = await make().embed([], EmbeddingTask.DOCUMENT)

    assert vectors.shape == (0, DIMS)
    assert standin.requests == []


def assert_content_free(exc: EmbeddingError) -> None:
    """Nothing the caller or server said may surface in the error, its chain or
    its formatted traceback."""
    rendered = "".join(traceback.format_exception(exc)) + repr(exc) + str(exc)
    for secret in [*SECRET_TEXTS, API_KEY, "sk-standin"]:
        assert secret not in rendered
    # Chained exceptions would keep the request (with its Authorization header)
    # or the response body reachable from the error.
    assert exc.__cause__ is None
    assert exc.__context__ is None


@pytest.mark.parametrize(
    ("behaviour", "kind", "fragment"),
    [
        (Behaviour.RATE_LIMITED, ErrorKind.UNAVAILABLE, "HTTP 429"),
        (Behaviour.SERVER_ERROR, ErrorKind.UNAVAILABLE, "HTTP 500"),
        (Behaviour.BAD_REQUEST, ErrorKind.UNAVAILABLE, "rejected the request (HTTP 400)"),
        (Behaviour.MALFORMED_JSON, ErrorKind.UNAVAILABLE, "non-JSON"),
        (Behaviour.WRONG_COUNT, ErrorKind.UNAVAILABLE, "count mismatch: expected 3, got 2"),
        (Behaviour.DUPLICATE_INDEX, ErrorKind.UNAVAILABLE, "duplicate index"),
        (Behaviour.MISSING_INDEX, ErrorKind.UNAVAILABLE, "no integer index"),
        (Behaviour.INDEX_OUT_OF_RANGE, ErrorKind.UNAVAILABLE, "index out of range"),
        (Behaviour.WRONG_DIMENSION, ErrorKind.UNAVAILABLE, f"expected {DIMS}, got {DIMS - 1}"),
        (Behaviour.NAN_VALUES, ErrorKind.UNAVAILABLE, "non-finite"),
    ],
)
async def test_refuses_failures_and_bad_payloads(
    make: Factory,
    standin: OpenAIEmbeddingsStandIn,
    behaviour: Behaviour,
    kind: ErrorKind,
    fragment: str,
) -> None:
    standin.behaviour = behaviour

    with pytest.raises(EmbeddingError) as caught:
        await make(api_key=API_KEY).embed(SECRET_TEXTS, EmbeddingTask.DOCUMENT)

    exc = caught.value
    assert exc.reason == "EMBEDDING_PROVIDER_FAILED"
    assert exc.kind is kind
    assert fragment in exc.message
    assert len(standin.requests) == 1, "the adapter must not retry"
    assert_content_free(exc)


async def test_client_errors_are_told_apart_from_server_errors(
    make: Factory, standin: OpenAIEmbeddingsStandIn
) -> None:
    messages = {}
    for behaviour in (Behaviour.BAD_REQUEST, Behaviour.RATE_LIMITED, Behaviour.SERVER_ERROR):
        standin.behaviour = behaviour
        with pytest.raises(EmbeddingError) as caught:
            await make().embed(["x"], EmbeddingTask.DOCUMENT)
        messages[behaviour] = caught.value.message

    assert len(set(messages.values())) == 3
    assert "rejected" in messages[Behaviour.BAD_REQUEST]
    assert "rejected" not in messages[Behaviour.SERVER_ERROR]


async def test_timeout_is_deadline_exceeded_and_bounded(
    make: Factory, standin: OpenAIEmbeddingsStandIn
) -> None:
    standin.behaviour = Behaviour.SLOW
    delay, standin.delay = standin.delay, 30.0  # answers after 30 s
    embedder = make(api_key=API_KEY, timeout=0.3)

    started = time.monotonic()
    try:
        with pytest.raises(EmbeddingError) as caught:
            await embedder.embed(SECRET_TEXTS, EmbeddingTask.DOCUMENT)
    finally:
        standin.delay = delay
    elapsed = time.monotonic() - started

    assert caught.value.kind is ErrorKind.DEADLINE_EXCEEDED
    assert "timed out" in caught.value.message
    # Far below the 30 s answer, and holds on a loaded machine (load 10, 2 cores).
    assert elapsed < 10.0
    assert_content_free(caught.value)


async def test_connection_refused_is_unavailable(make: Factory) -> None:
    # A port that was just served and released: nothing listens there now.
    closed = OpenAIEmbeddingsStandIn().start()
    url = closed.base_url
    closed.stop()
    embedder = make(base_url=url, api_key=API_KEY, timeout=2.0)

    with pytest.raises(EmbeddingError) as caught:
        await embedder.embed(SECRET_TEXTS, EmbeddingTask.DOCUMENT)

    assert caught.value.kind is ErrorKind.UNAVAILABLE
    assert "connection failed (ConnectError)" in caught.value.message
    assert_content_free(caught.value)


async def test_closed_client_fails_as_provider_error(make: Factory) -> None:
    embedder = make()
    await embedder.aclose()

    with pytest.raises(EmbeddingError, match="closed"):
        await embedder.embed(["x"], EmbeddingTask.DOCUMENT)


@pytest.mark.parametrize(
    "overrides",
    [
        {"model": "  "},
        {"model": ""},
        {"base_url": "127.0.0.1:8000/v1"},
        {"base_url": "ftp://127.0.0.1/v1"},
        {"dimensions": 0},
        {"dimensions": True},
        {"timeout": 0},
        {"max_batch_size": 0},
        {"api_key": " "},
    ],
)
def test_rejects_bad_configuration(overrides: dict[str, Any]) -> None:
    kwargs: dict[str, Any] = {
        "base_url": "http://127.0.0.1:1/v1",
        "model": "m",
        "dimensions": DIMS,
        **overrides,
    }
    with pytest.raises(ValueError):
        OpenAICompatibleEmbedder(**kwargs)
