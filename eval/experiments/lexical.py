"""Prototype: how would lexical analysis and BM25 parameters move nDCG@10?

A scratch experiment (not product code). It rebuilds the in-memory store's BM25
(Lucene idf log(1 + (N - df + 0.5) / (df + 0.5)), k1, b; a document ranked by its
best chunk) over the same chunks the server makes (the product's chunker on
title + blank line + text), with alternative analyzers:

- `product`: groundwire.domain.text.index_tokens (identifiers kept whole and split);
- `words`: lowercase alphanumeric runs only (no identifier splitting);
- `+stop`: minus Lucene's 33-word English stop set (Lucene/Anserini's default);
- `+porter` / `+snowball`: PyStemmer's Porter or Snowball English stemmer.

`product` at k1=0.9, b=0.4 must reproduce the server's LEXICAL figures: that is
the check that the prototype models the product. Optionally fuses the prototype's
lexical rankings with the server's SEMANTIC rankings from a run.json (document
level RRF) to see the effect on HYBRID.

    .venv/bin/python eval/experiments/lexical.py --dataset ../shared/data/scifact \\
        --split train --chunk-size 2000 --chunk-overlap 200 [--semantic RUN.json:semantic]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import scipy.sparse as sp  # type: ignore[import-untyped]

from groundwire.domain.chunking import ChunkPolicy, chunk_text
from groundwire.domain.text import index_tokens, normalize_text
from groundwire.evaluation.dataset import Dataset, load_beir
from groundwire.evaluation.metrics import evaluate, mean, parse_metrics

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET (the classic 33 words).
LUCENE_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)
_WORD = re.compile(r"[^\W_]+")

Analyzer = Callable[[str], list[str]]


def analyzers() -> dict[str, Analyzer]:
    import Stemmer  # type: ignore[import-not-found]

    porter = Stemmer.Stemmer("porter")
    snowball = Stemmer.Stemmer("english")

    def words(t: str) -> list[str]:
        return [w.lower() for w in _WORD.findall(t)]

    def stop(t: str) -> list[str]:
        return [w for w in words(t) if w not in LUCENE_STOP]

    def product_stop_porter(t: str) -> list[str]:
        return [porter.stemWord(w) for w in index_tokens(t) if w not in LUCENE_STOP]

    def product_stop_porter_words(t: str) -> list[str]:
        # The rule recommended for the product: identifiers stay as index_tokens
        # makes them; only plain alphabetic words are stemmed; stop words dropped.
        return [
            porter.stemWord(w) if w.isalpha() else w
            for w in index_tokens(t)
            if w not in LUCENE_STOP
        ]

    return {
        "product": index_tokens,
        "product+stop+porter-words": product_stop_porter_words,
        "words": words,
        "words+stop": stop,
        "words+porter": lambda t: porter.stemWords(words(t)),
        "words+stop+porter": lambda t: porter.stemWords(stop(t)),
        "words+stop+snowball": lambda t: snowball.stemWords(stop(t)),
        "product+stop+porter": product_stop_porter,
    }


class Bm25:
    """Chunk-level BM25 with the in-memory store's formula; documents by best chunk."""

    def __init__(self, chunks: Sequence[tuple[str, str]], analyzer: Analyzer) -> None:
        self.doc_of = [d for d, _ in chunks]
        vocab: dict[str, int] = {}
        rows, cols, vals = [], [], []
        lengths = np.zeros(len(chunks), dtype=np.float64)
        for i, (_, text) in enumerate(chunks):
            toks = analyzer(text)
            lengths[i] = len(toks)
            counts: dict[int, int] = {}
            for t in toks:
                j = vocab.setdefault(t, len(vocab))
                counts[j] = counts.get(j, 0) + 1
            for j, c in counts.items():
                rows.append(i)
                cols.append(j)
                vals.append(c)
        self.vocab = vocab
        self.analyzer = analyzer
        self.tf = sp.csc_matrix(
            (np.asarray(vals, dtype=np.float64), (rows, cols)), shape=(len(chunks), len(vocab))
        )
        self.lengths = lengths
        self.avgdl = float(lengths.mean()) or 1.0
        self.df = np.diff(self.tf.indptr)
        self.n = len(chunks)

    def rank(self, query: str, k1: float, b: float, depth: int = 1000) -> list[str]:
        terms: dict[int, int] = {}
        for t in self.analyzer(query):
            j = self.vocab.get(t)
            if j is not None:
                terms[j] = terms.get(j, 0) + 1
        if not terms:
            return []
        scores = np.zeros(self.n)
        for j, qtf in terms.items():
            lo, hi = self.tf.indptr[j], self.tf.indptr[j + 1]
            rows = self.tf.indices[lo:hi]
            tf = self.tf.data[lo:hi]
            df = hi - lo
            idf = math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))
            dl = self.lengths[rows]
            scores[rows] += qtf * idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / self.avgdl))
        hit = np.flatnonzero(scores > 0)
        order = hit[np.argsort(-scores[hit], kind="stable")][: depth * 3]
        return list(dict.fromkeys(self.doc_of[i] for i in order))[:depth]


