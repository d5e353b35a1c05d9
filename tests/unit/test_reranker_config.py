"""Reranker configuration: strict models, references, secrets and building."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from groundwire.app.reranker_config import (
    CohereRerankerConfig,
    LocalEmbeddingRerankerConfig,
    OfflineRerankerConfig,
    OnnxCrossEncoderRerankerConfig,
    OpenRerankConfig,
    RerankerConfig,
    RerankingConfig,
    build_rerankers,
    build_reranking_service,
    check_reranker_references,
    resolve_reranker_paths,
)
from groundwire.domain.reranking import FailurePolicy
from groundwire.providers.embeddings.hashing import HashingEmbedder
from groundwire.providers.rerankers.cohere import CohereReranker
from groundwire.providers.rerankers.local_embedding import LocalEmbeddingReranker
from groundwire.providers.rerankers.offline import OfflineReranker
from groundwire.providers.rerankers.open_rerank import OpenRerankReranker

ADAPTER: TypeAdapter[dict[str, RerankerConfig]] = TypeAdapter(dict[str, RerankerConfig])


def rerankers(data: dict[str, Any]) -> dict[str, RerankerConfig]:
    return ADAPTER.validate_python(data)


def test_reranking_defaults_are_the_seed_defaults() -> None:
    cfg = RerankingConfig()
    settings = cfg.stage_settings()
    assert (settings.maximum_candidates, settings.timeout_seconds) == (5, 5.0)
    assert settings.failure_policy is FailurePolicy.USE_ORIGINAL_ORDER
    assert cfg.limits().max_request_candidates == 1000
    assert RerankingConfig(failure_policy="fail").stage_settings().failure_policy is (
        FailurePolicy.FAIL
    )


@pytest.mark.parametrize(
    "data",
    [
        {"timeout_seconds": 0},
        {"timeout_seconds": 90, "max_timeout_seconds": 60},
        {"maximum_candidates": 0},
        {"maximum_candidates": 200},
        {"failure_policy": "retry"},
        {"unknown_key": 1},
        {"default_reranker": "bad name"},
    ],
)
def test_reranking_config_rejects_bad_values(data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        RerankingConfig.model_validate(data)


def test_every_kind_parses_with_its_defaults() -> None:
    cfg = rerankers(
        {
            "co": {"kind": "cohere", "api_key": {"env": "COHERE_API_KEY"}},
            "tei": {"kind": "open-rerank", "base_url": "http://127.0.0.1:8080/", "flavour": "tei"},
            "local": {"kind": "local-embedding", "embedder": "minilm"},
            "ce": {"kind": "onnx-cross-encoder", "model_dir": "models/ce"},
            "off": {"kind": "offline"},
        }
    )
    co = cfg["co"]
    assert isinstance(co, CohereRerankerConfig)
    assert (co.model, co.minimum_answerable_relevance, co.base_url) == (
        "rerank-v4.0-fast",
        0.5,
        None,
    )
    tei = cfg["tei"]
    assert isinstance(tei, OpenRerankConfig) and tei.base_url == "http://127.0.0.1:8080"
    assert isinstance(cfg["local"], LocalEmbeddingRerankerConfig)
    assert isinstance(cfg["ce"], OnnxCrossEncoderRerankerConfig)
    assert isinstance(cfg["off"], OfflineRerankerConfig)


@pytest.mark.parametrize(
    "data",
    [
        {"kind": "cohere"},  # the key is required
        {"kind": "cohere", "api_key": "sk-inline-secret"},  # never inline
        {"kind": "cohere", "api_key": {"env": "K"}, "minimum_answerable_relevance": 1.5},
        {"kind": "cohere", "api_key": {"env": "K"}, "base_url": "api.cohere.com"},
        {"kind": "cohere", "api_key": {"env": "K"}, "retries": 3},
        {"kind": "open-rerank", "base_url": "http://h", "flavour": "cohere"},
        {"kind": "open-rerank"},
        {"kind": "local-embedding"},
        {"kind": "offline", "behaviour": "explode"},
        {"kind": "mystery"},
    ],
)
def test_bad_reranker_configs_are_rejected(data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        rerankers({"r": data})


def test_references_must_point_somewhere() -> None:
    cfg = rerankers({"local": {"kind": "local-embedding", "embedder": "minilm"}})
    check_reranker_references(RerankingConfig(default_reranker="local"), cfg, {"minilm"})
    with pytest.raises(ValueError, match=r"rerankers\.local\.embedder"):
        check_reranker_references(RerankingConfig(), cfg, {"other"})
    with pytest.raises(ValueError, match=r"reranking\.default_reranker"):
        check_reranker_references(RerankingConfig(default_reranker="cohere"), cfg, {"minilm"})
    with pytest.raises(ValueError, match="names are"):
        check_reranker_references(RerankingConfig(), {"bad name": cfg["local"]}, {"minilm"})


def test_relative_model_dirs_resolve_against_the_config_folder(tmp_path: Path) -> None:
    cfg = rerankers(
        {
            "ce": {"kind": "onnx-cross-encoder", "model_dir": "models/ce"},
            "abs": {"kind": "onnx-cross-encoder", "model_dir": "/opt/ce"},
        }
    )
    resolved = resolve_reranker_paths(cfg, tmp_path)
    ce, absolute = resolved["ce"], resolved["abs"]
    assert isinstance(ce, OnnxCrossEncoderRerankerConfig)
    assert isinstance(absolute, OnnxCrossEncoderRerankerConfig)
    assert ce.model_dir == tmp_path / "models/ce"
    assert absolute.model_dir == Path("/opt/ce")


async def test_build_rerankers_resolves_secrets_and_embedders(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GW_TEST_COHERE_KEY", "co-secret-value")
    cfg = rerankers(
        {
            "co": {"kind": "cohere", "api_key": {"env": "GW_TEST_COHERE_KEY"}},
            "jina": {"kind": "open-rerank", "base_url": "http://127.0.0.1:1", "model": "m"},
            "local": {"kind": "local-embedding", "embedder": "hash"},
            "off": {"kind": "offline", "behaviour": "hang"},
        }
    )
    built = build_rerankers(cfg, {"hash": HashingEmbedder(64)})
    try:
        assert isinstance(built["co"], CohereReranker)
        assert isinstance(built["jina"], OpenRerankReranker) and built["jina"].model == "m"
        assert isinstance(built["local"], LocalEmbeddingReranker)
        assert isinstance(built["off"], OfflineReranker) and built["off"].behaviour == "hang"
    finally:
        for r in built.values():
            await r.aclose()


def test_a_missing_secret_is_reported_by_reference_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GW_TEST_MISSING_KEY", raising=False)
    cfg = rerankers({"co": {"kind": "cohere", "api_key": {"env": "GW_TEST_MISSING_KEY"}}})
    with pytest.raises(ValueError, match="GW_TEST_MISSING_KEY") as info:
        build_rerankers(cfg, {})
    assert "rerankers.co.api_key" in str(info.value)


async def test_build_reranking_service_applies_defaults() -> None:
    cfg = rerankers({"off": {"kind": "offline"}})
    service = build_reranking_service(
        RerankingConfig(default_reranker="off", maximum_candidates=3, timeout_seconds=2), cfg, {}
    )
    assert service.names == frozenset({"off"})
    assert service.defaults.reranker == "off"
    assert service.defaults.settings.maximum_candidates == 3
    assert service.defaults.settings.timeout_seconds == 2
    await service.aclose()
