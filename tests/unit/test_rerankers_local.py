"""The offline rerankers: term overlap, local-embedding max-sim, and the ONNX
cross-encoder runner (on a tiny model this test builds with `onnx`, read with the
real all-MiniLM-L6-v2 WordPiece tokenizer)."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from groundwire.domain.errors import ErrorKind
from groundwire.domain.reranking import (
    Answerability,
    RerankCandidate,
    RerankerError,
    RerankFailureCode,
    RerankOutcome,
    validate_output,
)
from groundwire.providers.embeddings.base import (
    EmbeddingInfo,
    EmbeddingTask,
    Vectors,
    provider_failed,
)
from groundwire.providers.embeddings.hashing import HashingEmbedder
from groundwire.providers.embeddings.onnx_local import default_tokenizer_path
from groundwire.providers.rerankers.base import Reranker
from groundwire.providers.rerankers.local_embedding import LocalEmbeddingReranker, sentence_windows
from groundwire.providers.rerankers.offline import OfflineReranker, term_overlap
from groundwire.providers.rerankers.onnx_cross_encoder import (
    OnnxCrossEncoderReranker,
    logits_to_relevance,
)
from groundwire.reranking.stage import RerankingStage, StageSettings

pytestmark = pytest.mark.timeout(60)


def cand(i: int, text: str) -> RerankCandidate:
    return RerankCandidate(f"doc-{i}", "c0", text, i)


# --- offline term overlap


def test_term_overlap_is_the_share_of_query_words_present() -> None:
    assert term_overlap("Parental leave weeks", "weeks of parental LEAVE") == 1.0
    assert term_overlap("parental leave weeks", "leave") == pytest.approx(1 / 3)
    assert term_overlap("", "anything") == 0.0


async def test_offline_reranker_is_a_reranker_and_records_identities_only() -> None:
    r = OfflineReranker()
    assert isinstance(r, Reranker)
    out = await r.rerank("vpn error", [cand(1, "printer jam"), cand(2, "vpn error E42")])
    assert [j.relevance for j in out.judgements] == [0.0, 1.0]
    assert out.answerability is Answerability.ANSWERABLE
    assert r.calls == [(("doc-1", "c0"), ("doc-2", "c0"))]


# --- local embedding max-sim


def test_sentence_windows_slide_and_are_bounded() -> None:
    text = "One. Two! Three? Four; Five.\n\nSix"
    assert sentence_windows(text, 2, 100) == [
        "One. Two!",
        "Two! Three?",
        "Three? Four;",
        "Four; Five.",
        "Five. Six",
    ]
    assert sentence_windows("Just one sentence", 3, 10) == ["Just one sentence"]
    many = " ".join(f"S{i}." for i in range(100))
    spread = sentence_windows(many, 1, 8)
    # Too many for sliding windows: consecutive blocks that still cover everything.
    assert len(spread) == 8
    assert " ".join(spread) == many


async def test_max_sim_scores_a_buried_sentence_by_itself() -> None:
    embedder = HashingEmbedder(256)
    reranker = LocalEmbeddingReranker(
        embedder, window_sentences=1, max_windows=32, include_whole=False
    )
    filler = " ".join(f"Unrelated filler sentence number {w}." for w in "abcdefgh")
    buried = cand(1, f"{filler} The VPN client fails with error E42. {filler}")
    distractor = cand(2, "Printers in building two jam on thick paper. " * 3)
    out = await reranker.rerank("vpn client fails with error e42", [distractor, buried])
    scores = {j.document_id: j.relevance for j in out.judgements}
    assert scores["doc-1"] > 0.9 > scores["doc-2"]
    whole = embedder.embed_sync(["vpn client fails with error e42", buried.content])
    assert scores["doc-1"] > (float(whole[0] @ whole[1]) + 1) / 2
    assert all(0.0 <= s <= 1.0 for s in scores.values())
    validate_output([distractor, buried], out)


async def test_include_whole_never_scores_below_the_whole_text() -> None:
    embedder = HashingEmbedder(256)
    reranker = LocalEmbeddingReranker(embedder, window_sentences=1, include_whole=True)
    c = cand(1, "alpha beta. gamma delta. epsilon zeta.")
    texts, owners = reranker.windows([c])
    assert texts[-1] == c.content and owners == [0, 0, 0, 0]
    out = await reranker.rerank("alpha beta gamma delta epsilon zeta", [c])
    full = embedder.embed_sync(["alpha beta gamma delta epsilon zeta", c.content])
    assert out.judgements[0].relevance >= (float(full[0] @ full[1]) + 1) / 2 - 1e-6


class RecordingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(128)
        self.batches: list[list[str]] = []

    async def embed(self, texts: Sequence[str], task: EmbeddingTask) -> Vectors:
        self.batches.append(list(texts))
        return self.embed_sync(texts)


async def test_windows_are_embedded_in_length_order_and_scored_per_candidate() -> None:
    embedder = RecordingEmbedder()
    reranker = LocalEmbeddingReranker(embedder, window_sentences=1, include_whole=True)
    candidates = [
        cand(1, "A fairly long first sentence about vpn tokens. Short two."),
        cand(2, "Tiny. Another rather long sentence mentioning printers and paper jams."),
        cand(3, "vpn"),
    ]
    query = "vpn tokens"
    out = await reranker.rerank(query, candidates)

    windows = embedder.batches[1]
    assert windows == sorted(windows, key=len)
    q = embedder.embed_sync([query])[0]
    for c, judgement in zip(candidates, out.judgements, strict=True):
        texts, _ = reranker.windows([c])
        best = max(float(v @ q) for v in embedder.embed_sync(texts))
        assert judgement.document_id == c.document_id
        assert judgement.relevance == pytest.approx((best + 1) / 2, abs=1e-6)


class FailingEmbedder:
    info = EmbeddingInfo("failing", "failing-v1", 8, True)
    max_batch_size = 8

    def __init__(self, timed_out: bool) -> None:
        self.timed_out = timed_out

    async def embed(self, texts: Sequence[str], task: EmbeddingTask) -> Vectors:
        raise provider_failed("embedding provider down", timed_out=self.timed_out)

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize(
    ("timed_out", "code"),
    [(False, RerankFailureCode.UNAVAILABLE), (True, RerankFailureCode.TIMEOUT)],
)
async def test_embedding_failures_become_reranker_failures(
    timed_out: bool, code: RerankFailureCode
) -> None:
    reranker = LocalEmbeddingReranker(FailingEmbedder(timed_out))
    with pytest.raises(RerankerError) as info:
        await reranker.rerank("q", [cand(1, "text")])
    assert info.value.failure_code is code
    assert info.value.__context__ is None


@pytest.fixture(scope="module")
def minilm() -> object:
    from groundwire.providers.embeddings.onnx_local import LocalOnnxEmbedder

    return LocalOnnxEmbedder(max_seq_length=128, intra_op_threads=1)


async def test_local_minilm_reranker_ranks_the_answer_first(minilm: object) -> None:
    reranker = LocalEmbeddingReranker(minilm)  # type: ignore[arg-type]
    assert reranker.name == "local-embedding-max-sim"
    assert reranker.model == "all-MiniLM-L6-v2:w2+whole"
    candidates = [
        cand(1, "Expense reports are due on the fifth business day. Receipts are required."),
        cand(
            2,
            "Our office has a gym. New parents receive sixteen weeks of paid parental leave. "
            "The cafeteria opens at eight.",
        ),
        cand(3, "Reset your VPN token from the self-service portal."),
    ]
    result = await RerankingStage().run(
        reranker, "how many weeks of parental leave do new parents get", candidates, StageSettings()
    )
    assert result.metadata.outcome is RerankOutcome.SUCCEEDED
    assert result.order[0].document_id == "doc-2"
    assert result.order[0].answerability is Answerability.ANSWERABLE
    assert result.order[-1].answerability is Answerability.NOT_ANSWERABLE


# --- ONNX cross-encoder runner


def tiny_cross_encoder(directory: Path, weights: dict[int, float], *, two_logits: bool) -> Path:
    """model.onnx: logit = bias + sum over passage tokens (type 1, unmasked) of
    W[token]; with `two_logits`, [-logit, logit]. Plus the MiniLM tokenizer."""
    vocab = 30522
    w = np.zeros(vocab, dtype=np.float32)
    for token_id, weight in weights.items():
        w[token_id] = weight
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
    types = helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, ["batch", "seq"])
    out_dim = 2 if two_logits else 1
    logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", out_dim])
    nodes = [
        helper.make_node("Gather", ["W", "input_ids"], ["per_token"]),
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["token_type_ids"], ["type_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["per_token", "mask_f"], ["masked"]),
        helper.make_node("Mul", ["masked", "type_f"], ["passage_only"]),
        helper.make_node("ReduceSum", ["passage_only", "axes"], ["summed"], keepdims=1),
        helper.make_node("Add", ["summed", "bias"], ["logit" if two_logits else "logits"]),
    ]
    if two_logits:
        nodes += [
            helper.make_node("Neg", ["logit"], ["neg"]),
            helper.make_node("Concat", ["neg", "logit"], ["logits"], axis=1),
        ]
    graph = helper.make_graph(
        nodes,
        "tiny-cross-encoder",
        [ids, mask, types],
        [logits],
        initializer=[
            helper.make_tensor("W", TensorProto.FLOAT, [vocab], w.tolist()),
            helper.make_tensor("axes", TensorProto.INT64, [1], [1]),
            helper.make_tensor("bias", TensorProto.FLOAT, [1], [-2.0]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    directory.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(directory / "model.onnx"))
    shutil.copy(default_tokenizer_path(), directory / "tokenizer.json")
    return directory


def token_id(word: str) -> int:
    from tokenizers import Tokenizer

    tid = Tokenizer.from_file(str(default_tokenizer_path())).token_to_id(word)
    assert tid is not None
    return tid


@pytest.mark.parametrize("two_logits", [False, True])
async def test_cross_encoder_scores_passage_tokens_of_each_pair(
    tmp_path: Path, two_logits: bool
) -> None:
    leave, weeks = token_id("leave"), token_id("weeks")
    model_dir = tiny_cross_encoder(tmp_path / "ce", {leave: 2.0, weeks: 1.0}, two_logits=two_logits)
    reranker = OnnxCrossEncoderReranker(model_dir=model_dir, max_seq_length=64, batch_size=2)
    assert (reranker.name, reranker.model) == ("onnx-cross-encoder", "ce")
    candidates = [
        cand(1, "The printer is jammed."),
        cand(2, "Sixteen weeks of leave."),  # logit -2 + 2 + 1 = 1
        cand(3, "Leave requests go to HR."),  # logit -2 + 2 = 0
    ]
    # The query mentions "leave" and "weeks" too; query tokens (type 0) must not count.
    result = await RerankingStage().run(
        reranker, "leave weeks leave weeks", candidates, StageSettings()
    )
    assert [c.document_id for c in result.order] == ["doc-2", "doc-3", "doc-1"]
    relevance = [c.rerank_relevance for c in result.order]
    scale = 2.0 if two_logits else 1.0  # softmax([-x, x])[1] == sigmoid(2x)
    expected = [1 / (1 + np.exp(-scale * x)) for x in (1.0, 0.0, -2.0)]
    assert relevance == pytest.approx(expected, abs=1e-5)
    assert result.order[0].answerability is Answerability.ANSWERABLE  # >= 0.5
    assert result.order[1].answerability is Answerability.ANSWERABLE  # exactly 0.5
    assert result.order[2].answerability is Answerability.NOT_ANSWERABLE


async def test_cross_encoder_truncates_long_pairs(tmp_path: Path) -> None:
    leave = token_id("leave")
    model_dir = tiny_cross_encoder(tmp_path / "ce", {leave: 1.0}, two_logits=False)
    reranker = OnnxCrossEncoderReranker(model_dir=model_dir, max_seq_length=16)
    # Only the first few passage tokens fit: a late "leave" is cut off.
    early = cand(1, "leave " + "word " * 200)
    late = cand(2, "word " * 200 + "leave")
    scores = reranker.score_sync("q", [early.content, late.content])
    assert scores[0] == pytest.approx(1 / (1 + np.exp(1.0)))
    assert scores[1] == pytest.approx(1 / (1 + np.exp(2.0)))


def test_cross_encoder_load_errors_name_no_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as info:
        OnnxCrossEncoderReranker(model_dir=tmp_path / "secret-dir")
    assert "secret-dir" not in str(info.value)
    (tmp_path / "only-tokenizer").mkdir()
    shutil.copy(default_tokenizer_path(), tmp_path / "only-tokenizer" / "tokenizer.json")
    with pytest.raises(FileNotFoundError) as info:
        OnnxCrossEncoderReranker(model_dir=tmp_path / "only-tokenizer")
    assert "only-tokenizer" not in str(info.value)


def test_an_embedding_model_is_not_accepted_as_a_cross_encoder(tmp_path: Path) -> None:
    # The MiniLM sentence encoder returns token states [batch, seq, 384], not logits.
    from groundwire.providers.embeddings.onnx_local import default_model_path

    directory = tmp_path / "minilm"
    directory.mkdir()
    shutil.copy(default_model_path(), directory / "model.onnx")
    shutil.copy(default_tokenizer_path(), directory / "tokenizer.json")
    with pytest.raises(ValueError):
        OnnxCrossEncoderReranker(model_dir=directory, max_seq_length=32)


async def test_a_closed_cross_encoder_fails_as_a_reranker(tmp_path: Path) -> None:
    model_dir = tiny_cross_encoder(tmp_path / "ce", {}, two_logits=False)
    reranker = OnnxCrossEncoderReranker(model_dir=model_dir)
    await reranker.aclose()
    with pytest.raises(RerankerError) as info:
        await reranker.rerank("q", [cand(1, "text")])
    assert info.value.failure_code is RerankFailureCode.FAILED
    assert info.value.kind is ErrorKind.UNAVAILABLE


def test_logits_to_relevance_shapes() -> None:
    assert logits_to_relevance(np.array([0.0, 1000.0, -1000.0])) == pytest.approx([0.5, 1.0, 0.0])
    assert logits_to_relevance(np.array([[0.0], [2.0]])) == pytest.approx(
        [0.5, 1 / (1 + np.exp(-2))]
    )
    assert logits_to_relevance(np.array([[1.0, 1.0], [0.0, 3.0]])) == pytest.approx(
        [0.5, np.exp(3) / (1 + np.exp(3))]
    )
    with pytest.raises(ValueError):
        logits_to_relevance(np.zeros((2, 3)))
