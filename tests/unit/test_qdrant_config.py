"""`kind = "qdrant"` store sections (issue 47): what the configuration refuses,
each error naming its key, and the settings app/store_factories.py builds."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundwire.app.config import ConfigError, GroundwireConfig, parse_config
from groundwire.app.store_factories import build_stores, qdrant_settings


def config(vectors: dict[str, object]) -> GroundwireConfig:
    return parse_config(
        {
            "auth": {"mode": "disabled"},
            "stores": {"vectors": {"kind": "qdrant", **vectors}},
            "indexes": {"docs": {"store": "vectors"}},
        }
    )


def refused(data: dict[str, object]) -> str:
    with pytest.raises(ConfigError) as err:
        parse_config({"auth": {"mode": "disabled"}, **data})
    return str(err.value)


def test_a_section_with_a_path_gives_the_engine_settings(tmp_path: Path) -> None:
    cfg = config({"path": str(tmp_path / "q"), "hnsw_m": 8, "search_threads": 2})
    s = qdrant_settings(cfg, "vectors")
    assert (s.path, s.hnsw_m, s.search_threads, s.label) == (tmp_path / "q", 8, 2, "vectors")
    assert s.indexing_threshold_kb == 10_000
    assert cfg.indexes["docs"].store == "vectors"


def test_a_path_is_required_and_a_dsn_refused() -> None:
    message = refused({"stores": {"vectors": {"kind": "qdrant"}}})
    assert "stores.vectors" in message and "path" in message
    message = refused({"stores": {"vectors": {"kind": "qdrant", "path": "q", "dsn": "x"}}})
    assert "dsn" in message


def test_qdrant_keys_belong_to_qdrant_stores() -> None:
    message = refused({"stores": {"pg": {"kind": "postgres", "path": "q"}}})
    assert "stores.pg" in message and "path" in message and "qdrant" in message


def test_the_default_store_cannot_be_qdrant() -> None:
    message = refused({"store": {"kind": "qdrant", "path": "q"}})
    assert "store.kind" in message and "Qdrant" in message


async def test_two_stores_on_one_path_are_refused(tmp_path: Path) -> None:
    cfg = parse_config(
        {
            "auth": {"mode": "disabled"},
            "stores": {
                "a": {"kind": "qdrant", "path": str(tmp_path / "q")},
                "b": {"kind": "qdrant", "path": str(tmp_path / "q" / ".." / "q")},
            },
        }
    )
    with pytest.raises(ConfigError) as err:
        await build_stores(cfg)
    assert "stores.b.path" in str(err.value)


def test_a_section_with_a_url_gives_the_server_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from groundwire.app.store_factories import qdrant_server_settings

    monkeypatch.setenv("GW_TEST_QDRANT_KEY", "k-123")
    (tmp_path / "ca.pem").write_text("x")
    cfg = config(
        {
            "url": "https://qdrant.example:6333",
            "api_key": {"env": "GW_TEST_QDRANT_KEY"},
            "ca_file": str(tmp_path / "ca.pem"),
            "request_timeout_ms": 2_500,
            "index_prefix": "team-a-",
        }
    )
    s = qdrant_server_settings(cfg, "vectors")
    assert (s.url, s.api_key, s.ca_file, s.timeout_s, s.collection_prefix) == (
        "https://qdrant.example:6333",
        "k-123",
        tmp_path / "ca.pem",
        2.5,
        "team-a-",
    )
    assert qdrant_settings(cfg, "vectors").label == "vectors"


def test_path_and_url_are_exclusive() -> None:
    message = refused(
        {"stores": {"vectors": {"kind": "qdrant", "path": "q", "url": "http://localhost:6333"}}}
    )
    assert "stores.vectors" in message and "exactly one of path" in message


def test_the_api_key_is_a_reference_never_a_value() -> None:
    inline = {"kind": "qdrant", "url": "http://localhost:6333", "api_key": "k-123"}
    message = refused({"stores": {"vectors": inline}})
    assert "api_key" in message and "k-123" not in message
    both = {"kind": "qdrant", "url": "http://localhost:6333", "api_key": {"env": "A", "file": "b"}}
    assert "exactly one of 'env' or 'file'" in refused({"stores": {"vectors": both}})


def test_credentials_in_the_url_are_refused_and_not_echoed() -> None:
    message = refused(
        {"stores": {"vectors": {"kind": "qdrant", "url": "https://user:s3cret@q.example"}}}
    )
    assert "url" in message and "s3cret" not in message


def test_an_unset_api_key_names_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from groundwire.app.store_factories import qdrant_server_settings

    monkeypatch.delenv("GW_TEST_QDRANT_UNSET", raising=False)
    cfg = config({"url": "http://localhost:6333", "api_key": {"env": "GW_TEST_QDRANT_UNSET"}})
    with pytest.raises(ConfigError) as err:
        qdrant_server_settings(cfg, "vectors")
    assert "stores.vectors.api_key" in str(err.value)


def test_server_keys_need_a_url_and_engine_keys_a_path() -> None:
    for key, value in (("api_key", {"env": "A"}), ("ca_file", "ca.pem")):
        message = refused({"stores": {"vectors": {"kind": "qdrant", "path": "q", key: value}}})
        assert key in message
    message = refused(
        {"stores": {"vectors": {"kind": "qdrant", "url": "http://h:6333", "search_threads": 2}}}
    )
    assert "search_threads" in message


async def test_two_stores_on_one_server_and_prefix_are_refused() -> None:
    cfg = parse_config(
        {
            "auth": {"mode": "disabled"},
            "stores": {
                "a": {"kind": "qdrant", "url": "http://127.0.0.1:9"},
                "b": {"kind": "qdrant", "url": "http://127.0.0.1:9/"},
            },
        }
    )
    with pytest.raises(ConfigError) as err:
        await build_stores(cfg)
    assert "stores.b.index_prefix" in str(err.value)
