"""Experiment: the README's evaluation table from `fusion_collect.py` pickles.

nDCG@10 / MRR@10 / Recall@100 per mode (LEXICAL, SEMANTIC, HYBRID as the server ran
them: top_k 100 chunks, a document ranked by its best chunk) and the rank-bm25
baseline `eval run` computes (k1 0.9, b 0.4, `evaluation.baseline.bm25_rankings`),
with the median server-side time per mode and the ingestion time of the run.

    .venv/bin/python eval/experiments/fusion_table.py scifact:train:/tmp/legs-scifact-memory.pkl ...
"""

from __future__ import annotations

import pickle
import statistics
import sys
from pathlib import Path

from groundwire.evaluation.baseline import bm25_rankings
from groundwire.evaluation.dataset import load_beir
from groundwire.evaluation.metrics import evaluate, mean, parse_metrics

DATA = Path("/work/shared/data")
MODES = ("lexical", "semantic", "hybrid")


def main() -> int:
    metrics = parse_metrics(["nDCG@10", "MRR@10", "Recall@100"])
    baseline = "--baseline" in sys.argv
    print(
        "| collection | store | LEXICAL | SEMANTIC (MiniLM) | HYBRID |"
        + (" BM25 baseline (rank-bm25 k1 0.9 b 0.4) |" if baseline else "")
        + " p50 ms lexical / semantic / hybrid | ingest s |"
    )
    for run in (a for a in sys.argv[1:] if not a.startswith("--")):
        name, split, pkl = run.split(":", 2)
        ds = load_beir(DATA / name, split)
        data = pickle.loads(Path(pkl).read_bytes())
        cells = []
        for mode in MODES:
            ranks = {
                q: list(dict.fromkeys(d for d, _c, _s in v[mode])) for q, v in data["legs"].items()
            }
            scores = evaluate(ds.qrels, ranks, metrics)
            cells.append(" / ".join(f"{mean(scores[m.name]):.4f}" for m in metrics))
        if baseline:
            queries = ds.judged_queries()
            ranks, _times = bm25_rankings(ds.corpus, queries)
            scores = evaluate(ds.qrels, ranks, metrics)
            cells.append(" / ".join(f"{mean(scores[m.name]):.4f}" for m in metrics))
        p50 = " / ".join(
            f"{statistics.median(data['durations'][m]) * 1000:.1f}"
            if data["durations"].get(m)
            else "-"
            for m in MODES
        )
        print(
            f"| {name} ({split}, {len(data['legs'])}) | {data['store']} | "
            + " | ".join(cells)
            + f" | {p50} | {data['ingest_seconds']:.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
