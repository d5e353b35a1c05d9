"""Throughput of the local ONNX embedder against bare onnxruntime.

Usage: python bench/bench_embeddings.py [--passages N] [--batch-size B] [--repeats R]

Both sides run the same int8 all-MiniLM-L6-v2 with the same session options and
thread count, on the same batches in the same process:

* provider: `LocalOnnxEmbedder.embed_sync` per batch (tokenization, inference,
  mean pooling, normalization, validation: everything a caller pays for);
* direct: `InferenceSession.run` alone on inputs tokenized before timing starts.

The ratio provider/direct is the share of raw model throughput the provider
keeps; the target is >= 0.9. The passages are the first N of the SciFact corpus
when it is present locally (read in place, never copied), otherwise synthetic
English-like passages of 40-120 words generated from a fixed seed. Runs are
interleaved and the best of `--repeats` is reported, which damps noise from
other load on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
import tokenizers

from groundwire.providers.embeddings.base import EmbeddingTask
from groundwire.providers.embeddings.onnx_local import (
    LocalOnnxEmbedder,
    default_model_path,
    default_tokenizer_path,
    load_tokenizer,
    make_session_options,
    mean_pool,
)

SCIFACT = Path("/work/shared/data/scifact/corpus.jsonl")

_VOCABULARY = """
the a of to and in for on with by from as at that which this these their
study results patients cells protein expression analysis data model method
increase decrease significant effect risk treatment clinical trial group
levels response activity role function mechanism pathway gene mutation tissue
report system network energy market policy city river history language music
school water growth climate design process network signal memory learning
observed measured reduced improved associated compared showed suggests found
"""


def synthetic_passages(count: int, seed: int = 20240611) -> list[str]:
    """Deterministic English-like passages of 40-120 words in sentences."""
    rng = random.Random(seed)
    vocabulary = _VOCABULARY.split()
    passages = []
    for _ in range(count):
        words: list[str] = []
        target = rng.randint(40, 120)
        while len(words) < target:
            sentence = rng.choices(vocabulary, k=rng.randint(6, 18))
            sentence[0] = sentence[0].capitalize()
            sentence[-1] += "."
            words.extend(sentence)
        passages.append(" ".join(words[:target]))
    return passages


def load_passages(count: int, corpus: Path | None) -> tuple[list[str], str]:
    """The first `count` passages of `corpus` (topped up synthetically), or synthetic."""
    texts: list[str] = []
    if corpus is not None and corpus.is_file():
        with corpus.open(encoding="utf-8") as lines:
            for line in lines:
                if len(texts) >= count:
                    break
                doc = json.loads(line)
                texts.append(f"{doc.get('title', '')}. {doc.get('text', '')}".strip())
        source = f"{corpus.name} (first {len(texts)})"
        missing = count - len(texts)
        if missing:
            texts += synthetic_passages(missing)
            source += f" + {missing} synthetic"
        return texts, source
    return synthetic_passages(count), "synthetic (seeded)"


def best_and_median(samples: list[float]) -> tuple[float, float]:
    return max(samples), statistics.median(samples)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--passages", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="default: os.cpu_count()")
    parser.add_argument("--max-seq-length", type=int, default=256)
    parser.add_argument("--synthetic", action="store_true", help="ignore the SciFact corpus")
    args = parser.parse_args(argv)
    if args.passages < 1 or args.batch_size < 1 or args.repeats < 1:
        parser.error("--passages, --batch-size and --repeats must be positive")

    texts, source = load_passages(args.passages, None if args.synthetic else SCIFACT)
    batches = [texts[i : i + args.batch_size] for i in range(0, len(texts), args.batch_size)]

    embedder = LocalOnnxEmbedder(
        max_batch_size=args.batch_size,
        intra_op_threads=args.threads,
        max_seq_length=args.max_seq_length,
    )
    threads = embedder.intra_op_threads
    session = ort.InferenceSession(
        str(default_model_path()),
        sess_options=make_session_options(threads),
        providers=["CPUExecutionProvider"],
    )
    tokenizer = load_tokenizer(default_tokenizer_path(), args.max_seq_length)
    feeds: list[dict[str, npt.NDArray[np.int64]]] = []
    tokens = 0
    for batch in batches:
        encodings = tokenizer.encode_batch(batch)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        tokens += int(mask.sum())
        feeds.append(
            {
                "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
                "attention_mask": mask,
                "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
            }
        )

    def run_provider() -> None:
        for batch in batches:
            embedder.embed_sync(batch, EmbeddingTask.DOCUMENT)

    def run_direct() -> None:
        for feed in feeds:
            session.run(["last_hidden_state"], feed)

    def rate(run: Callable[[], None]) -> float:
        started = time.perf_counter()
        run()
        return len(texts) / (time.perf_counter() - started)

    # Both sides compute the same thing; check it before trusting the timings.
    warm = min(2, len(batches))
    provider_vectors = np.concatenate([embedder.embed_sync(b) for b in batches[:warm]])
    direct_vectors = np.concatenate(
        [
            mean_pool(session.run(["last_hidden_state"], f)[0], f["attention_mask"])
            for f in feeds[:warm]
        ]
    )
    agreement = float(np.min(np.sum(provider_vectors * direct_vectors, axis=1)))

    provider_rates: list[float] = []
    direct_rates: list[float] = []
    for _ in range(args.repeats):
        provider_rates.append(rate(run_provider))
        direct_rates.append(rate(run_direct))
    provider_best, provider_median = best_and_median(provider_rates)
    direct_best, direct_median = best_and_median(direct_rates)

    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    print("machine")
    print(f"  cpu            {cpu_model()}")
    print(f"  nproc          {affinity} (os.cpu_count {os.cpu_count()})")
    print(f"  python         {platform.python_version()} on {platform.platform()}")
    print(f"  onnxruntime    {ort.__version__}   tokenizers {tokenizers.__version__}")
    print(f"  numpy          {np.__version__}")
    print("workload")
    print(f"  passages       {len(texts)} from {source}")
    mean_tokens = tokens / len(texts)
    print(f"  tokens         {mean_tokens:.0f} per passage on average, max {args.max_seq_length}")
    print(
        f"  batch size     {args.batch_size}   intra-op threads {threads}   repeats {args.repeats}"
    )
    print(f"  agreement      min cosine provider vs direct {agreement:.6f}")
    print("throughput (passages/s, best / median)")
    print(f"  provider       {provider_best:8.1f} / {provider_median:8.1f}   embed_sync")
    print(
        f"  direct         {direct_best:8.1f} / {direct_median:8.1f}   session.run, pre-tokenized"
    )
    print(
        f"  ratio          {provider_best / direct_best:.3f} best, "
        f"{provider_median / direct_median:.3f} median (target >= 0.9)"
    )
    return 0 if agreement > 0.9999 else 1


if __name__ == "__main__":
    sys.exit(main())
