"""Validation rules of `kind = "url"` sources, shared by the configuration models.
Messages name the rule, never the URL (a query string may hold a secret)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from groundwire.ingestion.sources import url_document_id as url_document_id
from groundwire.ingestion.url_policy import (
    AllowList,
    UrlRefusal,
    UrlRefused,
    check_address,
    check_url,
    literal_address,
)

_MESSAGES = {
    UrlRefusal.SCHEME_NOT_ALLOWED: "only http and https URLs are allowed",
    UrlRefusal.CREDENTIALS_IN_URL: "URLs must not contain credentials (user info)",
    UrlRefusal.MALFORMED_URL: "not an absolute URL with a host",
}


def url_source_url(value: str) -> str:
    """An http(s) URL with a host and no user info; raises ValueError."""
    try:
        check_url(value)
    except UrlRefused as exc:
        raise ValueError(_MESSAGES.get(exc.refusal, exc.refusal.value)) from None
    return value


def cidr_block(value: str) -> str:
    """An IPv4 or IPv6 CIDR block (host bits may be set)."""
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        raise ValueError("not a CIDR block (for example 10.1.0.0/16 or fd12::/48)") from None
    return value


def url_allow_list(hosts: Iterable[str], cidrs: Iterable[str]) -> AllowList:
    return AllowList.of(hosts, cidrs)


def url_literal_refusal(url: str, allow: AllowList) -> str | None:
    """Why a URL whose host is a literal IP address is refused already at
    configuration time (host names are checked when resolved, at every fetch)."""
    checked = check_url(url)
    address = literal_address(checked.host)
    if address is None:
        return None
    try:
        check_address(checked.host, address, allow)
    except UrlRefused as exc:
        return f"the address is refused ({exc.refusal.value}); list it in allow_cidrs to permit it"
    return None
