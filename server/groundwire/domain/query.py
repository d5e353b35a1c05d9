"""Query text rules: bounds, exact phrases, the lexical query, and how a
follow-up is rewritten into a retrieval query."""

from __future__ import annotations

from enum import StrEnum

from groundwire.domain.analysis import PLAIN, Analyzer
from groundwire.domain.bm25 import DEFAULT_MAX_TERMS
from groundwire.domain.errors import invalid
from groundwire.domain.retrieval import LexicalQuery


class QueryRewriting(StrEnum):
    """How a follow-up message becomes the retrieval query (an agent's RAG policy)."""

    # The message as written.
    NONE = "none"
    # The last two user turns and the message, joined (no model call).
    HISTORY = "history"
    # A self-contained query written by the agent's model from the conversation.
    MODEL = "model"


def validate_query_text(text: str, max_chars: int, field_path: str = "query.text") -> str:
    """Reject empty, whitespace-only and over-long query text; return it stripped."""
    if len(text) > max_chars:
        raise invalid("FIELD_TOO_LONG", field_path, f"query text exceeds {max_chars} characters")
    stripped = text.strip()
    if not stripped:
        raise invalid("EMPTY_QUERY", field_path, "query text is empty or whitespace only")
    return stripped


def split_phrases(text: str, field_path: str = "query.text") -> tuple[str, list[str]]:
    """Split query text into loose text and exact phrases.

    Double quotes delimit phrases (surrounding quotes express exact-phrase
    intent); phrases may be mixed with loose terms. An odd number of quotes is an
    unterminated phrase. Empty phrases are ignored."""
    if text.count('"') % 2:
        raise invalid(
            "UNTERMINATED_PHRASE",
            field_path,
            "query has an opening double quote with no closing one",
        )
    pieces = text.split('"')
    loose = " ".join(pieces[0::2])
    phrases = [p.strip() for p in pieces[1::2] if p.strip()]
    return loose, phrases


def semantic_text(text: str) -> str:
    """The text embedded for the semantic leg: quotes removed, whitespace folded."""
    return " ".join(text.replace('"', " ").split())


def parse_lexical(
    text: str,
    field_path: str = "query.text",
    analyzer: Analyzer = PLAIN,
    max_terms: int = DEFAULT_MAX_TERMS,
) -> LexicalQuery:
    """Parse query text into loose terms and exact phrases, analyzed with the
    index's `analyzer` (the one its chunks were indexed with).

    Phrase words that are terms also count as terms for ranking (stop words do
    not); a phrase of one word is just a required term."""
    loose, phrases = split_phrases(text, field_path)
    terms = analyzer.terms(loose)
    phrase_tokens: list[tuple[str, ...]] = []
    for phrase in phrases:
        analyzed = analyzer.analyze(phrase)
        terms.extend(analyzed.terms)
        if analyzed.words:
            phrase_tokens.append(tuple(analyzed.words))
    return LexicalQuery(
        text=text,
        terms=tuple(terms),
        phrases=tuple(phrase_tokens),
        max_terms=max_terms,
        analyzer=analyzer,
    )


def contains_phrase(words: list[str], phrase: tuple[str, ...]) -> bool:
    """True when `phrase` occurs as a contiguous run of `words`."""
    n = len(phrase)
    if n == 0:
        return True
    first = phrase[0]
    for i in range(len(words) - n + 1):
        if words[i] == first and tuple(words[i : i + n]) == phrase:
            return True
    return False
