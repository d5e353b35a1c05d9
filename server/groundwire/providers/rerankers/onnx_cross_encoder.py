"""A local cross-encoder: a user-supplied ONNX model directory run in-process.

The directory holds `model.onnx` (or `onnx/model.onnx`, the layout of Hugging
Face exports) and `tokenizer.json`. Each (query, passage) pair is encoded as one
sequence with the tokenizer's own pair template (`[CLS] q [SEP] p [SEP]` with
token types 0/1 for BERT-style models); pairs longer than `max_seq_length`
tokens are truncated longest-first, which in practice cuts the passage. The
model must take `input_ids` and `attention_mask` (and optionally
`token_type_ids`) and return logits of shape [batch], [batch, 1] or [batch, 2].
One logit is turned into a relevance with the sigmoid (what sentence-transformers'
CrossEncoder does for ms-marco-style models); two logits with the softmax
probability of the second (positive) class. The relevance is in [0, 1];
candidates at or above `minimum_answerable_relevance` are ANSWERABLE.

Inference runs in a worker thread so the event loop never blocks. The stage's
timeout cancels the await; a batch already running in onnxruntime finishes in
its thread and its result is dropped.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from groundwire.domain.reranking import (
    Answerability,
    RerankCandidate,
    RerankerOutput,
    RerankFailureCode,
    reranker_failure,
)
from groundwire.providers.embeddings.onnx_local import (
    find_model_file,
    load_tokenizer,
    make_session_options,
    model_inputs,
)
from groundwire.providers.rerankers.base import output_from_scores, validate_threshold

__all__ = ["OnnxCrossEncoderReranker", "logits_to_relevance"]

PROVIDER = "onnx-cross-encoder"


def logits_to_relevance(logits: npt.NDArray[np.floating]) -> npt.NDArray[np.float64]:
    """[batch] or [batch, 1] -> sigmoid; [batch, 2] -> softmax of class 1."""
    arr = np.asarray(logits, dtype=np.float64)
    if arr.ndim == 2 and arr.shape[1] == 2:
        shifted = arr - arr.max(axis=1, keepdims=True)
        exp = np.exp(shifted)
        out: npt.NDArray[np.float64] = exp[:, 1] / exp.sum(axis=1)
        return out
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError("cross-encoder logits must have shape [batch], [batch, 1] or [batch, 2]")
    # Stable sigmoid for large |x|.
    pos = 1.0 / (1.0 + np.exp(-np.abs(arr)))
    result: npt.NDArray[np.float64] = np.where(arr >= 0, pos, 1.0 - pos)
    return result


def _model_file(model_dir: Path) -> Path:
    found = find_model_file(model_dir)
    if found is None:
        # No path in the message: configuration errors are logged.
        raise FileNotFoundError("the cross-encoder directory has no model.onnx")
    return found


class OnnxCrossEncoderReranker:
    """A cross-encoder run with onnxruntime on CPU (see module docstring)."""

    def __init__(
        self,
        *,
        model_dir: str | Path,
        model_name: str | None = None,
        max_seq_length: int = 512,
        batch_size: int = 16,
        intra_op_threads: int | None = None,
        minimum_answerable_relevance: float = 0.5,
    ) -> None:
        directory = Path(model_dir)
        if not 8 <= max_seq_length <= 8192:
            raise ValueError("max_seq_length must be in [8, 8192]")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        threads = intra_op_threads if intra_op_threads is not None else (os.cpu_count() or 2)
        if threads < 1:
            raise ValueError("intra_op_threads must be at least 1")
        tokenizer_file = directory / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise FileNotFoundError("the cross-encoder directory has no tokenizer.json")
        self._threshold = validate_threshold(minimum_answerable_relevance)
        self._batch = batch_size
        self._model = (model_name or directory.name or PROVIDER).strip()
        self._tokenizer: Tokenizer = load_tokenizer(tokenizer_file, max_seq_length)
        self._session: ort.InferenceSession | None = ort.InferenceSession(
            str(_model_file(directory)),
            sess_options=make_session_options(threads),
            providers=["CPUExecutionProvider"],
        )
        self._input_names = self._inspect(self._session)
        self._lock = threading.Lock()
        # Fail at load, not on the first request, when the output is not logits.
        probe = self.score_sync("probe", ["probe passage"])
        if probe.shape != (1,) or not np.isfinite(probe).all():
            raise ValueError("the cross-encoder produced unusable scores on the load probe")

    @staticmethod
    def _inspect(session: ort.InferenceSession) -> tuple[str, ...]:
        return model_inputs(session, "the cross-encoder")

    @property
    def name(self) -> str:
        return PROVIDER

    @property
    def model(self) -> str:
        return self._model

    def _encode(self, query: str, texts: Sequence[str]) -> list[Encoding] | None:
        try:
            return self._tokenizer.encode_batch([(query, t) for t in texts])
        except Exception:
            # A tokenizer error could quote the text: report nothing of it.
            return None

    def score_sync(self, query: str, texts: Sequence[str]) -> npt.NDArray[np.float64]:
        """Relevance in [0, 1] of each text for `query`, in order (blocking)."""
        out: list[npt.NDArray[np.float64]] = []
        for i in range(0, len(texts), self._batch):
            encodings = self._encode(query, texts[i : i + self._batch])
            if encodings is None:
                raise reranker_failure(
                    RerankFailureCode.FAILED, "cross-encoder tokenization failed"
                )
            feeds = {
                "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            }
            if "token_type_ids" in self._input_names:
                feeds["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
            out.append(logits_to_relevance(self._run(feeds)))
        return np.concatenate(out) if out else np.zeros(0, dtype=np.float64)

    def _run(self, feeds: dict[str, npt.NDArray[np.int64]]) -> npt.NDArray[np.floating]:
        session = self._session
        if session is None:
            raise reranker_failure(RerankFailureCode.FAILED, "cross-encoder model is closed")
        logits: object = None
        try:
            with self._lock:
                (logits,) = session.run([session.get_outputs()[0].name], feeds)
        except Exception:
            # onnxruntime messages name nodes and shapes; raised outside the
            # handler all the same, so nothing of the run rides along.
            logits = None
        if logits is None:
            raise reranker_failure(RerankFailureCode.FAILED, "cross-encoder model failed to run")
        return np.asarray(logits)

    async def rerank(self, query: str, candidates: Sequence[RerankCandidate]) -> RerankerOutput:
        """Cross-encoder relevance and threshold answerability for every candidate."""
        if not candidates:
            return RerankerOutput((), Answerability.UNKNOWN)
        texts = [c.content for c in candidates]
        scores = await asyncio.to_thread(self.score_sync, query, texts)
        return output_from_scores(candidates, [float(s) for s in scores], self._threshold)

    async def aclose(self) -> None:
        self._session = None
