"""Evidence sentences for the offline extractive model: splitting, scoring and the
answerability rule (the rules themselves are stated in providers/chat/offline.py).

The model's scorer is BM25 over the candidate sentences with the sentence's title
and headings as weak context (`score_bm25_context`); `score_bm25` is the same
without context. `bench/bench_extractive_answers.py` compares them with the
alternatives it measured (the first version's distinct-word count, idf of the
terms held, BM25 scaled by coverage and proximity), which it defines itself. All
are pure and deterministic.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from groundwire.domain import bm25
from groundwire.domain.analysis import ENGLISH_STOP_WORDS, Analyzer
from groundwire.domain.text import phrase_words

__all__ = [
    "CONTEXT_WEIGHT",
    "MIN_COVERAGE",
    "Candidate",
    "Scored",
    "answerability",
    "candidates_of",
    "choose",
    "coverage",
    "held_terms",
    "question_terms",
    "score_bm25",
    "score_bm25_context",
    "split_sentences",
    "split_with_headings",
    "term_weights",
]

# The share of the question's idf weight the best sentence's source must hold for
# the model to answer (`answerability`; calibrated on eval/answers/key_facts.jsonl
# with bench/bench_extractive_answers.py).
MIN_COVERAGE = 0.55

_HEADING = re.compile(r"^\s*#{1,6}\s")
_BULLET = re.compile(r"^\s*(?:[-*+>]\s+|\d{1,3}[.)]\s+)+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
# Citation-like markers inside source text must not become citations of the answer.
_MARKER = re.compile(r"\s*\[[0-9,\s]+\]")

# Words that say nothing about the topic of a question (first version's list).
_QUESTION_STOP_TEXT = """
    a an and are as at be been but by can could did do does for from had has have how i if in
    into is it its may me might must my of on or our should so than that the their them then
    there these they this those to was we were what when where which who whom why will with
    would you your about any all also
"""
QUESTION_STOP_WORDS = frozenset(_QUESTION_STOP_TEXT.split())
# BM25 terms: the product's English analysis (Snowball stems, Snowball stop words)
# without the words that only shape a question.
_ANALYZER = Analyzer(
    language="english",
    stemming=True,
    stop_words=ENGLISH_STOP_WORDS | QUESTION_STOP_WORDS,
    stop_source="english",
)
# Stems of words that only shape a question: amounts, times and modality ("how
# many", "how long", "how often", "how quickly"; the evidence states the amount
# instead) and the asking verbs "get", "tell", "know".
_QUESTION_ONLY = frozenset(
    {"mani", "much", "long", "often", "quick", "soon", "big", "get", "tell", "know"}
    | {"may", "might", "must", "will", "would", "shall"}
)


@dataclass(frozen=True, slots=True)
class Candidate:
    """One evidence sentence: its source's order and citation number, its position
    in the source, its text, its source's title and the headings above it in the
    source (its context)."""

    source_order: int
    position: int
    number: int
    text: str
    title: str = ""
    headings: str = ""

    @property
    def context(self) -> str:
        return f"{self.title} {self.headings}".strip()


@dataclass(frozen=True, slots=True)
class Scored:
    """Candidates' scores and the share of the question's weight each one covers."""

    scores: list[float]
    coverage: list[float]


Scorer = Callable[[str, Sequence[Candidate]], Scored]


# -- splitting -----------------------------------------------------------------------


def _logical_lines(text: str) -> list[str]:
    """Re-join hard-wrapped paragraph lines (Markdown wraps prose at ~100
    characters) so a sentence is not cut at a line break; headings, list items,
    table rows and blank lines start new lines."""
    out: list[str] = []
    joinable = False
    for raw in text.split("\n"):
        line = raw.strip()
        starts_block = (
            not line or bool(_HEADING.match(line)) or bool(_BULLET.match(line)) or line[0] in "|>`"
        )
        if joinable and not starts_block:
            out[-1] = f"{out[-1]} {line}"
        else:
            out.append(line)
        joinable = bool(line) and not _HEADING.match(line) and line[0] not in "|`"
    return out


def split_sentences(text: str) -> list[str]:
    """The candidate sentences of a source: line by line, then at `.`, `!`, `?`;
    headings dropped, bullets and citation-like markers removed."""
    return [sentence for sentence, _ in split_with_headings(text)]


def split_with_headings(text: str) -> list[tuple[str, str]]:
    """`split_sentences` with, for each sentence, the Markdown headings in force
    above it in the source (outermost first, joined by spaces)."""
    out: list[tuple[str, str]] = []
    headings: list[tuple[int, str]] = []
    for line in _logical_lines(text):
        heading = _HEADING.match(line)
        if heading:
            level = line.lstrip().index(" ")
            headings = [h for h in headings if h[0] < level]
            headings.append((level, line.lstrip("# ").strip()))
            continue
        line = _MARKER.sub("", _BULLET.sub("", line)).strip()
        above = " ".join(h[1] for h in headings)
        out.extend((s.strip(), above) for s in _SENTENCE_END.split(line) if phrase_words(s))
    return out


def candidates_of(sources: Sequence[tuple[int, str, str]]) -> list[Candidate]:
    """The candidate sentences of sources given as (citation number, title, text),
    in source order then position."""
    return [
        Candidate(order, position, number, sentence, title, above)
        for order, (number, title, text) in enumerate(sources)
        for position, (sentence, above) in enumerate(split_with_headings(text))
    ]


# -- BM25 over the candidate sentences -----------------------------------------------


def question_terms(question: str) -> list[str]:
    """The distinct analyzed terms of a question, in question order."""
    return [t for t in dict.fromkeys(_ANALYZER.terms(question)) if t not in _QUESTION_ONLY]


def _same(term: str, wanted: str) -> bool:
    """A term stands for a question term when equal to it, or when the shorter of
    the two (at least 5 characters) starts the other: Snowball leaves "recover" and
    "recovery" as "recov" and "recoveri", "configure" and "configuration" as
    "configur" and "configur"."""
    if term == wanted:
        return True
    short, long_ = (term, wanted) if len(term) <= len(wanted) else (wanted, term)
    return len(short) >= _PREFIX and long_.startswith(short)


_PREFIX = 5


def held_terms(text: str, wanted: Sequence[str]) -> tuple[Counter[str], list[str], int]:
    """The question terms `text` holds (with repeats), its terms as question terms
    where they stand for one ("" otherwise), and its length in terms. A term equal
    to a question term stands for that one, never for a longer term it starts: an
    identifier's parts ("zqacm" of "zqacme29819315marker") are question terms of
    their own."""
    bag: Counter[str] = Counter()
    words: list[str] = []
    exact = set(wanted)
    terms = _ANALYZER.terms(text)
    for term in terms:
        hit = term if term in exact else next((w for w in wanted if _same(term, w)), "")
        if hit:
            bag[hit] += 1
        words.append(hit)
    return bag, words, len(terms)


def term_weights(wanted: Sequence[str], bags: Sequence[Counter[str]]) -> dict[str, float]:
    df = Counter(t for b in bags for t in b)
    return {t: bm25.idf(len(bags), df[t]) for t in wanted}


def coverage(wanted: Sequence[str], held: Counter[str], weights: dict[str, float]) -> float:
    """The share of the question terms' idf weight that `held` contains."""
    total = sum(weights[t] for t in wanted)
    return sum(weights[t] for t in wanted if held[t]) / total if total else 0.0


