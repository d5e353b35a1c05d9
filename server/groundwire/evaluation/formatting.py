"""How numbers read in the Markdown reports: table cells, percentage intervals,
latency percentile cells, and the display order of latency stages."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["STAGE_ORDER", "fmt", "ordered_stages", "pct_ci", "percentile_cell"]

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


def pct_ci(ci: Sequence[float] | None) -> str:
    """A relative-change interval as signed percentages ('-' when absent)."""
    if not ci:
        return "-"
    return f"[{ci[0]:+.2%}, {ci[1]:+.2%}]"


def percentile_cell(st: Mapping[str, Any] | None) -> str:
    """`p50 / p95 / p99` of one stage's latency summary ('-' when it has no data)."""
    if not st or not st.get("n"):
        return "-"
    return f"{fmt(st['p50'], 1)} / {fmt(st['p95'], 1)} / {fmt(st['p99'], 1)}"


def ordered_stages(seen: Iterable[str]) -> list[str]:
    """Stages in `STAGE_ORDER`, then any others alphabetically."""
    present = set(seen)
    ordered = [s for s in STAGE_ORDER if s in present]
    return ordered + sorted(present - set(ordered))
