"""Synthetic 384-d embedding collections for the vector benchmarks, and the statistics
that say how close a collection's neighbourhood structure is to real embeddings
(bench_vector_structure.py prints them beside all-MiniLM-L6-v2 vectors of the BEIR
collections in ../shared/data).

Two generators, both seeded and unit-length:

- ``isotropic``: 256 random centroids plus isotropic Gaussian noise of norm ~1.4, the
  data of every earlier million-chunk run. Each point is mostly noise spread over all
  384 dimensions, so neighbours barely stand out from the crowd (local intrinsic
  dimensionality ~37, relative contrast ~1.3 at 8k points): far harder for a graph
  index than text embeddings.
- ``latent``: points on low-dimensional topic manifolds, as text embeddings are. A
  shared mean direction (embeddings of one model are anisotropic), 256 topic centres,
  and within a topic a Gaussian over a `d_latent`-dimensional subspace of its own, plus
  a little isotropic noise. Its parameters are fitted to MiniLM's statistics on the BEIR
  collections (bench_vector_structure.py shows both).

Statistics, over sample points of the collection itself (each excluded from its own
neighbours), by exact search:

- local intrinsic dimensionality, the maximum-likelihood estimate over the 20 nearest
  neighbours (Levina and Bickel, 2004), median over the sample;
- relative contrast at 1 and 10: the mean distance to any point over the distance to the
  1st / 10th nearest neighbour (He, Kumar and Chang, 2012); near 1, neighbours do not
  stand out and every approximate index struggles;
- the mean cosine between points (anisotropy) and the principal components that hold
  50 / 80 / 90% of the variance (of the first 4,000 points).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Vec = npt.NDArray[np.float32]
DIM = 384


def _unit(v: npt.NDArray[np.floating]) -> Vec:
    out: Vec = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    return out


class Isotropic:
    """256 random unit centroids plus N(0, (1.4 / sqrt(dim))^2) noise per dimension."""

    def __init__(self, rng: np.random.Generator, dim: int = DIM) -> None:
        self.dim = dim
        centroids = rng.normal(size=(256, dim)).astype(np.float32)
        self.centroids = centroids / np.linalg.norm(centroids, axis=1, keepdims=True)

    def sample(self, rng: np.random.Generator, n: int) -> Vec:
        c = self.centroids[rng.integers(len(self.centroids), size=n)]
        v = c + rng.normal(scale=0.35 / np.sqrt(self.dim) * 4, size=(n, self.dim)).astype(
            np.float32
        )
        return _unit(v)


@dataclass(frozen=True)
class LatentShape:
    """The `latent` generator's parameters (defaults: fitted to MiniLM on BEIR, see
    bench_vector_structure.py)."""

    topics: int = 256
    d_latent: int = 48  # dimensions of a topic's own subspace
    alpha: float = 1.4  # the global spectrum: variance of component i ~ i^-alpha
    mean: float = 0.35  # weight of the shared direction (anisotropy)
    spread: float = 1.0  # norm of a topic centre's offset from it
    within: float = 1.0  # norm of a point's offset inside its topic subspace
    noise: float = 0.3  # norm of the isotropic noise


class Latent:
    """Points on per-topic `d_latent`-dimensional subspaces around anisotropic centres,
    centres and subspaces drawn from one covariance with a power-law spectrum (a few
    directions carry most of the variance, as in real embeddings)."""

    def __init__(
        self, rng: np.random.Generator, dim: int = DIM, shape: LatentShape | None = None
    ) -> None:
        s = shape or LatentShape()
        self.dim, self.shape = dim, s
        rotation = np.linalg.qr(rng.normal(size=(dim, dim)))[0]
        # x = scale @ g (g standard normal) has covariance R diag(i^-alpha) R^T.
        scale = rotation * np.arange(1, dim + 1, dtype=np.float64) ** (-s.alpha / 2)
        mu = rng.normal(size=dim)
        mu /= np.linalg.norm(mu)
        centres = (scale @ rng.normal(size=(dim, s.topics))).T
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        self.centres = (s.mean * mu + s.spread * centres).astype(np.float32)
        # One orthonormal basis per topic, spanning directions drawn from the same
        # covariance: (topics, dim, d_latent).
        raw = np.einsum("ij,tjk->tik", scale, rng.normal(size=(s.topics, dim, s.d_latent)))
        self.bases = np.linalg.qr(raw)[0].astype(np.float32)

    def sample(self, rng: np.random.Generator, n: int) -> Vec:
        s = self.shape
        t = rng.integers(s.topics, size=n)
        z = rng.normal(scale=s.within / np.sqrt(s.d_latent), size=(n, s.d_latent))
        v = self.centres[t] + np.einsum("nij,nj->ni", self.bases[t], z.astype(np.float32))
        v += rng.normal(scale=s.noise / np.sqrt(self.dim), size=(n, self.dim)).astype(np.float32)
        return _unit(v)


GENERATORS = {"isotropic": Isotropic, "latent": Latent}


def add_vectors_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--vectors",
        choices=sorted(GENERATORS),
        default="isotropic",
        help="synthetic vectors (bench/vector_data.py): isotropic (earlier runs' data) "
        "or latent (fitted to MiniLM on real text)",
    )


@dataclass(frozen=True)
class Structure:
    """Neighbourhood statistics of one collection (see the module docstring)."""

    n: int
    lid: float
    rc1: float
    rc10: float
    mean_cos: float
    var_dims: tuple[int, int, int]
    nn1_cos: float
    nn10_cos: float

    def row(self, label: str) -> str:
        d50, d80, d90 = self.var_dims
        return (
            f"| {label} | {self.n:,} | {self.lid:.1f} | {self.rc1:.3f} | {self.rc10:.3f} | "
            f"{self.mean_cos:.3f} | {d50} / {d80} / {d90} | {self.nn1_cos:.3f} | "
            f"{self.nn10_cos:.3f} |"
        )


HEADER = (
    "| collection | points | LID (k=20) | RC@1 | RC@10 | mean cosine | "
    "components for 50 / 80 / 90% variance | 1st-NN cosine | 10th-NN cosine |\n"
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
)


def structure(x: Vec, sample: int = 1000, k: int = 20, seed: int = 0) -> Structure:
    """The statistics of unit vectors `x` (medians over `sample` of its points)."""
    rng = np.random.default_rng(seed)
    picked = rng.choice(len(x), size=min(sample, len(x)), replace=False)
    sims = x[picked] @ x.T
    sims[np.arange(len(picked)), picked] = -np.inf
    idx = np.argpartition(-sims, k, axis=1)[:, :k]
    top = -np.sort(-np.take_along_axis(sims, idx, 1), axis=1)
    dist = np.sqrt(np.maximum(1e-12, 2 - 2 * top))
    lid = -1 / np.mean(np.log(dist[:, :-1] / dist[:, -1:]), axis=1)
    finite = sims[np.isfinite(sims)]
    mean_dist = float(np.sqrt(np.maximum(0, 2 - 2 * finite)).mean())
    head = x[: min(len(x), 4000)]
    var = np.linalg.svd(head - head.mean(0), compute_uv=False) ** 2
    cum = np.cumsum(var / var.sum())
    d50, d80, d90 = (int(np.searchsorted(cum, p)) + 1 for p in (0.5, 0.8, 0.9))
    return Structure(
        n=len(x),
        lid=float(np.median(lid)),
        rc1=float(np.median(mean_dist / dist[:, 0])),
        rc10=float(np.median(mean_dist / dist[:, 9])),
        mean_cos=float(finite.mean()),
        var_dims=(d50, d80, d90),
        nn1_cos=float(np.median(top[:, 0])),
        nn10_cos=float(np.median(top[:, 9])),
    )
