"""The preview redactor and bound (domain/redaction.py): every secret shape is
removed, ordinary text survives, previews are normalized and never longer than
their bound, and redaction runs before truncation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundwire.domain.redaction import (
    ELLIPSIS,
    ContentPreviews,
    luhn_valid,
    preview,
    redact,
)

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    "-----END RSA PRIVATE KEY-----"
)

# (planted secret, the marker kind that must replace it)
SECRETS = [
    ("alice.smith+hr@example.co.uk", "email"),
    ("4111 1111 1111 1111", "card"),
    ("5500-0000-0000-0004", "card"),
    ("378282246310005", "card"),
    ("Bearer eyJhbGciOiJIUzI1NiJ9abc.def", "token"),
    ("sk-proj-Abc123def456GHI789jkl012", "api-key"),
    ("sk-ant-api03-AbCdEf0123456789xyz", "api-key"),
    ("ghp_0123456789abcdefghijABCDEFGHIJ012345", "api-key"),
    ("xoxb-1234567890-abcdefghij", "api-key"),
    ("AIzaSyA1234567890abcdefghijklmnopqrstuv", "api-key"),
    ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "api-key"),
    ("gw_Q2hhbmdlTWUtUGxlYXNlLXRoaXMtaXMtYS10ZXN0", "api-key"),
    ("AKIAIOSFODNN7EXAMPLE", "aws-key"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N", "jwt"),
    (PEM, "private-key"),
    ("123456789012345678901234", "number"),
    ("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "key"),
]


@pytest.mark.parametrize(("secret", "kind"), SECRETS, ids=[k for _, k in SECRETS])
def test_each_secret_shape_is_redacted(secret: str, kind: str) -> None:
    out = redact(f"Contact: {secret} (see above).")
    assert secret not in out
    # A long digit run almost always holds a Luhn-valid stretch: card or number.
    kinds = ("card", "number") if kind == "number" else (kind,)
    assert any(f"[REDACTED:{k}]" in out for k in kinds), out
    assert out.startswith("Contact: ") and out.endswith(" (see above).")


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("password = hunter2-correct-horse", "password = "),
        ("api_key: 'q1w2e3r4t5'", "api_key: "),
        (
            'AWS_SECRET_ACCESS_KEY="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
            "AWS_SECRET_ACCESS_KEY=",
        ),
        ("client_secret=abcd1234", "client_secret="),
        ("the token is tok-9922-abcd", "the token is "),
    ],
)
def test_assignments_keep_the_name_and_lose_the_value(text: str, name: str) -> None:
    out = redact(text)
    value = text.split()[-1].split("=")[-1].split(":")[-1].strip("'\" ")
    assert value not in out
    # The name (and everything before the value) stays; the value, quotes
    # included, becomes one marker.
    assert out == name + "[REDACTED:secret]"


def test_credentials_in_urls_are_redacted() -> None:
    out = redact("fetch https://admin:s3cr3t-pw@db.internal:5432/app now")
    assert "admin" not in out and "s3cr3t" not in out
    assert "https://[REDACTED:credentials]@db.internal" in out


def test_an_unterminated_private_key_block_is_redacted_to_the_end() -> None:
    head = PEM.split("-----END")[0]
    assert redact(f"key: {head}") == "key: [REDACTED:private-key]"


def test_luhn() -> None:
    assert luhn_valid("4111111111111111")
    assert luhn_valid("79927398713")
    assert not luhn_valid("4111111111111112")
    assert not luhn_valid("")


def test_twelve_digits_are_kept_and_longer_runs_with_a_luhn_stretch_are_not() -> None:
    # Card detection looks at runs of 13+ digits: any Luhn-valid stretch of
    # 13-19 digits inside the run redacts it (a card next to other digits).
    assert redact("id 411111111112") == "id 411111111112"
    assert redact("id 4111111111111112") == "id [REDACTED:card]"
    assert redact("id 04111111111111111") == "id [REDACTED:card]"


def test_ordinary_text_and_numbers_survive() -> None:
    text = (
        "Parental leave is 16 weeks; call 555-0134 or visit room 4.2. "
        "Order 411111111112 shipped on 2024-05-01, total 1,299.00 EUR. "
        "Version 3.11.7 of the handbook, ISO 8601 dates, user@ sign alone."
    )
    assert redact(text) == text


def test_redaction_is_idempotent() -> None:
    text = " ".join(s for s, _ in SECRETS)
    once = redact(text)
    assert redact(once) == once


def test_preview_is_normalized_and_bounded() -> None:
    assert preview("  a\n\tb\x00  c  ", 160) == "a b c"
    long = "word " * 100
    out = preview(long, 20)
    assert len(out) == 20 and out.endswith(ELLIPSIS)
    with pytest.raises(ValueError):
        preview("x", 0)


def test_redaction_runs_before_truncation() -> None:
    # The bound falls in the middle of the key: neither the whole key nor a
    # fragment of it may show.
    secret = "sk-proj-" + "A1b2C3d4E5f6G7h8" * 4
    out = preview("prefix " + secret + " suffix", 24)
    assert "A1b2" not in out and len(out) <= 24
    assert out.startswith("prefix [REDACTED")


def test_a_huge_text_is_examined_in_a_window_without_leaking_the_cut_token() -> None:
    secret_fragment = "Zq9" * 40  # a key-like token that the window cuts through
    text = "x " * 5000 + secret_fragment
    out = preview(text, 1000)
    assert len(out) <= 1000 and "Zq9" not in out
    tail = "a " * 10_000 + "sk-proj-" + "Q" * 30
    assert "QQQQ" not in preview(tail, 50)


@settings(max_examples=200, deadline=None)
@given(
    before=st.text(max_size=300),
    after=st.text(max_size=300),
    secret=st.sampled_from([s for s, _ in SECRETS]),
    bound=st.integers(min_value=16, max_value=400),
)
def test_no_secret_or_long_fragment_of_it_survives_a_preview(
    before: str, after: str, secret: str, bound: int
) -> None:
    out = preview(f"{before} {secret} {after}", bound)
    assert len(out) <= bound
    # No 12-character piece of the secret (its whitespace normalized) shows.
    flat = " ".join(secret.split())
    pieces = {flat[i : i + 12] for i in range(0, max(1, len(flat) - 11))}
    leaked = [p for p in pieces if p in out and p not in f"{before} {after}"]
    assert not leaked


def test_preview_policy_is_off_by_default_and_bounded_when_on() -> None:
    assert ContentPreviews().fields("q", ["t"]) is None
    policy = ContentPreviews(enabled=True, max_chars=16, max_items=2)
    fields = policy.fields("mail me at bob@example.com", ["one", "two", "three"])
    assert fields == {
        "query_preview": "mail me at [RED" + ELLIPSIS,
        "text_previews": ["one", "two"],
    }
    no_query = ContentPreviews(enabled=True, include_query=False).fields("secret q", ["t"])
    assert no_query == {"text_previews": ["t"]}
    with pytest.raises(ValueError):
        ContentPreviews(max_chars=0)
    with pytest.raises(ValueError):
        ContentPreviews(max_chars=5000)
