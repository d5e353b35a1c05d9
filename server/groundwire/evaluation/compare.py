"""Paired comparison of two variants on the same queries, and seed 001's
release gate.

Inputs are variant blocks of run results (`RUN.json:variant`; the part after
the last colon may be left out when the run has one variant). Queries are
paired by id (only queries present in both count, and the report says how many
were dropped); both runs must be on the same dataset version.

For every metric recorded by both: means, the mean per-query difference with a
95% paired bootstrap interval (10,000 resamples of queries by default, fixed
seed), the relative change with its interval, a paired randomization test and
the Wilcoxon signed-rank test, wins/losses/ties. Slices by query metadata fields
recorded in the runs. Latency percentiles per stage and reliability ratios side
by side.

The gate (seed 001, "Before enabling reranking in production"): the candidate
passes when the relative gain on the primary metric is at least 3%, no slice (of
at least `min_slice_queries` queries) regresses by more than one percentage point
(0.01 on the metric's [0, 1] scale), and every configured latency and
reliability target holds. If quality fails, keep the change disabled; if only an
operational target fails, reduce candidates, choose a lower-latency model or add
capacity; never hide it with a longer timeout.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from groundwire.evaluation.common import COMPARE_SCHEMA, read_json, utc_now
from groundwire.evaluation.report import STAGE_ORDER, fmt
from groundwire.evaluation.stats import bootstrap_mean_ci, paired_stats

__all__ = [
    "GateConfig",
    "LoadedVariant",
    "compare_runs",
    "load_gate",
    "load_variant",
    "write_compare_report",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LatencyTarget(_Strict):
    """Upper bounds (ms) on one stage's percentiles for the candidate."""

    p50: float | None = Field(None, gt=0)
    p95: float | None = Field(None, gt=0)
    p99: float | None = Field(None, gt=0)


class ReliabilityTargets(_Strict):
    """Bounds on the candidate's error and reranking outcome ratios. The reranking
    ratios apply only when the candidate reranks (eligible attempts > 0)."""

    max_error_rate: float = Field(0.01, ge=0, le=1)
    min_rerank_success_rate: float | None = Field(0.99, ge=0, le=1)
    max_rerank_fallback_rate: float | None = Field(0.01, ge=0, le=1)
    max_rerank_blocked_failure_rate: float | None = Field(0.001, ge=0, le=1)
    max_rerank_timeout_rate: float | None = Field(0.005, ge=0, le=1)


class GateConfig(_Strict):
    """Seed 001's release gate, configurable (see eval/gate.toml)."""

    primary: str = "nDCG@10"
    secondary: list[str] = Field(default_factory=lambda: ["MRR@10"])
    min_relative_gain: float = Field(0.03, ge=-1, le=10)
    max_slice_regression: float = Field(0.01, ge=0, le=1)
    min_slice_queries: int = Field(10, ge=1)
    # Stricter than seed 001 (off by default): also require the 95% bootstrap
    # interval of the primary metric's relative change to exclude zero.
    require_significance: bool = False
    slice_fields: list[str] = Field(default_factory=list)
    latency_ms: dict[str, LatencyTarget] = Field(default_factory=dict)
    reliability: ReliabilityTargets = ReliabilityTargets()


def load_gate(path: Path) -> GateConfig:
    """A gate configuration from TOML."""
    try:
        return GateConfig.model_validate(tomllib.loads(Path(path).read_text(encoding="utf-8")))
    except (tomllib.TOMLDecodeError, ValidationError) as exc:
        raise ValueError(f"invalid gate file {path}: {exc}") from None


class LoadedVariant:
    """One variant block with the run it came from."""

    def __init__(self, source: str, run: Mapping[str, Any], variant: Mapping[str, Any]) -> None:
        self.source = source
        self.run = run
        self.variant = variant

    @property
    def name(self) -> str:
        return str(self.variant.get("name"))

    @property
    def label(self) -> str:
        return self.name

    def per_query(self, metric: str) -> dict[str, float]:
        return {
            str(q["id"]): float(q["metrics"][metric])
            for q in self.variant.get("queries", [])
            if metric in q.get("metrics", {})
        }

    def slices(self) -> dict[str, dict[str, str]]:
        return {
            str(q["id"]): dict(q["slices"])
            for q in self.variant.get("queries", [])
            if q.get("slices")
        }

    def metrics(self) -> list[str]:
        return list(self.variant.get("summary", {}))

    def context(self) -> dict[str, Any]:
        run = self.run
        idx = run.get("index", {})
        desc = idx.get("description", {})
        return {
            "file": self.source,
            "variant": self.name,
            "kind": run.get("kind"),
            "descriptor": self.variant.get("descriptor"),
            "dataset": run.get("dataset"),
            "index": {
                "name": idx.get("name"),
                "published_version": idx.get("published_version"),
                "chunking": desc.get("chunking"),
                "embedding": desc.get("embedding"),
                "store": desc.get("store"),
            }
            if idx
            else None,
            "groundwire_version": run.get("groundwire_version"),
            "started_at": run.get("started_at"),
            "machine": run.get("machine"),
        }


