"""The Markdown report of a run (retrieval or agent): a quality table with 95%
bootstrap intervals, latency percentiles per stage, reranking outcomes, agent
outcomes and errors; `write_run_report` adds the plots of `plots`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from groundwire.evaluation.formatting import (
    analysis_label,
    feedback_label,
    fmt,
    fusion_label,
    ordered_stages,
    percentile_cell,
)
from groundwire.evaluation.plots import answers_plot, latency_plot, metric_plot, per_query_values
from groundwire.evaluation.stats import bootstrap_mean_ci

__all__ = ["run_markdown", "write_run_report"]


def _stages(variants: Sequence[Mapping[str, Any]]) -> list[str]:
    return ordered_stages(s for v in variants for s in v.get("latency_ms", {}))


def _describe(variant: Mapping[str, Any]) -> str:
    d = variant.get("descriptor", {})
    if d.get("kind") == "client-baseline":
        return f"{d.get('model')} k1={d.get('k1')} b={d.get('b')} (client)"
    if d.get("kind") == "agent":
        return f"agent {d.get('agent_id')}"
    parts = [str(d.get("mode", "?")), f"top_k={d.get('top_k')}"]
    if d.get("mode") == "hybrid" or d.get("fusion_applied"):
        parts.append(fusion_label(d.get("fusion_applied"), d.get("fusion_requested")))
    if "lexical_feedback" in d:
        parts.append(feedback_label(d.get("lexical_feedback")))
    if d.get("minimum_relevance") is not None:
        parts.append(f"min_rel={d['minimum_relevance']}")
    rr = d.get("reranker")
    if rr:
        parts.append(f"rerank {rr.get('reranker')} x{rr.get('candidates')}")
    return ", ".join(parts)


def run_markdown(result: Mapping[str, Any], *, resamples: int = 2000, seed: int = 0) -> str:
    """The Markdown report of a run result."""
    settings = result.get("settings", {})
    metrics: list[str] = list(settings.get("metrics", []))
    primary = settings.get("primary", metrics[0] if metrics else "nDCG@10")
    variants: list[Mapping[str, Any]] = list(result.get("variants", []))
    lines = _header(result)
    lines += _quality_table(variants, metrics, primary, resamples=resamples, seed=seed)
    lines += _latency_table(variants)
    lines += _reranking_table(variants)
    lines += _profile_section(variants)
    agents = [v for v in variants if v.get("agent")]
    if agents:
        lines += _agent_sections(agents)
        lines += _answer_sections(agents)
        lines += _refusal_sections(agents)
    errs = [v for v in variants if v.get("reliability", {}).get("errors")]
    if errs:
        lines += ["", "## Errors", ""]
        for v in errs:
            lines.append(f"- {v['name']}: {v['reliability']['errors_by_code']}")
    if result.get("plots"):
        lines += ["", "## Plots", ""]
        lines += [f"![{p}]({p})" for p in result["plots"]]
    return "\n".join(lines) + "\n"


def _profile_section(variants: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each variant's retrieval profile: fingerprint, then every part; a variant
    that saw several (a reload or re-ingestion mid-run) is flagged."""
    profiled = [v for v in variants if v.get("profile")]
    if not profiled:
        return []
    lines = [
        "",
        "## Profiles",
        "",
        "| variant | fingerprint | queries | parts |",
        "| --- | --- | --- | --- |",
    ]
    for v in profiled:
        p = v["profile"]
        parts = "; ".join(f"{k}: `{x['descriptor']}`" for k, x in p["parts"].items())
        lines.append(f"| {v['name']} | `{p['fingerprint']}` | {p.get('queries')} | {parts} |")
        for other in p.get("others", []):
            lines.append(
                f"| {v['name']} (**also**) | `{other['fingerprint']}` | {other.get('queries')} | "
                "a second profile during the run |"
            )
    return lines


def _header(result: Mapping[str, Any]) -> list[str]:
    """Title and the facts a reader needs to trust the numbers: dataset version,
    index, ingestion, server version, machine and concurrency."""
    ds = result.get("dataset", {})
    idx = result.get("index", {})
    settings = result.get("settings", {})
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
            f"({emb.get('dimensions')} dims, metric {desc.get('metric')}); lexical analysis "
            f"{analysis_label(desc.get('analysis'))}"
        )
    ing = result.get("ingestion")
    if ing:
        lines.append(f"- ingestion: {_ingestion(ing)}")
    mach = result.get("machine", {})
    lines.append(
        f"- groundwire {result.get('groundwire_version')}; {mach.get('cores')} cores, "
        f"load average at start {mach.get('load_average')}; concurrency "
        f"{settings.get('concurrency')}; {result.get('started_at')} .. "
        f"{result.get('finished_at')}"
    )
    return lines


