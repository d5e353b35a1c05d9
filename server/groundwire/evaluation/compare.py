"""Paired comparison of two variants on the same queries.

Inputs are variant blocks of run results (`RUN.json:variant`; the part after
the last colon may be left out when the run has one variant). Queries are
paired by id (only queries present in both count, and the report says how many
were dropped); both runs must be on the same dataset version.

For every metric recorded by both: means, the mean per-query difference with a
95% paired bootstrap interval (10,000 resamples of queries by default, fixed
seed), the relative change with its interval, a paired randomization test and
the Wilcoxon signed-rank test, wins/losses/ties. Slices by query metadata fields
recorded in the runs. Latency percentiles per stage and reliability ratios side
by side. The release gate's checks and verdict come from `gate`; the report from
`compare_report`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from groundwire.evaluation.common import COMPARE_SCHEMA, read_json, utc_now
from groundwire.evaluation.formatting import ordered_stages
from groundwire.evaluation.gate import (
    GateConfig,
    answer_checks,
    answer_measures,
    comparability_checks,
    gate_verdict,
    latency_checks,
    quality_checks,
    reliability_checks,
    same_dataset,
)
from groundwire.evaluation.profiles import profile_check, profile_comparison
from groundwire.evaluation.stats import bootstrap_mean_ci, paired_stats

__all__ = ["LoadedVariant", "answer_rows", "compare_runs", "load_variant"]


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
            "profile": self.variant.get("profile"),
            "dataset": run.get("dataset"),
            "index": {
                "name": idx.get("name"),
                "published_version": idx.get("published_version"),
                "chunking": desc.get("chunking"),
                "analysis": desc.get("analysis"),
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


def _metric_stats(
    a: LoadedVariant,
    b: LoadedVariant,
    metrics: Sequence[str],
    paired: Sequence[str],
    resamples: int,
    seed: int,
) -> dict[str, Any]:
    """Paired statistics of every common metric over the paired queries."""
    stats: dict[str, Any] = {}
    for m in metrics:
        ma, mb = a.per_query(m), b.per_query(m)
        qs = [q for q in paired if q in ma and q in mb]
        stats[m] = paired_stats(
            [ma[q] for q in qs], [mb[q] for q in qs], resamples=resamples, seed=seed
        ).as_dict()
    return stats


def _slice_fields(
    requested: Sequence[str], gate: GateConfig, slices: Mapping[str, Mapping[str, str]]
) -> list[str]:
    """The fields asked for, else the gate's, else every field the baseline recorded."""
    fields = list(requested) or list(gate.slice_fields)
    return fields or sorted({f for s in slices.values() for f in s})


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
    return {s: {"baseline": la.get(s), "candidate": lb.get(s)} for s in ordered_stages({*la, *lb})}


# Answer measures recorded per query (`queries[].answer`), paired by query id.
PER_QUERY_ANSWER_MEASURES = (
    "citation_precision",
    "citation_recall",
    "sentence_citation_share",
    "faithfulness",
    "answer_relevance",
)


def _answer_values(v: LoadedVariant, measure: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for q in v.variant.get("queries", []):
        value = (q.get("answer") or {}).get(measure)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[str(q["id"])] = float(value)
    return out


def answer_rows(
    agent_a: Mapping[str, Any] | None,
    agent_b: Mapping[str, Any] | None,
    a: LoadedVariant | None = None,
    b: LoadedVariant | None = None,
    *,
    resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Any] | None:
    """Answer measures side by side (None when neither run reports any). With the
    variants, measures recorded per query also get the mean paired difference over
    the queries where both have a value, with its 95% bootstrap interval."""
    ma, mb = answer_measures(agent_a), answer_measures(agent_b)
    rows: dict[str, Any] = {}
    for m in ma:
        x, y = ma[m], mb[m]
        if x is None and y is None:
            continue
        delta = None if x is None or y is None else y - x
        rows[m] = {"baseline": x, "candidate": y, "delta": delta}
        if a is not None and b is not None and m in PER_QUERY_ANSWER_MEASURES:
            va, vb = _answer_values(a, m), _answer_values(b, m)
            diffs = [vb[q] - va[q] for q in va if q in vb]
            if diffs:
                lo, hi = bootstrap_mean_ci(diffs, resamples=resamples, seed=seed)
                rows[m]["paired"] = {
                    "n": len(diffs),
                    "delta": sum(diffs) / len(diffs),
                    "delta_ci95": [lo, hi],
                }
    return rows or None


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
    ds_a, ds_b = a.run.get("dataset", {}), b.run.get("dataset", {})
    common = [m for m in a.metrics() if m in b.metrics()]
    if gate.primary not in common:
        raise ValueError(
            f"primary metric {gate.primary} is not recorded by both variants "
            f"(common: {', '.join(common) or 'none'})"
        )
    pa, pb = a.per_query(gate.primary), b.per_query(gate.primary)
    paired = [q for q in pa if q in pb]
    dropped = {"baseline_only": len(set(pa) - set(pb)), "candidate_only": len(set(pb) - set(pa))}
    stats = _metric_stats(a, b, common, paired, resamples, seed)
    slices_a = a.slices()
    slice_rows = _slice_table(
        pa, pb, slices_a, _slice_fields(slice_fields, gate, slices_a), gate, seed
    )
    agent_a, agent_b = a.variant.get("agent"), b.variant.get("agent")
    profiles = profile_comparison(a.variant.get("profile"), b.variant.get("profile"))
    same_profile = profile_check(profiles, gate.allow_profile_change)
    checks = [
        *comparability_checks(ds_a, ds_b, len(paired), dropped),
        same_profile,
        *quality_checks(gate, stats[gate.primary], slice_rows),
        *answer_checks(gate, agent_a, agent_b),
        *latency_checks(gate, b.variant.get("latency_ms", {})),
        *reliability_checks(gate, b.variant.get("reliability", {})),
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
        "latency_ms": _latency(a, b),
        "reliability": {
            "baseline": a.variant.get("reliability"),
            "candidate": b.variant.get("reliability"),
        },
        "profiles": profiles,
        "gate": gate_verdict(
            checks,
            comparable=same_dataset(ds_a, ds_b),
            same_profile=same_profile["passed"],
        ),
        "agents": {"baseline": agent_a, "candidate": agent_b} if agent_a or agent_b else None,
        "answers": answer_rows(agent_a, agent_b, a, b, resamples=min(resamples, 2000), seed=seed),
        "per_query": [
            {"id": q, "baseline": pa[q], "candidate": pb[q], "delta": pb[q] - pa[q]} for q in paired
        ],
    }
