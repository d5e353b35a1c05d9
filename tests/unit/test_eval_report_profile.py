"""Evaluation reports say truly what was measured (issue 30, item 2): the
index's recorded lexical analyzer (IndexDescription.analysis.analyzer_descriptor),
a configuration column that names the fusion method and the RM3 settings (a
min-max or RM3 variant never reads like the default), and the retrieval profile
of every variant; `eval compare` reports profile differences by part, and the
gate refuses variants measured under different profiles unless asked."""

from __future__ import annotations

from typing import Any

from groundwire.domain.profile import ProfilePartKind, RetrievalProfile, part
from groundwire.evaluation.compare import LoadedVariant, compare_runs
from groundwire.evaluation.compare_report import compare_markdown
from groundwire.evaluation.formatting import analysis_label
from groundwire.evaluation.gate import GateConfig
from groundwire.evaluation.profiles import variant_profile
from groundwire.evaluation.run_report import run_markdown


def variant(name: str, descriptor: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "descriptor": descriptor,
        "summary": {"nDCG@10": 0.5},
        "reliability": {"attempts": 1, "errors": 0, "error_rate": 0.0},
        "latency_ms": {},
        "queries": [{"id": "q1", "metrics": {"nDCG@10": 0.5}, "latency_ms": {}}],
    }


def run(*variants: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "retrieval",
        "dataset": {"name": "t", "split": "test", "version": "sha256:abc"},
        "index": {
            "name": "scifact",
            "published_version": 3,
            "description": {
                "store": "memory",
                "analysis": {
                    "language": "english",
                    "stemming": True,
                    "stop_words": "english",
                    "analyzer_descriptor": "snowball:english+stop:english",
                },
            },
        },
        "settings": {"metrics": ["nDCG@10"], "primary": "nDCG@10"},
        "variants": list(variants),
    }


def hybrid(method: str) -> dict[str, Any]:
    return {
        "mode": "hybrid",
        "top_k": 100,
        "fusion_requested": {"method": None if method == "rrf" else method},
        "fusion_applied": {
            "rrf_k": 20,
            "semantic_weight": 1.0,
            "lexical_weight": 1.0,
            "leg_depth": 100,
            "method": "FUSION_METHOD_RRF" if method == "rrf" else "FUSION_METHOD_MIN_MAX",
        },
    }


def row(md: str, name: str) -> str:
    return next(line for line in md.splitlines() if line.startswith(f"| {name} |"))


def test_the_header_shows_the_recorded_analyzer_not_plain() -> None:
    md = run_markdown(run(variant("a", {"mode": "lexical", "top_k": 10})))
    assert "lexical analysis snowball:english+stop:english" in md
    assert "lexical analysis plain" not in md


def test_an_index_without_a_recorded_analyzer_is_unknown_not_plain() -> None:
    assert analysis_label(None) == "unknown"
    assert analysis_label({"analyzer_descriptor": "plain"}) == "plain"


def test_the_configuration_names_the_fusion_method_and_rm3() -> None:
    rm3 = {
        "mode": "lexical",
        "top_k": 100,
        "lexical_feedback": {"documents": 5, "terms": None, "original_query_weight": 0.6},
    }
    md = run_markdown(
        run(
            variant("rrf", hybrid("rrf")),
            variant("minmax", hybrid("min-max")),
            variant("bm25", {"mode": "lexical", "top_k": 100}),
            variant("rm3", rm3),
        )
    )
    assert "fusion rrf rrf_k=20" in row(md, "rrf")
    assert "fusion min-max" in row(md, "minmax") and "rrf_k" not in row(md, "minmax")
    assert row(md, "rrf") != row(md, "minmax")
    assert "RM3" not in row(md, "bm25")
    assert "RM3 docs=5 terms=default orig_w=0.60" in row(md, "rm3")


def profile_record(**fusion: object) -> dict[str, Any]:
    """A variant's recorded profile, as `eval run` writes it."""
    parts = [
        part(ProfilePartKind.INDEX, {"name": "kb", "version": 3}),
        part(ProfilePartKind.FUSION, {"method": "rrf", "k": 20, **fusion}),
    ]
    rec = variant_profile([RetrievalProfile(tuple(parts))] * 4)
    assert rec is not None
    return rec


def paired_run(name: str, gain: float, profile: dict[str, Any] | None) -> LoadedVariant:
    queries = [
        {"id": f"q{i}", "metrics": {"nDCG@10": 0.5 + gain}, "latency_ms": {}} for i in range(20)
    ]
    block = {
        "name": name,
        "descriptor": {"mode": "hybrid"},
        "summary": {"nDCG@10": 0.5 + gain},
        "reliability": {"attempts": 20, "errors": 0, "error_rate": 0.0},
        "latency_ms": {},
        "queries": queries,
        "profile": profile,
    }
    run = {
        "kind": "retrieval",
        "dataset": {"name": "t", "split": "test", "version": "v"},
        "index": {
            "name": "kb",
            "description": {"analysis": {"analyzer_descriptor": "stem=english;stop=english"}},
        },
        "variants": [block],
    }
    return LoadedVariant(name, run, block)


def profile_check_of(result: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in result["gate"]["checks"] if c["name"] == "same retrieval profile")


