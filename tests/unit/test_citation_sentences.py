"""Citations at sentence grain: which sentence(s) of a cited chunk the answer's
citing statement is drawn from, and the snippet and span that follow."""

from __future__ import annotations

import pytest

from groundwire.domain.citations import (
    cited_passage,
    citing_statements,
    passage_snippet,
    sentence_spans,
)

pytestmark = pytest.mark.timeout(5)

CHUNK = (
    "# Leave\n\n"
    "Employees accrue 25 days of paid leave per\n"
    "year. Unused days expire in March.\n\n"
    "- Carry-over requires approval from\n"
    "  the manager.\n"
    "- Sick leave is separate (see POL-HR-020).\n"
)


def sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text)]


def test_sentences_join_wrapped_lines_and_skip_headings_and_bullets() -> None:
    assert sentences(CHUNK) == [
        "Employees accrue 25 days of paid leave per\nyear.",
        "Unused days expire in March.",
        "Carry-over requires approval from\n  the manager.",
        "Sick leave is separate (see POL-HR-020).",
    ]


def test_sentence_ends_need_whitespace_after_the_punctuation() -> None:
    assert sentences("Version 2.5 ships soon. Call e.g. support! Why? Because.") == [
        "Version 2.5 ships soon.",
        "Call e.g.",
        "support!",
        "Why?",
        "Because.",
    ]
    assert sentences('He said "stop." Then left.') == ['He said "stop."', "Then left."]
    assert sentences("") == [] and sentences("  \n\n # Only a heading\n") == []


def test_citing_statements_take_the_markers_after_a_sentence() -> None:
    answer = (
        "Unused days expire in March. [1] Sick leave is separate. [2] Accrual is 25 days [1, 2]."
    )
    assert citing_statements(answer, 1) == [
        "Unused days expire in March.",
        "Accrual is 25 days.",
    ]
    assert citing_statements(answer, 2) == ["Sick leave is separate.", "Accrual is 25 days."]
    assert citing_statements(answer, 3) == []
    # A marker followed by more text ends the clause it cites.
    assert citing_statements("Leave is 25 days [1] and sick leave is separate [2].", 2) == [
        "and sick leave is separate."
    ]


def test_a_verbatim_copy_selects_its_sentences() -> None:
    # The offline extractive model joins wrapped lines and drops list markers.
    answer = (
        "Employees accrue 25 days of paid leave per year. [1] "
        "Carry-over requires approval from the manager. [1]"
    )
    start, end = cited_passage(CHUNK, citing_statements(answer, 1)) or (0, 0)
    assert CHUNK[start:end].startswith("Employees accrue")
    assert CHUNK[start:end].endswith("the manager.")


def test_a_copy_wins_over_word_overlap() -> None:
    # "leave" and "days" overlap other sentences; the copied one is chosen alone.
    answer = "Leave days: Unused days expire in March. [1]"
    passage = cited_passage(CHUNK, citing_statements(answer, 1))
    assert passage is not None and CHUNK[passage[0] : passage[1]] == "Unused days expire in March."


def test_otherwise_the_sentence_sharing_most_words_is_chosen() -> None:
    answer = "Your manager has to approve any carry-over. [1]"
    passage = cited_passage(CHUNK, citing_statements(answer, 1))
    assert passage is not None
    assert CHUNK[passage[0] : passage[1]] == "Carry-over requires approval from\n  the manager."


def test_ties_go_to_the_denser_then_the_earlier_sentence() -> None:
    chunk = "Alpha beta gamma delta. Alpha appears here. Alpha also here."
    # One shared word each: the shortest sentence holds the largest share.
    passage = cited_passage(chunk, ["alpha"])
    assert passage is not None and chunk[passage[0] : passage[1]] == "Alpha appears here."
    chunk = "Alpha one here. Alpha two here."
    passage = cited_passage(chunk, ["alpha"])
    assert passage is not None and chunk[passage[0] : passage[1]] == "Alpha one here."
    # Deterministic: the same inputs give the same passage.
    assert cited_passage(chunk, ["alpha"]) == cited_passage(chunk, ["alpha"])


def test_stop_words_alone_are_no_overlap() -> None:
    assert cited_passage(CHUNK, ["It is the one and only."]) is None
    assert cited_passage(CHUNK, []) is None
    assert cited_passage("", ["anything"]) is None


def test_snippet_falls_back_to_the_chunk_start() -> None:
    got = passage_snippet(CHUNK, "Nothing related at all [1].", 1, 20)
    assert got.text == "# Leave\n\nEmployees"
    assert got.truncated and CHUNK[got.start : got.end] == got.text
    # Not cited at all: the chunk's beginning too.
    assert passage_snippet(CHUNK, "Unused days expire in March. [2]", 1, 300).start == 0


def test_snippet_is_the_cited_sentence_with_its_offsets() -> None:
    got = passage_snippet(CHUNK, "Sick leave is separate (see POL-HR-020). [1]", 1, 300)
    assert got.text == "Sick leave is separate (see POL-HR-020)."
    assert not got.truncated
    assert CHUNK[got.start : got.end] == got.text


def test_a_long_cited_sentence_is_cut_at_a_word_boundary() -> None:
    got = passage_snippet(CHUNK, "Sick leave is separate (see POL-HR-020). [1]", 1, 16)
    assert got.text == "Sick leave is" and got.truncated
    assert CHUNK[got.start : got.end] == got.text
    empty = passage_snippet(CHUNK, "Sick leave is separate. [1]", 1, 0)
    assert empty.text == "" and empty.truncated and empty.start == empty.end
