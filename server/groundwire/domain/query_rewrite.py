"""Keyword queries for the lexical leg: a conversational question becomes the
terms worth searching for, and a rewriter model's keywords are checked before
they are searched.

    "Hi! Could you tell me how many weeks of leave POL-HR-014 gives?"
        -> "weeks leave POL-HR-014"

Rules, in the order they apply:
- quoted phrases are kept whole, quotes included, in their original position;
- identifiers are always kept as written (the tokenizer's compound rule of
  domain/text.py: POL-HR-014, filename.cs, IRagRetriever, CS1503, a/b), even
  when a part of them is a stop word;
- plain words are dropped when they are English stop words or conversational
  filler (case-insensitive);
- repeated keywords are kept: BM25 weights a term by how often the query
  names it, and deduplicating cost 3-9% nDCG@10 on long questions (CISI);
- derived keywords are a subsequence of the query, so they are bounded by the
  query's own bounds; a rewriter model's reply is bounded here (MAX_KEYWORDS
  terms, MAX_KEYWORD_CHARS characters);
- when nothing is left ("what is it?"), there is no keyword query and the
  question is searched as it is.

Measured through the server with eval/experiments/keywords_server.py (LEXICAL
retrieval on the in-memory store, nDCG@10; question as written -> its keywords;
the question in a conversational frame -> its keywords): Cranfield 0.322 ->
0.341, 0.298 -> 0.339; CISI 0.325 -> 0.341, 0.265 -> 0.340; SciFact train
(claims, not questions) 0.659 -> 0.660, 0.632 -> 0.660.

Only the lexical leg searches the keywords: the semantic leg embeds the
question and the reranker reads it, because both understand prose.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from groundwire.domain.text import COMPOUND_PATTERN, phrase_words

# Bounds of a keyword query: enough for any question, small enough that a
# rewriter model cannot flood the lexical index with terms.
MAX_KEYWORDS = 32
MAX_KEYWORD_CHARS = 512
# The most a rewriter model's reply may hold before it is refused outright.
MAX_MODEL_OUTPUT_CHARS = 2000

_PHRASE = re.compile(r'"([^"]*)"')
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# A token is an identifier (kept whatever its parts) when it joins parts with a
# connector, holds a digit, or has an upper-case letter after its first.
_CONNECTED = re.compile(r"[._\-/:#+@]")
_DIGIT = re.compile(r"\d")

# English stop words (function words) and the filler of conversational
# questions. Content words such as "policy" or "leave" are never here.
_STOP_WORD_TEXT = """
    a about above after again against all also am an and any are as at be because
    been before being below between both but by can cannot could did do does doing
    done down during each either else even ever every few for from further get gets
    getting give given go goes going got had has have having he her here hers herself
    him himself his how however i if in into is it its itself just let me might mine
    more most much must my myself neither no nor not now of off often on once only or
    other others otherwise our ours ourselves out over own per quite rather really
    same shall she should so some such than that the their theirs them themselves
    then there these they this those though through thus to too under until up upon
    us very was we well were what whatever when whenever where whether which while who
    whoever whom whose why will with within without would yet you your yours yourself
    yourselves
    hi hello hey thanks thank please pls kindly ok okay yes
    tell show explain describe know want need like wondering wonder find help
    something anything thing things someone anyone
    s t d m ll re ve don doesn didn isn aren wasn weren haven hasn hadn won wouldn
    shouldn couldn
