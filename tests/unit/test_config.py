"""Configuration validation: unknown keys, named offending keys, secret references."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundwire.app.config import (
    ConfigError,
    DirectorySource,
    GroundwireConfig,
    SecretRef,
    load_config,
)
from groundwire.app.config import parse_config as _parse
from groundwire.app.defaults import default_config

NO_AUTH = {"auth": {"mode": "disabled"}}


def parse_config(data: dict[str, object]) -> GroundwireConfig:
    return _parse({**NO_AUTH, **data})


def test_default_config_is_valid() -> None:
    cfg = default_config()
    assert "demo" in cfg.indexes
    assert cfg.indexes["demo"].ingestion.strategy == "on_startup"


def test_unknown_key_is_named() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"server": {"adress": "x"}})
    assert "server.adress" in str(err.value)


def test_unknown_embedder_reference() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"indexes": {"docs": {"embedder": "nope"}}})
    assert "indexes.docs.embedder" in str(err.value)


def test_inline_secret_rejected() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(
            {
                "embedders": {
                    "e": {
                        "kind": "openai-compatible",
                        "base_url": "http://127.0.0.1:1/v1",
                        "model": "m",
                        "dimensions": 3,
                        "api_key": "sk-secret",
                    }
                }
            }
        )
    assert "sk-secret" not in str(err.value)
    assert "embedders.e" in str(err.value)


def test_secret_ref_env_and_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GW_TEST_KEY", " abc ")
    assert SecretRef(env="GW_TEST_KEY").resolve() == "abc"
    f = tmp_path / "key"
    f.write_text("xyz\n")
    assert SecretRef(file=f).resolve() == "xyz"
    assert SecretRef(env="GW_TEST_MISSING_VAR").resolve() is None
    with pytest.raises(ValueError):
        SecretRef(env="A", file=f)


def test_bad_index_name_and_chunking() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"indexes": {"Bad Name": {}}})
    assert "Bad Name" in str(err.value)
    with pytest.raises(ConfigError) as err:
        parse_config({"indexes": {"ok": {"chunking": {"size": 100, "overlap": 80}}}})
    assert "indexes.ok.chunking" in str(err.value)


def test_schedule_requires_cron() -> None:
    with pytest.raises(ConfigError):
        parse_config({"indexes": {"x": {"ingestion": {"strategy": "scheduled"}}}})
    with pytest.raises(ConfigError):
        parse_config(
            {"indexes": {"x": {"ingestion": {"strategy": "scheduled", "schedule": "* * *"}}}}
        )
    parse_config(
        {"indexes": {"x": {"ingestion": {"strategy": "scheduled", "schedule": "0 3 * * *"}}}}
    )


def test_relative_paths_resolve_against_config_file(tmp_path: Path) -> None:
    (tmp_path / "gw.toml").write_text(
        '[auth]\nmode = "disabled"\n[indexes.docs]\nsources = [{ kind = "directory", path = "docs" }]\n'
    )
    cfg = load_config(tmp_path / "gw.toml")
    src = cfg.indexes["docs"].sources[0]
    assert isinstance(src, DirectorySource)
    assert src.path == tmp_path / "docs"


def test_invalid_toml(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text("[server\n")
    with pytest.raises(ConfigError):
        load_config(tmp_path / "bad.toml")


def test_auth_must_be_configured_or_disabled_explicitly() -> None:
    with pytest.raises(ConfigError) as err:
        _parse({})
    assert "auth" in str(err.value)
    with pytest.raises(ConfigError) as err:
        _parse({"auth": {"mode": "api_keys"}})
    assert "at least one key" in str(err.value)
    cfg = _parse(
        {
            "auth": {
                "keys": [
                    {
                        "id": "acme-app",
                        "hash": "sha256:" + "a" * 64,
                        "tenant": "acme",
                        "permissions": ["retrieve"],
                    }
                ]
            }
        }
    )
    assert cfg.auth.keys[0].tenant == "acme"
    with pytest.raises(ConfigError):
        _parse(
            {"auth": {"keys": [{"id": "k", "hash": "plain-secret", "permissions": ["retrieve"]}]}}
        )


def test_keys_create_prints_a_loadable_entry(capsys: pytest.CaptureFixture[str]) -> None:
    import tomllib

    from groundwire.app.cli import main
    from groundwire.domain.auth import KeyRing, StoredKey, hash_key

    assert (
        main(
            ["keys", "create", "--id", "k1", "--tenant", "acme", "--permissions", "retrieve,ingest"]
        )
        == 0
    )
    out = capsys.readouterr()
    key = out.err.rsplit(" ", 1)[-1].strip()
    entry = tomllib.loads(out.out)["auth"]["keys"][0]
    assert entry["hash"] == hash_key(key) and key not in out.out
    cfg = _parse({"auth": {"keys": [entry]}})
    k = cfg.auth.keys[0]
    assert (k.id, k.tenant, k.permissions) == ("k1", "acme", ["retrieve", "ingest"])
    ring = KeyRing([StoredKey(k.id, k.hash, k.tenant, frozenset())])
    assert ring.authenticate(f"Bearer {key}").tenant == "acme"


def test_vector_index_precision_is_validated_and_named() -> None:
    embedders = {"e": {"kind": "hashing", "dimensions": 64}}
    with pytest.raises(ConfigError) as err:
        parse_config(
            {"embedders": embedders, "indexes": {"docs": {"embedder": "e",
                                                          "vector_index_precision": "int8"}}}
        )  # fmt: skip
    assert "indexes.docs.vector_index_precision" in str(err.value)
    with pytest.raises(ConfigError) as err:
        parse_config({"indexes": {"docs": {"vector_index_precision": "float16"}}})
    assert "vector_index_precision" in str(err.value) and "embedder" in str(err.value)
    cfg = parse_config(
        {"embedders": embedders, "indexes": {"docs": {"embedder": "e",
                                                      "vector_index_precision": "float16"}}}
    )  # fmt: skip
    assert cfg.indexes["docs"].vector_index_precision == "float16"


def test_fusion_method_is_rrf_or_min_max() -> None:
    assert parse_config({}).retrieval.fusion_method == "rrf"
    assert parse_config({"retrieval": {"fusion_method": "min-max"}}).retrieval.fusion_method == (
        "min-max"
    )
    with pytest.raises(ConfigError) as err:
        parse_config({"retrieval": {"fusion_method": "combsum"}})
    assert "retrieval.fusion_method" in str(err.value)
