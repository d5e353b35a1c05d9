"""Every result names the profile that produced it (issue 30, item 1), over real
gRPC: Retrieve, Rerank, Execute (unary, stream, prepare, resume) and
GetIndex/GetAgent report a stable, content-free fingerprint and the parts it
covers; a reload that changes the fusion defaults or the reranker yields a new
profile without re-ingestion."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from groundwire.app.config import load_config
from groundwire.app.lifecycle import RunningApp, start_app
from groundwire_client.v1 import (
    agent_pb2,
    agent_pb2_grpc,
    common_pb2,
    ingestion_pb2,
    ingestion_pb2_grpc,
    reranker_pb2,
    reranker_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
)
from tests.support.reload_probe import write

pytestmark = pytest.mark.timeout(90)

K = common_pb2.ProfilePartKind
SECRET_TEXT = "ZEBRA-CANARY-7"
QUERY = f"parental leave weeks {SECRET_TEXT}"
DOCS = {
    "leave": "POL-HR-014 parental leave: sixteen weeks of paid parental leave for every parent.",
    "travel": "POL-FIN-007 travel: economy class for flights under six hours.",
    "weeks": "Leave weeks are counted in calendar weeks, parental leave included.",
}


def config(rrf_k: int = 20, threshold: float = 0.5) -> dict[str, object]:
    lexical = {"index": "kb", "retrieval_mode": "lexical"}
    return {
        "store": {"kind": "memory"},
        "auth": {"mode": "disabled"},
        "embedders": {"hash": {"kind": "hashing", "dimensions": 64}},
        "retrieval": {"rrf_k": rrf_k},
        "indexes": {
            "kb": {
                "embedder": "hash",
                "sources": [{"kind": "inline", "id": k, "text": v} for k, v in DOCS.items()],
                "ingestion": {"strategy": "on_startup"},
            }
        },
        "rerankers": {
            "overlap": {"kind": "offline", "minimum_answerable_relevance": threshold},
        },
        "models": {"offline": {"kind": "offline"}},
        "agents": {
            "rag": {"name": "RAG", "model": "offline/extractive-v1", "rag": lexical},
            "reranked": {
                "name": "Reranked",
                "model": "offline/extractive-v1",
                "rag": {**lexical, "reranking": {"enabled": True, "reranker": "overlap"}},
            },
            "plain": {"name": "Plain", "model": "offline/extractive-v1"},
        },
    }


class Served:
    def __init__(self, app: RunningApp, path: Path, channel: grpc.aio.Channel) -> None:
        self.app = app
        self.path = path
        self.retriever = retriever_pb2_grpc.RetrieverServiceStub(channel)
        self.reranker = reranker_pb2_grpc.RerankerServiceStub(channel)
        self.agents = agent_pb2_grpc.AgentServiceStub(channel)
        self.ingestion = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)

    async def retrieve(self, mode: Any = retriever_pb2.RETRIEVAL_MODE_HYBRID) -> Any:
        q = retriever_pb2.RagQuery(index_name="kb", text=QUERY, mode=mode)
        return await self.retriever.Retrieve(retriever_pb2.RetrieveRequest(query=q), timeout=30)

    async def execute(self, agent: str, **kw: Any) -> agent_pb2.AgentResult:
        i = agent_pb2.ExecutionInput(agent_id=agent, message=QUERY, **kw)
        return (await self.agents.Execute(agent_pb2.ExecuteRequest(input=i), timeout=30)).result

    async def reload(self, cfg: dict[str, object]) -> None:
        write(self.path, cfg)
        assert self.app.reloader is not None
        report = await self.app.reloader.reload()
        assert report.applied


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    path = tmp_path / "groundwire.toml"
    write(path, config())
    app = await start_app(load_config(path), "127.0.0.1:0", config_path=path)
    try:
        await app.wait_ready()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
            yield Served(app, path, ch)
    finally:
        if app.reloader is not None:
            await app.reloader.aclose()
        await app.stop(0)


def kinds(profile: common_pb2.RetrievalProfile) -> list[int]:
    return [p.kind for p in profile.parts]


def by_kind(profile: common_pb2.RetrievalProfile) -> dict[int, common_pb2.ProfilePart]:
    return {p.kind: p for p in profile.parts}


def assert_content_free(profile: common_pb2.RetrievalProfile) -> None:
    text = str(profile)
    assert SECRET_TEXT not in text and "parental" not in text and "/tmp" not in text


async def test_retrieve_reports_the_index_version_and_fusion_profile(served: Served) -> None:
    r = await served.retrieve()
    p = r.profile
    assert p.fingerprint.startswith("rp1-") and len(p.fingerprint) == 20
    assert kinds(p) == [
        K.Value(f"PROFILE_PART_KIND_{n}")
        for n in ("INDEX", "CHUNKING", "EMBEDDER", "ANALYZER", "FUSION")
    ]
    parts = by_kind(p)
    version = r.diagnostics.index_version
    assert parts[K.PROFILE_PART_KIND_INDEX].settings == f"name=kb version={version}"
    assert parts[K.PROFILE_PART_KIND_FUSION].settings == (
        "method=rrf k=20 semantic_weight=1 lexical_weight=1 leg_depth=50"
    )
    assert "hashing/" in parts[K.PROFILE_PART_KIND_EMBEDDER].settings
    assert all(len(x.fingerprint) == 16 for x in p.parts)
    assert_content_free(p)
    # Stable: another query, another mode, the same profile.
    again = await served.retrieve(retriever_pb2.RETRIEVAL_MODE_LEXICAL)
    assert again.profile == p


async def test_get_index_shows_the_index_parts_retrieve_reports(served: Served) -> None:
    r = await served.retrieve()
    index = (await served.ingestion.GetIndex(ingestion_pb2.GetIndexRequest(index_name="kb"))).index
    got = by_kind(index.profile)
    for kind, part in by_kind(r.profile).items():
        if kind in got:
            assert got[kind] == part
    for name in ("INDEX", "CHUNKING", "EMBEDDER", "ANALYZER", "FUSION"):
        assert K.Value(f"PROFILE_PART_KIND_{name}") in got
    # The same parts, so the same fingerprint, as the Retrieve it describes.
    assert index.profile.fingerprint == r.profile.fingerprint


async def test_rerank_reports_the_reranker_and_the_settings_applied(served: Served) -> None:
    cands = [
        reranker_pb2.RerankCandidate(document_id=k, chunk_id="0", content=v, original_rank=i)
        for i, (k, v) in enumerate(DOCS.items(), start=1)
    ]

    async def rerank(**kw: Any) -> Any:
        req = reranker_pb2.RerankRequest(query=QUERY, candidates=cands, reranker="overlap", **kw)
        return await served.reranker.Rerank(req, timeout=30)

    first = await rerank()
    assert kinds(first.profile) == [K.PROFILE_PART_KIND_RERANKER]
    d = first.profile.parts[0].settings
    assert d.startswith("name=overlap provider=offline model=term-overlap-v1")
    assert "maximum_candidates=5" in d and "failure_policy=use_original_order" in d
    assert_content_free(first.profile)
    # A request's own bound is the caller's choice (in its metadata), not the profile.
    bounded = await rerank(maximum_candidates=2)
    assert bounded.profile == first.profile and bounded.reranking.candidate_count == 2


async def test_execute_names_its_profile_on_every_surface(served: Served) -> None:
    r = await served.execute("reranked")
    p = r.profile
    assert kinds(p) == [
        K.Value(f"PROFILE_PART_KIND_{n}")
        for n in (
            "INDEX",
            "CHUNKING",
            "EMBEDDER",
            "ANALYZER",
            "FUSION",
            "RERANKER",
            "FINAL_SELECTION",
            "AGENT_POLICY",
        )
    ]
    parts = by_kind(p)
    assert parts[K.PROFILE_PART_KIND_INDEX].settings.endswith(f"version={r.rag.index_version}")
    policy = parts[K.PROFILE_PART_KIND_AGENT_POLICY].settings
    assert policy.startswith("agent=reranked model=offline/extractive-v1 index=kb")
    assert "mode=open" in policy and " definition=" in policy
    assert parts[K.PROFILE_PART_KIND_FINAL_SELECTION].settings == (
        "policy=reranker_only retrieval_weight=none normalization=none "
        "candidate_multiplier=1 pool=5 final_top_k=5"
    )
    assert_content_free(p)
    # The index parts are Retrieve's.
    retrieved = by_kind((await served.retrieve()).profile)
    for kind in (K.PROFILE_PART_KIND_INDEX, K.PROFILE_PART_KIND_FUSION):
        assert parts[kind] == retrieved[kind]
    # The stream's terminal result, PrepareExecution and GetAgent agree.
    i = agent_pb2.ExecutionInput(agent_id="reranked", message=QUERY)
    events = [e async for e in served.agents.ExecuteStream(agent_pb2.ExecuteStreamRequest(input=i))]
    assert events[-1].result.profile == p
    prepared = await served.agents.PrepareExecution(agent_pb2.PrepareExecutionRequest(input=i))
    assert prepared.prepared.profile == p
    described = await served.agents.GetAgent(agent_pb2.GetAgentRequest(agent_id="reranked"))
    assert described.agent.profile == p
    # A resume returns the recorded result, profile included.
    resumed = await served.agents.ResumeExecution(
        agent_pb2.ResumeExecutionRequest(execution_id=r.execution_id)
    )
    assert resumed.result.profile == p


async def test_agents_without_retrieval_report_their_policy_only(served: Served) -> None:
    plain = await served.execute("plain")
    assert kinds(plain.profile) == [K.PROFILE_PART_KIND_AGENT_POLICY]
    bypassed = await served.execute("rag", bypass_rag=True)
    assert kinds(bypassed.profile) == [K.PROFILE_PART_KIND_AGENT_POLICY]
    rag = await served.execute("rag")
    assert K.PROFILE_PART_KIND_RERANKER not in kinds(rag.profile)
    assert bypassed.profile.parts[0] == by_kind(rag.profile)[K.PROFILE_PART_KIND_AGENT_POLICY]


async def test_a_reload_that_changes_a_part_yields_a_new_profile_without_reingestion(
    served: Served,
) -> None:
    before = (await served.retrieve()).profile
    agent_before = (await served.execute("reranked")).profile
    status = ingestion_pb2.GetIndexStatusRequest(index_name="kb")
    version = (await served.ingestion.GetIndexStatus(status)).status.published_version

    await served.reload(config(rrf_k=60))
    after = (await served.retrieve()).profile
    assert after.fingerprint != before.fingerprint
    changed = [
        k
        for k, part in by_kind(after).items()
        if part.fingerprint != by_kind(before)[k].fingerprint
    ]
    assert changed == [K.PROFILE_PART_KIND_FUSION]
    assert "k=60" in by_kind(after)[K.PROFILE_PART_KIND_FUSION].settings

    await served.reload(config(rrf_k=60, threshold=0.8))
    agent_after = (await served.execute("reranked")).profile
    assert agent_after.fingerprint != agent_before.fingerprint
    reranker = by_kind(agent_after)[K.PROFILE_PART_KIND_RERANKER]
    assert reranker != by_kind(agent_before)[K.PROFILE_PART_KIND_RERANKER]
    # Nothing was re-ingested: the same published version throughout.
    assert (await served.ingestion.GetIndexStatus(status)).status.published_version == version
    assert (
        by_kind(agent_after)[K.PROFILE_PART_KIND_INDEX]
        == by_kind(before)[K.PROFILE_PART_KIND_INDEX]
    )
    # Reloading the original configuration restores the original fingerprint.
    await served.reload(config())
    assert (await served.retrieve()).profile.fingerprint == before.fingerprint
    assert json.dumps(before.fingerprint)  # a plain string, safe in any log


async def test_the_access_log_records_the_fingerprint_only(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="groundwire.access")
    retrieved = await served.retrieve()
    executed = await served.execute("reranked")
    await served.ingestion.ListIndexes(ingestion_pb2.ListIndexesRequest())
    rpcs = {
        r.__dict__["method"].rsplit("/", 1)[-1]: r
        for r in caplog.records
        if r.getMessage() == "rpc" and "method" in r.__dict__
    }
    assert rpcs["Retrieve"].__dict__["profile"] == retrieved.profile.fingerprint
    assert rpcs["Execute"].__dict__["profile"] == executed.profile.fingerprint
    assert not rpcs["ListIndexes"].__dict__.get("profile")
    # The fingerprint only: never a descriptor.
    for r in caplog.records:
        text = json.dumps({k: str(v) for k, v in r.__dict__.items()})
        assert "method=rrf" not in text and "term-overlap" not in text
        assert SECRET_TEXT not in text
