"""groundwire.evaluation: metrics against hand-computed values, BEIR loading and
the dataset hash, variants, statistics, the release gate and agent summaries."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from groundwire.evaluation.agent_outcomes import Execution, Prices, agent_summary
from groundwire.evaluation.baseline import bm25_rankings, word_tokens
from groundwire.evaluation.common import EvalError, percentiles
from groundwire.evaluation.compare import LoadedVariant, compare_runs, load_variant
from groundwire.evaluation.dataset import (
    Document,
    Query,
    dataset_version,
    load_beir,
    load_slice_file,
    slice_value,
)
from groundwire.evaluation.gate import GateConfig, LatencyTarget
from groundwire.evaluation.metrics import evaluate, mean, parse_metric, parse_metrics
from groundwire.evaluation.run_report import run_markdown
from groundwire.evaluation.stats import (
    bootstrap_mean_ci,
    paired_stats,
    randomization_test,
    wilcoxon_test,
)
from groundwire.evaluation.variants import Variant, load_variants

LOG2_3 = math.log2(3)


def metric_values(
    qrels: dict[str, dict[str, int]], rankings: dict[str, list[str]], *names: str
) -> dict[str, dict[str, float]]:
    return evaluate(qrels, rankings, parse_metrics(names))


# -- metrics (hand-computed) -------------------------------------------------------


def test_ndcg_with_graded_judgments_matches_hand_computation() -> None:
    qrels = {"q": {"d1": 1, "d3": 2}}
    got = metric_values(qrels, {"q": ["d1", "d2", "d3"]}, "nDCG@10", "nDCG@1", "nDCG@2")
    # DCG = 1/log2(2) + 2/log2(4) = 2; ideal = 2/log2(2) + 1/log2(3).
    assert got["nDCG@10"]["q"] == pytest.approx(2 / (2 + 1 / LOG2_3))
    # @1: DCG 1, ideal 2.
    assert got["nDCG@1"]["q"] == pytest.approx(0.5)
    # @2: DCG 1 + 0, ideal 2 + 1/log2(3).
    assert got["nDCG@2"]["q"] == pytest.approx(1 / (2 + 1 / LOG2_3))


def test_mrr_recall_precision_match_hand_computation() -> None:
    qrels = {"q": {"d9": 1, "d7": 1}}
    ranking = {"q": ["x", "y", "d9", "z"]}
    got = metric_values(
        qrels, ranking, "MRR@10", "MRR@2", "Recall@2", "Recall@3", "P@3", "P@10", "nDCG@10"
    )
    assert got["MRR@10"]["q"] == pytest.approx(1 / 3)
    assert got["MRR@2"]["q"] == 0.0
    assert got["Recall@2"]["q"] == 0.0
    assert got["Recall@3"]["q"] == pytest.approx(0.5)
    assert got["P@3"]["q"] == pytest.approx(1 / 3)
    assert got["P@10"]["q"] == pytest.approx(0.1)  # trec_eval divides by the cutoff
    # DCG = 1/log2(4) = 0.5; ideal = 1 + 1/log2(3).
    assert got["nDCG@10"]["q"] == pytest.approx(0.5 / (1 + 1 / LOG2_3))


def test_missing_empty_and_duplicate_rankings() -> None:
    qrels = {"a": {"d1": 1}, "b": {"d1": 1}, "c": {"d1": 1}}
    got = metric_values(qrels, {"a": [], "b": ["d2", "d2", "d1"], "c": ["d1"]}, "MRR@10")
    # An empty ranking scores 0 (it is never dropped from the mean); duplicates
    # are removed before scoring, so d1 is at rank 2 for b.
    assert got["MRR@10"] == {"a": 0.0, "b": pytest.approx(0.5), "c": 1.0}
    assert mean(got["MRR@10"]) == pytest.approx(0.5)


def test_zero_judgments_are_not_relevant() -> None:
    got = metric_values({"q": {"d1": 0, "d2": 1}}, {"q": ["d1", "d2"]}, "MRR@10", "P@1")
    assert got["MRR@10"]["q"] == pytest.approx(0.5)
    assert got["P@1"]["q"] == 0.0


def test_metric_names_and_aliases() -> None:
    assert parse_metric("ndcg@10").name == "nDCG@10"
    assert parse_metric("RR@5").name == "MRR@5"
    assert parse_metric("R@100").name == "Recall@100"
    assert parse_metric("precision@3").name == "P@3"
    assert [m.name for m in parse_metrics(["nDCG@10", "ndcg@10", "MRR@10"])] == [
        "nDCG@10",
        "MRR@10",
    ]
    with pytest.raises(ValueError):
        parse_metric("MAP")


# -- dataset ---------------------------------------------------------------------


def write_beir(root: Path, *, split: str = "test") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    docs = [
        {"_id": "d1", "title": "First", "text": "alpha text"},
        {"_id": "d2", "title": "", "text": "bravo text"},
        {"_id": "d3", "title": "Third", "text": ""},
    ]
    queries = [
        {"_id": "q1", "text": "alpha?", "metadata": {"lang": "en", "tags": ["x", "y"]}},
        {"_id": "q2", "text": "bravo", "metadata": {"lang": "de", "nested": {"k": 3}}},
        {"_id": "q3", "text": "unjudged"},
    ]
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    (root / "qrels").mkdir(exist_ok=True)
    (root / "qrels" / f"{split}.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq2\td2\t1\nq1\td1\t2\nq1\td3\t1\n"
    )
    return root


def test_load_beir_and_content(tmp_path: Path) -> None:
    ds = load_beir(write_beir(tmp_path / "tiny"), "test")
    assert ds.name == "tiny" and ds.split == "test"
    assert [d.id for d in ds.corpus] == ["d1", "d2", "d3"]
    assert ds.corpus[0].content() == "First\n\nalpha text"
    assert ds.corpus[1].content() == "bravo text"
    assert ds.corpus[2].content() == "Third"
    # qrels file order; unjudged queries are not run.
    assert [q.id for q in ds.judged_queries()] == ["q2", "q1"]
    assert ds.qrels["q1"] == {"d1": 2, "d3": 1}
    assert ds.describe()["judgments"] == 3


def test_dataset_version_is_a_content_hash(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "a")
    v1 = dataset_version(root, "test")
    assert v1.startswith("sha256:") and len(v1) == 71
    assert dataset_version(write_beir(tmp_path / "b"), "test") == v1  # same bytes
    with (root / "qrels" / "test.tsv").open("a") as fh:
        fh.write("q2\td3\t1\n")
    assert dataset_version(root, "test") != v1
    with pytest.raises(ValueError):
        dataset_version(root, "dev")  # no such split


def test_slices(tmp_path: Path) -> None:
    ds = load_beir(write_beir(tmp_path / "s"), "test")
    q1, q2 = ds.queries["q1"], ds.queries["q2"]
    assert slice_value(q1, "lang") == "en"
    assert slice_value(q1, "tags") == "x|y"
    assert slice_value(q2, "nested.k") == "3"
    assert slice_value(q2, "tags") is None
    assert slice_value(q1, "qrels.relevant", ds.qrels) == "2"
    assert slice_value(q1, "query.length") == "1-8"
    tsv = tmp_path / "slices.tsv"
    tsv.write_text("query-id\tslice\nq1\tcritical\n")
    assert load_slice_file(tsv) == {"q1": "critical"}


# -- variants ----------------------------------------------------------------------


def test_variants_file(tmp_path: Path) -> None:
    path = tmp_path / "v.toml"
    path.write_text(
        '[defaults]\ntop_k = 50\n\n[[variant]]\nname = "lex"\nmode = "lexical"\n\n'
        '[[variant]]\nname = "hyb"\nmode = "hybrid"\nrrf_k = 20\ntop_k = 10\n'
        'rerank = { candidates = 5, failure_policy = "fail" }\n'
    )
    lex, hyb = load_variants(path)
    assert lex.top_k == 50 and lex.rerank is None
    assert hyb.top_k == 10 and hyb.rrf_k == 20
    assert hyb.rerank is not None and hyb.rerank.candidates == 5
    assert hyb.descriptor()["fusion_requested"]["rrf_k"] == 20
    assert Variant(name="x", mode="lexical").query_text('a "quoted" b') == "a quoted b"
    assert Variant(name="x", mode="lexical", query_quotes="keep").query_text('"q"') == '"q"'
    path.write_text('[[variant]]\nname = "x"\nmode = "lexical"\nrrf_k = 5\n')
    with pytest.raises(EvalError, match="hybrid"):
        load_variants(path)
    path.write_text(
        '[[variant]]\nname = "x"\nmode = "lexical"\n[[variant]]\nname = "x"\nmode = "semantic"\n'
    )
    with pytest.raises(EvalError, match="unique"):
        load_variants(path)


def test_variant_lexical_feedback_reaches_the_query(tmp_path: Path) -> None:
    from groundwire.evaluation.query_runs import _rag_query

    path = tmp_path / "v.toml"
    path.write_text(
        '[[variant]]\nname = "rm3"\nmode = "lexical"\nlexical_feedback = { documents = 5 }\n'
        '[[variant]]\nname = "plain"\nmode = "hybrid"\n'
    )
    rm3, plain = load_variants(path)
    q = _rag_query("idx", rm3, "text")
    assert q.HasField("lexical_feedback") and q.lexical_feedback.documents == 5
    assert not q.lexical_feedback.HasField("terms")
    assert rm3.descriptor()["lexical_feedback"]["documents"] == 5
    assert not _rag_query("idx", plain, "text").HasField("lexical_feedback")
    minmax = Variant(name="mm", mode="hybrid", fusion_method="min-max")
    assert _rag_query("idx", minmax, "t").fusion.method == 2  # FUSION_METHOD_MIN_MAX
    assert minmax.descriptor()["fusion_requested"]["method"] == "min-max"
    # An empty table turns feedback on with the server's defaults.
    empty = Variant.model_validate({"name": "x", "mode": "hybrid", "lexical_feedback": {}})
    assert _rag_query("idx", empty, "t").HasField("lexical_feedback")
    path.write_text('[[variant]]\nname = "x"\nmode = "semantic"\nlexical_feedback = {}\n')
    with pytest.raises(EvalError, match="lexical_feedback"):
        load_variants(path)
    path.write_text('[[variant]]\nname = "x"\nmode = "lexical"\nlexical_feedback = { terms = 0 }\n')
    with pytest.raises(EvalError, match="terms"):
        load_variants(path)


# -- baseline ----------------------------------------------------------------------


def test_bm25_baseline_ranks_and_ties() -> None:
    corpus = [
        Document("b", "", "apple banana"),
        Document("a", "", "apple cherry"),
        Document("c", "", "durian durian"),
        Document("d", "", "elder fig"),
        Document("e", "", "grape honeydew"),
    ]
    ranks, times = bm25_rankings(
        corpus, [Query("q1", "Apple!"), Query("q2", "durian"), Query("q3", "zzz")]
    )
    # a and b tie on "apple": ties by document id; non-matching documents are left out.
    assert ranks == {"q1": ["a", "b"], "q2": ["c"], "q3": []}
    assert len(times) == 3
    assert word_tokens("Don't STOP-me") == ["don", "t", "stop", "me"]


# -- statistics --------------------------------------------------------------------


def test_percentiles() -> None:
    p = percentiles([float(x) for x in range(1, 101)])
    assert p["n"] == 100 and p["p50"] == pytest.approx(50.5) and p["max"] == 100.0
    assert p["p95"] == pytest.approx(95.05) and p["p99"] == pytest.approx(99.01)
    assert percentiles([])["p50"] is None


def test_bootstrap_and_tests_are_seeded_and_sane() -> None:
    vals = [0.0, 1.0] * 50
    lo, hi = bootstrap_mean_ci(vals, resamples=2000, seed=1)
    assert lo < 0.5 < hi and hi - lo < 0.25
    assert bootstrap_mean_ci(vals, resamples=2000, seed=1) == (lo, hi)
    assert randomization_test([0.1] * 30, resamples=2000) < 0.001
    assert randomization_test([0.1, -0.1] * 15, resamples=2000) > 0.9
    p = wilcoxon_test([0.1 + i / 100 for i in range(20)])
    assert p is not None and p < 0.001
    st = paired_stats([0.5] * 40, [0.6] * 40, resamples=1000)
    assert st.delta == pytest.approx(0.1) and st.relative == pytest.approx(0.2)
    assert st.delta_ci == pytest.approx((0.1, 0.1))
    assert (st.wins, st.losses, st.ties) == (40, 0, 0)


# -- compare and the gate ----------------------------------------------------------


def fake_run(
    name: str,
    values: dict[str, float],
    *,
    slices: dict[str, str] | None = None,
    version: str = "sha256:abc",
    latency: float = 10.0,
    reranking: dict[str, Any] | None = None,
) -> dict[str, Any]:
    queries = [
        {
            "id": q,
            "metrics": {"nDCG@10": v, "MRR@10": v},
            "latency_ms": {"end_to_end": latency},
            **({"slices": {"lang": slices[q]}} if slices else {}),
        }
        for q, v in values.items()
    ]
    reliability: dict[str, Any] = {"attempts": len(values), "errors": 0, "error_rate": 0.0}
    if reranking:
        reliability["reranking"] = reranking
    return {
        "schema": "groundwire.eval.run/1",
        "kind": "retrieval",
        "dataset": {"name": "t", "split": "test", "version": version},
        "variants": [
            {
                "name": name,
                "descriptor": {"mode": "hybrid"},
                "summary": {"nDCG@10": mean(values), "MRR@10": mean(values)},
                "reliability": reliability,
                "latency_ms": {"end_to_end": percentiles([latency] * len(values))},
                "queries": queries,
            }
        ],
    }


def loaded(run: dict[str, Any]) -> LoadedVariant:
    return LoadedVariant("mem", run, run["variants"][0])


def test_gate_passes_on_a_clear_gain() -> None:
    qids = [f"q{i}" for i in range(40)]
    base = {q: 0.5 for q in qids}
    cand = {q: 0.6 if i % 2 else 0.55 for i, q in enumerate(qids)}
    res = compare_runs(loaded(fake_run("a", base)), loaded(fake_run("b", cand)), GateConfig())
    assert res["gate"]["verdict"] == "PASS", res["gate"]["checks"]
    st = res["metrics"]["nDCG@10"]
    assert st["relative_delta"] == pytest.approx(0.15)
    assert st["delta_ci95"][0] > 0 and st["p_randomization"] < 0.01
    assert res["paired_queries"] == 40
    strict = compare_runs(
        loaded(fake_run("a", base)),
        loaded(fake_run("b", cand)),
        GateConfig(require_significance=True),
    )
    assert strict["gate"]["verdict"] == "PASS"
    noisy = {q: (0.9 if i % 2 else 0.2) for i, q in enumerate(qids)}  # mean 0.55, +10%
    res = compare_runs(
        loaded(fake_run("a", base)),
        loaded(fake_run("b", noisy)),
        GateConfig(require_significance=True),
    )
    assert res["metrics"]["nDCG@10"]["relative_delta"] == pytest.approx(0.1)
    assert res["gate"]["verdict"] == "FAIL"


def test_gate_fails_on_small_gain_slice_regression_and_latency() -> None:
    qids = [f"q{i}" for i in range(40)]
    langs = {q: ("en" if i < 20 else "de") for i, q in enumerate(qids)}
    base = {q: 0.5 for q in qids}
    # +2% overall: en gains 4 points, de loses 2.
    cand = {q: (0.54 if langs[q] == "en" else 0.48) for q in qids}
    res = compare_runs(
        loaded(fake_run("a", base, slices=langs)),
        loaded(fake_run("b", cand, slices=langs, latency=900.0)),
        GateConfig(latency_ms={"end_to_end": LatencyTarget(p95=500)}),
    )
    gate = res["gate"]
    assert gate["verdict"] == "FAIL" and not gate["quality_passed"]
    failed = {c["name"] for c in gate["checks"] if not c["passed"]}
    assert "nDCG@10 relative gain >= 3.0%" in failed
    assert "no lang slice regresses by more than 1.0 pp" in failed
    assert "end_to_end p95 <= 500 ms" in failed
    de = next(r for r in res["slices"]["lang"] if r["slice"] == "de")
    en = next(r for r in res["slices"]["lang"] if r["slice"] == "en")
    assert de["delta"] == pytest.approx(-0.02) and de["regression"] and de["n"] == 20
    assert en["delta"] == pytest.approx(0.04) and not en["regression"]
    assert res["metrics"]["nDCG@10"]["relative_delta"] == pytest.approx(0.02)


def test_gate_operational_failure_keeps_quality_verdict_separate() -> None:
    qids = [f"q{i}" for i in range(30)]
    rr = {
        "eligible": 30,
        "success_rate": 0.9,
        "fallback_rate": 0.1,
        "blocked_failure_rate": 0.0,
        "timeout_rate": 0.1,
    }
    res = compare_runs(
        loaded(fake_run("a", {q: 0.4 for q in qids})),
        loaded(fake_run("b", {q: 0.5 for q in qids}, reranking=rr)),
        GateConfig(),
    )
    gate = res["gate"]
    assert gate["quality_passed"] and not gate["operational_passed"]
    assert gate["verdict"] == "FAIL" and "longer timeout" in gate["recommendation"]


def test_compare_refuses_different_datasets_and_loads_variants(tmp_path: Path) -> None:
    qids = {f"q{i}": 0.5 for i in range(5)}
    a = fake_run("a", qids)
    b = fake_run("b", {q: 0.9 for q in qids}, version="sha256:other")
    res = compare_runs(loaded(a), loaded(b), GateConfig())
    assert res["gate"]["verdict"] == "FAIL"
    assert res["gate"]["recommendation"].startswith("Not comparable")
    path = tmp_path / "run.json"
    two = fake_run("x", qids)
    two["variants"].append({**two["variants"][0], "name": "y"})
    path.write_text(json.dumps(two))
    assert load_variant(f"{path}:y").name == "y"
    with pytest.raises(ValueError, match="several variants"):
        load_variant(str(path))
    with pytest.raises(ValueError, match="no variant"):
        load_variant(f"{path}:z")


# -- agents and reports -----------------------------------------------------------


def test_agent_summary_rates_usage_and_cost() -> None:
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 1}, "q4": {"d4": 1}}
    ex = [
        Execution(
            "q1",
            context_accepted=True,
            rerank_requested=True,
            rerank_ran=True,
            rerank_candidates=5,
            rerank_outcome="SUCCEEDED",
            aggregate_answerability="ANSWERABLE",
            prompt_tokens=1000,
            completion_tokens=100,
            context_docs=["d1"],
            cited_docs=["d1", "d9"],
        ),
        Execution(
            "q2",
            no_context_reason="NOT_ANSWERABLE",
            rerank_requested=True,
            rerank_ran=True,
            rerank_candidates=5,
            rerank_outcome="SUCCEEDED",
            aggregate_answerability="NOT_ANSWERABLE",
            model_skipped=True,
        ),
        Execution(
            "q3",
            context_accepted=True,
            rerank_requested=True,
            rerank_ran=True,
            rerank_candidates=150,
            rerank_outcome="FALLBACK",
            rerank_timed_out=True,
            rerank_failure_code="RerankerTimeout",
            aggregate_answerability="UNKNOWN",
            prompt_tokens=500,
            completion_tokens=50,
            context_docs=["d0"],
        ),
        Execution(
            "q4",
            error="UNAVAILABLE/RERANKER_FAILED",
            rerank_requested=True,
            rerank_candidates=1,
            rerank_outcome="FAILED",
        ),
    ]
    s = agent_summary(
        ex, qrels, Prices(prompt_per_1k=0.01, completion_per_1k=0.02, search_unit=0.002)
    )
    assert s["executions"] == 4 and s["errors"] == 1
    assert s["no_context"]["rate"] == pytest.approx(1 / 3)
    assert s["no_context"]["by_reason"] == {"NOT_ANSWERABLE": 1}
    assert s["no_context"]["not_answerable_not_answerable"] == 1
    assert s["no_context"]["not_answerable_unknown"] == 0
    r = s["reranking"]
    assert r["eligible"] == 4
    assert (r["success_rate"], r["fallback_rate"]) == (0.5, 0.25)
    assert (r["blocked_failure_rate"], r["timeout_rate"]) == (0.25, 0.25)
    # Search units: 1 + 1 + ceil(150/100)=2 + 1 (the blocked call) = 5.
    assert s["usage"]["search_units"] == 5
    cost = 1.5 * 0.01 + 0.15 * 0.02 + 5 * 0.002
    assert s["cost"]["per_1000_executions"] == pytest.approx(cost / 4 * 1000)
    assert s["grounding"]["context_hit_rate"] == pytest.approx(1 / 3)
    assert s["grounding"]["citation_relevant_rate"] == pytest.approx(0.5)


def test_run_markdown_lists_variants_and_latency() -> None:
    run = fake_run("hybrid", {"q1": 1.0, "q2": 0.0})
    run["settings"] = {"metrics": ["nDCG@10", "MRR@10"], "primary": "nDCG@10"}
    md = run_markdown(run)
    assert "| hybrid |" in md and "**0.5000**" in md and "end_to_end" in md
