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
