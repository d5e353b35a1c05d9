"""Lexical analysis: text -> the terms an index holds and a query searches for.

An index's analyzer is fixed by its configuration (language, stemming, stop words);
both stores index exactly the terms `Analyzer.analyze` produces and every lexical
query is analyzed with the same analyzer, so the two stores rank alike.

Rules that never change, whatever the configuration:
- the text is cut into compounds with the identifier-aware rule of domain/text.py;
- an identifier (a compound joining parts with a connector, holding a digit, or
  with an upper-case letter after its first character: POL-HR-014, CS1503,
  IRagRetriever, RetrieverFactory.cs) is indexed whole, lower-cased, and split
  exactly as `text.index_tokens` splits it; the identifier and its pieces are never
  stemmed and never dropped as stop words. With stemming on, the stems of its
  alphabetic pieces are indexed beside them (IRagRetriever also gives "retriev"), so
  prose finds identifiers and identifiers find prose as they did without stemming;
- numbers are identifiers (they hold a digit): kept as written;
- a plain word (letters only, at most its first one upper-case) is lower-cased,
  dropped when it is a stop word, and otherwise stemmed when stemming is on.

Phrases. A quoted phrase matches the analyzed word sequence in order: a document's
phrase words are every word of its text (identifiers give their alphanumeric parts,
alphabetic ones stemmed; plain words their stem), stop words included, so positions
count every word and "state of the art" matches "State of the Arts" but never
"state art". Stop words are not index terms, so they cannot select candidates: a
phrase is looked up by its other words and verified on the whole sequence. A phrase
made of stop words alone has nothing to look up and matches nothing; index with
`stop_words = "none"` to search such phrases.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

import Stemmer

from groundwire.domain.text import COMPOUND_PATTERN, PART_PATTERN, subparts

# Languages with a Snowball stemmer (PyStemmer's algorithms, "porter" excluded: it is
# the original English algorithm, kept by the library for compatibility only).
STEMMER_LANGUAGES: tuple[str, ...] = tuple(sorted(a for a in Stemmer.algorithms() if a != "porter"))

# The Snowball project's English stop word list (snowballstem.org, english.stp),
# without the contractions the tokenizer never produces whole ("isn't" is cut into
# "isn" and "t", both listed below). Function words only: no content word is here.
_ENGLISH_TEXT = """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what
    which who whom this that these those am is are was were be been being have has had
    having do does did doing would should could ought a an the and but if or because as
    until while of at by for with about against between into through during before
    after above below to from up down in out on off over under again further then once
    here there when where why how all any both each few more most other some such no nor
    not only own same so than too very cannot
    s t d ll m re ve isn aren wasn weren hasn haven hadn doesn don didn won wouldn shan
    shouldn can couldn mustn let
