"""Token chunking with the embedding model's own tokenizer: every chunk fits the
configured token size as the model encodes it (task prefix and special tokens
included), offsets are exact, overlap holds, boundaries are natural; the
per-extension chunker and its descriptor; the chunking configuration."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from groundwire.app.config import parse_config
from groundwire.app.config_base import ConfigError
from groundwire.domain.chunking import Chunker, ChunkPolicy, ChunkUnit, chunk_text
from groundwire.domain.token_chunking import split_range_tokens, token_overhead
from groundwire.providers.embeddings.base import EmbeddingTask
from groundwire.providers.embeddings.onnx_local import (
    LocalOnnxEmbedder,
    default_tokenizer_path,
    load_tokenizer,
)
from groundwire.providers.embeddings.tokens import ModelTokenCounter

pytestmark = pytest.mark.timeout(60)

DATA = Path("/work/shared/data")
TOKENS = ChunkUnit.TOKENS


def corpus_text(collection: str, docs: int) -> str:
    path = DATA / collection / "corpus.jsonl"
    if not path.is_file():
        pytest.skip(f"test collection {collection} is not available")
    out = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            out.append(f"{row['title']}\n{row['text']}")
            if len(out) == docs:
                break
    return "\n\n".join(out)


@pytest.fixture(scope="module")
def counter() -> ModelTokenCounter:
    return ModelTokenCounter(
        load_tokenizer(default_tokenizer_path(), 256), document_prefix="", max_tokens=256
    )


@pytest.fixture(scope="module")
def prefixed() -> ModelTokenCounter:
    # E5-style task prefix: it costs tokens in every chunk.
    return ModelTokenCounter(
        load_tokenizer(default_tokenizer_path(), 256),
        document_prefix="passage: ",
        max_tokens=256,
    )


@pytest.fixture(scope="module")
def scifact() -> str:
    return corpus_text("scifact", 120)


@pytest.fixture(scope="module")
def cranfield() -> str:
    return corpus_text("cranfield", 120)


def assert_chunks_sound(
    text: str, spans: list[tuple[int, int]], size: int, c: ModelTokenCounter
) -> None:
    assert spans, "no chunks"
    for a, b in spans:
        body = text[a:b]
        assert body and body == body.strip()
        assert c.document_tokens(body) <= size
    # Nothing is lost: every non-space character lies in some chunk.
    covered = bytearray(len(text))
    for a, b in spans:
        covered[a:b] = b"\x01" * (b - a)
    missing = [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]
    assert not missing, f"{len(missing)} characters in no chunk, first at {missing[0]}"
    # Chunks advance.
    assert all(s2[0] > s1[0] and s2[1] > s1[1] for s1, s2 in itertools.pairwise(spans))


@pytest.mark.parametrize(("size", "overlap"), [(24, 0), (64, 12), (128, 32), (256, 64)])
@pytest.mark.parametrize("collection", ["scifact", "cranfield"])
def test_every_chunk_fits_on_real_text(
    collection: str, size: int, overlap: int, request: pytest.FixtureRequest
) -> None:
    text: str = request.getfixturevalue(collection)
    c: ModelTokenCounter = request.getfixturevalue("prefixed")
    spans = split_range_tokens(text, 0, len(text), size=size, overlap=overlap, counter=c)
    assert_chunks_sound(text, spans, size, c)
    counts = [c.document_tokens(text[a:b]) for a, b in spans]
    # Windows are filled, not timid: most chunks use most of the budget.
    full = sum(1 for n in counts if n >= size * 0.6)
    assert full >= 0.7 * (len(spans) - 1)


def test_overlap_is_shared_tokens(scifact: str, counter: ModelTokenCounter) -> None:
    text = scifact[:20_000]
    plain = split_range_tokens(text, 0, len(text), size=64, overlap=0, counter=counter)
    over = split_range_tokens(text, 0, len(text), size=64, overlap=16, counter=counter)
    # Without overlap neighbours are disjoint; with it they share a tail of text
    # that is at most `overlap` tokens long.
    assert all(b1 <= a2 for (_, b1), (a2, _) in itertools.pairwise(plain))
    shared = [max(0, b1 - a2) for (_, b1), (a2, _) in itertools.pairwise(over)]
    assert sum(1 for s in shared if s > 0) >= 0.9 * len(shared)
    for (_, b1), (a2, _) in itertools.pairwise(over):
        if b1 > a2:
            assert len(counter.token_spans(text[a2:b1])) <= 16
    assert len(over) > len(plain)


def test_boundaries_are_natural(scifact: str, counter: ModelTokenCounter) -> None:
    text = scifact[:30_000]
    spans = split_range_tokens(text, 0, len(text), size=96, overlap=0, counter=counter)
    # Sentence ends (or the end of a title line/paragraph) close most chunks.
    natural = sum(
        1 for _, b in spans if b == len(text) or text[b - 1] in ".?!;:" or text[b] == "\n"
    )
    assert natural >= 0.8 * len(spans)
    # No chunk starts or ends inside a word.
    for a, b in spans:
        assert a == 0 or not (text[a - 1].isalnum() and text[a].isalnum())
        assert b == len(text) or not (text[b - 1].isalnum() and text[b].isalnum())


def test_tokens_not_characters_bound_dense_scripts(counter: ModelTokenCounter) -> None:
    # CJK and emoji: far more tokens per character than English; a character
    # budget would overshoot the model window, a token budget does not.
    cjk = "東京都の人口は約千四百万人です。" * 30
    text = (cjk + "\n\n" + "🎉 party time! " * 60).strip()
    spans = split_range_tokens(text, 0, len(text), size=32, overlap=4, counter=counter)
    assert_chunks_sound(text, spans, 32, counter)
    # One token per CJK character: 30 characters of text at most (2 special tokens).
    assert max(b - a for a, b in spans if b <= len(cjk)) <= 30


def test_no_overlong_text_reaches_the_embedder(scifact: str) -> None:
    embedder = LocalOnnxEmbedder(max_seq_length=64, max_batch_size=32, document_prefix="passage: ")
    c = embedder.token_counter()
    assert c.max_tokens == 64 and token_overhead(c) == 4  # passage, :, [CLS], [SEP]
    text = scifact[:12_000]
    chunks = chunk_text(text, ChunkPolicy(64, 8, False, TOKENS), markdown=False, tokenizer=c)
    embedder.embed_sync([ch.text for ch in chunks], EmbeddingTask.DOCUMENT)
    assert embedder.truncated_texts == 0
    # The character splitter at a similar average size does make it truncate.
    chars = chunk_text(text, ChunkPolicy(400, 0, False), markdown=False)
    embedder.embed_sync([ch.text for ch in chars], EmbeddingTask.DOCUMENT)
    assert embedder.truncated_texts > 0


def test_markdown_sections_with_tokens(counter: ModelTokenCounter) -> None:
    body = "The policy applies to everyone on the team, without exception. " * 12
    text = f"# Handbook\n\n{body}\n\n## Leave\n\n{body}\n\n## Travel\n\nBook it.\n"
    chunks = chunk_text(text, ChunkPolicy(48, 8, True, TOKENS), markdown=True, tokenizer=counter)
    assert {c.section for c in chunks} == {"Handbook", "Handbook > Leave", "Handbook > Travel"}
    for ch in chunks:
        assert text[ch.start : ch.end] == ch.text
        assert counter.document_tokens(ch.text) <= 48
        # No chunk straddles a heading.
        assert "\n#" not in ch.text
    assert chunks[-1].text.endswith("Book it.") and chunks[-1].section == "Handbook > Travel"
    # Deterministic ids.
    again = chunk_text(text, ChunkPolicy(48, 8, True, TOKENS), markdown=True, tokenizer=counter)
    assert [c.chunk_id for c in again] == [c.chunk_id for c in chunks]


def test_a_token_policy_needs_a_tokenizer() -> None:
    with pytest.raises(ValueError, match="tokenizer"):
        chunk_text("x" * 100, ChunkPolicy(32, 0, False, TOKENS), markdown=False)
    with pytest.raises(ValueError, match="tokenizer"):
        Chunker(ChunkPolicy(), {".txt": ChunkPolicy(32, 0, False, TOKENS)})


def test_chunker_picks_the_policy_by_extension(counter: ModelTokenCounter) -> None:
    chunker = Chunker(
        ChunkPolicy(200, 20, True),
        {".txt": ChunkPolicy(24, 0, False, TOKENS)},
        counter,
    )
    text = "# Title\n\n" + "Plain words that go on and on. " * 40
    as_md = chunker.chunk(text, ".md", markdown=True)
    as_txt = chunker.chunk(text, ".TXT", markdown=False)
    assert all(len(c.text) <= 200 for c in as_md) and as_md[0].section == "Title"
    assert all(counter.document_tokens(c.text) <= 24 for c in as_txt)
    assert len(as_txt) > len(as_md)


def descriptors(counter: ModelTokenCounter, other: ModelTokenCounter) -> list[str]:
    base = ChunkPolicy(128, 16, True, TOKENS)
    return [
        Chunker(ChunkPolicy(800, 100, True)).descriptor(),
        Chunker(ChunkPolicy(800, 100, False)).descriptor(),
        Chunker(base, {}, counter).descriptor(),
        Chunker(ChunkPolicy(128, 16, True), {}, counter).descriptor(),
        Chunker(ChunkPolicy(129, 16, True, TOKENS), {}, counter).descriptor(),
        Chunker(ChunkPolicy(128, 15, True, TOKENS), {}, counter).descriptor(),
        Chunker(base, {".txt": ChunkPolicy(64, 0, False, TOKENS)}, counter).descriptor(),
        Chunker(base, {".txt": ChunkPolicy(64, 0, True, TOKENS)}, counter).descriptor(),
        Chunker(base, {".text": ChunkPolicy(64, 0, True, TOKENS)}, counter).descriptor(),
        Chunker(base, {".txt": ChunkPolicy(64, 0, False)}, counter).descriptor(),
        # Same policies, another document prefix: other token counts.
        Chunker(base, {}, other).descriptor(),
    ]


def test_descriptor_covers_everything_that_changes_chunks(
    counter: ModelTokenCounter, prefixed: ModelTokenCounter
) -> None:
    all_ = descriptors(counter, prefixed)
    assert len(set(all_)) == len(all_)
    # Character-only indexes keep the descriptor they were built with: upgrading
    # re-ingests nothing.
    assert all_[0] == "chars:size=800,overlap=100,md"
    assert Chunker(ChunkPolicy(800, 100, True), {}, counter).descriptor() == all_[0]
    # Stable across instances of the same tokenizer.
    fresh = ModelTokenCounter(
        load_tokenizer(default_tokenizer_path(), 128), document_prefix="", max_tokens=128
    )
    assert Chunker(ChunkPolicy(128, 16, True, TOKENS), {}, fresh).descriptor() == all_[2]


def config(chunking: dict[str, object], embedder: dict[str, object] | None = None) -> object:
    index: dict[str, object] = {"chunking": chunking}
    data: dict[str, object] = {"auth": {"mode": "disabled"}, "indexes": {"docs": index}}
    if embedder is not None:
        data["embedders"] = {"e": embedder}
        index["embedder"] = "e"
    return parse_config(data)


@pytest.fixture
def local() -> Iterator[dict[str, object]]:
    yield {"kind": "local-onnx", "max_seq_length": 128}


@pytest.mark.parametrize(
    ("chunking", "embedder", "key"),
    [
        ({"unit": "tokens", "size": 64, "overlap": 8}, None, "indexes.docs.chunking.unit"),
        (
            {"unit": "tokens", "size": 64, "overlap": 8},
            {"kind": "hashing"},
            "indexes.docs.chunking.unit",
        ),
        ({"unit": "tokens", "size": 256, "overlap": 8}, "local", "indexes.docs.chunking.size"),
        (
            {"extensions": {".txt": {"unit": "tokens", "size": 512, "overlap": 0}}},
            "local",
            "indexes.docs.chunking.extensions..txt.size",
        ),
        ({"unit": "bytes"}, None, "indexes.docs.chunking.unit"),
        ({"extensions": {"t x t": {}}}, None, "indexes.docs.chunking.extensions"),
        ({"extensions": {".md": {}, "MD": {}}}, None, "indexes.docs.chunking.extensions"),
        (
            {"extensions": {".txt": {"size": 100}}},
            None,
            "indexes.docs.chunking: Value error, extensions..txt.overlap",
        ),
        (
            {"extensions": {".txt": {"unit": "tokens", "overlap": 0}}},
            "local",
            "extensions..txt.size: required when the unit differs",
        ),
        ({"extensions": {".txt": {"sizee": 100}}}, None, "indexes.docs.chunking.extensions..txt"),
    ],
)
def test_chunking_config_errors_name_the_key(
    chunking: dict[str, object], embedder: object, key: str, local: dict[str, object]
) -> None:
    emb = local if embedder == "local" else embedder
    with pytest.raises(ConfigError) as err:
        config(chunking, emb if isinstance(emb, dict) else None)
    assert key in str(err.value)


def test_chunking_config_resolves_extension_policies(local: dict[str, object]) -> None:
    cfg = config(
        {
            "unit": "tokens",
            "size": 128,
            "overlap": 16,
            "extensions": {"TXT": {"size": 64, "markdown_sections": False}, ".md": {}},
        },
        local,
    )
    chunking = cfg.indexes["docs"].chunking  # type: ignore[attr-defined]
    assert chunking.default_policy() == ChunkPolicy(128, 16, True, TOKENS)
    assert dict(chunking.extension_policies()) == {
        ".txt": ChunkPolicy(64, 16, False, TOKENS),
        ".md": ChunkPolicy(128, 16, True, TOKENS),
    }


def test_build_chunker_refuses_what_config_cannot_see() -> None:
    from groundwire.app.chunking_config import ChunkingConfig
    from groundwire.app.config import IndexConfig
    from groundwire.app.factories import build_chunker
    from groundwire.providers.embeddings.hashing import HashingEmbedder

    tokens = IndexConfig(chunking=ChunkingConfig(unit="tokens", size=64, overlap=8))
    # An embedder without a tokenizer (a plug-in kind, say) is refused by key.
    with pytest.raises(ConfigError, match=r"indexes\.docs\.chunking\.unit"):
        build_chunker("docs", tokens, HashingEmbedder())
    embedder = LocalOnnxEmbedder(max_seq_length=32, document_prefix="passage: ")
    # Larger than the model's window (which config cannot know for a model_dir).
    with pytest.raises(ConfigError, match=r"indexes\.docs\.chunking\.size: 64 tokens exceed"):
        build_chunker("docs", tokens, embedder)
    # No room for text after a long task prefix and the special tokens.
    wordy = LocalOnnxEmbedder(
        max_seq_length=32, document_prefix="represent this scientific passage for retrieval: "
    )
    overhead = token_overhead(wordy.token_counter())
    assert overhead > 8
    tiny = IndexConfig(chunking=ChunkingConfig(unit="tokens", size=16, overlap=0))
    with pytest.raises(ConfigError, match=rf"chunking\.size: .* 8 more than the {overhead} tokens"):
        build_chunker("docs", tiny, wordy)
    # Character chunking needs no tokenizer, whatever the embedder.
    assert build_chunker("docs", IndexConfig(), HashingEmbedder()).tokenizer is None
