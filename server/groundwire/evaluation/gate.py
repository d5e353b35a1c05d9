"""The release gate: when a candidate configuration (e.g. reranking on) may
replace its baseline.

The candidate passes when the runs are comparable (same dataset version and
split, the same judged queries), the relative gain on the primary metric is at
least `min_relative_gain` (3% by default), no slice of at least
`min_slice_queries` queries regresses by more than `max_slice_regression` (one
percentage point, 0.01 on the metric's [0, 1] scale), and every configured
latency and reliability target holds for the candidate. If quality fails, keep
the change disabled; if only an operational target fails, reduce candidates,
choose a lower-latency model or add capacity; never hide it with a longer
timeout.

Agent runs with answer-level measures are also gated on them (`[answers]`,
`AnswerTargets`): absolute floors for the candidate (citation precision and
recall, the share of cited sentences, faithfulness, answer relevance, the
refusal rate on unanswerable questions, the answered rate on answerable ones),
the largest allowed drop of each from the baseline, and the largest judge
failure rate. A floor on a measure the candidate did not report (no judge, no
holdout) fails: a gate that asks for it must not pass without it.

Each check is a dict `{name, kind, passed, detail}` with kind `comparability`,
`quality` or `operational`; `gate_verdict` turns the list into the verdict.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from groundwire.evaluation.common import StrictFile
from groundwire.evaluation.formatting import fmt, pct_ci

__all__ = [
    "ANSWER_MEASURES",
    "AnswerTargets",
    "GateConfig",
    "LatencyTarget",
    "ReliabilityTargets",
    "answer_checks",
    "answer_measures",
    "comparability_checks",
    "gate_verdict",
    "latency_checks",
    "load_gate",
    "quality_checks",
    "reliability_checks",
    "same_dataset",
]


class LatencyTarget(StrictFile):
    """Upper bounds (ms) on one stage's percentiles for the candidate."""

    p50: float | None = Field(None, gt=0)
    p95: float | None = Field(None, gt=0)
    p99: float | None = Field(None, gt=0)


class ReliabilityTargets(StrictFile):
    """Bounds on the candidate's error and reranking outcome ratios. The reranking
    ratios apply only when the candidate reranks (eligible attempts > 0)."""

    max_error_rate: float = Field(0.01, ge=0, le=1)
    min_rerank_success_rate: float | None = Field(0.99, ge=0, le=1)
    max_rerank_fallback_rate: float | None = Field(0.01, ge=0, le=1)
    max_rerank_blocked_failure_rate: float | None = Field(0.001, ge=0, le=1)
    max_rerank_timeout_rate: float | None = Field(0.005, ge=0, le=1)


class AnswerTargets(StrictFile):
    """Answer-level targets of agent runs (None: not checked). Fractions in [0, 1]."""

    min_citation_precision: float | None = Field(None, ge=0, le=1)
    min_citation_recall: float | None = Field(None, ge=0, le=1)
    min_sentence_citation_share: float | None = Field(None, ge=0, le=1)
    min_faithfulness: float | None = Field(None, ge=0, le=1)
    min_answer_relevance: float | None = Field(None, ge=0, le=1)
    min_refusal_rate: float | None = Field(None, ge=0, le=1)
    min_answered_rate: float | None = Field(None, ge=0, le=1)
    # No measure both runs report may fall further than this below the baseline.
    max_drop: float | None = Field(0.02, ge=0, le=1)
    # Applies when the candidate was judged: more failures make the judged means untrustworthy.
    max_judge_failure_rate: float | None = Field(0.05, ge=0, le=1)


class GateConfig(StrictFile):
    """The release gate's thresholds and targets (see eval/gate.toml)."""

    primary: str = "nDCG@10"
    secondary: list[str] = Field(default_factory=lambda: ["MRR@10"])
    min_relative_gain: float = Field(0.03, ge=-1, le=10)
    max_slice_regression: float = Field(0.01, ge=0, le=1)
    min_slice_queries: int = Field(10, ge=1)
    # Stricter than the default gate (off by default): also require the 95%
    # bootstrap interval of the primary metric's relative change to exclude zero.
    require_significance: bool = False
    slice_fields: list[str] = Field(default_factory=list)
    latency_ms: dict[str, LatencyTarget] = Field(default_factory=dict)
    reliability: ReliabilityTargets = ReliabilityTargets()
    answers: AnswerTargets = AnswerTargets()
    # Gate two variants whose retrieval profiles differ in a part both report
    # (evaluation/profiles.py); off: such a comparison is not comparable.
    allow_profile_change: bool = False


def load_gate(path: Path) -> GateConfig:
    """A gate configuration from TOML."""
    try:
        return GateConfig.model_validate(tomllib.loads(Path(path).read_text(encoding="utf-8")))
    except (tomllib.TOMLDecodeError, ValidationError) as exc:
        raise ValueError(f"invalid gate file {path}: {exc}") from None


