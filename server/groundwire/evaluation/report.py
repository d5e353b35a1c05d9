"""Markdown and PNG output of a run (retrieval or agent): a quality table with
95% bootstrap intervals, latency percentiles per stage, reliability, and plots
(metric per variant with intervals; latency distributions per variant)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from groundwire.evaluation.stats import bootstrap_mean_ci

__all__ = [
    "fmt",
    "latency_plot",
    "metric_plot",
    "per_query_values",
    "run_markdown",
    "write_run_report",
]

# Stages in display order; anything else follows alphabetically.
STAGE_ORDER = (
    "end_to_end",
    "client",
    "total",
    "embedding",
    "semantic",
    "lexical",
    "rerank",
    "rerank_client",
    "execution",
)


def fmt(value: object, digits: int = 4) -> str:
    """A number for a table ('-' for missing)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        return f"{value:.{digits}f}"
    return str(value)


def per_query_values(variant: Mapping[str, Any], metric: str) -> list[float]:
    """Per-query values of one metric of one variant block."""
    return [float(q["metrics"].get(metric, 0.0)) for q in variant.get("queries", [])]


def _stages(variants: Sequence[Mapping[str, Any]]) -> list[str]:
    seen = {s for v in variants for s in v.get("latency_ms", {})}
    ordered = [s for s in STAGE_ORDER if s in seen]
    return ordered + sorted(seen - set(ordered))


def _describe(variant: Mapping[str, Any]) -> str:
    d = variant.get("descriptor", {})
    if d.get("kind") == "client-baseline":
        return f"{d.get('model')} k1={d.get('k1')} b={d.get('b')} (client)"
    if d.get("kind") == "agent":
        return f"agent {d.get('agent_id')}"
    parts = [str(d.get("mode", "?")), f"top_k={d.get('top_k')}"]
    fusion = d.get("fusion_applied") or {}
    if fusion:
        parts.append(
            f"rrf_k={fusion.get('rrf_k')} w={fmt(fusion.get('semantic_weight'), 2)}/"
            f"{fmt(fusion.get('lexical_weight'), 2)} legs={fusion.get('leg_depth')}"
        )
    if d.get("minimum_relevance") is not None:
        parts.append(f"min_rel={d['minimum_relevance']}")
    rr = d.get("reranker")
    if rr:
        parts.append(f"rerank {rr.get('reranker')} x{rr.get('candidates')}")
    return ", ".join(parts)