def test_the_gate_refuses_variants_measured_under_different_profiles() -> None:
    base = paired_run("a", 0.0, profile_record())
    cand = paired_run("b", 0.2, profile_record(k=60))
    refused = compare_runs(base, cand, GateConfig(), resamples=200)
    assert refused["gate"]["verdict"] == "FAIL"
    assert refused["gate"]["recommendation"].startswith("Not comparable")
    assert "--allow-profile-change" in refused["gate"]["recommendation"]
    assert [(p["part"], p["change"]) for p in refused["profiles"]["parts"]] == [
        ("fusion", "changed")
    ]
    assert "fusion differ" in profile_check_of(refused)["detail"]
    md = compare_markdown(refused)
    assert (
        "## Profiles" in md and "| fusion | changed | `method=rrf k=20` | `method=rrf k=60` |" in md
    )
    assert "lexical analysis stem=english;stop=english" in md
    # Asked to, the gate runs, and still reports the difference.
    allowed = compare_runs(base, cand, GateConfig(allow_profile_change=True), resamples=200)
    assert allowed["gate"]["verdict"] == "PASS"
    check = profile_check_of(allowed)
    assert check["passed"] and "allowed" in check["detail"]
    assert allowed["profiles"]["parts"] == refused["profiles"]["parts"]


def test_the_same_profile_passes_and_old_runs_are_not_blocked() -> None:
    same = compare_runs(
        paired_run("a", 0.0, profile_record()),
        paired_run("b", 0.2, profile_record()),
        GateConfig(),
        resamples=200,
    )
    assert same["gate"]["verdict"] == "PASS" and same["profiles"]["same"]
    old = compare_runs(
        paired_run("a", 0.0, None), paired_run("b", 0.2, None), GateConfig(), resamples=200
    )
    assert old["gate"]["verdict"] == "PASS" and not old["profiles"]["recorded"]
    assert "not recorded" in profile_check_of(old)["detail"]


def test_a_stage_only_the_candidate_runs_is_reported_not_blocking() -> None:
    rerank = RetrievalProfile(
        (
            part(ProfilePartKind.INDEX, {"name": "kb", "version": 3}),
            part(ProfilePartKind.FUSION, {"method": "rrf", "k": 20}),
            part(ProfilePartKind.RERANKER, {"name": "overlap"}),
        )
    )
    res = compare_runs(
        paired_run("a", 0.0, profile_record()),
        paired_run("b", 0.2, variant_profile([rerank])),
        GateConfig(),
        resamples=200,
    )
    assert res["gate"]["verdict"] == "PASS"
    assert [(p["part"], p["change"]) for p in res["profiles"]["parts"]] == [("reranker", "added")]


def test_a_variant_that_saw_two_profiles_is_flagged() -> None:
    a = RetrievalProfile((part(ProfilePartKind.INDEX, {"name": "kb", "version": 3}),))
    b = RetrievalProfile((part(ProfilePartKind.INDEX, {"name": "kb", "version": 4}),))
    rec = variant_profile([a, a, b])
    assert rec is not None and rec["queries"] == 2 and rec["others"][0]["queries"] == 1
    # A query that skipped a stage is not another profile.
    fewer = variant_profile([a, a.with_parts([part(ProfilePartKind.RERANKER, {"x": 1})])])
    assert fewer is not None and "others" not in fewer and "reranker" in fewer["parts"]
    res = compare_runs(
        paired_run("a", 0.0, rec), paired_run("b", 0.2, rec), GateConfig(), resamples=200
    )
    assert res["gate"]["verdict"] == "FAIL" and res["profiles"]["mixed"]
    md = run_markdown(
        {
            **run(variant("x", {"mode": "lexical"})),
            "variants": [{**variant("x", {"mode": "lexical"}), "profile": rec}],
        }
    )
    assert "## Profiles" in md and "(**also**)" in md


def agent_profile(agent: str, threshold: float = 0.5) -> dict[str, Any]:
    parts = (
        part(ProfilePartKind.INDEX, {"name": "kb", "version": 3}),
        part(ProfilePartKind.RERANKER, {"name": "-", "answerable_at": threshold}),
        part(ProfilePartKind.AGENT_POLICY, {"agent": agent, "mode": "open"}),
    )
    rec = variant_profile([RetrievalProfile(parts)])
    assert rec is not None
    return rec


def test_two_agents_are_the_variants_the_same_agent_changed_is_not() -> None:
    two = compare_runs(
        paired_run("a", 0.0, agent_profile("plain")),
        paired_run("b", 0.2, agent_profile("strict", 0.8)),
        GateConfig(),
        resamples=200,
    )
    assert {(p["part"], p["change"]) for p in two["profiles"]["parts"]} == {
        ("reranker", "variant"),
        ("agent_policy", "variant"),
    }
    assert two["gate"]["verdict"] == "PASS"
    changed = compare_runs(
        paired_run("a", 0.0, agent_profile("plain")),
        paired_run("b", 0.2, agent_profile("plain", 0.8)),
        GateConfig(),
        resamples=200,
    )
    assert [(p["part"], p["change"]) for p in changed["profiles"]["parts"]] == [
        ("reranker", "changed")
    ]
    assert changed["gate"]["verdict"] == "FAIL"
