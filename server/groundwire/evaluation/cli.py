"""`groundwire eval ...`: evaluate a running groundwire through its public API.

    groundwire eval run --address 127.0.0.1:50061 --dataset ../shared/data/scifact \\
        --split train --index eval-scifact --variants eval/variants/modes.toml \\
        --out eval/results/scifact
    groundwire eval compare RUN.json:hybrid RUN.json:hybrid-rerank --out report/
    groundwire eval report RUN.json --out report/
    groundwire eval agent --address 127.0.0.1:50061 --agent scifact-plain \\
        --agent scifact-rerank --dataset ../shared/data/scifact --split train --out agents/
    groundwire eval agent --address 127.0.0.1:50077 --agent scifact-required \\
        --holdout scifact-required=scifact-required-holdout \\
        --foreign-queries ../shared/data/cranfield/queries.jsonl \\
        --judge-base-url http://127.0.0.1:11434/v1 --judge-model qwen2.5:7b-instruct \\
        --dataset ../shared/data/scifact --split train --out answers/

Exit codes: 0 success (and, for `compare --fail-on-gate`, a passing gate);
1 the release gate failed under --fail-on-gate; 2 bad arguments or input;
3 the evaluation could not run (server unreachable, index in a bad state).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from groundwire.evaluation.dataset import Query
    from groundwire.evaluation.judge import JudgeSettings

__all__ = ["main"]

# Optional dependencies of the evaluation (the `eval` extra).
_EVAL_MODULES = frozenset({"ir_measures", "pytrec_eval", "matplotlib", "scipy", "rank_bm25"})


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _api_key(env: str | None) -> str | None:
    return os.environ.get(env) if env else None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="groundwire eval",
        description="Evaluate a running groundwire on BEIR collections (a gRPC client).",
    )
    sub = p.add_subparsers(dest="command", required=True)
    _run_parser(sub)
    _report_parser(sub)
    _compare_parser(sub)
    _agent_parser(sub)
    return p


def _connection_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--address", default="127.0.0.1:50051", help="server HOST:PORT")
    sp.add_argument("--api-key-env", help="environment variable holding an API key")
    sp.add_argument("--timeout", type=float, default=60.0, help="per-call deadline in seconds (60)")


def _data_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--dataset", type=Path, required=True, help="BEIR collection folder")
    sp.add_argument("--split", default="test", help="qrels split (default: test)")
    sp.add_argument("--name", help="dataset name (default: the folder name)")
    sp.add_argument("--limit", type=int, help="only the first N judged queries")
    sp.add_argument(
        "--slice-field",
        action="append",
        default=[],
        help="query metadata field (dotted) or derived field (qrels.relevant, "
        "query.length) to slice by; repeatable",
    )
    sp.add_argument(
        "--slice-file",
        action="append",
        default=[],
        metavar="NAME=TSV",
        help="external slices: a TSV of query-id<TAB>slice, named NAME; repeatable",
    )


def _run_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from groundwire.evaluation.metrics import DEFAULT_METRICS

    run = sub.add_parser("run", help="ingest a collection and evaluate retrieval variants")
    _connection_args(run)
    _data_args(run)
    run.add_argument("--index", required=True, help="push-only index to ingest into and query")
    group = run.add_mutually_exclusive_group(required=True)
    group.add_argument("--variants", type=Path, help="TOML file of [[variant]] tables")
    group.add_argument(
        "--modes", type=_csv, help="shortcut: comma-separated modes, server defaults otherwise"
    )
    run.add_argument("--top-k", type=int, default=100, help="top_k for --modes (100)")
    run.add_argument(
        "--metrics", type=_csv, default=list(DEFAULT_METRICS), help="comma-separated metrics"
    )
    run.add_argument("--primary", default="nDCG@10", help="primary metric (nDCG@10)")
    run.add_argument("--depth", type=int, default=100, help="documents kept per query (100)")
    run.add_argument("--concurrency", type=int, default=4, help="queries in flight (4)")
    run.add_argument("--warmup", type=int, default=5, help="unrecorded warm-up queries (5)")
    run.add_argument("--batch-size", type=int, default=128, help="documents per upsert (128)")
    run.add_argument("--ingest-timeout", type=float, default=900.0, help="per upsert call (s)")
    run.add_argument("--force-ingest", action="store_true", help="upsert even if up to date")
    run.add_argument("--skip-ingest", action="store_true", help="query the index as it is")
    run.add_argument("--no-baseline", action="store_true", help="skip the rank-bm25 baseline")
    run.add_argument("--out", type=Path, required=True, help="output folder")
    run.add_argument("--no-plots", action="store_true", help="JSON and Markdown only")


def _report_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rep = sub.add_parser("report", help="Markdown and plots for a run result")
    rep.add_argument("run_json", type=Path)
    rep.add_argument("--out", type=Path, required=True)
    rep.add_argument("--no-plots", action="store_true")


def _compare_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmp_ = sub.add_parser(
        "compare", help="paired comparison of two variants and the release gate verdict"
    )
    cmp_.add_argument("baseline", help="RUN.json[:variant] (the control, e.g. reranking off)")
    cmp_.add_argument("candidate", help="RUN.json[:variant] (the change, e.g. reranking on)")
    cmp_.add_argument("--out", type=Path, required=True)
    cmp_.add_argument(
        "--gate",
        type=Path,
        help="gate TOML, e.g. eval/gate.toml (default: a 3%% primary-metric gain, at most "
        "1 pp regression per slice, the default reliability targets, no latency targets)",
    )
    cmp_.add_argument("--primary", help="primary metric (default: the gate's)")
    cmp_.add_argument("--slice-field", action="append", default=[], help="slice field(s)")
    cmp_.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples")
    cmp_.add_argument("--seed", type=int, default=20_240_601, help="random seed")
    cmp_.add_argument("--no-plots", action="store_true")
    cmp_.add_argument(
        "--fail-on-gate", action="store_true", help="exit 1 when the gate verdict is FAIL"
    )
    cmp_.add_argument(
        "--allow-profile-change",
        action="store_true",
        help="gate variants whose retrieval profiles differ in a part both report "
        "(otherwise not comparable); the report still lists every difference",
    )


def _agent_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ag = sub.add_parser("agent", help="agent-level evaluation through AgentService.Execute")
    _connection_args(ag)
    _data_args(ag)
    ag.add_argument("--agent", action="append", required=True, help="agent id; repeatable")
    ag.add_argument("--concurrency", type=int, default=2, help="executions in flight (2)")
    ag.add_argument("--warmup", type=int, default=2, help="unrecorded warm-up executions (2)")
    ag.add_argument("--metrics", type=_csv, default=["nDCG@5", "MRR@5", "Recall@5"], help="metrics")
    ag.add_argument("--price-prompt", type=float, default=0.0, help="price per 1k prompt tokens")
    ag.add_argument(
        "--price-completion", type=float, default=0.0, help="price per 1k completion tokens"
    )
    ag.add_argument(
        "--price-search-unit", type=float, default=0.0, help="price per rerank search unit"
    )
    ag.add_argument("--currency", default="USD")
    ag.add_argument("--out", type=Path, required=True)
    ag.add_argument("--no-plots", action="store_true")
    judge = ag.add_argument_group(
        "answer judge", "faithfulness and answer relevance judged by an OpenAI-compatible model"
    )
    judge.add_argument("--judge-base-url", help="e.g. http://127.0.0.1:11434/v1 (enables it)")
    judge.add_argument("--judge-model", help="model name sent to the judge endpoint")
    judge.add_argument("--judge-api-key-env", help="environment variable holding its key")
    judge.add_argument("--judge-concurrency", type=int, default=4, help="calls in flight (4)")
    judge.add_argument("--judge-timeout", type=float, default=60.0, help="per call, s (60)")
    judge.add_argument("--judge-max-tokens", type=int, default=256, help="reply bound (256)")
    judge.add_argument("--judge-prompt", type=Path, help="prompt file (default: packaged)")
    judge.add_argument(
        "--judge-json-mode",
        action="store_true",
        help='send response_format {"type": "json_object"} (servers that support it)',
    )
    ref = ag.add_argument_group("refusal correctness", "questions the index cannot answer")
    ref.add_argument(
        "--holdout",
        action="append",
        default=[],
        metavar="AGENT=HOLDOUT_AGENT",
        help="HOLDOUT_AGENT is configured like AGENT on a push-only index of its own, "
        "which is filled with the collection minus the relevant documents of the "
        "holdout queries; repeatable",
    )
    ref.add_argument("--holdout-queries", type=int, default=50, help="holdout sample size (50)")
    ref.add_argument("--holdout-seed", type=int, default=20_240_601, help="sample seed")
    ref.add_argument(
        "--foreign-queries",
        type=Path,
        help="queries.jsonl of another collection, asked of each agent on its own index",
    )
    ref.add_argument("--foreign-limit", type=int, default=50, help="foreign queries used (50)")
    ref.add_argument("--batch-size", type=int, default=128, help="documents per upsert (128)")
    ref.add_argument("--ingest-timeout", type=float, default=900.0, help="per upsert call (s)")


def _slices(args: argparse.Namespace) -> dict[str, dict[str, str]]:
    from groundwire.evaluation.dataset import load_slice_file

    out: dict[str, dict[str, str]] = {}
    for item in args.slice_file:
        name, sep, path = str(item).partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--slice-file expects NAME=TSV, got {item!r}")
        out[name] = load_slice_file(Path(path))
    return out


def _run(args: argparse.Namespace) -> int:
    from groundwire.evaluation.common import write_json
    from groundwire.evaluation.dataset import load_beir
    from groundwire.evaluation.metrics import parse_metric, parse_metrics
    from groundwire.evaluation.run_report import write_run_report
    from groundwire.evaluation.runner import RunSettings, run_evaluation
    from groundwire.evaluation.variants import Variant, load_variants

    metrics = parse_metrics(args.metrics)
    primary = parse_metric(args.primary)
    if primary not in metrics:
        metrics.insert(0, primary)
    if args.variants is not None:
        variants = load_variants(args.variants)
    else:
        variants = [Variant(name=m, mode=m, top_k=args.top_k) for m in args.modes]
    dataset = load_beir(args.dataset, args.split, args.name)
    settings = RunSettings(
        address=args.address,
        dataset=dataset,
        index=args.index,
        variants=variants,
        metrics=metrics,
        primary=primary.name,
        depth=args.depth,
        concurrency=args.concurrency,
        warmup=args.warmup,
        batch_size=args.batch_size,
        api_key=_api_key(args.api_key_env),
        ingest_timeout=args.ingest_timeout,
        force_ingest=args.force_ingest,
        skip_ingest=args.skip_ingest,
        baseline=not args.no_baseline,
        slice_fields=args.slice_field,
        external_slices=_slices(args),
        limit=args.limit,
        rpc_timeout=args.timeout,
    )
    result = asyncio.run(run_evaluation(settings))
    out: Path = args.out
    write_json(out / "run.json", result)
    write_run_report(result, out, plots=not args.no_plots)
    print(f"wrote {out / 'run.json'} and {out / 'report.md'}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from groundwire.evaluation.common import read_json
    from groundwire.evaluation.run_report import write_run_report

    write_run_report(read_json(args.run_json), args.out, plots=not args.no_plots)
    print(f"wrote {args.out / 'report.md'}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from groundwire.evaluation.common import write_json
    from groundwire.evaluation.compare import compare_runs, load_variant
    from groundwire.evaluation.compare_report import write_compare_report
    from groundwire.evaluation.gate import GateConfig, load_gate

    gate = load_gate(args.gate) if args.gate else GateConfig()
    if args.primary:
        gate = gate.model_copy(update={"primary": args.primary})
    if args.allow_profile_change:
        gate = gate.model_copy(update={"allow_profile_change": True})
    base = load_variant(args.baseline)
    cand = load_variant(args.candidate)
    result = compare_runs(
        base,
        cand,
        gate,
        slice_fields=args.slice_field,
        resamples=args.resamples,
        seed=args.seed,
    )
    write_json(args.out / "compare.json", result)
    write_compare_report(result, base, cand, args.out, plots=not args.no_plots)
    verdict = result["gate"]["verdict"]
    changed = [p["part"] for p in result["profiles"]["parts"]]
    if changed:
        print(f"retrieval profiles differ in: {', '.join(changed)}")
    print(f"release gate: {verdict}; wrote {args.out / 'report.md'}")
    return 1 if (args.fail_on_gate and verdict != "PASS") else 0


def _judge_settings(args: argparse.Namespace) -> JudgeSettings | None:
    from groundwire.evaluation.judge import JudgeSettings

    if not args.judge_base_url and not args.judge_model:
        return None
    if not args.judge_base_url or not args.judge_model:
        raise ValueError("--judge-base-url and --judge-model go together")
    key = _api_key(args.judge_api_key_env)
    if args.judge_api_key_env and not key:
        raise ValueError(f"--judge-api-key-env: {args.judge_api_key_env} is not set")
    return JudgeSettings(
        base_url=args.judge_base_url,
        model=args.judge_model,
        api_key=key,
        concurrency=args.judge_concurrency,
        timeout_seconds=args.judge_timeout,
        max_tokens=args.judge_max_tokens,
        prompt_file=args.judge_prompt,
        json_mode=args.judge_json_mode,
    )


def _holdout(items: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        agent, sep, holdout = str(item).partition("=")
        if not sep or not agent.strip() or not holdout.strip():
            raise ValueError(f"--holdout expects AGENT=HOLDOUT_AGENT, got {item!r}")
        out[agent.strip()] = holdout.strip()
    return out


def _agent(args: argparse.Namespace) -> int:
    from groundwire.evaluation.agent_outcomes import Prices
    from groundwire.evaluation.agents import AgentSettings, run_agent_evaluation
    from groundwire.evaluation.common import write_json
    from groundwire.evaluation.dataset import load_beir, load_queries
    from groundwire.evaluation.metrics import parse_metrics
    from groundwire.evaluation.run_report import write_run_report

    dataset = load_beir(args.dataset, args.split, args.name)
    foreign: list[Query] = []
    if args.foreign_queries is not None:
        if not args.foreign_queries.is_file():
            raise ValueError(f"--foreign-queries: no such file {args.foreign_queries}")
        foreign = list(load_queries(args.foreign_queries).values())[: max(0, args.foreign_limit)]
        if not foreign:
            raise ValueError("--foreign-queries holds no queries")
    settings = AgentSettings(
        address=args.address,
        dataset=dataset,
        agents=args.agent,
        metrics=parse_metrics(args.metrics),
        prices=Prices(
            prompt_per_1k=args.price_prompt,
            completion_per_1k=args.price_completion,
            search_unit=args.price_search_unit,
            currency=args.currency,
        ),
        concurrency=args.concurrency,
        warmup=args.warmup,
        api_key=_api_key(args.api_key_env),
        rpc_timeout=args.timeout,
        limit=args.limit,
        slice_fields=args.slice_field,
        external_slices=_slices(args),
        judge=_judge_settings(args),
        holdout=_holdout(args.holdout),
        holdout_queries=args.holdout_queries,
        holdout_seed=args.holdout_seed,
        foreign_queries=foreign,
        foreign_name=str(args.foreign_queries.parent.name) if args.foreign_queries else "",
        batch_size=args.batch_size,
        ingest_timeout=args.ingest_timeout,
    )
    result = asyncio.run(run_agent_evaluation(settings))
    write_json(args.out / "run.json", result)
    write_run_report(result, args.out, plots=not args.no_plots)
    print(f"wrote {args.out / 'run.json'} and {args.out / 'report.md'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `groundwire eval`; returns the process exit code."""
    args = _parser().parse_args(list(argv) if argv is not None else None)
    import grpc

    from groundwire.evaluation.common import EvalError
    from groundwire.evaluation.dataset import DatasetError

    handlers = {"run": _run, "report": _report, "compare": _compare, "agent": _agent}
    try:
        return handlers[args.command](args)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in _EVAL_MODULES:
            print(
                f"groundwire eval: {exc.name} is not installed: "
                "pip install 'groundwire[eval]' (ir-measures, matplotlib, scipy, rank-bm25)",
                file=sys.stderr,
            )
            return 2
        raise
    except (DatasetError, ValueError, OSError) as exc:
        print(f"groundwire eval: {exc}", file=sys.stderr)
        return 2
    except EvalError as exc:
        print(f"groundwire eval: {exc}", file=sys.stderr)
        return 3
    except grpc.aio.AioRpcError as exc:
        from groundwire.evaluation.client import decode_rpc_error

        print(
            f"groundwire eval: server call failed: {decode_rpc_error(exc).label}", file=sys.stderr
        )
        return 3
