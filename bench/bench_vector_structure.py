"""How realistic are the vector benchmarks' synthetic collections? Their neighbourhood
statistics (bench/vector_data.py: local intrinsic dimensionality, relative contrast,
anisotropy, spectrum) beside those of real embeddings: the product's local model
(all-MiniLM-L6-v2, int8 ONNX, 384-d) over every document of the BEIR collections in
../shared/data (SciFact, Cranfield, CISI: 8,041 documents, title and text), each
generator sampled at the same number of points.

    python bench/bench_vector_structure.py [--data ../shared/data] [--embeddings FILE.npy]

Embedding the collections takes ~9 minutes on 2 cores; --embeddings keeps the vectors
in FILE.npy and reuses them when it exists.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from vector_data import GENERATORS, HEADER, structure

from groundwire.providers.embeddings.base import EmbeddingTask
from groundwire.providers.embeddings.onnx_local import LocalOnnxEmbedder

COLLECTIONS = ("scifact", "cranfield", "cisi")


def documents(data: Path) -> list[str]:
    texts = []
    for name in COLLECTIONS:
        with (data / name / "corpus.jsonl").open() as f:
            for line in f:
                d = json.loads(line)
                texts.append(f"{d.get('title', '')}. {d['text']}".strip())
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_data = Path(__file__).resolve().parents[2] / "shared" / "data"
    parser.add_argument("--data", type=Path, default=default_data)
    parser.add_argument("--embeddings", type=Path, default=None, help="cache of the vectors")
    args = parser.parse_args()
    if args.embeddings is not None and args.embeddings.exists():
        real = np.load(args.embeddings)
        print(f"real vectors: {len(real):,} from {args.embeddings.name}")
    else:
        texts = documents(args.data)
        t = time.perf_counter()
        embedder = LocalOnnxEmbedder(max_batch_size=32)
        real = np.asarray(embedder.embed_sync(texts, EmbeddingTask.DOCUMENT), dtype=np.float32)
        print(f"embedded {len(texts):,} documents in {time.perf_counter() - t:.0f} s")
        if args.embeddings is not None:
            np.save(args.embeddings, real)
    print(HEADER)
    print(structure(real).row("all-MiniLM-L6-v2, BEIR SciFact + Cranfield + CISI"))
    for name, cls in sorted(GENERATORS.items()):
        sample = cls(np.random.default_rng(7)).sample(np.random.default_rng(1), len(real))
        print(structure(sample).row(f"synthetic `{name}`"))


if __name__ == "__main__":
    main()