def _quality_table(
    variants: Sequence[Mapping[str, Any]],
    metrics: Sequence[str],
    primary: str,
    *,
    resamples: int,
    seed: int,
) -> list[str]:
    """One row per variant; the primary metric carries its bootstrap interval."""
    lines = [
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
    return lines


def _latency_table(variants: Sequence[Mapping[str, Any]]) -> list[str]:
    stages = _stages(variants)
    if not stages:
        return []
    lines = [
        "",
        "## Latency (ms; p50 / p95 / p99 over successful queries)",
        "",
        "| variant | " + " | ".join(stages) + " |",
        "|" + " --- |" * (len(stages) + 1),
    ]
    for v in variants:
        lat = v.get("latency_ms", {})
        cells = [percentile_cell(lat.get(s)) for s in stages]
        lines.append(f"| {v.get('name')} | " + " | ".join(cells) + " |")
    return lines


def _reranking_table(variants: Sequence[Mapping[str, Any]]) -> list[str]:
    reranked = [v for v in variants if v.get("reliability", {}).get("reranking")]
    if not reranked:
        return []
    lines = [
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
    return lines


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


def _answer_sections(agents: Sequence[Mapping[str, Any]]) -> list[str]:
    shown = [v for v in agents if v["agent"].get("answers")]
    if not shown:
        return []
    lines = [
        "",
        "## Answer-level measures",
        "",
        "Citations: `[n]` markers with n in 1..sources; precision and recall over distinct "
        "cited documents against the judged relevant ones (recall in context: of those the "
        "model had). Judge: faithfulness = supported / claims, relevance 0-3 scaled to "
        "[0, 1], means over valid verdicts; failures are never counted as passes.",
        "",
        "| agent | answered | refused | cited sentences | uncited answers | citation "
        "precision | citation recall | recall in context | faithfulness | answer relevance "
        "| judge failures |",
        "|" + " --- |" * 11,
    ]
    for v in shown:
        a = v["agent"]["answers"]
        c = a["citations"]
        j = a.get("judge") or {}
        failures = (
            f"{j['failures']} of {j['attempted']} {j.get('failures_by_code') or ''}".strip()
            if j
            else "not judged"
        )
        lines.append(
            f"| {v['name']} | {fmt(a['answered_rate'])} | {fmt(a['refused_rate'])} | "
            f"{fmt(c['sentence_citation_share'])} | {fmt(c['uncited_answer_rate'])} | "
            f"{fmt(c['precision'])} | {fmt(c['recall'])} | {fmt(c['recall_in_context'])} | "
            f"{fmt(j.get('faithfulness'))} | {fmt(j.get('answer_relevance'))} | {failures} |"
        )
    return lines


def _refusal_sections(agents: Sequence[Mapping[str, Any]]) -> list[str]:
    rows = []
    for v in agents:
        ref = v["agent"].get("refusal") or {}
        for kind in ("holdout", "foreign"):
            r = ref.get(kind)
            if not r:
                continue
            how = (
                f"holdout via {r.get('agent')} ({r.get('removed_documents')} documents removed)"
                if kind == "holdout"
                else f"questions of {r.get('source')}"
            )
            un, ans = r["unanswerable"], r["answerable"]
            rows.append(
                f"| {v['name']} | {ref.get('mode') or '-'} | {how} | {un['queries']} | "
                f"**{fmt(un['refusal_rate'])}** | {ans['queries']} | {fmt(ans['answered_rate'])} "
                f"| {un['errors']} / {ans['errors']} |"
            )
    if not rows:
        return []
    return [
        "",
        "## Refusal correctness",
        "",
        "Refusal: the framework's not-found answer or NO_ACCEPTED_CONTEXT. Unanswerable: no "
        "judged relevant document is in the index; answerable: the same agent on questions "
        "whose documents are there.",
        "",
        "| agent | mode | unanswerable questions | n | refusal rate | answerable n | "
        "answered rate | errors (unanswerable / answerable) |",
        "|" + " --- |" * 8,
        *rows,
    ]


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
        if answers_plot(variants, out / "answers.png", title=title):
            files.append("answers.png")
        shown["plots"] = files
    (out / "report.md").write_text(run_markdown(shown), encoding="utf-8")
