"""extract_citations: which numbered sources an answer cites."""

from __future__ import annotations

import pytest

from groundwire.domain.citations import extract_citations, renumber_markers, snippet

pytestmark = pytest.mark.timeout(5)


def test_markers_in_order_of_first_appearance() -> None:
    assert extract_citations("B is true [2]. A is true [1]. B again [2].", 3) == [2, 1]


def test_adjacent_and_list_markers() -> None:
    assert extract_citations("Both agree [3][1]. See also [2, 4] and [ 5 ,1 ].", 5) == [
        3,
        1,
        2,
        4,
        5,
    ]


def test_out_of_range_and_zero_are_ignored() -> None:
    assert extract_citations("x [0] y [4] z [2] w [99]", 3) == [2]


def test_out_of_range_members_of_a_list_are_ignored_individually() -> None:
    assert extract_citations("x [1, 7, 2]", 2) == [1, 2]


@pytest.mark.parametrize(
    "answer",
    [
        "no markers here",
        "[a] [1-2] [] [-1] [1.5] (1) {1}",
        "[１]",  # full-width digit: not an ASCII source number
        "[" + "9" * 5000 + "]",  # never reaches int()
        "[1 2]",
    ],
)
def test_non_markers_cite_nothing(answer: str) -> None:
    assert extract_citations(answer, 3) == []


@pytest.mark.parametrize("count", [0, -1])
def test_no_sources_no_citations(count: int) -> None:
    assert extract_citations("A [1] B [2]", count) == []


def test_leading_zeros_read_as_the_number() -> None:
    assert extract_citations("A [01]", 1) == [1]


def test_empty_answer() -> None:
    assert extract_citations("", 5) == []


def test_snippet_is_the_whole_text_when_it_fits() -> None:
    assert snippet("  Short text.\n", 300) == ("Short text.", False)


def test_snippet_cuts_at_the_last_word_boundary_within_the_bound() -> None:
    text = "alpha beta gamma delta"
    cut = snippet(text, 13)  # "alpha beta ga|" -> back to the space before "gamma"
    assert cut == ("alpha beta", True)
    assert len(cut.text) <= 13 and text.startswith(cut.text)
    # A bound that ends exactly before a space keeps the whole word.
    assert snippet(text, 10) == ("alpha beta", True)
    # Any whitespace is a boundary (newline, tab, no-break space).
    assert snippet("one\ntwo\tthree\u00a0four", 12) == ("one\ntwo", True)


def test_snippet_cuts_one_long_word_at_the_bound_and_counts_code_points() -> None:
    assert snippet("x" * 50, 8) == ("x" * 8, True)
    assert snippet("é" * 10 + " fin", 5) == ("é" * 5, True)


def test_snippet_bound_zero_gives_nothing() -> None:
    assert snippet("anything", 0) == ("", True)
    assert snippet("", 0) == ("", False)


def test_renumber_markers_rewrites_only_markers() -> None:
    numbers = {3: 1, 1: 2}
    answer = "A [3]. B [1][3]. Both [3, 1]. Not a marker [a] or [1-2]. Unknown [2]."
    assert renumber_markers(answer, numbers) == (
        "A [1]. B [2][1]. Both [1, 2]. Not a marker [a] or [1-2]. Unknown [2]."
    )