def load_variant(spec: str) -> LoadedVariant:
    """`RUN.json` or `RUN.json:variant`."""
    path, name = Path(spec), None
    if not path.is_file() and ":" in spec:
        head, _, name = spec.rpartition(":")
        path = Path(head)
    if not path.is_file():
        raise ValueError(f"no such run file: {path}")
    run = read_json(path)
    variants = list(run.get("variants", []))
    if name is None:
        if len(variants) != 1:
            names = ", ".join(str(v.get("name")) for v in variants)
            raise ValueError(f"{path} has several variants ({names}): use {path}:<variant>")
        return LoadedVariant(str(path), run, variants[0])
    for v in variants:
        if v.get("name") == name:
            return LoadedVariant(str(path), run, v)
    names = ", ".join(str(v.get("name")) for v in variants)
    raise ValueError(f"{path} has no variant {name!r} (it has: {names})")


def _check(name: str, passed: bool, detail: str, kind: str) -> dict[str, Any]:
    return {"name": name, "kind": kind, "passed": passed, "detail": detail}


def _slice_table(
    base: Mapping[str, float],
    cand: Mapping[str, float],
    slices: Mapping[str, Mapping[str, str]],
    fields: Sequence[str],
    gate: GateConfig,
    seed: int,
) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for f in fields:
        groups: dict[str, list[str]] = {}
        for q in base:
            v = slices.get(q, {}).get(f)
            if v is not None and q in cand:
                groups.setdefault(v, []).append(q)
        rows = []
        for value, qids in sorted(groups.items()):
            a = [base[q] for q in qids]
            b = [cand[q] for q in qids]
            deltas = [y - x for x, y in zip(a, b, strict=True)]
            delta = sum(deltas) / len(deltas)
            lo, hi = bootstrap_mean_ci(deltas, resamples=2000, seed=seed)
            gated = len(qids) >= gate.min_slice_queries
            rows.append(
                {
                    "slice": value,
                    "n": len(qids),
                    "mean_baseline": sum(a) / len(a),
                    "mean_candidate": sum(b) / len(b),
                    "delta": delta,
                    "delta_ci95": [lo, hi],
                    "gated": gated,
                    "regression": gated and delta < -gate.max_slice_regression,
                }
            )
        if rows:
            out[f] = rows
    return out


def _latency(a: LoadedVariant, b: LoadedVariant) -> dict[str, Any]:
    la, lb = a.variant.get("latency_ms", {}), b.variant.get("latency_ms", {})
    stages = [s for s in STAGE_ORDER if s in la or s in lb]
    stages += sorted((set(la) | set(lb)) - set(stages))
    return {s: {"baseline": la.get(s), "candidate": lb.get(s)} for s in stages}


