"""`kind = "opensearch"` store sections (issue 26): what the configuration refuses,
each error naming its key, and how app/factories.py turns a section into the
store's settings (secrets resolved by reference, or a ConfigError naming the key
of one that is unset). No cluster is contacted."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundwire.app.config import ConfigError, GroundwireConfig, parse_config
from groundwire.app.store_factories import build_stores, opensearch_settings

HOST = "http://127.0.0.1:9"  # never contacted: every case fails before a connection


def config(search: dict[str, object], **extra: object) -> GroundwireConfig:
    return parse_config(
        {
            "auth": {"mode": "disabled"},
            "stores": {"search": {"kind": "opensearch", **search}},
            "indexes": {"docs": {"store": "search"}},
            **extra,
        }
    )


def refused(data: dict[str, object]) -> str:
    with pytest.raises(ConfigError) as err:
        parse_config({"auth": {"mode": "disabled"}, **data})
    return str(err.value)


def test_a_minimal_section_is_valid_with_the_documented_defaults() -> None:
    cfg = config({"hosts": [HOST]})
    s = cfg.store_configs()["search"]
    assert (s.shards, s.replicas, s.index_prefix, s.verify_certs) == (1, 1, "groundwire-", True)
    assert (s.request_timeout_ms, s.superseded_grace_ms, s.bulk_chunks, s.bulk_max_mib) == (
        30_000,
        30_000,
        500,
        8,
    )
    assert s.bulk_in_flight == 2
    assert cfg.indexes["docs"].store == "search"


def test_hosts_are_required() -> None:
    message = refused({"stores": {"search": {"kind": "opensearch"}}})
    assert "stores.search" in message and "hosts" in message
    message = refused({"stores": {"search": {"kind": "opensearch", "hosts": []}}})
    assert "stores.search" in message and "hosts" in message


@pytest.mark.parametrize(
    "bad",
    [
        "ftp://127.0.0.1:9200",
        "127.0.0.1:9200",
        "http://user:secret-pw@127.0.0.1:9200",
        "http://127.0.0.1:9200/?q=1",
        "http://127.0.0.1:9200/#frag",
    ],
)
def test_each_host_must_be_a_plain_http_url_and_is_named(bad: str) -> None:
    message = refused({"stores": {"search": {"kind": "opensearch", "hosts": [HOST, bad]}}})
    assert "stores.search" in message and "hosts[1]" in message
    # The offending value (which may hold credentials) is not echoed.
    assert "secret-pw" not in message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("hosts", [HOST]),
        ("username", "elastic"),
        ("password", {"env": "GW_TEST_OS_PASSWORD"}),
        ("api_key", {"env": "GW_TEST_OS_API_KEY"}),
        ("ca_file", "/etc/ssl/ca.pem"),
        ("verify_certs", False),
        ("request_timeout_ms", 1_000),
        ("shards", 2),
        ("replicas", 0),
        ("index_prefix", "gw-"),
        ("superseded_grace_ms", 0),
        ("bulk_chunks", 10),
        ("bulk_max_mib", 1),
        ("bulk_in_flight", 4),
    ],
)
@pytest.mark.parametrize("kind", ["postgres", "memory"])
def test_opensearch_keys_on_another_store_kind_are_errors_naming_the_key(
    kind: str, key: str, value: object
) -> None:
    message = refused({"stores": {"other": {"kind": kind, key: value}}})
    assert "stores.other" in message and f"{key}: only a kind = 'opensearch' store" in message
    message = refused({"store": {"kind": kind, key: value}})
    assert "store" in message and f"{key}: only a kind = 'opensearch' store" in message


def test_a_password_needs_its_username() -> None:
    message = refused(
        {
            "stores": {
                "search": {"kind": "opensearch", "hosts": [HOST], "password": {"env": "GW_PW"}}
            }
        }
    )
    assert "stores.search" in message and "password: give the username" in message
    cfg = config({"hosts": [HOST], "username": "gw", "password": {"env": "GW_PW"}})
    assert cfg.store_configs()["search"].username == "gw"


def test_basic_auth_and_an_api_key_exclude_each_other() -> None:
    message = refused(
        {
            "stores": {
                "search": {
                    "kind": "opensearch",
                    "hosts": [HOST],
                    "username": "gw",
                    "api_key": {"env": "GW_KEY"},
                }
            }
        }
    )
    assert "stores.search" in message and "api_key: use basic auth or an API key" in message


def test_credentials_are_references_never_inline() -> None:
    message = refused(
        {
            "stores": {
                "search": {
                    "kind": "opensearch",
                    "hosts": [HOST],
                    "username": "gw",
                    "password": "inline-secret",
                }
            }
        }
    )
    assert "stores.search.password" in message


def test_an_opensearch_store_takes_no_dsn() -> None:
    message = refused(
        {"stores": {"search": {"kind": "opensearch", "hosts": [HOST], "dsn": {"env": "X"}}}}
    )
    assert "stores.search" in message and "dsn:" in message


@pytest.mark.parametrize("section", ["store", "stores.default"])
def test_the_default_store_cannot_be_opensearch(section: str) -> None:
    # It keeps the operations and ingestion locks, which OpenSearch cannot hold.
    store = {"kind": "opensearch", "hosts": [HOST]}
    data: dict[str, object] = (
        {"store": store} if section == "store" else {"stores": {"default": store}}
    )
    message = refused(data)
    assert f"{section}.kind" in message


@pytest.mark.parametrize("prefix", ["gw-", "a", "groundwire_test-1-", "0x", "a" * 41])
def test_index_prefixes_that_make_valid_index_names_are_accepted(prefix: str) -> None:
    assert config({"hosts": [HOST], "index_prefix": prefix}).store_configs()[
        "search"
    ].index_prefix == (prefix)


@pytest.mark.parametrize(
    "prefix", ["", "Upper-", "-lead", "_lead", "has.dot", "sp ace", "a/b", "a*", "é-", "a" * 42]
)
def test_index_prefix_is_lowercase_name_characters_and_named_when_wrong(prefix: str) -> None:
    message = refused(
        {"stores": {"search": {"kind": "opensearch", "hosts": [HOST], "index_prefix": prefix}}}
    )
    assert "stores.search.index_prefix" in message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("shards", 0),
        ("replicas", -1),
        ("request_timeout_ms", 99),
        ("bulk_chunks", 0),
        ("bulk_max_mib", 101),
        ("bulk_in_flight", 0),
        ("bulk_in_flight", 17),
        ("superseded_grace_ms", -1),
        ("shared_tenant_chunks", -1),
        ("shared_tenant_chunks", 10_001),
    ],
)
def test_out_of_range_numbers_are_named(key: str, value: int) -> None:
    message = refused({"stores": {"search": {"kind": "opensearch", "hosts": [HOST], key: value}}})
    assert f"stores.search.{key}" in message


# -- app/factories.py: settings and secrets --------------------------------------


def test_settings_carry_every_key_in_the_store_s_units(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GW_TEST_OS_PASSWORD", "  s3cret  ")
    ca = tmp_path / "ca.pem"
    cfg = config(
        {
            "hosts": [HOST, "https://127.0.0.1:19200"],
            "username": "gw",
            "password": {"env": "GW_TEST_OS_PASSWORD"},
            "ca_file": str(ca),
            "verify_certs": False,
            "request_timeout_ms": 2_500,
            "shards": 3,
            "replicas": 2,
            "index_prefix": "gw-test-",
            "superseded_grace_ms": 1_500,
            "bulk_chunks": 50,
            "bulk_max_mib": 2,
            "bulk_in_flight": 3,
            "hnsw_m": 24,
            "hnsw_ef_construction": 128,
            "hnsw_ef_search": 40,
            "shared_tenant_chunks": 2_000,
        }
    )
    s = opensearch_settings(cfg, "search")
    assert s.hosts == (HOST, "https://127.0.0.1:19200")
    assert (s.username, s.password, s.api_key) == ("gw", "s3cret", None)
    assert (s.ca_file, s.verify_certs) == (ca, False)
    assert (s.request_timeout_s, s.superseded_grace_s) == (2.5, 1.5)
    assert (s.shards, s.replicas, s.index_prefix) == (3, 2, "gw-test-")
    assert (s.bulk_chunks, s.bulk_bytes, s.bulk_in_flight) == (50, 2 * 1024 * 1024, 3)
    assert (s.hnsw_m, s.hnsw_ef_construction, s.ef_search) == (24, 128, 40)
    assert s.shared_tenant_chunks == 2_000
    assert s.label == "search"


def test_an_api_key_is_read_from_a_file(tmp_path: Path) -> None:
    key_file = tmp_path / "api-key"
    key_file.write_text("key-from-file\n")
    cfg = config({"hosts": [HOST], "api_key": {"file": str(key_file)}})
    s = opensearch_settings(cfg, "search")
    assert (s.username, s.password, s.api_key) == (None, None, "key-from-file")


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        pytest.param("   "),
    ],
)
def test_an_unset_password_is_a_config_error_naming_the_key(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("GW_TEST_OS_PASSWORD", raising=False)
    else:
        monkeypatch.setenv("GW_TEST_OS_PASSWORD", value)
    cfg = config({"hosts": [HOST], "username": "gw", "password": {"env": "GW_TEST_OS_PASSWORD"}})
    with pytest.raises(ConfigError) as err:
        opensearch_settings(cfg, "search")
    assert str(err.value).startswith("stores.search.password:")
    assert "unset or empty" in str(err.value)


def test_an_unset_api_key_file_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    cfg = config({"hosts": [HOST], "api_key": {"file": str(tmp_path / "missing")}})
    with pytest.raises(ConfigError) as err:
        opensearch_settings(cfg, "search")
    assert str(err.value).startswith("stores.search.api_key:")


async def test_an_unset_secret_fails_the_start_before_any_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # HOST is a closed port: reaching for it would be STORE_UNAVAILABLE instead.
    monkeypatch.delenv("GW_TEST_OS_API_KEY", raising=False)
    cfg = config({"hosts": [HOST], "api_key": {"env": "GW_TEST_OS_API_KEY"}})
    with pytest.raises(ConfigError) as err:
        await build_stores(cfg)
    assert "stores.search.api_key" in str(err.value)
