"""domain/query_rewrite.py: keywords of a conversational question (stop words
removed, identifiers and quoted phrases kept, bounded) and the checks a
rewriter model's keywords pass before they are searched."""

from __future__ import annotations

import pytest

from groundwire.domain.query import parse_lexical
from groundwire.domain.query_rewrite import (
    MAX_KEYWORD_CHARS,
    MAX_KEYWORDS,
    MAX_MODEL_OUTPUT_CHARS,
    InvalidRewrite,
    derive_keywords,
    is_identifier,
    validate_model_keywords,
)


def text(q: str) -> str | None:
    k = derive_keywords(q)
    return None if k is None else k.text


@pytest.mark.parametrize(
    ("question", "keywords"),
    [
        (
            "Hi! Could you please tell me how many weeks of parental leave I get?",
            "many weeks parental leave",
        ),
        ("What does POL-HR-014 say about the notice period?", "POL-HR-014 say notice period"),
        (
            "Why does IRagRetriever throw CS1503 in filename.cs?",
            "IRagRetriever throw CS1503 filename.cs",
        ),
        # Identifiers are kept even when they spell a stop word or hold one.
        ("Is IT allowed to reset it?", "IT allowed reset"),
        ("how do I use the a/b flag", "use a/b flag"),
        # Quoted phrases stay whole, quotes included, where they were.
        ('Where is "account recovery" described for the VPN?', '"account recovery" described VPN'),
        ('what about "the and of" then', '"the and of"'),
        # Repeats are kept: BM25 weights a term by how often the query names it.
        ("the leave policy: is leave paid?", "leave policy leave paid"),
        ("Don't you know the isn't rule?", "rule"),
    ],
)
def test_keywords_of_conversational_questions(question: str, keywords: str) -> None:
    assert text(question) == keywords


def test_all_caps_words_count_as_identifiers_case_preserved() -> None:
    # "LEAVE" is an acronym-shaped token: kept apart from "Leave".
    assert is_identifier("LEAVE") and is_identifier("POL-HR-014") and is_identifier("CS1503")
    assert is_identifier("iPhone") and not is_identifier("Leave") and not is_identifier("I")


def test_nothing_left_means_no_keyword_query() -> None:
    assert derive_keywords("What is it?") is None
    assert derive_keywords("   ") is None
    assert derive_keywords('""  "?"') is None


def test_unmatched_quote_is_a_space_and_the_result_always_parses() -> None:
    k = derive_keywords('refund "policy for "laptops')
    assert k is not None and k.text.count('"') % 2 == 0
    for q in ['a "b c" "d', 'x"y"z"', '"""', 'leave "weeks of pay" POL-HR-014 "x']:
        k = derive_keywords(q)
        if k is not None:
            parsed = parse_lexical(k.text)
            assert parsed.terms


def test_counts_and_bounds() -> None:
    k = derive_keywords('parental "account recovery" leave')
    assert k is not None and (k.keyword_count, k.phrase_count) == (2, 1)
    many = " ".join(f"term{i}" for i in range(200))
    # Derived keywords are a subsequence of the (already bounded) query: all kept.
    k = derive_keywords(many)
    assert k is not None and k.keyword_count == 200
    k = derive_keywords(many, MAX_KEYWORDS, MAX_KEYWORD_CHARS)
    assert k is not None and k.keyword_count == MAX_KEYWORDS
    assert k.text == " ".join(f"term{i}" for i in range(MAX_KEYWORDS))
    long_words = " ".join(f"{'x' * 60}{i}" for i in range(30))
    k = derive_keywords(long_words, MAX_KEYWORDS, MAX_KEYWORD_CHARS)
    assert k is not None and len(k.text) <= MAX_KEYWORD_CHARS
    assert k.text == " ".join(long_words.split()[: k.keyword_count])
    # Bounds stop at the first term that does not fit: the result is a prefix.
    k = derive_keywords(f"{'y' * 20} {'z' * 20} a1", max_chars=30)
    assert k is not None and k.text == "y" * 20


def test_model_keywords_are_bounded() -> None:
    k = validate_model_keywords(" ".join(f"term{i}" for i in range(100)))
    assert k.keyword_count == MAX_KEYWORDS and len(k.text) <= MAX_KEYWORD_CHARS


def test_control_characters_never_reach_the_query() -> None:
    k = derive_keywords('leave "weeks\x00 of\x1b pay"\x07 policy')
    assert k is not None and k.text == 'leave "weeks of pay" policy'


def test_model_keywords_are_filtered_by_the_same_rules() -> None:
    k = validate_model_keywords("  parental, leave; the weeks POL-HR-014  ")
    assert k.text == "parental leave weeks POL-HR-014"
    assert validate_model_keywords('"account recovery" VPN').phrase_count == 1


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "   ",
        "the of and",  # nothing left
        "line one\nline two",  # prose, not keywords
        'unbalanced "quote',
        "x" * (MAX_MODEL_OUTPUT_CHARS + 1),
    ],
)
def test_invalid_model_output_is_refused_with_a_stable_code(reply: str) -> None:
    with pytest.raises(InvalidRewrite) as err:
        validate_model_keywords(reply)
    assert err.value.code == "REWRITE_INVALID_OUTPUT"
