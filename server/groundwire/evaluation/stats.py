"""Paired statistics: bootstrap confidence intervals, a paired randomization
(sign-flip) test and the Wilcoxon signed-rank test (scipy). All resampling uses a
seeded numpy Generator, so a report is reproducible bit for bit."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "PairedStats",
    "bootstrap_mean_ci",
    "paired_stats",
    "randomization_test",
    "wilcoxon_test",
]


def bootstrap_mean_ci(
    values: Sequence[float], *, resamples: int = 10_000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return (math.nan, math.nan)
    if x.size == 1 or np.all(x == x[0]):
        return (float(x[0]), float(x[0]))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(resamples, x.size))
    means = x[idx].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    return (float(np.quantile(means, alpha)), float(np.quantile(means, 1.0 - alpha)))


def randomization_test(deltas: Sequence[float], *, resamples: int = 10_000, seed: int = 0) -> float:
    """Two-sided paired randomization test of mean(delta) = 0: random sign flips
    of the per-query differences; p = (count(|mean*| >= |mean|) + 1) / (R + 1)."""
    d = np.asarray(deltas, dtype=np.float64)
    if d.size == 0 or np.all(d == 0):
        return 1.0
    observed = abs(float(d.mean()))
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(resamples, d.size))
    flipped = np.abs((signs * d).mean(axis=1))
    extreme = int(np.count_nonzero(flipped >= observed - 1e-12))
    return (extreme + 1) / (resamples + 1)


def wilcoxon_test(deltas: Sequence[float]) -> float | None:
    """Two-sided Wilcoxon signed-rank p-value (zero differences dropped, as
    `zero_method="wilcox"`); None when there is nothing to test or scipy is
    missing."""
    d = [x for x in deltas if x != 0.0]
    if len(d) < 1:
        return None
    try:
        from scipy.stats import wilcoxon  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - scipy comes with pytrec-eval-terrier
        return None
    res = wilcoxon(d, zero_method="wilcox", alternative="two-sided")
    p = float(res.pvalue)
    return p if math.isfinite(p) else None


@dataclass(frozen=True, slots=True)
class PairedStats:
    """Paired comparison of one metric."""

    n: int
    mean_a: float
    mean_b: float
    delta: float
    relative: float | None
    delta_ci: tuple[float, float]
    relative_ci: tuple[float, float] | None
    p_randomization: float
    p_wilcoxon: float | None
    wins: int
    losses: int
    ties: int

    def as_dict(self) -> dict[str, object]:
        return {
            "n": self.n,
            "mean_baseline": self.mean_a,
            "mean_candidate": self.mean_b,
            "delta": self.delta,
            "relative_delta": self.relative,
            "delta_ci95": list(self.delta_ci),
            "relative_delta_ci95": list(self.relative_ci) if self.relative_ci else None,
            "p_randomization": self.p_randomization,
            "p_wilcoxon": self.p_wilcoxon,
            "wins": self.wins,
            "losses": self.losses,
            "ties": self.ties,
        }


def paired_stats(
    a: Sequence[float], b: Sequence[float], *, resamples: int = 10_000, seed: int = 0
) -> PairedStats:
    """Bootstrap intervals (of the mean difference and of the relative change
    mean(b)/mean(a) - 1, resampling queries jointly) and both tests."""
    xa = np.asarray(a, dtype=np.float64)
    xb = np.asarray(b, dtype=np.float64)
    if xa.shape != xb.shape:
        raise ValueError("paired samples must have the same length")
    n = int(xa.size)
    if n == 0:
        nan = (math.nan, math.nan)
        return PairedStats(0, math.nan, math.nan, math.nan, None, nan, None, 1.0, None, 0, 0, 0)
    d = xb - xa
    mean_a, mean_b = float(xa.mean()), float(xb.mean())
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    ra, rb = xa[idx].mean(axis=1), xb[idx].mean(axis=1)
    rd = rb - ra
    delta_ci = (float(np.quantile(rd, 0.025)), float(np.quantile(rd, 0.975)))
    relative = (mean_b / mean_a - 1.0) if mean_a > 0 else None
    relative_ci: tuple[float, float] | None = None
    if mean_a > 0:
        with np.errstate(divide="ignore", invalid="ignore"):
            rr = np.where(ra > 0, rb / ra - 1.0, np.nan)
        rr = rr[np.isfinite(rr)]
        if rr.size:
            relative_ci = (float(np.quantile(rr, 0.025)), float(np.quantile(rr, 0.975)))
    eps = 1e-12
    return PairedStats(
        n=n,
        mean_a=mean_a,
        mean_b=mean_b,
        delta=mean_b - mean_a,
        relative=relative,
        delta_ci=delta_ci,
        relative_ci=relative_ci,
        p_randomization=randomization_test(d.tolist(), resamples=resamples, seed=seed + 1),
        p_wilcoxon=wilcoxon_test(d.tolist()),
        wins=int(np.count_nonzero(d > eps)),
        losses=int(np.count_nonzero(d < -eps)),
        ties=int(np.count_nonzero(np.abs(d) <= eps)),
    )
