"""Plug-ins through entry points, over real gRPC: the example package in
tests/plugins (registered by its .dist-info on sys.path) provides one loader,
embedder, reranker, chat model and store; the configuration names each by kind
like a built-in one, and every call path uses it. Unknown kinds, plug-ins that fail
to import, reject their options or build the wrong thing are configuration errors
naming the key."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from groundwire.app.config import ConfigError, parse_config
from groundwire.app.factories import build_components
from groundwire_client.v1 import (
    agent_pb2,
    agent_pb2_grpc,
    ingestion_pb2,
    ingestion_pb2_grpc,
    reranker_pb2,
    reranker_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
)
from tests.support.servers import serving

pytestmark = pytest.mark.timeout(60)

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"


@pytest.fixture(autouse=True)
def example_plugins() -> Iterator[None]:
    sys.path.insert(0, str(PLUGINS))
    importlib.invalidate_caches()
    try:
        yield
    finally:
        sys.path.remove(str(PLUGINS))
        for name in [m for m in sys.modules if m.startswith("gw_example_plugin")]:
            del sys.modules[name]
        importlib.invalidate_caches()


def plugin_config(docs: Path, **overrides: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "auth": {"mode": "disabled"},
        "store": {"kind": "example-counting", "label": "tests"},
        "embedders": {"tri": {"kind": "example-trigram", "dimensions": 32}},
        "rerankers": {"overlap": {"kind": "example-overlap", "minimum_answerable_relevance": 0.6}},
        "reranking": {"default_reranker": "overlap"},
        "models": {"ex": {"kind": "example-echo"}},
        "indexes": {
            "docs": {
                "embedder": "tri",
                "sources": [{"kind": "directory", "path": str(docs)}],
                "ingestion": {
                    "strategy": "on_startup",
                    "extensions": [".md"],
                    "loaders": {".csv": {"kind": "example-csv", "delimiter": ";"}},
                },
            }
        },
        "agents": {
            "helper": {
                "name": "Helper",
                "model": "ex/echo-1",
                "rag": {"index": "docs", "retrieval_mode": "lexical", "mode": "grounded"},
            }
        },
    }
    cfg.update(overrides)
    return cfg


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    (tmp_path / "prices.csv").write_text("sku;price;colour\nSKU-42;9.50;teal\nSKU-77;3.10;amber\n")
    (tmp_path / "notes.md").write_text("# Notes\n\nWarehouse opening hours are nine to five.\n")
    return tmp_path


async def test_every_kind_of_plugin_serves_over_grpc(docs: Path) -> None:
    async with serving(parse_config(plugin_config(docs))) as app:
        store: Any = app.components.store  # the plug-in's CountingStore
        assert type(store).__name__ == "CountingStore"
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
            ing = ingestion_pb2_grpc.IngestionManagerServiceStub(ch)
            desc = (await ing.GetIndex(ingestion_pb2.GetIndexRequest(index_name="docs"))).index
            assert (desc.embedding.provider, desc.embedding.model) == (
                "example-trigram",
                "trigram-v1",
            )
            assert desc.embedding.dimensions == 32 and desc.store == "memory"
            status = (
                await ing.GetIndexStatus(ingestion_pb2.GetIndexStatusRequest(index_name="docs"))
            ).status
            assert status.document_count == 2

            # The CSV loader's text, embedded by the trigram embedder, found semantically.
            ret = retriever_pb2_grpc.RetrieverServiceStub(ch)
            resp = await ret.Retrieve(
                retriever_pb2.RetrieveRequest(
                    query=retriever_pb2.RagQuery(
                        index_name="docs", text="sku: SKU-42 colour: teal", top_k=2
                    )
                )
            )
            top = resp.results[0]
            assert top.document_id == "prices.csv"
            assert "sku: SKU-42\nprice: 9.50\ncolour: teal" in top.content
            searches = store.searches
            assert searches >= 1

            rr = reranker_pb2_grpc.RerankerServiceStub(ch)
            ranked = await rr.Rerank(
                reranker_pb2.RerankRequest(
                    query="teal warehouse",
                    candidates=[
                        reranker_pb2.RerankCandidate(
                            document_id="a", chunk_id="0", content="nothing here", original_rank=1
                        ),
                        reranker_pb2.RerankCandidate(
                            document_id="b",
                            chunk_id="0",
                            content="the teal warehouse",
                            original_rank=2,
                        ),
                        reranker_pb2.RerankCandidate(
                            document_id="c", chunk_id="0", content="a warehouse", original_rank=3
                        ),
                    ],
                )
            )
            assert [(r.document_id, r.rerank_relevance) for r in ranked.results] == [
                ("b", 1.0),
                ("c", 0.5),
                ("a", 0.0),
            ]
            assert ranked.results[0].answerability == reranker_pb2.ANSWERABILITY_ANSWERABLE
            assert ranked.results[1].answerability == reranker_pb2.ANSWERABILITY_NOT_ANSWERABLE

            agents = agent_pb2_grpc.AgentServiceStub(ch)
            result = (
                await agents.Execute(
                    agent_pb2.ExecuteRequest(
                        input=agent_pb2.ExecutionInput(
                            agent_id="helper", message="warehouse opening hours"
                        )
                    ),
                    timeout=30,
                )
            ).result
            assert (result.model_provider, result.model) == ("example-echo", "echo-1")
            assert result.answer and result.rag.context_accepted
            assert store.searches > searches


def config_error(cfg: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(cfg)
    return str(info.value)


async def build_error(cfg: dict[str, Any]) -> str:
    parsed = parse_config(cfg)
    with pytest.raises(ConfigError) as info:
        components = await build_components(parsed)
        await components.aclose()
    return str(info.value)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (
            {"embedders": {"e": {"kind": "nope"}}},
            "embedders.e: Value error, kind 'nope' is neither built in (hashing, local-onnx, openai-compatible) nor registered by an installed plug-in (entry point group groundwire.embedders: example-broken, example-not-an-embedder, example-trigram)",
        ),
        (
            {"rerankers": {"r": {"kind": "nope"}}, "reranking": {}},
            "rerankers.r: Value error, kind 'nope' is neither built in",
        ),
        (
            {"models": {"m": {"kind": "nope"}}, "agents": {}},
            "models.m: Value error, kind 'nope' is neither built in (offline, openai-compatible) nor registered by an installed plug-in (entry point group groundwire.chat_models: example-echo)",
        ),
        ({"store": {"kind": "nope"}}, "store.kind"),
        (
            {"store": {"kind": "memory", "options": {"a": 1}}},
            "store: Value error, options: only a plug-in store takes options",
        ),
    ],
)
def test_unknown_kinds_name_the_key_and_the_installed_plugins(
    docs: Path, override: dict[str, Any], expected: str
) -> None:
    assert expected in config_error(plugin_config(docs, **override))


def test_an_unknown_loader_kind_names_the_extension(docs: Path) -> None:
    cfg = plugin_config(docs)
    cfg["indexes"]["docs"]["ingestion"]["loaders"] = {".rtf": {"kind": "rtf-reader"}}
    text = config_error(cfg)
    assert (
        "indexes.docs.ingestion.loaders..rtf: Value error, kind 'rtf-reader' is not registered"
        " by an installed plug-in"
    ) in text
    assert "groundwire.loaders: example-csv" in text


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (
            {"embedders": {"tri": {"kind": "example-broken"}}},
            "embedders.tri: plug-in 'example-broken' (entry point group groundwire.embedders) failed to load: ImportError",
        ),
        (
            {"embedders": {"tri": {"kind": "example-trigram", "dimensions": 3}}},
            "embedders.tri: plug-in 'example-trigram' rejected its options: dimensions: must be in [8, 1024]",
        ),
        (
            {"embedders": {"tri": {"kind": "example-not-an-embedder"}}},
            "embedders.tri: plug-in 'example-not-an-embedder' built a object, which is not a EmbeddingProvider",
        ),
        (
            {
                "rerankers": {
                    "overlap": {"kind": "example-overlap", "minimum_answerable_relevance": 2}
                }
            },
            "rerankers.overlap: plug-in 'example-overlap' rejected its options: minimum_answerable_relevance must be in [0, 1]",
        ),
        (
            {"agents": {"helper": {"name": "H", "model": "ex/gpt-9"}}},
            "models.ex: plug-in 'example-echo' rejected its options: model: this plug-in serves models named echo-*",
        ),
        (
            {"store": {"kind": "example-counting", "colour": "red"}},
            "store.kind: plug-in 'example-counting' rejected its options: colour: unknown option",
        ),
    ],
)
async def test_plugins_that_fail_to_load_or_build_are_config_errors(
    docs: Path, override: dict[str, Any], expected: str
) -> None:
    assert expected in await build_error(plugin_config(docs, **override))


async def test_a_loader_that_rejects_its_options_names_the_extension(docs: Path) -> None:
    cfg = plugin_config(docs)
    cfg["indexes"]["docs"]["ingestion"]["loaders"][".csv"]["delimiter"] = ";;"
    assert (
        "indexes.docs.ingestion.loaders..csv: plug-in 'example-csv' rejected its options:"
        " delimiter: must be one character"
    ) in await build_error(cfg)


def test_a_kind_is_unknown_once_the_plugin_is_gone(docs: Path) -> None:
    sys.path.remove(str(PLUGINS))
    importlib.invalidate_caches()
    try:
        assert "entry point group groundwire.embedders: none installed" in config_error(
            plugin_config(docs)
        )
    finally:
        sys.path.insert(0, str(PLUGINS))