def score_bm25(
    question: str, candidates: Sequence[Candidate], *, context_weight: float = 0.0
) -> Scored:
    """BM25 (domain/bm25.py: k1 1.2, b 0.75, Lucene idf) of each sentence for the
    question's distinct terms, N, df and the mean length taken over the candidate
    sentences; coverage weights each question term by that idf (a term no sentence
    holds weighs the most). With `context_weight`, a question term the sentence
    lacks but its context (title, headings) holds adds that share of its idf."""
    wanted = question_terms(question)
    held = [held_terms(c.text, wanted) for c in candidates]
    bags = [h[0] for h in held]
    lengths = [float(h[2]) for h in held]
    avgdl = bm25.average_length(int(sum(lengths)), len(bags))
    weights = term_weights(wanted, bags)
    scores: list[float] = []
    for candidate, bag, length in zip(candidates, bags, lengths, strict=True):
        score = 0.0
        around = held_terms(candidate.context, wanted)[0] if context_weight else Counter[str]()
        for term in wanted:
            if bag[term]:
                score += bm25.term_score(weights[term], float(bag[term]), length, avgdl)
            elif around[term]:
                score += context_weight * weights[term]
        scores.append(score)
    return Scored(scores, [coverage(wanted, bag, weights) for bag in bags])


# A question term found only in a sentence's title or headings counts this share
# of its idf (a term at the mean length and tf 1 counts its whole idf).
CONTEXT_WEIGHT = 0.5


def score_bm25_context(question: str, candidates: Sequence[Candidate]) -> Scored:
    """`score_bm25` with the sentence's context counted at `CONTEXT_WEIGHT`."""
    return score_bm25(question, candidates, context_weight=CONTEXT_WEIGHT)


def answerability(question: str, candidates: Sequence[Candidate], source: str) -> float:
    """The share of the question terms' weight that `source` (the text of the best
    sentence's source) holds, each distinct question term weighing its BM25 idf over
    the candidate sentences (a term no sentence holds weighs the most)."""
    wanted = question_terms(question)
    weights = term_weights(wanted, [held_terms(c.text, wanted)[0] for c in candidates])
    return coverage(wanted, held_terms(source, wanted)[0], weights)


def choose(
    question: str,
    candidates: Sequence[Candidate],
    sources: Sequence[str],
    scorer: Scorer = score_bm25_context,
    *,
    limit: int = 3,
    min_coverage: float = MIN_COVERAGE,
) -> list[Candidate]:
    """The sentences that answer, best first. Only sentences holding a question
    term themselves or in their headings are eligible: none when no sentence is,
    or when the best one's source (`sources[source_order]`) holds less than
    `min_coverage` of the question (`answerability`); else the best and up to
    `limit - 1` more eligible ones scoring at least half as much (ties: source
    order, then position; a sentence repeated word for word counts once)."""
    scored = scorer(question, candidates)
    wanted = question_terms(question)

    def eligible(i: int) -> bool:
        if scored.coverage[i] > 0.0:
            return True
        headings = candidates[i].headings
        return bool(headings) and scored.scores[i] > 0.0 and bool(held_terms(headings, wanted)[0])

    order = sorted(
        (i for i in range(len(candidates)) if eligible(i)),
        key=lambda i: (-scored.scores[i], candidates[i].source_order, candidates[i].position),
    )
    if not order:
        return []
    top = candidates[order[0]]
    best = scored.scores[order[0]]
    if min_coverage > 0.0 and (
        answerability(question, candidates, sources[top.source_order]) < min_coverage
    ):
        return []
    chosen: list[Candidate] = []
    seen: set[str] = set()
    for i in order:
        if len(chosen) == limit or scored.scores[i] * 2 < best:
            break
        if candidates[i].text in seen:
            continue
        seen.add(candidates[i].text)
        chosen.append(candidates[i])
    return chosen