"""
ENGLISH_STOP_WORDS: frozenset[str] = frozenset(_ENGLISH_TEXT.split())


def is_identifier(token: str) -> bool:
    """True for compounds that name something exactly (POL-HR-014, CS1503,
    IRagRetriever, filename.cs, 2024): kept as written, never stemmed or dropped."""
    if not token.isalpha():
        return True
    return any(c.isupper() for c in token[1:])


@dataclass(frozen=True, slots=True)
class Analyzed:
    """What one text contributes to a lexical index: its terms (with repeats, in
    text order) and its phrase words (every word, in order)."""

    terms: list[str]
    words: list[str]


@dataclass(frozen=True)
class Analyzer:
    """An index's lexical analysis. `stop_words` are lower-case plain words;
    `stop_source` names where they came from ("none", "english", a language, or
    "file:<sha256 prefix>") for the descriptor."""

    language: str = "english"
    stemming: bool = False
    stop_words: frozenset[str] = frozenset()
    stop_source: str = "none"

    def __post_init__(self) -> None:
        if self.language not in STEMMER_LANGUAGES:
            raise ValueError(f"no stemmer for language {self.language!r}")

    @property
    def plain(self) -> bool:
        """True for the analysis of old: no stemming, no stop words."""
        return not self.stemming and not self.stop_words

    def descriptor(self) -> str:
        """A stable description, recorded with the published index: a change of
        analyzer changes it, which makes the next ingestion rebuild the index."""
        if self.plain:
            return "plain"
        stem = f"stem={self.language}" if self.stemming else "stem=off"
        return f"{stem};stop={self.stop_source}"

    def analyze(self, text: str, *, phrase: bool = True) -> Analyzed:
        """Terms and (with `phrase`) phrase words of `text`."""
        terms: list[str] = []
        words: list[str] = []
        plain = self.plain
        stem = _stemmer(self.language) if self.stemming else None
        stop = self.stop_words
        for match in COMPOUND_PATTERN.finditer(text):
            compound = match.group(0)
            # The common case first: an ASCII word of letters, at most its first one
            # upper-case, is one part with no sub-parts, so every branch below gives
            # it alone (lower-cased); only stop words and stems apply.
            if (
                compound.isascii()
                and compound.isalpha()
                and (len(compound) == 1 or compound[1:].islower())
            ):
                lower = compound.lower()
                word = stem(lower) if stem is not None else lower
                if lower not in stop:
                    terms.append(word)
                if phrase:
                    words.append(word)
                continue
            if plain or is_identifier(compound):
                whole = compound.lower()
                terms.append(whole)
                parts = PART_PATTERN.findall(compound)
                lowered = [p.lower() for p in parts]
                pieces = list(lowered) if len(parts) > 1 else []
                for part in parts:
                    pieces.extend(s.lower() for s in subparts(part))
                if stem is None:
                    terms.extend(pieces)
                    if phrase:
                        words.extend(lowered)
                    continue
                # The identifier itself is indexed as written (matched exactly); its
                # pieces, split where they always were, are words like any other and
                # are stemmed, so "factories" finds RetrieverFactory.cs and "acme"
                # finds ACME-PLAN. A single-run identifier (POLICIES, IRagRetriever)
                # also gives its stem when that differs.
                if len(parts) == 1 and whole.isalpha():
                    stemmed = stem(whole)
                    if stemmed != whole:
                        terms.append(stemmed)
                terms.extend(stem(p) if p.isalpha() else p for p in pieces)
                if phrase:
                    words.extend(stem(w) if w.isalpha() else w for w in lowered)
                continue
            lower = compound.lower()
            word = stem(lower) if stem is not None else lower
            if lower not in stop:
                terms.append(word)
            if phrase:
                words.append(word)
        return Analyzed(terms, words)

    def terms(self, text: str) -> list[str]:
        """The index terms of `text` (repeats kept, text order)."""
        return self.analyze(text, phrase=False).terms

    def phrase_words(self, text: str) -> list[str]:
        """The word sequence of `text` for exact-phrase matching."""
        return self.analyze(text).words


class _StemWord:
    """A memoized Snowball stem function for one language. A PyStemmer object is
    not safe to share across threads, so each thread stems with its own; the memo
    is a dict (reads and writes atomic under the GIL; stemming is pure, so a race
    only repeats work), bounded in size."""

    __slots__ = ("_language", "_local", "_memo")
    _LIMIT = 200_000

    def __init__(self, language: str) -> None:
        self._language = language
        self._memo: dict[str, str] = {}
        self._local = threading.local()

    def __call__(self, word: str) -> str:
        got = self._memo.get(word)
        if got is not None:
            return got
        stemmer: Stemmer.Stemmer | None = getattr(self._local, "stemmer", None)
        if stemmer is None:
            stemmer = self._local.stemmer = Stemmer.Stemmer(self._language, 0)
        stemmed: str = stemmer.stemWord(word)
        if len(self._memo) < self._LIMIT:
            self._memo[word] = stemmed
        return stemmed


@cache
def _stemmer(language: str) -> _StemWord:
    return _StemWord(language)


def stop_words_digest(words: Iterable[str]) -> str:
    """A short stable digest of a stop word list (for the descriptor of a file list)."""
    joined = "\n".join(sorted(set(words)))
    return hashlib.sha256(joined.encode()).hexdigest()[:12]


# The analysis of old (no stemming, no stop words): `text.index_tokens` exactly.
PLAIN = Analyzer()
# The default analyzer of a new index (chosen by measurement, see README).
ENGLISH = Analyzer("english", True, ENGLISH_STOP_WORDS, "english")
