"""`groundwire eval` end to end against an in-process server: a synthetic BEIR
collection (10 documents, 5 judged queries) is push-ingested, two lexical
variants, a hybrid one and a reranked one run, then `eval compare` and
`eval agent`. Lexical metrics are checked against hand-computed values."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from groundwire.app.config import parse_config
from groundwire.evaluation.cli import main as eval_main
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(90)

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
]
NUMBERS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
# Query -> (text, judgments). Only d<i> contains WORDS[i]; all documents have the
# same length, so equal term matches tie and ties go by document id.
QUERIES: dict[str, tuple[str, dict[str, int]]] = {
    "q1": ("bravo", {"d1": 1}),  # d1 alone matches: 1.0
    "q2": ("charlie delta", {"d3": 1}),  # d2, d3 tie: d3 second
    "q3": ("echo", {"d4": 2, "d5": 1}),  # only d4 matches
    "q4": ("zulu", {"d6": 1}),  # nothing matches
    "q5": ("hotel", {"d7": 1}),  # d7 alone matches
}
LOG2_3 = math.log2(3)
NDCG10 = {"q1": 1.0, "q2": 1 / LOG2_3, "q3": 2 / (2 + 1 / LOG2_3), "q4": 0.0, "q5": 1.0}
MRR10 = {"q1": 1.0, "q2": 0.5, "q3": 1.0, "q4": 0.0, "q5": 1.0}
NDCG10_TOP1 = {**NDCG10, "q2": 0.0}


def write_collection(root: Path) -> Path:
    root.mkdir(parents=True)
    with (root / "corpus.jsonl").open("w") as fh:
        for i, (w, n) in enumerate(zip(WORDS, NUMBERS, strict=True)):
            doc = {"_id": f"d{i}", "title": f"Record {n}", "text": f"{w} shared filler words"}
            fh.write(json.dumps(doc) + "\n")
    with (root / "queries.jsonl").open("w") as fh:
        for qid, (text, _) in QUERIES.items():
            meta = {"topic": "even" if int(qid[1:]) % 2 == 0 else "odd"}
            fh.write(json.dumps({"_id": qid, "text": text, "metadata": meta}) + "\n")
    (root / "qrels").mkdir()
    rows = ["query-id\tcorpus-id\tscore"]
    rows += [f"{q}\t{d}\t{s}" for q, (_, j) in QUERIES.items() for d, s in j.items()]
    (root / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n")
    return root


@pytest.fixture
async def server() -> AsyncIterator[RunningApp]:
    cfg = parse_config(
        {
            "auth": {"mode": "disabled"},
            "embedders": {"hash": {"kind": "hashing", "dimensions": 64}},
            "indexes": {"eval-tiny": {"embedder": "hash"}},
            "rerankers": {"overlap": {"kind": "offline"}},
            "reranking": {"default_reranker": "overlap"},
            "models": {"offline": {"kind": "offline"}},
            "agents": {
                "tiny-agent": {
                    "name": "Tiny",
                    "model": "offline/extractive-v1",
                    "rag": {
                        "index": "eval-tiny",
                        "retrieval_mode": "lexical",
                        "mode": "grounded",
                        "no_context_behavior": "return_not_found",
                        "reranking": {"enabled": True, "reranker": "overlap"},
                    },
                }
            },
        }
    )
    async with serving(cfg) as app:
        yield app


def variants_file(path: Path) -> Path:
    path.write_text(
        """
[[variant]]
name = "lexical"
mode = "lexical"
top_k = 20

[[variant]]
name = "lexical-top1"
mode = "lexical"
top_k = 1

[[variant]]
name = "hybrid"
mode = "hybrid"
top_k = 10
rrf_k = 10
leg_depth = 10

