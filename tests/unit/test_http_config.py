"""`[http]`: off unless set, validated with the key named, on in the embedded default."""

from __future__ import annotations

import pytest

from groundwire.app.config import ConfigError, parse_config
from groundwire.app.defaults import default_config


def cfg(http: dict[str, object]) -> object:
    return parse_config({"auth": {"mode": "disabled"}, "http": http})


def test_off_unless_configured_and_on_in_the_embedded_default() -> None:
    assert parse_config({"auth": {"mode": "disabled"}}).http.host_port() is None
    assert default_config().http.host_port() == ("127.0.0.1", 8080)
    assert parse_config({"auth": {"mode": "disabled"}}).http.cors_allowed_origins == []


@pytest.mark.parametrize(
    ("http", "key"),
    [
        ({"address": "8080"}, "http.address"),
        ({"address": "host:port"}, "http.address"),
        ({"address": "127.0.0.1:70000"}, "http.address"),
        ({"cors_allowed_origins": ["example.com"]}, "http.cors_allowed_origins"),
        ({"cors_allowed_origins": ["https://a.example/path"]}, "http.cors_allowed_origins"),
        ({"cors_allowed_origins": ["*", "https://a.example"]}, "http.cors_allowed_origins"),
        ({"cors_max_age_seconds": -1}, "http.cors_max_age_seconds"),
        ({"adress": "127.0.0.1:8080"}, "http.adress"),
    ],
)
def test_bad_values_name_their_key(http: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        cfg(http)
    assert key in str(caught.value)


def test_ipv6_and_wildcard() -> None:
    parsed = parse_config(
        {
            "auth": {"mode": "disabled"},
            "http": {"address": "[::1]:0", "cors_allowed_origins": ["*"]},
        }
    )
    assert parsed.http.host_port() == ("::1", 0)