"""
STOP_WORDS = frozenset(_STOP_WORD_TEXT.split())


@dataclass(frozen=True, slots=True)
class KeywordQuery:
    """A derived keyword query: the text the lexical leg parses, and its counts."""

    text: str
    keyword_count: int
    phrase_count: int


def is_identifier(token: str) -> bool:
    """True for tokens that name something exactly (POL-HR-014, CS1503,
    IRagRetriever, filename.cs): they are kept even if they look like a stop
    word once lower-cased."""
    if _CONNECTED.search(token) or _DIGIT.search(token):
        return True
    return any(c.isupper() for c in token[1:])


def derive_keywords(
    text: str, max_terms: int | None = None, max_chars: int | None = None
) -> KeywordQuery | None:
    """The keyword query of `text`, or None when no keyword is left; with
    bounds, at most `max_terms` terms (keywords and phrases) and `max_chars`
    characters, the first ones kept.

    Quoted phrases stay whole; an unmatched quote is treated as a space (the
    keyword query must always parse)."""
    pieces: list[tuple[str, bool]] = []  # (text, is_phrase) in order
    pos = 0
    for match in _PHRASE.finditer(text):
        pieces.append((text[pos : match.start()], False))
        pieces.append((match.group(1), True))
        pos = match.end()
    pieces.append((text[pos:], False))
    out: list[str] = []
    keywords = phrases = 0
    full = False
    size = 0
    for piece, is_phrase in pieces:
        if full:
            break
        if is_phrase:
            words = " ".join(_CONTROL.sub(" ", piece).split())
            candidates = [f'"{words}"'] if phrase_words(words) else []
        else:
            candidates = [
                m.group(0)
                for m in COMPOUND_PATTERN.finditer(piece.replace('"', " "))
                if is_identifier(m.group(0)) or m.group(0).lower() not in STOP_WORDS
            ]
        for term in candidates:
            if (max_terms is not None and keywords + phrases >= max_terms) or (
                max_chars is not None and size + len(term) > max_chars
            ):
                full = True
                break
            out.append(term)
            size += len(term) + 1
            if is_phrase:
                phrases += 1
            else:
                keywords += 1
    if not out:
        return None
    return KeywordQuery(" ".join(out), keywords, phrases)


class KeywordMode(enum.StrEnum):
    """Whether an agent's lexical leg searches keywords (its RAG policy)."""

    # The query as it is.
    NONE = "none"
    # Keywords derived by the rules above (no model call).
    DERIVED = "derived"
    # Keywords written by the rewriter model, validated; derived on failure.
    MODEL = "model"


class KeywordSource(enum.Enum):
    """Where a keyword query came from."""

    DERIVED = "DERIVED"
    MODEL = "MODEL"
    # The rewriter model failed; the keywords were derived instead.
    DERIVED_AFTER_MODEL_FAILURE = "DERIVED_AFTER_MODEL_FAILURE"


@dataclass(frozen=True, slots=True)
class KeywordRewrite:
    """The keyword query the lexical leg searched, where it came from, and the
    stable code of the rewriter model's failure when it fell back."""

    query: str
    source: KeywordSource
    failure_code: str = ""


class InvalidRewrite(ValueError):
    """A rewriter model's reply that cannot be searched; `code` is stable."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


REWRITE_INVALID_OUTPUT = "REWRITE_INVALID_OUTPUT"


def validate_model_keywords(reply: str) -> KeywordQuery:
    """A rewriter model's keywords as a bounded keyword query.

    The reply must be one short line of terms: over-long replies, several
    lines of text, unbalanced quotes or a reply with no keyword left after
    the stop-word rule are refused (InvalidRewrite). Accepted replies go
    through the same rule as derived keywords, so a model cannot smuggle stop
    words, control characters or more than MAX_KEYWORDS terms into the query."""
    stripped = reply.strip()
    if not stripped or len(stripped) > MAX_MODEL_OUTPUT_CHARS:
        raise InvalidRewrite(REWRITE_INVALID_OUTPUT)
    if "\n" in stripped or "\r" in stripped:
        raise InvalidRewrite(REWRITE_INVALID_OUTPUT)
    if stripped.count('"') % 2:
        raise InvalidRewrite(REWRITE_INVALID_OUTPUT)
    # Models like to separate keywords with commas or list them as "a; b".
    derived = derive_keywords(
        re.sub(r"[,;|]+(?=\s|$)", " ", stripped), MAX_KEYWORDS, MAX_KEYWORD_CHARS
    )
    if derived is None:
        raise InvalidRewrite(REWRITE_INVALID_OUTPUT)
    return derived