def compare_runs(
    a: LoadedVariant,
    b: LoadedVariant,
    gate: GateConfig,
    *,
    slice_fields: Sequence[str] = (),
    resamples: int = 10_000,
    seed: int = 20_240_601,
) -> dict[str, Any]:
    """The comparison document (schema `groundwire.eval.compare/1`)."""
    checks: list[dict[str, Any]] = []
    ds_a, ds_b = a.run.get("dataset", {}), b.run.get("dataset", {})
    same_data = ds_a.get("version") == ds_b.get("version") and ds_a.get("split") == ds_b.get(
        "split"
    )
    checks.append(
        _check(
            "same dataset version",
            same_data,
            f"{ds_a.get('name')}/{ds_a.get('split')} {str(ds_a.get('version'))[:19]} vs "
            f"{ds_b.get('name')}/{ds_b.get('split')} {str(ds_b.get('version'))[:19]}",
            "comparability",
        )
    )
    common = [m for m in a.metrics() if m in b.metrics()]
    if gate.primary not in common:
        raise ValueError(
            f"primary metric {gate.primary} is not recorded by both variants "
            f"(common: {', '.join(common) or 'none'})"
        )
    pa, pb = a.per_query(gate.primary), b.per_query(gate.primary)
    paired = [q for q in pa if q in pb]
    dropped = {"baseline_only": len(set(pa) - set(pb)), "candidate_only": len(set(pb) - set(pa))}
    checks.append(
        _check(
            "same queries",
            not dropped["baseline_only"] and not dropped["candidate_only"] and bool(paired),
            f"{len(paired)} paired; {dropped['baseline_only']} baseline-only, "
            f"{dropped['candidate_only']} candidate-only",
            "comparability",
        )
    )
    stats: dict[str, Any] = {}
    for m in common:
        ma, mb = a.per_query(m), b.per_query(m)
        qs = [q for q in paired if q in ma and q in mb]
        stats[m] = paired_stats(
            [ma[q] for q in qs], [mb[q] for q in qs], resamples=resamples, seed=seed
        ).as_dict()
    prim = stats[gate.primary]
    rel = prim["relative_delta"]
    checks.append(
        _check(
            f"{gate.primary} relative gain >= {gate.min_relative_gain:.1%}",
            rel is not None and rel >= gate.min_relative_gain,
            f"{fmt(prim['mean_baseline'])} -> {fmt(prim['mean_candidate'])} "
            f"({'-' if rel is None else f'{rel:+.2%}'}; 95% CI of the relative change "
            f"{_pct_ci(prim['relative_delta_ci95'])}; p_randomization "
            f"{fmt(prim['p_randomization'])})",
            "quality",
        )
    )
    if gate.require_significance:
        ci = prim["relative_delta_ci95"]
        checks.append(
            _check(
                f"{gate.primary} gain is significant (95% CI excludes 0)",
                bool(ci) and ci[0] > 0,
                f"95% CI of the relative change {_pct_ci(ci)}",
                "quality",
            )
        )
    slices_a = a.slices()
    fields = list(slice_fields) or list(gate.slice_fields)
    if not fields:
        fields = sorted({f for s in slices_a.values() for f in s})
    slice_rows = _slice_table(pa, pb, slices_a, fields, gate, seed)
    for f, rows in slice_rows.items():
        worst = min(rows, key=lambda r: r["delta"])
        regress = [r for r in rows if r["regression"]]
        small = [r["slice"] for r in rows if not r["gated"]]
        detail = (
            f"worst slice {worst['slice']!r} (n={worst['n']}) {worst['delta'] * 100:+.2f} pp"
            + (f"; regressing: {[r['slice'] for r in regress]}" if regress else "")
            + (f"; not gated (n < {gate.min_slice_queries}): {small}" if small else "")
        )
        checks.append(
            _check(
                f"no {f} slice regresses by more than {gate.max_slice_regression * 100:.1f} pp",
                not regress,
                detail,
                "quality",
            )
        )
    latency = _latency(a, b)
    lb = b.variant.get("latency_ms", {})
    for stage, target in sorted(gate.latency_ms.items()):
        st = lb.get(stage)
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
    rel_b = b.variant.get("reliability", {})
    rt = gate.reliability
    err = float(rel_b.get("error_rate", 0.0))
    checks.append(
        _check(
            f"error rate <= {rt.max_error_rate:.2%}",
            err <= rt.max_error_rate,
            f"{err:.2%} ({rel_b.get('errors', 0)} of {rel_b.get('attempts', 0)})",
            "operational",
        )
    )
    rr = rel_b.get("reranking") or {}
    if rr.get("eligible"):
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
            ok = value >= limit if lower else value <= limit
            checks.append(
                _check(
                    f"{label} {'>=' if lower else '<='} {limit:.2%}",
                    ok,
                    f"{value:.2%} of {rr['eligible']} eligible attempts",
                    "operational",
                )
            )
    quality_ok = all(c["passed"] for c in checks if c["kind"] in ("quality", "comparability"))
    ops_ok = all(c["passed"] for c in checks if c["kind"] == "operational")
    if not same_data:
        recommendation = "Not comparable: the runs used different dataset versions or splits."
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
    per_query = [
        {"id": q, "baseline": pa[q], "candidate": pb[q], "delta": pb[q] - pa[q]} for q in paired
    ]
    return {
        "schema": COMPARE_SCHEMA,
        "created_at": utc_now(),
        "baseline": a.context(),
        "candidate": b.context(),
        "settings": {
            "primary": gate.primary,
            "secondary": [m for m in gate.secondary if m in common],
            "resamples": resamples,
            "seed": seed,
            "gate": gate.model_dump(),
        },
        "paired_queries": len(paired),
        "dropped_queries": dropped,
        "metrics": stats,
        "slices": slice_rows,
        "latency_ms": latency,
        "reliability": {
            "baseline": a.variant.get("reliability"),
            "candidate": b.variant.get("reliability"),
        },
        "gate": {
            "verdict": "PASS" if quality_ok and ops_ok else "FAIL",
            "quality_passed": quality_ok,
            "operational_passed": ops_ok,
            "checks": checks,
            "recommendation": recommendation,
        },
        "agents": {"baseline": a.variant.get("agent"), "candidate": b.variant.get("agent")}
        if a.variant.get("agent") or b.variant.get("agent")
        else None,
        "per_query": per_query,
    }


