"""Experiment: how much the two legs agree, and what fusion could reach at best.

Reads a `fusion_collect.py` pickle and prints, over the judged queries: each leg's and
HYBRID's nDCG@10, the mean overlap of the legs' top-10 documents (|A n B| / 10), the
share of relevant documents in either leg's top 100 that only one leg found, and the
per-query oracle max(nDCG@10 lexical, nDCG@10 semantic) (what a perfect choice of
one leg per query would give).

    .venv/bin/python eval/experiments/fusion_overlap.py cranfield:test:/tmp/legs-cranfield.pkl
"""

from __future__ import annotations

import pickle
import statistics
import sys
from pathlib import Path

from groundwire.evaluation.dataset import load_beir
from groundwire.evaluation.metrics import evaluate, mean, parse_metrics

DATA = Path("/work/shared/data")


def docs(hits: list[tuple[str, str, float]]) -> list[str]:
    return list(dict.fromkeys(d for d, _c, _s in hits))


def main() -> int:
    metrics = parse_metrics(["nDCG@10"])
    for run in sys.argv[1:]:
        name, split, pkl = run.split(":", 2)
        ds = load_beir(DATA / name, split)
        data = pickle.loads(Path(pkl).read_bytes())
        legs = data.get("legs", data)
        ranks = {
            mode: {q: docs(v[mode]) for q, v in legs.items()}
            for mode in ("lexical", "semantic", "hybrid")
        }
        per = {m: evaluate(ds.qrels, r, metrics)["nDCG@10"] for m, r in ranks.items()}
        overlap, only_one, rel_total = [], 0, 0
        for q in legs:
            lex, sem = ranks["lexical"][q], ranks["semantic"][q]
            overlap.append(len(set(lex[:10]) & set(sem[:10])) / 10)
            relevant = {d for d, g in ds.qrels.get(q, {}).items() if g > 0}
            found_lex, found_sem = relevant & set(lex), relevant & set(sem)
            only_one += len(found_lex ^ found_sem)
            rel_total += len(found_lex | found_sem)
        oracle = [max(per["lexical"][q], per["semantic"][q]) for q in per["lexical"]]
        print(
            name,
            {m: round(mean(v), 4) for m, v in per.items()},
            f"top-10 overlap {statistics.fmean(overlap):.3f}",
            f"relevant found by one leg only {only_one / max(1, rel_total):.3f}",
            f"oracle best-leg-per-query {mean(oracle):.4f}",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