[[variant]]
name = "lexical-rerank"
mode = "lexical"
top_k = 10
rerank = { candidates = 5 }
"""
    )
    return path


def run_cli(*args: str) -> int:
    return eval_main(list(args))


def variant(run: dict[str, Any], name: str) -> dict[str, Any]:
    return next(v for v in run["variants"] if v["name"] == name)


def per_query(block: dict[str, Any], metric: str) -> dict[str, float]:
    return {q["id"]: q["metrics"][metric] for q in block["queries"]}


async def test_eval_run_compare_and_agent_end_to_end(server: RunningApp, tmp_path: Path) -> None:
    data = write_collection(tmp_path / "tiny")
    address = f"127.0.0.1:{server.port}"
    out = tmp_path / "out"
    common = ["--address", address, "--dataset", str(data), "--split", "test"]
    code = await asyncio.to_thread(
        run_cli,
        "run",
        *common,
        "--index",
        "eval-tiny",
        "--variants",
        str(variants_file(tmp_path / "v.toml")),
        "--slice-field",
        "topic",
        "--warmup",
        "1",
        "--out",
        str(out),
    )
    assert code == 0
    run = json.loads((out / "run.json").read_text())
    assert run["dataset"]["judged_queries"] == 5 and run["dataset"]["version"].startswith("sha256:")
    assert run["ingestion"]["upserted"] == 10 and not run["ingestion"]["skipped"]
    idx = run["index"]
    assert idx["name"] == "eval-tiny" and idx["document_count"] == 10
    assert idx["published_version"] >= 1
    assert idx["description"]["chunking"]["size"] == 800
    assert idx["description"]["embedding"]["provider"] == "hashing"
    assert run["machine"]["cores"] >= 1 and run["groundwire_version"]

    lex = variant(run, "lexical")
    assert per_query(lex, "nDCG@10") == pytest.approx(NDCG10)
    assert per_query(lex, "MRR@10") == pytest.approx(MRR10)
    assert lex["summary"]["nDCG@10"] == pytest.approx(sum(NDCG10.values()) / 5)
    assert per_query(lex, "Recall@10")["q3"] == pytest.approx(0.5)
    assert {"client", "total", "lexical", "end_to_end"} <= set(lex["latency_ms"])
    assert "semantic" not in lex["latency_ms"]
    assert lex["reliability"]["errors"] == 0
    top1 = variant(run, "lexical-top1")
    assert per_query(top1, "nDCG@10") == pytest.approx(NDCG10_TOP1)
    hybrid = variant(run, "hybrid")
    assert hybrid["descriptor"]["fusion_applied"] == {
        "rrf_k": 10,
        "semantic_weight": 1.0,
        "lexical_weight": 1.0,
        "leg_depth": 10,
        "method": "FUSION_METHOD_RRF",
    }
    assert {"embedding", "semantic", "lexical"} <= set(hybrid["latency_ms"])
    reranked = variant(run, "lexical-rerank")
    assert reranked["reliability"]["reranking"]["success_rate"] == 1.0
    assert "rerank" in reranked["latency_ms"]
    baseline = variant(run, "bm25-baseline")
    assert per_query(baseline, "nDCG@10") == pytest.approx(NDCG10)
    assert lex["queries"][0]["slices"] == {"topic": "odd"}
    for f in ("report.md", "metrics.png", "latency.png"):
        assert (out / f).stat().st_size > 0
    assert "| lexical |" in (out / "report.md").read_text()
    # Every variant records the profile its responses named (issue 30).
    profile = lex["profile"]
    assert profile["fingerprint"].startswith("rp1-") and profile["queries"] == 5
    assert list(profile["parts"]) == ["index", "chunking", "embedder", "analyzer", "fusion"]
    assert profile["parts"]["index"]["descriptor"] == (
        f"name=eval-tiny version={idx['published_version']}"
    )
    assert "others" not in profile and top1["profile"]["fingerprint"] == profile["fingerprint"]
    assert "reranker" in reranked["profile"]["parts"]
    assert "profile" in baseline and baseline["profile"] is None  # the client-side BM25
    report_md = (out / "report.md").read_text()
    assert "## Profiles" in report_md and profile["fingerprint"] in report_md
    # The index's recorded analyzer, not a hard-coded "plain".
    analyzer = idx["description"]["analysis"]["analyzer_descriptor"]
    assert f"lexical analysis {analyzer}" in report_md

    # A second run finds the dataset version in the index and skips ingestion.
    out2 = tmp_path / "out2"
    code = await asyncio.to_thread(
        run_cli,
        "run",
        *common,
        "--index",
        "eval-tiny",
        "--modes",
        "lexical",
        "--no-baseline",
        "--no-plots",
        "--out",
        str(out2),
    )
    assert code == 0
    again = json.loads((out2 / "run.json").read_text())
    assert again["ingestion"]["skipped"] is True
    assert again["index"]["published_version"] == idx["published_version"]

    # Paired comparison: top_k 1 loses q2 (nDCG 1/log2(3) -> 0).
    report = tmp_path / "report"
    code = await asyncio.to_thread(
        run_cli,
        "compare",
        f"{out / 'run.json'}:lexical",
        f"{out / 'run.json'}:lexical-top1",
        "--out",
        str(report),
        "--resamples",
        "2000",
    )
    assert code == 0
    cmp_ = json.loads((report / "compare.json").read_text())
    st = cmp_["metrics"]["nDCG@10"]
    assert st["delta"] == pytest.approx(-(1 / LOG2_3) / 5)
    assert (st["wins"], st["losses"], st["ties"]) == (0, 1, 4)
    assert cmp_["gate"]["verdict"] == "FAIL" and not cmp_["gate"]["quality_passed"]
    assert [r["slice"] for r in cmp_["slices"]["topic"]] == ["even", "odd"]
    assert cmp_["profiles"]["same"] and not cmp_["profiles"]["parts"]
    assert cmp_["baseline"]["profile"]["fingerprint"] == profile["fingerprint"]
    for f in ("report.md", "metrics.png", "deltas.png", "latency.png"):
        assert (report / f).stat().st_size > 0
    assert "Release gate: FAIL" in (report / "report.md").read_text()
    code = await asyncio.to_thread(
        run_cli,
        "compare",
        f"{out / 'run.json'}:lexical",
        f"{out / 'run.json'}:lexical-top1",
        "--out",
        str(report),
        "--no-plots",
        "--fail-on-gate",
    )
    assert code == 1

    # Agent-level evaluation.
    agent_out = tmp_path / "agent"
    code = await asyncio.to_thread(
        run_cli,
        "agent",
        *common,
        "--agent",
        "tiny-agent",
        "--warmup",
        "0",
        "--no-plots",
        "--out",
        str(agent_out),
    )
    assert code == 0
    arun = json.loads((agent_out / "run.json").read_text())
    block = variant(arun, "tiny-agent")
    summary = block["agent"]
    assert summary["executions"] == 5 and summary["errors"] == 0
    # q4 matches nothing: no results, so no context.
    assert summary["no_context"]["by_reason"].get("NO_RESULTS") == 1
    assert summary["reranking"]["eligible"] == 4
    assert summary["reranking"]["success_rate"] == 1.0
    assert summary["usage"]["search_units"] == 4
    assert "end_to_end" in block["latency_ms"] and "execution" in block["latency_ms"]
    assert (agent_out / "report.md").read_text().count("tiny-agent") >= 2
    agent_profile = block["profile"]
    assert {"index", "fusion", "reranker", "final_selection", "agent_policy"} <= set(
        agent_profile["parts"]
    )
    assert agent_profile["parts"]["agent_policy"]["descriptor"].startswith("agent=tiny-agent")

    # A stage only the candidate adds (reranking) is reported, not blocking.
    rerank_cmp = tmp_path / "rerank-cmp"
    code = await asyncio.to_thread(
        run_cli,
        "compare",
        f"{out / 'run.json'}:lexical",
        f"{out / 'run.json'}:lexical-rerank",
        "--out",
        str(rerank_cmp),
        "--no-plots",
        "--resamples",
        "200",
    )
    assert code == 0
    rcmp = json.loads((rerank_cmp / "compare.json").read_text())
    assert [(p["part"], p["change"]) for p in rcmp["profiles"]["parts"]] == [("reranker", "added")]
    check = next(c for c in rcmp["gate"]["checks"] if c["name"] == "same retrieval profile")
    assert check["passed"]
    assert "| reranker | added |" in (rerank_cmp / "report.md").read_text()


async def test_eval_run_reports_bad_input(tmp_path: Path, server: RunningApp) -> None:
    code = await asyncio.to_thread(
        run_cli,
        "run",
        "--address",
        f"127.0.0.1:{server.port}",
        "--dataset",
        str(tmp_path / "missing"),
        "--index",
        "eval-tiny",
        "--modes",
        "lexical",
        "--out",
        str(tmp_path / "o"),
    )
    assert code == 2
    data = write_collection(tmp_path / "tiny")
    code = await asyncio.to_thread(
        run_cli,
        "run",
        "--address",
        f"127.0.0.1:{server.port}",
        "--dataset",
        str(data),
        "--index",
        "no-such-index",
        "--modes",
        "lexical",
        "--out",
        str(tmp_path / "o"),
    )
    assert code == 3