def _check(name: str, passed: bool, detail: str, kind: str) -> dict[str, Any]:
    return {"name": name, "kind": kind, "passed": passed, "detail": detail}


def same_dataset(ds_a: Mapping[str, Any], ds_b: Mapping[str, Any]) -> bool:
    """Two runs are comparable only on the same dataset version and split."""
    return bool(
        ds_a.get("version") == ds_b.get("version") and ds_a.get("split") == ds_b.get("split")
    )


def comparability_checks(
    ds_a: Mapping[str, Any], ds_b: Mapping[str, Any], paired: int, dropped: Mapping[str, int]
) -> list[dict[str, Any]]:
    """Same dataset version and split; the same queries on both sides."""
    return [
        _check(
            "same dataset version",
            same_dataset(ds_a, ds_b),
            f"{ds_a.get('name')}/{ds_a.get('split')} {str(ds_a.get('version'))[:19]} vs "
            f"{ds_b.get('name')}/{ds_b.get('split')} {str(ds_b.get('version'))[:19]}",
            "comparability",
        ),
        _check(
            "same queries",
            not dropped["baseline_only"] and not dropped["candidate_only"] and bool(paired),
            f"{paired} paired; {dropped['baseline_only']} baseline-only, "
            f"{dropped['candidate_only']} candidate-only",
            "comparability",
        ),
    ]


def quality_checks(
    gate: GateConfig, primary: Mapping[str, Any], slices: Mapping[str, Sequence[Mapping[str, Any]]]
) -> list[dict[str, Any]]:
    """The primary metric's relative gain (and, if required, its significance);
    no slice regressing beyond the allowance."""
    rel = primary["relative_delta"]
    checks = [
        _check(
            f"{gate.primary} relative gain >= {gate.min_relative_gain:.1%}",
            rel is not None and rel >= gate.min_relative_gain,
            f"{fmt(primary['mean_baseline'])} -> {fmt(primary['mean_candidate'])} "
            f"({'-' if rel is None else f'{rel:+.2%}'}; 95% CI of the relative change "
            f"{pct_ci(primary['relative_delta_ci95'])}; p_randomization "
            f"{fmt(primary['p_randomization'])})",
            "quality",
        )
    ]
    if gate.require_significance:
        ci = primary["relative_delta_ci95"]
        checks.append(
            _check(
                f"{gate.primary} gain is significant (95% CI excludes 0)",
                bool(ci) and ci[0] > 0,
                f"95% CI of the relative change {pct_ci(ci)}",
                "quality",
            )
        )
    for f, rows in slices.items():
        checks.append(_slice_check(gate, f, rows))
    return checks


