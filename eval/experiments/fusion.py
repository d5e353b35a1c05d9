"""Prototype: rank-based fusion alternatives at the document level.

A scratch experiment (not product code). Inputs are the per-query document
rankings (top 100) that `groundwire eval run` recorded for the server's LEXICAL
and SEMANTIC variants; optionally the lexical leg is replaced by the prototype
analyzer of `lexical.py` (e.g. stop words + Porter stemming) to predict HYBRID
after a lexical change. Only rank-based fusion (RRF with k, per-leg weights and
depth) is tried: raw leg scores are never added or compared (product rule).

    .venv/bin/python eval/experiments/fusion.py RUN.json --dataset ../shared/data/scifact \\
        --split train [--analyzer product+stop+porter --chunk-size 2000 --chunk-overlap 200]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from lexical import Bm25, analyzers, chunks_of, rrf  # type: ignore[import-not-found]

from groundwire.evaluation.dataset import load_beir
from groundwire.evaluation.metrics import evaluate, mean, parse_metrics


def rankings(run: dict[str, object], name: str) -> dict[str, list[str]]:
    for v in run["variants"]:  # type: ignore[attr-defined]
        if v["name"] == name:
            return {q["id"]: q["ranking"] for q in v["queries"]}
    raise SystemExit(f"no variant {name}")


def score(ds: object, ranks: dict[str, list[str]]) -> float:
    return round(mean(evaluate(ds.qrels, ranks, parse_metrics(["nDCG@10"]))["nDCG@10"]), 4)  # type: ignore[attr-defined]


def grid(
    ds: object, sem: dict[str, list[str]], lex: dict[str, list[str]], label: str
) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    qids = list(sem)
    configs: list[tuple[int, float, float, int]] = []
    for k in (5, 10, 20, 30, 40, 60, 100):
        configs.append((k, 1.0, 1.0, 100))
    for ws, wl in ((1.0, 0.5), (1.0, 0.7), (1.0, 1.5), (0.7, 1.0), (0.5, 1.0), (1.5, 1.0)):
        for k in (20, 60):
            configs.append((k, ws, wl, 100))
    for depth in (20, 50):
        for k in (20, 60):
            configs.append((k, 1.0, 1.0, depth))
    for k, ws, wl, depth in configs:
        fused = {q: rrf([(sem[q], ws), (lex.get(q, []), wl)], k, depth) for q in qids}
        rows.append(
            {
                "lexical": label,
                "rrf_k": k,
                "w_sem": ws,
                "w_lex": wl,
                "depth": depth,
                "nDCG@10": score(ds, fused),
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("run_json", type=Path)
    p.add_argument("--dataset", type=Path, required=True)
    p.add_argument("--split", default="test")
    p.add_argument("--analyzer", action="append", default=[])
    p.add_argument("--chunk-size", type=int, default=2000)
    p.add_argument("--chunk-overlap", type=int, default=200)
    p.add_argument("--k1", type=float, default=0.9)
    p.add_argument("--b", type=float, default=0.4)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    run = json.loads(args.run_json.read_text())
    ds = load_beir(args.dataset, args.split)
    sem = rankings(run, "semantic")
    lex = rankings(run, "lexical")
    rows = [{"lexical": "server", "leg": "semantic", "nDCG@10": score(ds, sem)}]
    rows.append({"lexical": "server", "leg": "lexical", "nDCG@10": score(ds, lex)})
    rows += grid(ds, sem, lex, "server")
    if args.analyzer:
        chunks = chunks_of(ds, args.chunk_size, args.chunk_overlap)
        table = analyzers()
        for name in args.analyzer:
            index = Bm25(chunks, table[name])
            proto = {
                q.id: index.rank(" ".join(q.text.replace('"', " ").split()), args.k1, args.b, 100)
                for q in ds.judged_queries()
            }
            label = f"{name} k1={args.k1} b={args.b}"
            rows.append({"lexical": label, "leg": "lexical", "nDCG@10": score(ds, proto)})
            rows += grid(ds, sem, proto, label)
    for r in rows:
        print(json.dumps(r))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
