"""Tokenizer, normalization, phrases, query bounds and the token estimator."""

from __future__ import annotations

import pytest

from groundwire.domain.errors import GroundwireError
from groundwire.domain.query import (
    contains_phrase,
    parse_lexical,
    semantic_text,
    split_phrases,
    validate_query_text,
)
from groundwire.domain.text import estimate_tokens, index_tokens, normalize_text, phrase_words


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("POL-HR-014", ["pol-hr-014", "pol", "hr", "014"]),
        ("IRagRetriever", ["iragretriever", "i", "rag", "retriever"]),
        ("filename.cs", ["filename.cs", "filename", "cs"]),
        ("CS1503", ["cs1503", "cs", "1503"]),
        ("plain words", ["plain", "words"]),
        ("HTTPServer2", ["httpserver2", "http", "server", "2"]),
    ],
)
def test_identifiers_kept_whole_and_split(text: str, expected: list[str]) -> None:
    assert index_tokens(text) == expected


def test_sentence_punctuation_is_not_an_identifier() -> None:
    assert index_tokens("Done. Next, please.") == ["done", "next", "please"]


def test_normalization() -> None:
    assert normalize_text("\ufeffa\r\nb\rc\x00d") == "a\nb\ncd"
    assert normalize_text("e\u0301") == "\u00e9"


def test_phrases_and_loose_terms() -> None:
    loose, phrases = split_phrases('refund "account recovery" policy')
    assert phrases == ["account recovery"]
    assert loose.split() == ["refund", "policy"]
    q = parse_lexical('"Account-Recovery" portal')
    assert q.phrases == (("account", "recovery"),)
    assert "portal" in q.terms and "account-recovery" in q.terms


def test_unterminated_phrase() -> None:
    with pytest.raises(GroundwireError) as err:
        split_phrases('a "b')
    assert err.value.reason == "UNTERMINATED_PHRASE"


def test_empty_phrase_is_ignored() -> None:
    assert split_phrases('a ""')[1] == []


def test_contains_phrase() -> None:
    words = phrase_words("Start account recovery now")
    assert contains_phrase(words, ("account", "recovery"))
    assert not contains_phrase(words, ("recovery", "account"))


def test_query_bounds() -> None:
    assert validate_query_text("  hi ", 10) == "hi"
    with pytest.raises(GroundwireError) as err:
        validate_query_text(" \t", 10)
    assert err.value.reason == "EMPTY_QUERY"
    with pytest.raises(GroundwireError) as err:
        validate_query_text("q" * 11, 10)
    assert err.value.reason == "FIELD_TOO_LONG"
    assert "qq" not in err.value.message


def test_semantic_text_drops_quotes() -> None:
    assert semantic_text('"account  recovery" now') == "account recovery now"


def test_token_estimator_counts_runs_and_punctuation() -> None:
    assert estimate_tokens("Hello, world!") == 4
    assert estimate_tokens("POL-HR-014") == 5
    assert estimate_tokens("") == 0
    assert estimate_tokens("a_b") == 3
