"""Final selection of a reranked pool, measured through the public API.

`collect` runs every judged query of a collection through one reranking agent
with `AgentService.Execute` and keeps each result's RAG metadata: the whole pool
(accepted + NOT_SELECTED) with its retrieval rank and score and the reranker's
relevance, which the result reports per item. The reranker (the slow part on a
CPU) runs once per query.

`analyse` then computes every final-selection policy over the identical pools
with the server's own domain functions (`groundwire.domain.blend`): retrieval
order (no reranking), the pre-pool behaviour (rerank the first 5 only: the local
max-sim reranker scores each candidate independently, so that is the first 5
sorted by their relevance), RERANKER_ONLY over the pool, and WEIGHTED_BLEND with
rank and min-max normalization at several weights. nDCG@5 and MRR@5 of the final
documents, paired bootstrap against RERANKER_ONLY.

`verify` runs live blend agents on a few queries and checks that the server's
final order equals the one `analyse` computes (so the analysis measures what
the product does).

    python eval/experiments/selection.py collect --address 127.0.0.1:50063 \
        --dataset ../shared/data/scifact --split train --agent hybrid-rerank \
        --limit 100 --out eval/results/selection/hybrid.jsonl
    python eval/experiments/selection.py analyse eval/results/selection/hybrid.jsonl \
        --dataset ../shared/data/scifact --split train
    python eval/experiments/selection.py verify --address 127.0.0.1:50063 \
        --dataset ../shared/data/scifact --split train \
        --pool eval/results/selection/hybrid.jsonl --agent hybrid-blend-rank-03 --limit 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict, ParseDict

from groundwire.domain.blend import RetrievalNormalization, blend_order, blend_scores
from groundwire.domain.scores import Score, ScoreMetric
from groundwire.evaluation.dataset import load_beir
from groundwire.evaluation.metrics import evaluate, mean, parse_metrics
from groundwire.evaluation.stats import paired_stats
from groundwire_client.v1 import agent_pb2, agent_pb2_grpc, common_pb2, reranker_pb2

FINAL_K = 5
WEIGHTS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def _message(text: str) -> str:
    return " ".join(text.replace('"', " ").split())


def _done(out: Path) -> set[str]:
    """Query ids already collected (a rerun continues where it stopped)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists():
        return set()
    return {json.loads(line)["query_id"] for line in out.read_text().splitlines() if line}


def _append(out: Path, row: dict[str, Any]) -> None:
    with out.open("a") as f:
        f.write(json.dumps(row) + "\n")


