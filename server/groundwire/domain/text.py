"""Text normalization, identifier-aware tokenization and the token estimator."""

from __future__ import annotations

import re
import unicodedata

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# A compound token: alphanumeric runs joined by connector characters that are part
# of identifiers (POL-HR-014, filename.cs, a/b, C#, C++ is left to the parts).
_COMPOUND = re.compile(r"[^\W_]+(?:[._\-/:#+@][^\W_]+)*")
# The identifier rule, shared with keyword derivation (domain/query_rewrite.py).
COMPOUND_PATTERN = _COMPOUND
_PART = re.compile(r"[^\W_]+")
# camelCase / PascalCase / acronym / digit boundaries inside one alphanumeric run:
# IRagRetriever -> I, Rag, Retriever; HTTPServer2 -> HTTP, Server, 2; CS1503 -> CS, 1503.
_SUBPART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_]+")

_ESTIMATE = re.compile(r"[^\W_]+|[^\w\s]|_", re.UNICODE)


def normalize_text(text: str) -> str:
    """Canonical document text: no BOM, "\\n" newlines, NFC, no control characters
    other than tab and newline. Character offsets always refer to this form."""
    if text.startswith("\ufeff"):
        text = text[1:]
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = unicodedata.normalize("NFC", text)
    return _CONTROL.sub("", text)


def _subparts(part: str) -> list[str]:
    pieces = _SUBPART.findall(part)
    return pieces if len(pieces) > 1 else []


def index_tokens(text: str) -> list[str]:
    """Lexical index terms, lower-cased.

    Every identifier is kept whole and also split, so POL-HR-014 yields
    ``pol-hr-014, pol, hr, 014``, IRagRetriever yields ``iragretriever, i, rag,
    retriever`` and filename.cs yields ``filename.cs, filename, cs``. Plain words
    yield themselves once, so ordinary prose is tokenized like a word tokenizer."""
    out: list[str] = []
    for match in _COMPOUND.finditer(text):
        compound = match.group(0)
        out.append(compound.lower())
        parts = _PART.findall(compound)
        if len(parts) > 1:
            out.extend(p.lower() for p in parts)
        for part in parts:
            out.extend(s.lower() for s in _subparts(part))
    return out


def phrase_words(text: str) -> list[str]:
    """The word sequence used for exact-phrase matching: alphanumeric runs,
    lower-cased (so "account recovery" matches "Account-Recovery")."""
    return [p.lower() for p in _PART.findall(text)]


def estimate_tokens(text: str) -> int:
    """Deterministic token estimate: contiguous Unicode letter/digit runs
    plus individual punctuation marks. An estimate, not a provider token count."""
    return len(_ESTIMATE.findall(text))
