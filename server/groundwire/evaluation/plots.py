"""The PNG plots of the reports (matplotlib, imported only when plotting):
metric per variant with 95% bootstrap intervals, latency distributions per stage
and variant, and the distribution of per-query differences of a comparison."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from groundwire.evaluation.stats import bootstrap_mean_ci

__all__ = ["answers_plot", "delta_plot", "latency_plot", "metric_plot", "per_query_values"]


def per_query_values(variant: Mapping[str, Any], metric: str) -> list[float]:
    """Per-query values of one metric of one variant block."""
    return [float(q["metrics"].get(metric, 0.0)) for q in variant.get("queries", [])]


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


def delta_plot(result: Mapping[str, Any], path: Path) -> None:
    """Histogram of the per-query primary-metric differences of a comparison,
    with the mean and its 95% interval."""
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


def answers_plot(variants: Sequence[Mapping[str, Any]], path: Path, *, title: str) -> bool:
    """Grouped bars of the answer-level measures per agent (`gate.ANSWER_MEASURES`;
    a measure an agent did not report is marked n/a). Returns False (and writes
    nothing) when no variant has answer measures."""
    from groundwire.evaluation.gate import ANSWER_MEASURES, answer_measures

    agents = [v for v in variants if (v.get("agent") or {}).get("answers")]
    if not agents:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    measures = list(ANSWER_MEASURES)
    width = 0.8 / len(agents)
    x = np.arange(len(measures))
    fig, ax = plt.subplots(figsize=(max(8.0, 1.2 * len(measures) * max(1, len(agents) / 2)), 4.5))
    for j, v in enumerate(agents):
        values = answer_measures(v["agent"])
        heights = [float(values[m] or 0.0) for m in measures]
        pos = x - 0.4 + width * (j + 0.5)
        bars = ax.bar(pos, heights, width, label=str(v["name"]))
        for b, m in zip(bars, measures, strict=True):
            val = values[m]
            ax.annotate(
                "n/a" if val is None else f"{val:.2f}",
                (b.get_x() + b.get_width() / 2, b.get_height()),
                xytext=(0, 4),
                textcoords="offset points",
                ha="center",
                fontsize=7,
            )
    ax.set_xticks(x)
    ax.set_xticklabels([m.replace("_", " ") for m in measures], rotation=20, ha="right")
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("rate / mean (0-1)")
    ax.set_title(f"{title}: answer-level measures")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