def _slice_check(gate: GateConfig, field: str, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    worst = min(rows, key=lambda r: r["delta"])
    regress = [r for r in rows if r["regression"]]
    small = [r["slice"] for r in rows if not r["gated"]]
    detail = (
        f"worst slice {worst['slice']!r} (n={worst['n']}) {worst['delta'] * 100:+.2f} pp"
        + (f"; regressing: {[r['slice'] for r in regress]}" if regress else "")
        + (f"; not gated (n < {gate.min_slice_queries}): {small}" if small else "")
    )
    return _check(
        f"no {field} slice regresses by more than {gate.max_slice_regression * 100:.1f} pp",
        not regress,
        detail,
        "quality",
    )


def latency_checks(gate: GateConfig, latency: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every configured percentile bound on the candidate's stage latency; a stage
    the candidate did not run passes."""
    checks = []
    for stage, target in sorted(gate.latency_ms.items()):
        st = latency.get(stage)
        for pname in ("p50", "p95", "p99"):
            limit = getattr(target, pname)
            if limit is None:
                continue
            value = st.get(pname) if st else None
            checks.append(
                _check(
                    f"{stage} {pname} <= {limit:g} ms",
                    value is None or value <= limit,
                    "stage not run by the candidate" if value is None else f"{value:.1f} ms",
                    "operational",
                )
            )
    return checks


def reliability_checks(gate: GateConfig, reliability: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The candidate's error rate and, when it reranked, its reranking ratios."""
    rt = gate.reliability
    err = float(reliability.get("error_rate", 0.0))
    checks = [
        _check(
            f"error rate <= {rt.max_error_rate:.2%}",
            err <= rt.max_error_rate,
            f"{err:.2%} ({reliability.get('errors', 0)} of {reliability.get('attempts', 0)})",
            "operational",
        )
    ]
    rr = reliability.get("reranking") or {}
    if not rr.get("eligible"):
        return checks
    for label, key, limit, lower in (
        ("rerank success rate", "success_rate", rt.min_rerank_success_rate, True),
        ("rerank fallback rate", "fallback_rate", rt.max_rerank_fallback_rate, False),
        (
            "rerank blocked failure rate",
            "blocked_failure_rate",
            rt.max_rerank_blocked_failure_rate,
            False,
        ),
        ("rerank timeout rate", "timeout_rate", rt.max_rerank_timeout_rate, False),
    ):
        if limit is None:
            continue
        value = float(rr.get(key, 0.0))
        checks.append(
            _check(
                f"{label} {'>=' if lower else '<='} {limit:.2%}",
                value >= limit if lower else value <= limit,
                f"{value:.2%} of {rr['eligible']} eligible attempts",
                "operational",
            )
        )
    return checks


# Measure name -> its path in a variant's `agent` block (the refusal rate is the
# holdout's when there is one, else the foreign questions').
ANSWER_MEASURES: dict[str, tuple[str, ...]] = {
    "citation_precision": ("answers", "citations", "precision"),
    "citation_recall": ("answers", "citations", "recall"),
    "sentence_citation_share": ("answers", "citations", "sentence_citation_share"),
    "faithfulness": ("answers", "judge", "faithfulness"),
    "answer_relevance": ("answers", "judge", "answer_relevance"),
    "refusal_rate": ("refusal", "*", "unanswerable", "refusal_rate"),
    "answered_rate": ("answers", "answered_rate"),
}


def _dig(block: Any, path: Sequence[str]) -> float | None:
    for i, key in enumerate(path):
        if key == "*":
            if not isinstance(block, Mapping):
                return None
            for kind in ("holdout", "foreign"):
                found = _dig(block.get(kind), path[i + 1 :])
                if found is not None:
                    return found
            return None
        if not isinstance(block, Mapping):
            return None
        block = block.get(key)
    return float(block) if isinstance(block, int | float) and not isinstance(block, bool) else None


def answer_measures(agent: Mapping[str, Any] | None) -> dict[str, float | None]:
    """The gated answer measures of a variant's `agent` block (None: not reported)."""
    return {m: _dig(agent or {}, path) for m, path in ANSWER_MEASURES.items()}


def answer_checks(
    gate: GateConfig, baseline: Mapping[str, Any] | None, candidate: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """Floors, drops and the judge failure rate (see the module docstring);
    nothing for runs without answer measures and no floors asked for."""
    at = gate.answers
    base, cand = answer_measures(baseline), answer_measures(candidate)
    checks: list[dict[str, Any]] = []
    for m in ANSWER_MEASURES:
        floor = getattr(at, f"min_{m}")
        value = cand[m]
        if floor is not None:
            checks.append(
                _check(
                    f"{m} >= {floor:.2%}",
                    value is not None and value >= floor,
                    "not reported by the candidate" if value is None else f"{value:.2%}",
                    "quality",
                )
            )
        before = base[m]
        if at.max_drop is not None and value is not None and before is not None:
            checks.append(
                _check(
                    f"{m} drops by at most {at.max_drop * 100:.1f} pp",
                    value >= before - at.max_drop,
                    f"{before:.2%} -> {value:.2%}",
                    "quality",
                )
            )
    judge = ((candidate or {}).get("answers") or {}).get("judge")
    if at.max_judge_failure_rate is not None and judge and judge.get("attempted"):
        rate = float(judge.get("failure_rate", 0.0))
        checks.append(
            _check(
                f"judge failure rate <= {at.max_judge_failure_rate:.2%}",
                rate <= at.max_judge_failure_rate,
                f"{rate:.2%} of {judge['attempted']} ({judge.get('failures_by_code') or {}})",
                "quality",
            )
        )
    return checks


def gate_verdict(
    checks: Sequence[Mapping[str, Any]], *, comparable: bool, same_profile: bool = True
) -> dict[str, Any]:
    """PASS only when every check passes, with the action the outcome calls for."""
    quality_ok = all(c["passed"] for c in checks if c["kind"] in ("quality", "comparability"))
    ops_ok = all(c["passed"] for c in checks if c["kind"] == "operational")
    if not comparable:
        recommendation = "Not comparable: the runs used different dataset versions or splits."
    elif not same_profile:
        recommendation = (
            "Not comparable: the variants ran under different retrieval profiles (see "
            "Profiles); rerun both under one profile, or pass --allow-profile-change to "
            "gate them anyway."
        )
    elif not quality_ok:
        recommendation = "Quality gate not met: keep the change (e.g. reranking) disabled."
    elif not ops_ok:
        recommendation = (
            "Quality passes but an operational target fails: reduce candidates, select a "
            "lower-latency model or improve provider capacity before release; do not hide "
            "the regression with a longer timeout."
        )
    else:
        recommendation = "All gate checks pass: the change may ship."
    return {
        "verdict": "PASS" if quality_ok and ops_ok else "FAIL",
        "quality_passed": quality_ok,
        "operational_passed": ops_ok,
        "checks": list(checks),
        "recommendation": recommendation,
    }
