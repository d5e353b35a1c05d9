"""`kind = "url"` sources in the configuration: every rule names the offending key
and never echoes the URL (its query may hold a secret)."""

from __future__ import annotations

from typing import Any

import pytest

from groundwire.app.config import ConfigError, parse_config
from groundwire.app.factories import _sources
from groundwire.indexes.sources import UrlEntry, UrlSource


def cfg(source: dict[str, Any]) -> dict[str, Any]:
    return {
        "auth": {"mode": "disabled"},
        "indexes": {"web": {"sources": [{"kind": "url", **source}]}},
    }


def error(source: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(cfg(source))
    text = str(info.value)
    assert "secret" not in text
    return text


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            {"urls": ["ftp://host/x?k=secret"]},
            "indexes.web.sources.0.url.urls.0.url: Value error, only http and https",
        ),
        (
            {"urls": ["https://u:secret@host/x"]},
            "urls.0.url: Value error, URLs must not contain credentials",
        ),
        ({"urls": ["relative/secret"]}, "urls.0.url: Value error, only http and https"),
        ({"urls": ["http:///secret"]}, "urls.0.url: Value error, not an absolute URL"),
        ({"urls": []}, "indexes.web.sources.0.url.urls: List should have at least 1 item"),
        (
            {"urls": ["http://169.254.169.254/secret"]},
            "urls.0: the address is refused (METADATA_ADDRESS)",
        ),
        (
            {"urls": ["https://example.com/", "http://10.0.0.1/secret"]},
            "urls.1: the address is refused (PRIVATE_ADDRESS)",
        ),
        ({"urls": ["http://[::1]/secret"]}, "LOOPBACK_ADDRESS"),
        (
            {"urls": ["https://e.com/a"], "allow_cidrs": ["10.0.0.0/33"]},
            "allow_cidrs.0: Value error, not a CIDR block",
        ),
        ({"urls": ["https://e.com/a"], "allow_hosts": ["bad host"]}, "allow_hosts.0"),
        (
            {"urls": ["https://e.com/a?x=secret", "https://e.com/a?y=secret"]},
            "urls.1: two URLs map to the same document id",
        ),
        (
            {"urls": ["https://e.com/" + "p" * 600]},
            "urls.0: the URL makes a document id longer than 512 characters",
        ),
        ({"urls": ["https://e.com/a"], "max_redirects": 50}, "max_redirects"),
        ({"urls": ["https://e.com/a"], "connect_timeout_seconds": 0}, "connect_timeout_seconds"),
        ({"urls": ["https://e.com/a"], "max_bytes": 0}, "max_bytes"),
        (
            {"urls": ["https://e.com/a"], "headers": {}},
            "indexes.web.sources.0.url.headers: Extra inputs",
        ),
        (
            {"urls": [{"url": "https://e.com/a", "id": ""}]},
            "urls.0.id: String should match pattern",
        ),
    ],
)
def test_invalid_url_sources_name_the_key(source: dict[str, Any], expected: str) -> None:
    assert expected in error(source)


def test_a_valid_source_builds_entries_without_query_in_ids() -> None:
    config = parse_config(
        cfg(
            {
                "urls": [
                    "https://Docs.Example.com:8443/guide/intro.html?token=secret#top",
                    {"url": "https://e.com/a?x=1", "id": "a-x1"},
                    "http://10.1.2.3/wiki",
                ],
                "allow_cidrs": ["10.1.0.0/16"],
                "allow_hosts": ["wiki.internal"],
            }
        )
    )
    (source,) = _sources(config.indexes["web"])
    assert isinstance(source, UrlSource)
    assert source.urls == (
        UrlEntry(
            "https://Docs.Example.com:8443/guide/intro.html?token=secret#top",
            "https://docs.example.com:8443/guide/intro.html",
        ),
        UrlEntry("https://e.com/a?x=1", "a-x1"),
        UrlEntry("http://10.1.2.3/wiki", "http://10.1.2.3/wiki"),
    )
    assert source.allow_hosts == frozenset({"wiki.internal"})
