"""Page tokens (issue 19): authenticated with the server key and bound to the listing
that issued them, so anything else is INVALID_PAGE_TOKEN on `page_token`."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from groundwire.api.pagination import (
    LIST_AGENTS,
    LIST_INDEXES,
    LIST_OPERATIONS,
    MAX_PAGE_TOKEN_CHARS,
    PageTokens,
    listing,
)
from groundwire.app.config import GroundwireConfig, parse_config
from groundwire.app.config_base import ConfigError
from groundwire.app.factories import page_tokens
from groundwire.domain.errors import ErrorKind, GroundwireError

NAMES = [f"n{i:02d}" for i in range(10)]
INDEXES = listing(LIST_INDEXES, "")
DOCS_OPS = listing(LIST_OPERATIONS, "", "docs")


def refused(call: object) -> None:
    assert callable(call)
    with pytest.raises(GroundwireError) as info:
        call()
    err = info.value
    assert (err.kind, err.reason) == (ErrorKind.INVALID_ARGUMENT, "INVALID_PAGE_TOKEN")
    assert [v.field for v in err.violations] == ["page_token"]


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _raw(token: str) -> bytes:
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))


def test_valid_tokens_walk_every_page() -> None:
    tokens = PageTokens()
    seen, token = [], ""
    while True:
        page, token = tokens.page_of_names(INDEXES, NAMES, 3, token)
        seen += page
        if not token:
            break
    assert seen == NAMES
    op = tokens.operations_token(DOCS_OPS, 1234.5, "op-1")
    assert tokens.operations_cursor(op, DOCS_OPS) == (1234.5, "op-1")
    assert tokens.operations_cursor("", DOCS_OPS) is None


def test_a_configured_key_is_shared_by_replicas_and_survives_restart() -> None:
    secret = "k" * 40
    token = PageTokens(secret).operations_token(DOCS_OPS, 1.0, "op")
    assert PageTokens(secret).operations_cursor(token, DOCS_OPS) == (1.0, "op")
    refused(lambda: PageTokens("j" * 40).operations_cursor(token, DOCS_OPS))


def test_without_a_key_tokens_do_not_cross_processes() -> None:
    _, token = PageTokens().page_of_names(INDEXES, NAMES, 3, "")
    refused(lambda: PageTokens().page_of_names(INDEXES, NAMES, 3, token))


def test_tokens_are_bound_to_their_listing_tenant_and_filter() -> None:
    tokens = PageTokens()
    _, names_token = tokens.page_of_names(INDEXES, NAMES, 3, "")
    ops_token = tokens.operations_token(DOCS_OPS, 1.0, "op")
    # ListIndexes -> ListAgents / ListOperations, and back.
    refused(lambda: tokens.page_of_names(listing(LIST_AGENTS, ""), NAMES, 3, names_token))
    refused(lambda: tokens.operations_cursor(names_token, DOCS_OPS))
    refused(lambda: tokens.page_of_names(INDEXES, NAMES, 3, ops_token))
    # Another index filter, or none, or another caller tenant.
    refused(lambda: tokens.operations_cursor(ops_token, listing(LIST_OPERATIONS, "", "other")))
    refused(lambda: tokens.operations_cursor(ops_token, listing(LIST_OPERATIONS, "", "")))
    refused(lambda: tokens.operations_cursor(ops_token, listing(LIST_OPERATIONS, "acme", "docs")))
    refused(lambda: tokens.page_of_names(listing(LIST_INDEXES, "acme"), NAMES, 3, names_token))


def test_forged_truncated_and_random_tokens_are_refused() -> None:
    tokens = PageTokens()
    good = tokens.operations_token(DOCS_OPS, 1.0, "op")
    raw = _raw(good)
    payload = raw[1:-32]
    forged_payload = payload.replace(b'"op"', b'"zz"')
    cases = {
        "flipped MAC bit": _b64(raw[:-1] + bytes([raw[-1] ^ 1])),
        "edited payload, old MAC": _b64(raw[:1] + forged_payload + raw[-32:]),
        "truncated": good[:-4],
        "MAC only": _b64(raw[-32:]),
        "empty payload": _b64(raw[:1] + raw[-32:]),
        "unsigned JSON (the old format)": base64.urlsafe_b64encode(
            json.dumps({"index": "docs", "t": 1.0, "id": "op"}).encode()
        ).decode(),
        "random bytes": _b64(os.urandom(80)),
        "not base64": "%%%",
        "non-ASCII": "é" * 8,
        "oversized": "A" * (MAX_PAGE_TOKEN_CHARS + 1),
        "oversized, validly signed": tokens.issue(DOCS_OPS, {"t": 1.0, "id": "x" * 2000}),
    }
    for name, token in cases.items():
        assert token, name
        refused(lambda token=token: tokens.operations_cursor(token, DOCS_OPS))
        refused(lambda token=token: tokens.page_of_names(INDEXES, NAMES, 3, token))


def test_authentic_tokens_with_unusable_cursors_are_refused_not_crashes() -> None:
    tokens = PageTokens()
    cursors: list[dict[str, object]] = [
        {"t": "1", "id": "op"},
        {"t": True, "id": "op"},
        {"t": 1.0, "id": 5},
        {},
    ]
    for cursor in cursors:
        token = tokens.issue(DOCS_OPS, cursor)
        refused(lambda token=token: tokens.operations_cursor(token, DOCS_OPS))
    token = tokens.issue(DOCS_OPS, {"t": 10**400, "id": "op"})
    refused(lambda: tokens.operations_cursor(token, DOCS_OPS))
    refused(lambda: tokens.page_of_names(INDEXES, NAMES, 3, tokens.issue(INDEXES, {"after": 1})))


def _config(server: dict[str, object]) -> GroundwireConfig:
    return parse_config({"auth": {"mode": "disabled"}, "server": server})


def test_page_token_key_from_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("s" * 40 + "\n")
    from_file = page_tokens(_config({"page_token_key": {"file": str(key_file)}}))
    monkeypatch.setenv("GW_PAGE_KEY", "s" * 40)
    from_env = page_tokens(_config({"page_token_key": {"env": "GW_PAGE_KEY"}}))
    assert not from_file.ephemeral and not from_env.ephemeral
    token = from_file.operations_token(DOCS_OPS, 2.0, "op")
    assert from_env.operations_cursor(token, DOCS_OPS) == (2.0, "op")
    assert page_tokens(_config({})).ephemeral
    monkeypatch.setenv("GW_PAGE_KEY", "short")
    with pytest.raises(ConfigError, match="page_token_key"):
        page_tokens(_config({"page_token_key": {"env": "GW_PAGE_KEY"}}))
    monkeypatch.delenv("GW_PAGE_KEY")
    with pytest.raises(ConfigError, match="page_token_key"):
        page_tokens(_config({"page_token_key": {"env": "GW_PAGE_KEY"}}))