def _pct_ci(ci: Sequence[float] | None) -> str:
    if not ci:
        return "-"
    return f"[{ci[0]:+.2%}, {ci[1]:+.2%}]"


def compare_markdown(result: Mapping[str, Any]) -> str:
    """The people-facing report of a comparison."""
    base, cand = result["baseline"], result["candidate"]
    gate = result["gate"]
    s = result["settings"]
    lines = [
        f"# Paired comparison: {base['variant']} -> {cand['variant']}",
        "",
        f"**Release gate: {gate['verdict']}** — {gate['recommendation']}",
        "",
        f"- baseline: `{base['variant']}` from `{base['file']}`",
        f"- candidate: `{cand['variant']}` from `{cand['file']}`",
        f"- dataset: {base['dataset'].get('name')} ({base['dataset'].get('split')}), version "
        f"`{base['dataset'].get('version')}`; {result['paired_queries']} paired queries",
    ]
    for who, ctx in (("baseline", base), ("candidate", cand)):
        idx = ctx.get("index") or {}
        if idx:
            ch = idx.get("chunking") or {}
            em = idx.get("embedding") or {}
            lines.append(
                f"- {who} index: `{idx.get('name')}` v{idx.get('published_version')}, chunking "
                f"{ch.get('size')}/{ch.get('overlap', 0)}, {em.get('provider')}/"
                f"{em.get('model')}, store {idx.get('store')}"
            )
        lines.append(f"- {who} configuration: `{_compact(ctx.get('descriptor'))}`")
    lines += [
        f"- statistics: paired bootstrap ({s['resamples']} resamples, seed {s['seed']}), "
        "paired randomization test, Wilcoxon signed-rank",
        "",
        "## Gate checks",
        "",
        "| check | kind | result | detail |",
        "| --- | --- | --- | --- |",
    ]
    for c in gate["checks"]:
        lines.append(
            f"| {c['name']} | {c['kind']} | {'pass' if c['passed'] else '**FAIL**'} | "
            f"{c['detail']} |"
        )
    lines += [
        "",
        "## Metrics",
        "",
        "| metric | baseline | candidate | delta [95% CI] | relative [95% CI] | "
        "p (randomization) | p (Wilcoxon) | wins / losses / ties |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for m, st in result["metrics"].items():
        ci = st["delta_ci95"]
        rel = st["relative_delta"]
        mark = "**" if m == s["primary"] else ""
        lines.append(
            f"| {mark}{m}{mark} | {fmt(st['mean_baseline'])} | {fmt(st['mean_candidate'])} | "
            f"{st['delta']:+.4f} [{ci[0]:+.4f}, {ci[1]:+.4f}] | "
            f"{'-' if rel is None else f'{rel:+.2%}'} {_pct_ci(st['relative_delta_ci95'])} | "
            f"{fmt(st['p_randomization'])} | {fmt(st['p_wilcoxon'])} | "
            f"{st['wins']} / {st['losses']} / {st['ties']} |"
        )
    for f, rows in result["slices"].items():
        lines += [
            "",
            f"## Slices by `{f}` ({s['primary']}; pp = percentage points)",
            "",
            "| slice | n | baseline | candidate | delta (pp) [95% CI] | gated | regression |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in rows:
            lo, hi = r["delta_ci95"]
            lines.append(
                f"| {r['slice']} | {r['n']} | {fmt(r['mean_baseline'])} | "
                f"{fmt(r['mean_candidate'])} | {r['delta'] * 100:+.2f} [{lo * 100:+.2f}, "
                f"{hi * 100:+.2f}] | {fmt(r['gated'])} | "
                f"{'**yes**' if r['regression'] else 'no'} |"
            )
    lat = result["latency_ms"]
    if lat:
        lines += [
            "",
            "## Latency (ms, p50 / p95 / p99)",
            "",
            "| stage | baseline | candidate |",
            "| --- | --- | --- |",
        ]
        for stage, pair in lat.items():
            lines.append(f"| {stage} | {_pcts(pair['baseline'])} | {_pcts(pair['candidate'])} |")
    rel = result["reliability"]
    lines += ["", "## Reliability", ""]
    for who in ("baseline", "candidate"):
        r = rel.get(who) or {}
        line = f"- {who}: error rate {fmt(r.get('error_rate'))} ({r.get('errors', 0)} errors)"
        rr = r.get("reranking")
        if rr:
            line += (
                f"; reranking: {rr['eligible']} eligible, success {fmt(rr['success_rate'])}, "
                f"fallback {fmt(rr['fallback_rate'])}, blocked failure "
                f"{fmt(rr['blocked_failure_rate'])}, timeout {fmt(rr['timeout_rate'])}"
            )
        lines.append(line)
    agent_a = (result.get("agents") or {}).get("baseline")
    agent_b = (result.get("agents") or {}).get("candidate")
    if agent_a or agent_b:
        lines += ["", "## Agent outcomes", ""]
        for who, ag in (("baseline", agent_a), ("candidate", agent_b)):
            if ag:
                lines.append(
                    f"- {who}: no-context rate {fmt(ag['no_context']['rate'])} "
                    f"{ag['no_context']['by_reason']}; unknown/not-answerable "
                    f"{ag['no_context']['not_answerable_unknown']}/"
                    f"{ag['no_context']['not_answerable_not_answerable']}; search units/exec "
                    f"{fmt(ag['usage']['search_units_per_execution'], 3)}; cost per 1k "
                    f"{fmt(ag['cost']['per_1000_executions'], 4)} {ag['cost']['currency']}"
                )
    if result.get("plots"):
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in result["plots"]]
    return "\n".join(lines) + "\n"


def _compact(d: object) -> str:
    if not isinstance(d, Mapping):
        return str(d)
    parts = []
    for k, v in d.items():
        if v is None or v == {}:
            continue
        if isinstance(v, Mapping):
            inner = ",".join(f"{ik}={iv}" for ik, iv in v.items() if iv is not None)
            parts.append(f"{k}={{{inner}}}")
        else:
            parts.append(f"{k}={v}")
    return " ".join(parts)


def _pcts(st: Mapping[str, Any] | None) -> str:
    if not st or not st.get("n"):
        return "-"
    return f"{fmt(st['p50'], 1)} / {fmt(st['p95'], 1)} / {fmt(st['p99'], 1)}"


def _delta_plot(result: Mapping[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    primary = result["settings"]["primary"]
    deltas = [q["delta"] for q in result["per_query"]]
    st = result["metrics"][primary]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.hist(deltas, bins=41, color="#4c72b0", alpha=0.85)
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.axvline(st["delta"], color="#c44e52", linewidth=1.5, label=f"mean {st['delta']:+.4f}")
    lo, hi = st["delta_ci95"]
    ax.axvspan(lo, hi, color="#c44e52", alpha=0.2, label=f"95% CI [{lo:+.4f}, {hi:+.4f}]")
    ax.set_xlabel(f"per-query {primary} difference (candidate - baseline)")
    ax.set_ylabel("queries")
    ax.set_title(
        f"{result['candidate']['variant']} vs {result['baseline']['variant']}: "
        f"{st['wins']} wins / {st['losses']} losses / {st['ties']} ties"
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_compare_report(
    result: dict[str, Any],
    a: LoadedVariant,
    b: LoadedVariant,
    out: Path,
    *,
    plots: bool = True,
) -> None:
    """report.md plus metrics.png, deltas.png and latency.png."""
    from groundwire.evaluation.report import latency_plot, metric_plot

    out.mkdir(parents=True, exist_ok=True)
    shown = dict(result)
    if plots:
        variants = [
            {**a.variant, "name": f"baseline: {a.name}"},
            {**b.variant, "name": f"candidate: {b.name}"},
        ]
        primary = result["settings"]["primary"]
        metrics = [primary, *[m for m in result["settings"]["secondary"] if m != primary]]
        metric_plot(variants, metrics, out / "metrics.png", title="metric per variant")
        _delta_plot(result, out / "deltas.png")
        files = ["metrics.png", "deltas.png"]
        if latency_plot(variants, list(result["latency_ms"]), out / "latency.png", title="latency"):
            files.append("latency.png")
        shown["plots"] = files
    (out / "report.md").write_text(compare_markdown(shown), encoding="utf-8")