def run_markdown(result: Mapping[str, Any], *, resamples: int = 2000, seed: int = 0) -> str:
    """The Markdown report of a run result."""
    ds = result.get("dataset", {})
    idx = result.get("index", {})
    settings = result.get("settings", {})
    metrics: list[str] = list(settings.get("metrics", []))
    primary = settings.get("primary", metrics[0] if metrics else "nDCG@10")
    variants: list[Mapping[str, Any]] = list(result.get("variants", []))
    kind = result.get("kind", "retrieval")
    lines = [
        f"# {'Agent' if kind == 'agent' else 'Retrieval'} evaluation: "
        f"{ds.get('name')} ({ds.get('split')})",
        "",
        f"- dataset version: `{ds.get('version')}` ({ds.get('documents')} documents, "
        f"{settings.get('queries_run')} of {ds.get('judged_queries')} judged queries)",
    ]
    if idx:
        desc = idx.get("description", {})
        chunk = desc.get("chunking", {})
        emb = desc.get("embedding", {})
        lines.append(
            f"- index: `{idx.get('name')}` version {idx.get('published_version')} "
            f"({idx.get('document_count')} documents, {idx.get('chunk_count')} chunks, "
            f"store {desc.get('store')}); chunking size {chunk.get('size')} overlap "
            f"{chunk.get('overlap', 0)}; embedding {emb.get('provider')}/{emb.get('model')} "
            f"({emb.get('dimensions')} dims, metric {desc.get('metric')})"
        )
    ing = result.get("ingestion")
    if ing:
        lines.append(f"- ingestion: {_ingestion(ing)}")
    mach = result.get("machine", {})
    lines += [
        f"- groundwire {result.get('groundwire_version')}; {mach.get('cores')} cores, "
        f"load average at start {mach.get('load_average')}; concurrency "
        f"{settings.get('concurrency')}; {result.get('started_at')} .. "
        f"{result.get('finished_at')}",
        "",
        f"## Quality (primary: {primary}; [95% bootstrap interval of the mean])",
        "",
        "| variant | configuration | " + " | ".join(metrics) + " | docs/query | errors |",
        "|" + " --- |" * (len(metrics) + 4),
    ]
    for v in variants:
        cells = []
        for m in metrics:
            val = v.get("summary", {}).get(m)
            cell = fmt(val)
            if m == primary:
                lo, hi = bootstrap_mean_ci(per_query_values(v, m), resamples=resamples, seed=seed)
                cell = f"**{fmt(val)}** [{fmt(lo, 3)}, {fmt(hi, 3)}]"
            cells.append(cell)
        rel = v.get("reliability", {})
        lines.append(
            f"| {v.get('name')} | {_describe(v)} | "
            + " | ".join(cells)
            + f" | {fmt(v.get('documents_per_query'), 1)} | {rel.get('errors', 0)} |"
        )
    stages = _stages(variants)
    if stages:
        lines += [
            "",
            "## Latency (ms; p50 / p95 / p99 over successful queries)",
            "",
            "| variant | " + " | ".join(stages) + " |",
            "|" + " --- |" * (len(stages) + 1),
        ]
        for v in variants:
            lat = v.get("latency_ms", {})
            cells = []
            for s in stages:
                st = lat.get(s)
                cells.append(
                    "-"
                    if not st or not st.get("n")
                    else f"{fmt(st['p50'], 1)} / {fmt(st['p95'], 1)} / {fmt(st['p99'], 1)}"
                )
            lines.append(f"| {v.get('name')} | " + " | ".join(cells) + " |")
    reranked = [v for v in variants if v.get("reliability", {}).get("reranking")]
    if reranked:
        lines += [
            "",
            "## Reranking outcomes (eligible attempts: candidates > 0)",
            "",
            "| variant | eligible | success | fallback | blocked failure | timeout | codes |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for v in reranked:
            r = v["reliability"]["reranking"]
            lines.append(
                f"| {v.get('name')} | {r['eligible']} | {fmt(r['success_rate'])} | "
                f"{fmt(r['fallback_rate'])} | {fmt(r['blocked_failure_rate'])} | "
                f"{fmt(r['timeout_rate'])} | {r.get('failure_codes') or '-'} |"
            )
    agents = [v for v in variants if v.get("agent")]
    if agents:
        lines += _agent_sections(agents)
    errs = [v for v in variants if v.get("reliability", {}).get("errors")]
    if errs:
        lines += ["", "## Errors", ""]
        for v in errs:
            lines.append(f"- {v['name']}: {v['reliability']['errors_by_code']}")
    if result.get("plots"):
        lines += ["", "## Plots", ""]
        lines += [f"![{p}]({p})" for p in result["plots"]]
    return "\n".join(lines) + "\n"


def _ingestion(ing: Mapping[str, Any]) -> str:
    if ing.get("skipped"):
        return f"skipped ({ing.get('reason', 'index already holds this dataset version')})"
    return (
        f"{ing.get('upserted')} written, {ing.get('unchanged')} unchanged, "
        f"{ing.get('chunks_written')} chunks in {fmt(ing.get('seconds'), 1)} s; "
        f"failures {ing.get('failures') or 'none'}"
    )


def _agent_sections(agents: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = [
        "",
        "## Agent outcomes",
        "",
        "| agent | executions | no-context rate | by reason | NOT_ANSWERABLE: unknown / "
        "not answerable | context hit rate | cited relevant | tokens/exec | search units"
        "/exec | cost per 1k exec |",
        "|" + " --- |" * 10,
    ]
    for v in agents:
        a = v["agent"]
        nc = a["no_context"]
        cost = a["cost"]
        lines.append(
            f"| {v['name']} | {a['executions']} | {fmt(nc['rate'])} | "
            f"{nc['by_reason'] or '-'} | {nc['not_answerable_unknown']} / "
            f"{nc['not_answerable_not_answerable']} | {fmt(a['grounding'].get('context_hit_rate'))}"
            f" | {fmt(a['grounding'].get('citation_relevant_rate'))} | "
            f"{fmt(a['usage']['total_tokens_per_execution'], 1)} | "
            f"{fmt(a['usage']['search_units_per_execution'], 3)} | "
            f"{fmt(cost['per_1000_executions'], 4)} {cost['currency']} |"
        )
    return lines


def metric_plot(
    variants: Sequence[Mapping[str, Any]],
    metrics: Sequence[str],
    path: Path,
    *,
    title: str,
    resamples: int = 2000,
    seed: int = 0,
) -> None:
    """Grouped bars: metric per variant with 95% bootstrap intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = [str(v["name"]) for v in variants]
    n_m = max(1, len(metrics))
    width = 0.8 / n_m
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(names) * max(1, n_m / 2)), 4.5))
    for j, m in enumerate(metrics):
        means, lo_err, hi_err = [], [], []
        for v in variants:
            vals = per_query_values(v, m)
            mu = float(np.mean(vals)) if vals else 0.0
            lo, hi = bootstrap_mean_ci(vals, resamples=resamples, seed=seed) if vals else (mu, mu)
            means.append(mu)
            lo_err.append(max(0.0, mu - lo))
            hi_err.append(max(0.0, hi - mu))
        pos = x - 0.4 + width * (j + 0.5)
        bars = ax.bar(pos, means, width, yerr=[lo_err, hi_err], capsize=3, label=m)
        for b, mu in zip(bars, means, strict=True):
            ax.annotate(
                f"{mu:.3f}",
                (b.get_x() + b.get_width() / 2, mu),
                xytext=(0, 6),
                textcoords="offset points",
                ha="center",
                fontsize=7,
            )
    ax.set_xticks(x)
    ax.set_xticklabels(names, rotation=20, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("mean over queries (95% bootstrap CI)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def latency_plot(
    variants: Sequence[Mapping[str, Any]], stages: Sequence[str], path: Path, *, title: str
) -> bool:
    """Box plots of per-query latency per stage and variant (log scale). Returns
    False (and writes nothing) when no variant has latency data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = []
    for s in stages:
        data, labels = [], []
        for v in variants:
            vals = [
                float(q["latency_ms"][s])
                for q in v.get("queries", [])
                if s in q.get("latency_ms", {}) and "error" not in q
            ]
            if vals:
                data.append(vals)
                labels.append(str(v["name"]))
        if data:
            panels.append((s, data, labels))
    if not panels:
        return False
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.3 * len(panels) + 0.6), squeeze=False)
    for ax, (stage, data, labels) in zip(axes[:, 0], panels, strict=True):
        ax.boxplot(
            data,
            orientation="horizontal",
            whis=(1, 99),
            showfliers=True,
            flierprops={"markersize": 2},
        )
        ax.set_yticks(range(1, len(labels) + 1))
        ax.set_yticklabels(labels, fontsize=8)
        ax.set_xscale("log")
        ax.set_title(f"{stage} (ms; whiskers p1-p99)", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_run_report(result: dict[str, Any], out: Path, *, plots: bool = True) -> None:
    """Write report.md (and metrics.png, latency.png) for a run result."""
    out.mkdir(parents=True, exist_ok=True)
    variants = list(result.get("variants", []))
    settings = result.get("settings", {})
    ds = result.get("dataset", {})
    shown = dict(result)
    if plots and variants:
        metrics = list(settings.get("metrics", []))
        primary = settings.get("primary", metrics[0] if metrics else "nDCG@10")
        picked = [primary, *[m for m in metrics if m != primary][:3]]
        title = f"{ds.get('name')} ({ds.get('split')})"
        metric_plot(variants, picked, out / "metrics.png", title=title)
        files = ["metrics.png"]
        if latency_plot(variants, _stages(variants), out / "latency.png", title=title):
            files.append("latency.png")
        shown["plots"] = files
    (out / "report.md").write_text(run_markdown(shown), encoding="utf-8")
