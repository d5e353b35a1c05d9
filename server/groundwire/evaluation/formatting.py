"""How numbers read in the Markdown reports: table cells, percentage intervals,
latency percentile cells, and the display order of latency stages."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "STAGE_ORDER",
    "analysis_label",
    "feedback_label",
    "fmt",
    "fusion_label",
    "ordered_stages",
    "pct_ci",
    "percentile_cell",
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


def analysis_label(analysis: Mapping[str, Any] | None) -> str:
    """The lexical analyzer an index recorded (IndexDescription.analysis,
    `analyzer_descriptor`); "unknown" when the run file has none, never a guess."""
    a = analysis or {}
    return str(a.get("analyzer_descriptor") or a.get("descriptor") or "unknown")


_FUSION_NAMES = {"FUSION_METHOD_RRF": "rrf", "FUSION_METHOD_MIN_MAX": "min-max"}


def fusion_label(applied: Mapping[str, Any] | None, requested: Mapping[str, Any] | None) -> str:
    """The fusion a hybrid variant ran: its method first (a min-max variant never
    reads like the RRF default), then the RRF k, the leg weights and leg depth."""
    a = applied or {}
    r = requested or {}
    method = _FUSION_NAMES.get(str(a.get("method")), r.get("method") or "rrf")
    parts = [f"fusion {method}"]
    if method == "rrf":
        parts.append(f"rrf_k={a.get('rrf_k', r.get('rrf_k'))}")
    parts.append(
        f"w={fmt(a.get('semantic_weight', r.get('semantic_weight')), 2)}/"
        f"{fmt(a.get('lexical_weight', r.get('lexical_weight')), 2)}"
    )
    parts.append(f"legs={a.get('leg_depth', r.get('leg_depth'))}")
    return " ".join(parts)


def feedback_label(feedback: Mapping[str, Any] | None) -> str:
    """RM3 feedback settings ("default" for a setting left to the server)."""
    f = feedback or {}

    def setting(key: str) -> str:
        value = f.get(key)
        return "default" if value is None else fmt(value, 2)

    return (
        f"RM3 docs={setting('documents')} terms={setting('terms')} "
        f"orig_w={setting('original_query_weight')}"
    )
