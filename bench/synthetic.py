"""Deterministic synthetic corpora for speed benchmarks (never for quality).

Words are drawn from a Zipf-distributed vocabulary of pseudo-words, with an
identifier (like POL-HR-0042 or CS1503-style codes) sprinkled into some
passages, so the lexical index sees realistic posting-list length skew."""

from __future__ import annotations

import random

SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "ro",
    "ta",
    "vi",
    "su",
    "pe",
    "da",
    "go",
    "ri",
    "ze",
    "bo",
    "fa",
    "hu",
]


def vocabulary(size: int = 20_000, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def passages(count: int, *, words: int = 120, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    vocab = vocabulary()
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]
    out = []
    for i in range(count):
        body = rng.choices(vocab, weights=weights, k=words)
        if i % 7 == 0:
            body.insert(rng.randrange(len(body)), f"POL-HR-{i % 1000:04d}")
        if i % 11 == 0:
            body.insert(rng.randrange(len(body)), f"CS{1000 + i % 9000}")
        out.append(" ".join(body) + ".")
    return out


def queries(count: int, *, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    vocab = vocabulary()
    weights = [1.0 / (rank + 1) ** 0.5 for rank in range(len(vocab))]
    out = []
    for i in range(count):
        terms = rng.choices(vocab[50:], weights=weights[50:], k=rng.randint(2, 5))
        if i % 5 == 0:
            terms.append(f"POL-HR-{rng.randrange(1000):04d}")
        out.append(" ".join(terms))
    return out
