"""The lexical analyzer (domain/analysis.py) and its configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundwire.app.config import parse_config
from groundwire.app.config_base import ConfigError
from groundwire.app.factories import build_index_analyzer, index_descriptor
from groundwire.domain.analysis import ENGLISH, ENGLISH_STOP_WORDS, PLAIN, Analyzer
from groundwire.domain.query import parse_lexical
from groundwire.domain.query_rewrite import STOP_WORDS
from groundwire.domain.text import index_tokens, phrase_words

TEXT = (
    "The policies of POL-HR-014 say IRagRetriever in RetrieverFactory.cs fails with "
    "CS1503 in 2024; Running runs NASA filename.cs a/b C# user@example"
)


def test_plain_analysis_is_the_tokenizer_of_old() -> None:
    out = PLAIN.analyze(TEXT)
    assert out.terms == index_tokens(TEXT) and out.words == phrase_words(TEXT)
    assert PLAIN.plain and PLAIN.descriptor() == "plain"


def test_identifiers_and_numbers_are_kept_whole_split_as_today_and_never_stemmed() -> None:
    terms = ENGLISH.terms(TEXT)
    # The identifier is kept whole and as written; its pieces are split exactly as
    # before, alphabetic pieces stemmed like any word; digits never change.
    assert ENGLISH.terms("IRagRetriever") == ["iragretriever", "iragretriev", "i", "rag", "retriev"]
    assert ENGLISH.terms("RetrieverFactory.cs") == [
        "retrieverfactory.cs",
        "retrieverfactori",
        "cs",
        "retriev",
        "factori",
    ]
    for ident in ["IRagRetriever", "RetrieverFactory.cs", "acme-plan", "POLICIES"]:
        assert len(ENGLISH.terms(ident)) >= len(index_tokens(ident)), ident
        assert ENGLISH.terms(ident)[0] == index_tokens(ident)[0], ident
    assert ENGLISH.terms("POL-HR-014 CS1503 2024 NASA") == index_tokens(
        "POL-HR-014 CS1503 2024 NASA"
    )
    # Prose finds identifiers' pieces and identifiers find prose, through the stems.
    assert set(ENGLISH.terms("factories")) <= set(ENGLISH.terms("RetrieverFactory.cs"))
    assert set(ENGLISH.terms("Acme")) <= set(ENGLISH.terms("acme-plan"))
    assert set(ENGLISH.terms("policies")) <= set(ENGLISH.terms("POLICIES"))
    assert ENGLISH.phrase_words("ACME-PLAN reviews") == ENGLISH.phrase_words("acme plan review")
    assert {"pol-hr-014", "retrieverfactory.cs", "retrieverfactori", "cs1503", "2024"} <= set(terms)
    # Plain words are stemmed; stop words are gone.
    assert "polici" in terms and "policies" not in terms
    assert terms.count("run") == 2 and "the" not in terms and "of" not in terms


def test_phrase_words_keep_stop_word_positions() -> None:
    words = ENGLISH.phrase_words("State of the Arts")
    assert words == ["state", "of", "the", "art"]
    q = parse_lexical('"state of the arts" retrieval', analyzer=ENGLISH)
    assert q.phrases == (("state", "of", "the", "art"),)
    assert q.terms == ("retriev", "state", "art") and q.analyzer is ENGLISH


def test_query_analysis_matches_index_analysis() -> None:
    for text in [TEXT, "Policies and POLICIES", "état des lieux", "x" * 5000]:
        assert parse_lexical(text, analyzer=ENGLISH).terms == tuple(ENGLISH.terms(text))


def test_keyword_stop_words_extend_the_shared_standard_list() -> None:
    assert ENGLISH_STOP_WORDS < STOP_WORDS
    assert not {"policy", "leave", "retention"} & STOP_WORDS


def test_other_languages_stem_with_their_snowball_stemmer() -> None:
    german = Analyzer("german", True, frozenset({"die"}), "german")
    assert german.terms("Die Häuser") == ["haus"]
    with pytest.raises(ValueError):
        Analyzer("klingon")


def _cfg(analysis: dict[str, object], base: Path | None = None) -> object:
    return parse_config(
        {"auth": {"mode": "disabled"}, "indexes": {"docs": {"analysis": analysis}}}, base
    )


@pytest.mark.parametrize(
    ("analysis", "key"),
    [
        ({"language": "klingon"}, "indexes.docs.analysis.language"),
        ({"stop_words": "file"}, "indexes.docs.analysis"),
        ({"stop_words_file": "x.txt"}, "indexes.docs.analysis"),
        ({"stop_words": "some"}, "indexes.docs.analysis.stop_words"),
        ({"language": "tamil"}, "indexes.docs.analysis"),
        ({"stemming": "maybe"}, "indexes.docs.analysis.stemming"),
    ],
)
def test_bad_analysis_config_names_the_key(analysis: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        _cfg(analysis)
    assert key in str(info.value)


def test_analysis_config_builds_each_analyzer(tmp_path: Path) -> None:
    default = build_index_analyzer("docs", _cfg({}).indexes["docs"].analysis)  # type: ignore[attr-defined]
    assert default == ENGLISH and default.descriptor() == "stem=english;stop=english"
    off = build_index_analyzer(
        "docs",
        _cfg({"stemming": False, "stop_words": "none"}).indexes["docs"].analysis,  # type: ignore[attr-defined]
    )
    assert off.plain and index_descriptor("chars:size=800", off) == "chars:size=800"
    assert index_descriptor("chars:size=800", default) == (
        "chars:size=800|analyzer=stem=english;stop=english"
    )
    french = build_index_analyzer("docs", _cfg({"language": "french"}).indexes["docs"].analysis)  # type: ignore[attr-defined]
    assert "les" in french.stop_words and french.terms("les maisons") == ["maison"]
    (tmp_path / "stop.txt").write_text("# ours\nfoo\n\nBar  # trailing comment\n")
    from_file = build_index_analyzer(
        "docs",
        _cfg({"stop_words": "file", "stop_words_file": "stop.txt"}, tmp_path)  # type: ignore[attr-defined]
        .indexes["docs"]
        .analysis,
    )
    assert from_file.stop_words == {"foo", "bar"}
    assert from_file.descriptor().startswith("stem=english;stop=file:")
    (tmp_path / "bad.txt").write_text("two words\n")
    for name, key in [("missing.txt", "cannot read"), ("bad.txt", "one word per line")]:
        cfg = _cfg({"stop_words": "file", "stop_words_file": name}, tmp_path)
        with pytest.raises(ConfigError) as info:
            build_index_analyzer("docs", cfg.indexes["docs"].analysis)  # type: ignore[attr-defined]
        assert "indexes.docs.analysis.stop_words_file" in str(info.value) and key in str(info.value)
        assert str(tmp_path) not in str(info.value)
