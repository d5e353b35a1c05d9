"""Opt-in content previews for debugging (seed 000): what a preview may show and
the redactor every preview value passes first.

groundwire is content-free by default. An operator may switch on small previews
of queries and texts for local debugging (`[logging.previews]`); they appear only
as DEBUG log fields. Each preview is, in this order:

1. redacted (`redact`): private key blocks, bearer tokens, credentials in URLs,
   API-key shapes (OpenAI/Anthropic `sk-`, GitHub, Slack, Google, Stripe, JWTs,
   groundwire's own `gw_` keys), AWS access key ids and secret keys,
   `password=`/`api_key:`-style assignments, e-mail addresses, card numbers
   (13-19 Luhn-valid digits, spaces or dashes allowed, also inside a longer
   run of digits), long digit runs and
   long letter-and-digit tokens that look like keys;
2. normalized (runs of whitespace, control characters included, become one space);
3. bounded to `max_chars` characters (an ellipsis marks a cut).

Redaction runs before truncation, so a cut can never expose part of a secret the
whole would have matched; to keep the cost bounded, only a window of the input
(large enough for any bound) is examined, and the token the window cut through
is dropped. Redaction is pattern-based: it removes the listed shapes, not every
possible secret, which is why previews stay off by default and are for debugging.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "MAX_PREVIEW_CHARS",
    "ContentPreviews",
    "luhn_valid",
    "preview",
    "redact",
]

MAX_PREVIEW_CHARS = 1000
ELLIPSIS = "…"


def _tag(kind: str) -> str:
    return f"[REDACTED:{kind}]"


# (pattern, replacement), applied in order: whole blocks and structured
# credentials before the generic shapes, so each is named by what it is.
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
            r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.DOTALL,
        ),
        _tag("private-key"),
    ),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 " + _tag("token")),
    (
        re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/@:]+:[^\s/@]+@"),
        r"\1" + _tag("credentials") + "@",
    ),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"), _tag("jwt")),
    (re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA)[A-Z0-9]{16}\b"), _tag("aws-key")),
    (
        re.compile(
            r"\b(?:sk|rk|pk)[-_](?:live|test|proj|ant|svcacct|admin)?[-_]?[A-Za-z0-9_-]{16,}"
            r"|\bgh[pousr]_[A-Za-z0-9]{30,}\b|\bgithub_pat_[A-Za-z0-9_]{22,}"
            r"|\bxox[abeprs]-[A-Za-z0-9-]{10,}|\bAIza[0-9A-Za-z_-]{35}"
            r"|\bgw_[A-Za-z0-9_-]{20,}|\bglpat-[A-Za-z0-9_-]{20,}"
        ),
        _tag("api-key"),
    ),
    (
        re.compile(
            r"(?i)\b((?:aws_)?(?:secret(?:_access)?_key|api[_-]?key|access[_-]?token|auth[_-]?token"
            r"|client[_-]?secret|secret|password|passwd|pwd|token))(\s*[:=]\s*|\s+is\s+)"
            r"[\"']?[^\s\"',;]{4,}[\"']?"
        ),
        r"\1\2" + _tag("secret"),
    ),
    (
        re.compile(r"(?i)\b[a-z0-9._%+-]{1,64}@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,63}\b"),
        _tag("email"),
    ),
)
# Runs of 13 or more digits, single spaces or dashes between groups: a run
# holding a Luhn-valid stretch of 13-19 digits is redacted whole (so a card
# number written next to other digits is caught too).
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,}(?![\d-])")
# Numbers too long to be prices, counts or dates: account numbers, keys, ids.
_LONG_NUMBER = re.compile(r"(?<!\d)\d{20,}(?!\d)")
# Long tokens mixing letters and digits (hex and base64 keys, secrets).
_KEYLIKE = re.compile(r"(?<![A-Za-z0-9+/_=-])[A-Za-z0-9+/_=-]{32,}(?![A-Za-z0-9+/_=-])")
_WHITESPACE = re.compile(r"[\s\x00-\x1f\x7f]+")


def luhn_valid(digits: str) -> bool:
    """True when `digits` (only 0-9) passes the Luhn checksum of card numbers."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return bool(digits) and total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"[ -]", "", match.group())
    for size in range(13, min(19, len(digits)) + 1):
        for start in range(len(digits) - size + 1):
            if luhn_valid(digits[start : start + size]):
                return _tag("card")
    return match.group()


def _keylike(match: re.Match[str]) -> str:
    token = match.group()
    has_digit = any(c.isdigit() for c in token)
    has_letter = any(c.isalpha() for c in token)
    return _tag("key") if has_digit and has_letter else token


def redact(text: str) -> str:
    """`text` with every secret shape of the module docstring replaced by a
    `[REDACTED:<kind>]` marker. Pure and idempotent."""
    out = text
    for pattern, replacement in _RULES:
        out = pattern.sub(replacement, out)
    out = _CARD.sub(_card, out)
    out = _LONG_NUMBER.sub(_tag("number"), out)
    return _KEYLIKE.sub(_keylike, out)


def preview(text: str, max_chars: int) -> str:
    """A redacted, normalized preview of at most `max_chars` characters."""
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    # Examine a bounded window: ample for any bound even when redaction shrinks
    # it (a redacted block becomes a short marker). If the window cut the text,
    # the token it cut through is dropped, so no fragment of a secret the whole
    # token would have matched survives.
    window = 8 * max_chars + 4096
    cut = len(text) > window
    head = text[:window]
    if cut:
        head = re.sub(r"\S+\Z", "", head)
    normalized = _WHITESPACE.sub(" ", redact(head)).strip()
    if len(normalized) > max_chars:
        return normalized[: max_chars - 1].rstrip() + ELLIPSIS
    if cut:
        return (normalized[: max_chars - 1].rstrip() + ELLIPSIS)[:max_chars]
    return normalized


@dataclass(frozen=True, slots=True)
class ContentPreviews:
    """The preview policy: off unless `enabled`; at most `max_items` texts of at
    most `max_chars` characters each; the query shown only with `include_query`."""

    enabled: bool = False
    max_chars: int = 160
    max_items: int = 5
    include_query: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.max_chars <= MAX_PREVIEW_CHARS:
            raise ValueError(f"max_chars must be within [1, {MAX_PREVIEW_CHARS}]")
        if self.max_items < 0:
            raise ValueError("max_items must not be negative")

    def fields(self, query: str | None, texts: Iterable[str]) -> dict[str, object] | None:
        """The log fields of one preview (`query_preview`, `text_previews`), or
        None when previews are off."""
        if not self.enabled:
            return None
        out: dict[str, object] = {}
        if self.include_query and query is not None:
            out["query_preview"] = preview(query, self.max_chars)
        items: list[str] = []
        for text in texts:
            if len(items) >= self.max_items:
                break
            items.append(preview(text, self.max_chars))
        out["text_previews"] = items
        return out


PREVIEWS_OFF = ContentPreviews()
