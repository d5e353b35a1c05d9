"""The offline model's sentence module: splitting with headings, the scorers, the
answerability rule (the model's behaviour is tested in test_offline_model.py)."""

from __future__ import annotations

import math

import pytest

from groundwire.providers.chat.sentences import (
    CONTEXT_WEIGHT,
    MIN_COVERAGE,
    Candidate,
    Scorer,
    answerability,
    candidates_of,
    choose,
    question_terms,
    score_bm25,
    score_bm25_context,
    split_sentences,
    split_with_headings,
)

pytestmark = pytest.mark.timeout(5)


def test_headings_are_context_not_candidates() -> None:
    text = "# Leave\n\n## Primary caregiver\nTwenty weeks. Full pay.\n## Other\n- One week."
    assert split_with_headings(text) == [
        ("Twenty weeks.", "Leave Primary caregiver"),
        ("Full pay.", "Leave Primary caregiver"),
        ("One week.", "Leave Other"),
    ]
    assert split_sentences(text) == ["Twenty weeks.", "Full pay.", "One week."]


def test_candidates_carry_the_title_and_headings() -> None:
    (first, second) = candidates_of([(4, "Policy", "## Pay\nA. B.")])
    assert first == Candidate(0, 0, 4, "A.", "Policy", "Pay")
    assert first.context == "Policy Pay"
    assert second.position == 1 and second.number == 4


def test_a_heading_makes_a_sentence_eligible_a_title_does_not() -> None:
    question = "What should I do when internal sites do not load?"
    text = "## Internal sites do not load\nDisconnect and reconnect first."
    chosen = choose(question, candidates_of([(1, "", text)]), [text])
    assert [c.text for c in chosen] == ["Disconnect and reconnect first."]

    titled = "Disconnect and reconnect first."
    only_title = candidates_of([(1, "Internal sites do not load", titled)])
    assert choose(question, only_title, [titled], min_coverage=0.0) == []


def test_question_words_that_only_ask_are_not_terms() -> None:
    assert question_terms("How many weeks of parental leave do I get?") == [
        "week",
        "parent",
        "leav",
    ]


@pytest.mark.parametrize("scorer", [score_bm25, score_bm25_context])
def test_every_scorer_is_deterministic_and_prefers_the_matching_sentence(
    scorer: Scorer,
) -> None:
    candidates = candidates_of([(1, "", "Printers need toner. The canteen opens at noon.")])
    scored = scorer("When does the canteen open?", candidates)
    assert scored.scores[1] > scored.scores[0]
    assert scorer("When does the canteen open?", candidates) == scored


def test_answerability_weighs_terms_no_sentence_holds_the_most() -> None:
    text = "The office opens at 8 am. The office has a cafeteria."
    candidates = candidates_of([(1, "", text)])
    # "dress" and "code" are held by no sentence; "office" by both.
    assert answerability("What is the dress code at the office?", candidates, text) < 0.2
    assert choose("What is the dress code at the office?", candidates, [text]) == []
    assert answerability("When does the office open?", candidates, text) == 1.0
    assert MIN_COVERAGE == 0.55


def test_without_a_threshold_any_match_answers() -> None:
    text = "The office opens at 8 am."
    candidates = candidates_of([(1, "", text)])
    chosen = choose("What is the dress code at the office?", candidates, [text], min_coverage=0.0)
    assert [c.text for c in chosen] == [text]


def test_a_question_term_in_the_title_or_headings_adds_half_its_idf() -> None:
    question = "How many weeks of parental leave do I get?"
    text = "### Primary caregiver\nThe caregiver receives 20 weeks of leave."
    other = "Weeks of leave are counted per year."
    with_title = candidates_of([(1, "Parental Leave Policy", text), (2, "", other)])
    without = candidates_of([(1, "Leave Policy", text), (2, "", other)])

    plain = score_bm25(question, with_title).scores
    lifted = score_bm25_context(question, with_title).scores
    assert plain == score_bm25_context(question, without).scores  # no context term
    assert lifted[1] == plain[1]
    assert lifted[0] > plain[0]
    assert lifted[0] - plain[0] == pytest.approx(
        CONTEXT_WEIGHT * math.log(1 + (2 + 0.5) / 0.5)  # "parent": held by no sentence
    )


@pytest.mark.parametrize(
    "identifier", ["zqacme29819315marker", "zqacmeghijklmnmarker", "INV-2024-00017", "abcde123"]
)
def test_a_question_naming_an_identifier_its_source_holds_is_answerable(identifier: str) -> None:
    # The analyzer keeps an identifier whole and adds its parts ("zqacm", "29819315",
    # "marker"); a part is a question term of its own, held where the identifier is
    # (it once stood for the whole identifier it starts, so the source missed it and
    # the question was refused).
    text = f"{identifier} common policy words about leave."
    other = "Unrelated words about the canteen and its opening hours."
    candidates = candidates_of([(1, "", text), (2, "", other)])
    question = f"{identifier} leave"
    assert answerability(question, candidates, text) == 1.0
    assert [c.text for c in choose(question, candidates, [text, other])] == [text]
