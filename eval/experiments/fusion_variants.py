"""Experiment: fusion variants computed offline from legs recorded through the server.

Reads the pickles `fusion_collect.py` writes (one per collection: each judged query's
LEXICAL, SEMANTIC and HYBRID top 100 chunks with raw scores) and prints nDCG@10 on
documents (a document ranked by its best chunk unless the variant aggregates) for
every variant and collection, the mean over the collections, the change against the
server's default, and whether the variant passes the adoption rule: a higher mean and
no collection more than half a point (0.005) below the default.

    .venv/bin/python eval/experiments/fusion_variants.py \
        scifact:train:/tmp/legs-scifact-memory.pkl cranfield:test:/tmp/legs-cranfield-memory.pkl \
        cisi:test:/tmp/legs-cisi-memory.pkl
"""

from __future__ import annotations

import argparse
import math
import pickle
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from groundwire.evaluation.dataset import load_beir
from groundwire.evaluation.metrics import evaluate, mean, parse_metrics

Hit = tuple[str, str, float]
Legs = dict[str, list[Hit]]
Variant = Callable[[Legs], list[str]]

DATA = Path("/work/shared/data")


def docs(fused: Sequence[Hit], share: float = 0.0) -> list[str]:
    """Documents by best chunk score plus `share` x the sum of their other chunks'."""
    per: dict[str, list[float]] = defaultdict(list)
    for d, _c, s in fused:
        per[d].append(s)
    score = {d: max(v) + share * (sum(v) - max(v)) for d, v in per.items()}
    return sorted(score, key=lambda d: (-score[d], d))


def _sorted(acc: dict[tuple[str, str], float]) -> list[Hit]:
    return [(d, c, s) for (d, c), s in sorted(acc.items(), key=lambda kv: (-kv[1], kv[0]))]


def rrf(legs: Legs, k: float, ws: float = 1.0, wl: float = 1.0, depth: int = 100) -> list[Hit]:
    acc: dict[tuple[str, str], float] = defaultdict(float)
    for name, w in (("semantic", ws), ("lexical", wl)):
        for rank, (d, c, _s) in enumerate(legs[name][:depth], start=1):
            acc[(d, c)] += w / (k + rank)
    return _sorted(acc)


def convex(legs: Legs, alpha: float, depth: int, how: str) -> list[Hit]:
    """alpha x semantic + (1 - alpha) x lexical, each leg normalized over its own
    top `depth`: min-max of the scores, rank (1 - (rank-1)/depth), or z-score; absent
    = the leg's floor (0 for min-max and rank, the lowest z for z-score)."""
    acc: dict[tuple[str, str], float] = defaultdict(float)
    keys: set[tuple[str, str]] = set()
    norms: dict[str, dict[tuple[str, str], float]] = {}
    floors: dict[str, float] = {}
    for name in ("semantic", "lexical"):
        hits = legs[name][:depth]
        if not hits:
            norms[name], floors[name] = {}, 0.0
            continue
        scores = [s for _d, _c, s in hits]
        hi, lo = max(scores), min(scores)
        if how == "minmax":
            n = {(d, c): ((s - lo) / (hi - lo) if hi > lo else 1.0) for d, c, s in hits}
            floor = 0.0
        elif how == "rank":
            n = {(d, c): 1.0 - (r - 1) / depth for r, (d, c, _s) in enumerate(hits, start=1)}
            floor = 0.0
        else:
            mu = statistics.fmean(scores)
            sd = statistics.pstdev(scores) or 1.0
            n = {(d, c): (s - mu) / sd for d, c, s in hits}
            floor = (lo - mu) / sd
        norms[name], floors[name] = n, floor
        keys.update(n)
    for key in keys:
        acc[key] = alpha * norms["semantic"].get(key, floors["semantic"]) + (1 - alpha) * norms[
            "lexical"
        ].get(key, floors["lexical"])
    return _sorted(acc)


def variants() -> dict[str, Variant]:
    v: dict[str, Variant] = {
        "lexical leg": lambda lg: docs(lg["lexical"]),
        "semantic leg": lambda lg: docs(lg["semantic"]),
        "hybrid (server default)": lambda lg: docs(lg["hybrid"]),
    }
    for k in (5, 10, 20, 40, 60):
        for depth in (25, 50, 100):
            v[f"RRF k {k}, depth {depth}"] = lambda lg, k=k, d=depth: docs(rrf(lg, k, depth=d))
    for ws, wl in ((1.0, 0.5), (1.0, 0.7), (1.0, 1.5), (1.0, 2.0)):
        v[f"RRF k 20, weights {ws}/{wl}"] = lambda lg, a=ws, b=wl: docs(rrf(lg, 20, a, b))
    for how in ("minmax", "rank", "z"):
        for alpha in (0.3, 0.4, 0.5, 0.6, 0.7):
            for depth in (50, 100):
                v[f"convex {how} alpha {alpha}, depth {depth}"] = (
                    lambda lg, a=alpha, h=how, d=depth: docs(convex(lg, a, d, h))
                )
    for share in (0.05, 0.1, 0.2, 0.3, 0.5):
        v[f"RRF k 20 depth 100, document best + {share} x others"] = lambda lg, s=share: docs(
            rrf(lg, 20), s
        )
    return v


def load(path: Path) -> dict[str, Legs]:
    data: Any = pickle.loads(path.read_bytes())
    legs: dict[str, Legs] = data.get("legs", data)
    return legs


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("runs", nargs="+", help="NAME:SPLIT:PICKLE")
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args()
    metrics = parse_metrics(["nDCG@10"])
    table: dict[str, dict[str, float]] = defaultdict(dict)
    names = []
    for run in args.runs:
        name, split, pkl = run.split(":", 2)
        names.append(name)
        ds = load_beir(DATA / name, split)
        legs = load(Path(pkl))
        for vname, make in variants().items():
            ranks = {q: make(legs[q]) for q in legs}
            table[vname][name] = mean(evaluate(ds.qrels, ranks, metrics)["nDCG@10"])
    base = table["hybrid (server default)"]
    base_mean = statistics.fmean(base[n] for n in names)
    header = ["variant", *names, "mean", "Δ mean", "worst Δ", "adopt"]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for vname, row in table.items():
        m = statistics.fmean(row[n] for n in names)
        worst = min(row[n] - base[n] for n in names)
        adopt = m > base_mean and worst >= -0.005 and not vname.endswith("leg")
        cells = [f"{row[n]:.4f}" for n in names]
        print(
            f"| {vname} | "
            + " | ".join(cells)
            + f" | {m:.4f} | {m - base_mean:+.4f} | {worst:+.4f} | {'yes' if adopt else ''} |"
        )
    assert all(math.isfinite(x) for row in table.values() for x in row.values())
    return 0


if __name__ == "__main__":
    sys.exit(main())
