"""The client-side BM25 baseline the issue names: `rank-bm25`'s BM25Okapi with
k1=0.9, b=0.4 over lowercase word tokens (`\\w+`), on exactly the document text
the runner pushes (title, blank line, text). It runs in the evaluation process,
on the same documents and judged queries as the server variants of the run, so
"LEXICAL at least the BM25 baseline" is checked within one run.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from groundwire.evaluation.dataset import Document, Query

__all__ = ["BM25_B", "BM25_K1", "bm25_descriptor", "bm25_rankings", "word_tokens"]

BM25_K1 = 0.9
BM25_B = 0.4
_WORD = re.compile(r"\w+")


def word_tokens(text: str) -> list[str]:
    """Lowercase word tokens (Unicode `\\w+` runs)."""
    return _WORD.findall(text.lower())


def bm25_descriptor(k1: float = BM25_K1, b: float = BM25_B) -> dict[str, Any]:
    """What the baseline is, for the result file."""
    try:
        from importlib.metadata import version

        lib = f"rank-bm25 {version('rank-bm25')}"
    except Exception:  # pragma: no cover
        lib = "rank-bm25"
    return {
        "kind": "client-baseline",
        "library": lib,
        "model": "BM25Okapi",
        "k1": k1,
        "b": b,
        "tokenizer": "lowercase \\w+ word tokens",
        "document_text": "title + blank line + text",
    }


def bm25_rankings(
    corpus: Sequence[Document],
    queries: Sequence[Query],
    depth: int = 100,
    k1: float = BM25_K1,
    b: float = BM25_B,
) -> tuple[dict[str, list[str]], list[float]]:
    """Top-`depth` document ids per query (score descending, ties by document id;
    documents scoring exactly 0 are left out) and per-query times in ms."""
    from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]

    ids = [d.id for d in corpus]
    model = BM25Okapi([word_tokens(d.content()) for d in corpus], k1=k1, b=b)
    # Tie order: document id ascending (the server's ordinal tie rule).
    id_order = np.argsort(np.asarray(ids, dtype=object), kind="stable")
    tie_rank = np.empty(len(ids), dtype=np.int64)
    tie_rank[id_order] = np.arange(len(ids))
    out: dict[str, list[str]] = {}
    times: list[float] = []
    for q in queries:
        t0 = time.perf_counter()
        tokens = word_tokens(q.text)
        scores = np.asarray(model.get_scores(tokens), dtype=np.float64) if tokens else None
        if scores is None:
            out[q.id] = []
        else:
            order = np.lexsort((tie_rank, -scores))
            out[q.id] = [ids[i] for i in order[:depth] if scores[i] != 0.0]
        times.append((time.perf_counter() - t0) * 1000.0)
    return out, times
