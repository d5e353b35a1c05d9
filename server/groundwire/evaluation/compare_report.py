"""The people-facing report of a paired comparison: the release gate's verdict
and checks first, then metrics, slices, latency, reliability and agent outcomes
side by side; `write_compare_report` adds the plots of `plots`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from groundwire.evaluation.compare import LoadedVariant
from groundwire.evaluation.formatting import analysis_label, fmt, pct_ci, percentile_cell
from groundwire.evaluation.plots import delta_plot, latency_plot, metric_plot

__all__ = ["compare_markdown", "write_compare_report"]


def compare_markdown(result: Mapping[str, Any]) -> str:
    """The people-facing report of a comparison."""
    lines = _header(result)
    lines += _gate_table(result["gate"])
    lines += _profiles(result.get("profiles"))
    lines += _metrics_table(result)
    lines += _slice_tables(result)
    lines += _latency_table(result["latency_ms"])
    lines += _reliability(result["reliability"])
    lines += _agent_outcomes(result.get("agents") or {})
    lines += _answers_table(result.get("answers") or {})
    if result.get("plots"):
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in result["plots"]]
    return "\n".join(lines) + "\n"


def _header(result: Mapping[str, Any]) -> list[str]:
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
                f"{em.get('model')}, store {idx.get('store')}, lexical analysis "
                f"{analysis_label(idx.get('analysis'))}"
            )
        lines.append(f"- {who} configuration: `{_compact(ctx.get('descriptor'))}`")
    lines.append(
        f"- statistics: paired bootstrap ({s['resamples']} resamples, seed {s['seed']}), "
        "paired randomization test, Wilcoxon signed-rank"
    )
    return lines


def _gate_table(gate: Mapping[str, Any]) -> list[str]:
    lines = [
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
    return lines


def _profiles(profiles: Mapping[str, Any] | None) -> list[str]:
    """Both fingerprints and every part that differs, with both descriptors."""
    if not profiles:
        return []
    lines = ["", "## Profiles", ""]
    if not profiles.get("recorded"):
        return [*lines, "Not recorded by both runs (a run recorded before profiles were)."]
    lines.append(
        f"- baseline `{profiles['baseline']}`, candidate `{profiles['candidate']}`"
        + (": the same profile" if profiles.get("same") else "")
    )
    if profiles.get("mixed"):
        lines.append("- **a variant saw several profiles during its run** (reload or re-ingestion)")
    if profiles.get("parts"):
        lines += [
            "",
            "| part | change | baseline | candidate |",
            "| --- | --- | --- | --- |",
        ]
        for p in profiles["parts"]:
            lines.append(
                f"| {p['part']} | {p['change']} | `{p['baseline'] or '-'}` | "
                f"`{p['candidate'] or '-'}` |"
            )
    return lines


def _metrics_table(result: Mapping[str, Any]) -> list[str]:
    primary = result["settings"]["primary"]
    lines = [
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
        mark = "**" if m == primary else ""
        lines.append(
            f"| {mark}{m}{mark} | {fmt(st['mean_baseline'])} | {fmt(st['mean_candidate'])} | "
            f"{st['delta']:+.4f} [{ci[0]:+.4f}, {ci[1]:+.4f}] | "
            f"{'-' if rel is None else f'{rel:+.2%}'} {pct_ci(st['relative_delta_ci95'])} | "
            f"{fmt(st['p_randomization'])} | {fmt(st['p_wilcoxon'])} | "
            f"{st['wins']} / {st['losses']} / {st['ties']} |"
        )
    return lines


def _slice_tables(result: Mapping[str, Any]) -> list[str]:
    primary = result["settings"]["primary"]
    lines: list[str] = []
    for f, rows in result["slices"].items():
        lines += [
            "",
            f"## Slices by `{f}` ({primary}; pp = percentage points)",
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
    return lines


def _latency_table(latency: Mapping[str, Any]) -> list[str]:
    if not latency:
        return []
    lines = [
        "",
        "## Latency (ms, p50 / p95 / p99)",
        "",
        "| stage | baseline | candidate |",
        "| --- | --- | --- |",
    ]
    for stage, pair in latency.items():
        lines.append(
            f"| {stage} | {percentile_cell(pair['baseline'])} | "
            f"{percentile_cell(pair['candidate'])} |"
        )
    return lines


def _reliability(reliability: Mapping[str, Any]) -> list[str]:
    lines = ["", "## Reliability", ""]
    for who in ("baseline", "candidate"):
        r = reliability.get(who) or {}
        line = f"- {who}: error rate {fmt(r.get('error_rate'))} ({r.get('errors', 0)} errors)"
        rr = r.get("reranking")
        if rr:
            line += (
                f"; reranking: {rr['eligible']} eligible, success {fmt(rr['success_rate'])}, "
                f"fallback {fmt(rr['fallback_rate'])}, blocked failure "
                f"{fmt(rr['blocked_failure_rate'])}, timeout {fmt(rr['timeout_rate'])}"
            )
        lines.append(line)
    return lines


def _agent_outcomes(agents: Mapping[str, Any]) -> list[str]:
    agent_a, agent_b = agents.get("baseline"), agents.get("candidate")
    if not (agent_a or agent_b):
        return []
    lines = ["", "## Agent outcomes", ""]
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
    return lines


def _answers_table(answers: Mapping[str, Any]) -> list[str]:
    if not answers:
        return []
    lines = [
        "",
        "## Answer-level measures",
        "",
        "Paired: the mean per-query difference over queries where both runs have a value, "
        "with its 95% bootstrap interval.",
        "",
        "| measure | baseline | candidate | delta | paired delta [95% CI] (n) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for m, row in answers.items():
        delta = row.get("delta")
        p = row.get("paired")
        paired = (
            f"{p['delta']:+.4f} [{p['delta_ci95'][0]:+.4f}, {p['delta_ci95'][1]:+.4f}] ({p['n']})"
            if p
            else "-"
        )
        lines.append(
            f"| {m} | {fmt(row.get('baseline'))} | {fmt(row.get('candidate'))} | "
            f"{'-' if delta is None else f'{delta:+.4f}'} | {paired} |"
        )
    return lines


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


def write_compare_report(
    result: dict[str, Any],
    a: LoadedVariant,
    b: LoadedVariant,
    out: Path,
    *,
    plots: bool = True,
) -> None:
    """report.md plus metrics.png, deltas.png and latency.png."""
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
        delta_plot(result, out / "deltas.png")
        files = ["metrics.png", "deltas.png"]
        if latency_plot(variants, list(result["latency_ms"]), out / "latency.png", title="latency"):
            files.append("latency.png")
        shown["plots"] = files
    (out / "report.md").write_text(compare_markdown(shown), encoding="utf-8")