async def collect(args: argparse.Namespace) -> None:
    ds = load_beir(args.dataset, args.split)
    queries = ds.judged_queries()[: args.limit]
    out = Path(args.out)
    done = _done(out)
    sem = asyncio.Semaphore(args.concurrency)
    async with grpc.aio.insecure_channel(args.address) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)

        async def one(q: Any) -> None:
            async with sem:
                t0 = time.perf_counter()
                resp = await stub.Execute(
                    agent_pb2.ExecuteRequest(
                        input=agent_pb2.ExecutionInput(
                            agent_id=args.agent, message=_message(q.text)
                        )
                    ),
                    timeout=600,
                )
                rag = MessageToDict(resp.result.rag, preserving_proto_field_name=True)
                _append(out, {"query_id": q.id, "agent": args.agent, "rag": rag})
                print(f"{q.id}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)

        await asyncio.gather(*(one(q) for q in queries if q.id not in done))


def _pool(rag: agent_pb2.RagExecutionMetadata) -> list[agent_pb2.RagItem]:
    """The reranked pool in retrieval (original) order."""
    items = [
        *rag.accepted,
        *(i for i in rag.rejected if i.reason == agent_pb2.RAG_ITEM_REASON_NOT_SELECTED),
    ]
    return sorted(items, key=lambda i: i.retrieval_rank)


def _score(item: agent_pb2.RagItem) -> Score:
    s = item.score
    metric = ScoreMetric(common_pb2.ScoreMetric.Name(s.metric).removeprefix("SCORE_METRIC_"))
    return Score(
        s.raw_score, metric, s.higher_is_better, s.relevance if s.HasField("relevance") else None
    )


def _docs(items: Sequence[agent_pb2.RagItem]) -> list[str]:
    return list(dict.fromkeys(i.document_id for i in items[:FINAL_K]))


def policies(rag: agent_pb2.RagExecutionMetadata) -> dict[str, list[agent_pb2.RagItem]]:
    """Every policy's final top-k (items), computed over one pool."""
    pool = _pool(rag)
    judged = [i for i in pool if i.HasField("rerank_relevance")]
    keys = [(i.document_id, i.chunk_id) for i in judged]
    out: dict[str, list[agent_pb2.RagItem]] = {
        "retrieval order (no reranking)": pool[:FINAL_K],
        "rerank first 5 (pool x1)": sorted(
            pool[:FINAL_K], key=lambda i: (-i.rerank_relevance, i.retrieval_rank)
        ),
        "RERANKER_ONLY pool x3": sorted(
            judged, key=lambda i: (-i.rerank_relevance, i.retrieval_rank)
        ),
    }
    scores = [_score(i) for i in judged]
    relevances = [i.rerank_relevance for i in judged]
    for norm in (RetrievalNormalization.RANK, RetrievalNormalization.MIN_MAX):
        for w in WEIGHTS:
            blends = blend_scores(scores, relevances, w, norm)
            order = blend_order(blends, keys)
            out[f"WEIGHTED_BLEND {norm.value.lower()} w={w}"] = [judged[i] for i in order]
    return out


def _load(path: Path) -> dict[str, agent_pb2.RagExecutionMetadata]:
    out = {}
    for line in path.read_text().splitlines():
        if line:
            row = json.loads(line)
            out[row["query_id"]] = ParseDict(row["rag"], agent_pb2.RagExecutionMetadata())
    return out


def analyse(args: argparse.Namespace) -> None:
    ds = load_beir(args.dataset, args.split)
    loaded = _load(Path(args.pool))
    # Only pools the reranker judged: a fallback (timeout on a loaded CPU) has
    # no rerank relevance to select with.
    rags = {
        q: r
        for q, r in loaded.items()
        if r.reranking.outcome == reranker_pb2.RERANK_OUTCOME_SUCCEEDED
    }
    print(f"{len(loaded) - len(rags)} of {len(loaded)} pools left out: the rerank did not succeed")
    metrics = parse_metrics(["nDCG@5", "MRR@5"])
    by_policy: dict[str, dict[str, list[str]]] = {}
    for qid, rag in rags.items():
        for name, items in policies(rag).items():
            by_policy.setdefault(name, {})[qid] = _docs(items)
    qids = sorted(rags)
    base_name = "RERANKER_ONLY pool x3"
    values = {name: evaluate(ds.qrels, rankings, metrics) for name, rankings in by_policy.items()}
    base = values[base_name]
    print(f"{len(qids)} queries; paired against {base_name}")
    print("| final selection | nDCG@5 | MRR@5 | nDCG@5 delta (95% CI) | wins/losses |")
    print("| --- | --- | --- | --- | --- |")
    for name, v in values.items():
        st = paired_stats([base["nDCG@5"][q] for q in qids], [v["nDCG@5"][q] for q in qids])
        print(
            f"| {name} | {mean(v['nDCG@5']):.4f} | {mean(v['MRR@5']):.4f} | "
            f"{st.delta:+.4f} ({st.delta_ci[0]:+.4f}, {st.delta_ci[1]:+.4f}) | "
            f"{st.wins}/{st.losses} |"
        )


async def verify(args: argparse.Namespace) -> None:
    """The server's WEIGHTED_BLEND order equals the offline one on the same pools."""
    ds = load_beir(args.dataset, args.split)
    rags = _load(Path(args.pool))
    judged = {
        q for q, r in rags.items() if r.reranking.outcome == reranker_pb2.RERANK_OUTCOME_SUCCEEDED
    }
    queries = [q for q in ds.judged_queries() if q.id in judged][: args.limit]
    async with grpc.aio.insecure_channel(args.address) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        desc = (await stub.GetAgent(agent_pb2.GetAgentRequest(agent_id=args.agent))).agent.rag
        name = (
            f"WEIGHTED_BLEND {'rank' if args.agent.split('-')[2] == 'rank' else 'min_max'} "
            f"w={round(desc.retrieval_weight, 1)}"
        )
        agree = 0
        for q in queries:
            resp = await stub.Execute(
                agent_pb2.ExecuteRequest(
                    input=agent_pb2.ExecutionInput(agent_id=args.agent, message=_message(q.text))
                ),
                timeout=600,
            )
            if resp.result.rag.reranking.outcome != reranker_pb2.RERANK_OUTCOME_SUCCEEDED:
                print(f"{q.id}: the live rerank did not succeed; skipped", file=sys.stderr)
                continue
            live = [(i.document_id, i.chunk_id) for i in resp.result.rag.accepted]
            offline = [(i.document_id, i.chunk_id) for i in policies(rags[q.id])[name][:FINAL_K]]
            agree += live == offline
            print(f"{q.id}: live == offline: {live == offline}", file=sys.stderr)
    print(f"{args.agent}: server order equals the offline one on {agree}/{len(queries)} queries")


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--address", required=True)
    c.add_argument("--dataset", type=Path, required=True)
    c.add_argument("--split", default="train")
    c.add_argument("--agent", required=True)
    c.add_argument("--limit", type=int, default=100)
    c.add_argument("--concurrency", type=int, default=2)
    c.add_argument("--out", required=True)
    a = sub.add_parser("analyse")
    a.add_argument("pool")
    a.add_argument("--dataset", type=Path, required=True)
    a.add_argument("--split", default="train")
    v = sub.add_parser("verify")
    v.add_argument("--address", required=True)
    v.add_argument("--dataset", type=Path, required=True)
    v.add_argument("--split", default="train")
    v.add_argument("--pool", required=True)
    v.add_argument("--agent", required=True)
    v.add_argument("--limit", type=int, default=5)
    args = ap.parse_args()
    if args.cmd == "collect":
        asyncio.run(collect(args))
    elif args.cmd == "analyse":
        analyse(args)
    else:
        asyncio.run(verify(args))


if __name__ == "__main__":
    main()