def chunks_of(ds: Dataset, size: int, overlap: int) -> list[tuple[str, str]]:
    policy = ChunkPolicy(size=size, overlap=overlap, markdown_sections=False)
    out = []
    for d in ds.corpus:
        text = normalize_text(d.content())
        for c in chunk_text(text, policy, markdown=False):
            out.append((d.id, c.text))
    return out


def rrf(lists: Sequence[tuple[Sequence[str], float]], k: int, depth: int) -> list[str]:
    score: dict[str, float] = {}
    for ranking, weight in lists:
        for r, d in enumerate(ranking[:depth], start=1):
            score[d] = score.get(d, 0.0) + weight / (k + r)
    return [d for d, _ in sorted(score.items(), key=lambda x: (-x[1], x[0]))]


def semantic_rankings(spec: str) -> dict[str, list[str]]:
    path, _, name = spec.rpartition(":")
    run = json.loads(Path(path).read_text())
    block = next(v for v in run["variants"] if v["name"] == name)
    return {q["id"]: q["ranking"] for q in block["queries"]}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", type=Path, required=True)
    p.add_argument("--split", default="test")
    p.add_argument("--chunk-size", type=int, default=800)
    p.add_argument("--chunk-overlap", type=int, default=100)
    p.add_argument("--analyzers", default="")
    p.add_argument("--params", default="0.9:0.4,1.2:0.75,1.2:0.4,0.9:0.75,1.5:0.75")
    p.add_argument("--semantic", help="RUN.json:variant with server SEMANTIC rankings")
    p.add_argument("--json", type=Path, help="write the results here")
    args = p.parse_args()
    ds = load_beir(args.dataset, args.split)
    queries = ds.judged_queries()
    chunks = chunks_of(ds, args.chunk_size, args.chunk_overlap)
    metrics = parse_metrics(["nDCG@10", "Recall@100"])
    sem = semantic_rankings(args.semantic) if args.semantic else None
    wanted = set(_csv(args.analyzers)) if args.analyzers else None
    params = [tuple(float(x) for x in p.split(":")) for p in _csv(args.params)]
    results = []
    for name, analyzer in analyzers().items():
        if wanted and name not in wanted:
            continue
        t0 = time.perf_counter()
        index = Bm25(chunks, analyzer)
        for k1, b in params:
            ranks = {
                q.id: index.rank(" ".join(q.text.replace('"', " ").split()), k1, b) for q in queries
            }
            per = evaluate(ds.qrels, ranks, metrics)
            row = {
                "dataset": ds.name,
                "chunking": f"{args.chunk_size}/{args.chunk_overlap}",
                "analyzer": name,
                "k1": k1,
                "b": b,
                "nDCG@10": round(mean(per["nDCG@10"]), 4),
                "Recall@100": round(mean(per["Recall@100"]), 4),
            }
            if sem is not None:
                for k in (60,):
                    fused = {
                        q.id: rrf([(sem[q.id], 1.0), (ranks[q.id], 1.0)], k, 100) for q in queries
                    }
                    row[f"hybrid_rrf{k}"] = round(
                        mean(evaluate(ds.qrels, fused, metrics)["nDCG@10"]), 4
                    )
            results.append(row)
            print(json.dumps(row), flush=True)
        print(f"# {name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


def _csv(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


if __name__ == "__main__":
    sys.exit(main())
