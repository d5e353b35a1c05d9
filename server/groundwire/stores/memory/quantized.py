"""Sign-bit codes of the in-memory matrix and the candidate pass over them.

A row's code is one bit per dimension: whether the component of the row, scaled to
unit length, exceeds the same component of a center (the mean of the index's unit
rows); the query is coded alike. Centering matters: embeddings often share a common
direction (mean pairwise cosine 0.5-0.9), which makes most raw sign bits agree;
with the shared direction removed the bits discriminate again (measured on clustered
data shifted to a mean pairwise cosine of 0.8: recall@10 of a 1000-row pool 0.85
raw, 1.00 centered). Bits are packed into 64-bit words stored transposed, one
contiguous array per word: the Hamming distance between two codes approximates the
angle between the centered vectors, and over the (words, rows) layout it is a few
vectorised xor/popcount/add passes over contiguous memory. At 384 dimensions that
is 48 bytes a row (3% of the float32 row) read instead of 1536.

The pass only picks candidates: the rows whose distance is at most the smallest
distance holding `pool_size(k, rows in scope)` rows (all ties included) are
rescored exactly in float32 by the caller, so the scores are the plain scan's, and
the order is exact whenever the true top k are in the pool. It runs over the
scope's rows only (their codes gathered, or read in place when consecutive), so
filters apply before ranking: the pool is drawn from the rows in scope, and a
scope under QUANTIZED_MIN_ROWS (a selective filter, a small tenant) is scanned
exactly, whole.

Whether the codes find neighbours depends on the data: on clustered vectors (as
embeddings are) a pool of 1% of the rows holds the true top 10, on structureless
random unit vectors only 60% of them. So each encoding is calibrated: 48 of the
index's own rows serve as queries over a sample of 8192 rows, and the codes are
used only if their pool (the same share of the sample) holds at least
CALIBRATION_MIN_RECALL of the sample's exact top 10; otherwise every search of that
matrix is the plain scan (measured: clustered 1.0, clustered with a strong common
direction 0.998, random 0.48-0.80).

The codes are written with the matrix (Index.append, on the event loop, one
vectorised step per document) and replaced with it: when the matrix grows (its
capacity doubles) while it holds fewer than SETTLED_ROWS rows, the center is
estimated again, every row re-encoded and the codes calibrated again (O(rows), like
the matrix copy growth already does); beyond, the center and verdict are settled
and the codes are copied. Compaction keeps the center and gathers the kept rows'
codes. A search's codes therefore always cover its rows.
A search's snapshot takes the matrix and its codes together, on the event loop."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

CodeArray = npt.NDArray[np.uint64]
FloatArray = npt.NDArray[np.float32]

# Below this many rows in scope the plain float32 scan is used: the pass has a fixed
# cost (rescoring a pool of ~1100 rows, ~0.5 ms) that only pays off on larger scans.
# Measured with bench/bench_memory_scan.py (384 dimensions, 2 shared cores, medians
# of 300 queries): 0.46-0.48x the plain scan at 10k rows in scope, 0.39x at 16k,
# 0.14x at 100k, but ~1.1x at 8k (where the pool is already 1/8 of the scope).
QUANTIZED_MIN_ROWS = 10_000
# The pool rescored exactly: the largest of POOL_MIN rows, POOL_PER_K * k rows and
# the scope's rows / POOL_DIVISOR (the rows ranked above a true neighbour by the
# codes grow with the scope). Measured on clustered 384-dimension data (256
# centroids, recall of the true top 10 in the pool): 100k rows, pool 500: 0.9995,
# 1000: 1.0; 1M rows, pool 1000: 0.90, 2000: 0.978, 5000 and more: 1.0.
POOL_PER_K = 100
POOL_MIN = 1000
POOL_DIVISOR = 128
# When the pool would hold more than this share of the scope, scanning it all in
# float32 is as cheap: the plain path is used.
POOL_MAX_SHARE = 0.125

_BITS = 64
# The calibration (see above): sample rows, queries, the recall it needs, and the
# fewest rows worth calibrating on (below, the codes are not used).
CALIBRATION_ROWS = 8192
CALIBRATION_QUERIES = 48
CALIBRATION_MIN_RECALL = 0.98
CALIBRATION_MIN_INDEX = 2048

# Growth past this many rows keeps the center and the calibration's verdict (both
# settled by then) and copies the codes instead of re-encoding and re-calibrating:
# at 1M rows that work took 0.5-1.9 s of the event loop (2 loaded cores).
SETTLED_ROWS = 131_072

# Rows packed per step when building codes (bounds the temporaries to a few MB).
_PACK_ROWS = 16_384
# The center is the mean of at most this many unit rows, evenly spaced.
_CENTER_SAMPLE = 65_536


@dataclass(frozen=True, slots=True)
class Codes:
    """A matrix's codes: bits (words, capacity), columns below the index's n
    written; the center they were taken against; whether calibration found them
    good enough to use on this data."""

    bits: CodeArray
    center: FloatArray
    trusted: bool = False

    @property
    def bytes_per_row(self) -> int:
        return int(self.bits.shape[0]) * 8


def words_for(dims: int) -> int:
    return -(-dims // _BITS)


def empty_codes(dims: int, capacity: int, center: FloatArray | None = None) -> Codes:
    bits: CodeArray = np.zeros((words_for(dims), capacity), dtype=np.uint64)
    if center is None:
        center = np.zeros(dims, dtype=np.float32)
    return Codes(bits, center)


def _unit(vectors: FloatArray) -> FloatArray:
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
    norms[norms == 0.0] = 1.0
    unit: FloatArray = vectors / norms[:, None]
    return unit


def estimate_center(matrix: FloatArray, n: int) -> FloatArray:
    """The mean of the first n rows scaled to unit length (a sample when many)."""
    if n == 0:
        return np.zeros(matrix.shape[1], dtype=np.float32)
    step = max(1, n // _CENTER_SAMPLE)
    center: FloatArray = _unit(matrix[:n:step]).mean(axis=0, dtype=np.float64).astype(np.float32)
    return center


def pack(vectors: FloatArray, center: FloatArray) -> CodeArray:
    """Codes of `vectors` (m, dims) against `center`, as (words, m)."""
    m, dims = vectors.shape
    words = words_for(dims)
    bits = np.zeros((m, words * _BITS), dtype=bool)
    np.greater(_unit(vectors), center, out=bits[:, :dims])
    packed = np.packbits(bits, axis=1).view(np.uint64)  # (m, words)
    codes: CodeArray = np.ascontiguousarray(packed.T)
    return codes


def write_codes(codes: Codes, matrix: FloatArray, lo: int, hi: int) -> None:
    """Encode matrix rows [lo, hi) into codes.bits[:, lo:hi]."""
    if not codes.bits.shape[0]:
        return
    for start in range(lo, hi, _PACK_ROWS):
        stop = min(hi, start + _PACK_ROWS)
        codes.bits[:, start:stop] = pack(matrix[start:stop], codes.center)


def encode(matrix: FloatArray, n: int) -> Codes:
    """Codes for a whole matrix (its capacity), its first n rows written, against a
    center estimated from them, and calibrated on them."""
    codes = empty_codes(matrix.shape[1], matrix.shape[0], estimate_center(matrix, n))
    write_codes(codes, matrix, 0, n)
    if n < CALIBRATION_MIN_INDEX or not codes.bits.shape[0]:
        return codes
    return Codes(
        codes.bits, codes.center, calibrate(matrix, codes.bits, n) >= CALIBRATION_MIN_RECALL
    )


def grown(codes: Codes, matrix: FloatArray, n: int) -> Codes:
    """The codes for `matrix`, a larger copy of the matrix `codes` encode (n rows)."""
    if n < SETTLED_ROWS:
        return encode(matrix, n)
    bits: CodeArray = np.zeros((codes.bits.shape[0], matrix.shape[0]), dtype=np.uint64)
    bits[:, :n] = codes.bits[:, :n]
    return Codes(bits, codes.center, codes.trusted)


def calibrate(matrix: FloatArray, bits: CodeArray, n: int, k: int = 10) -> float:
    """The share of the exact top k (by dot product) of sample rows, used as queries
    over a sample of the first n rows (themselves excluded), that the codes' pool
    holds, the pool being the share of the sample a search over n rows would take."""
    sample = np.arange(0, n, max(1, n // CALIBRATION_ROWS))[:CALIBRATION_ROWS]
    queries = np.linspace(0, n - 1, CALIBRATION_QUERIES).astype(np.int64)
    scores = matrix[sample] @ matrix[queries].T  # (sample, queries)
    itself = sample[:, None] == queries[None, :]
    scores[itself] = -np.inf
    pool = max(k, round(len(sample) * pool_size(k, n) / n))
    codes = bits[:, sample]
    found = 0
    for j, row in enumerate(queries.tolist()):
        truth = np.argpartition(-scores[:, j], k)[:k]
        dist = hamming(codes, bits[:, row])
        dist[itself[:, j]] = np.iinfo(np.uint16).max
        counts = np.cumsum(np.bincount(dist))
        bound = int(np.searchsorted(counts, pool))
        found += int((dist[truth] <= bound).sum())
    return found / (len(queries) * k)


def query_code(q: FloatArray, center: FloatArray) -> CodeArray:
    return pack(q.reshape(1, -1), center)[:, 0]


def hamming(codes: CodeArray, qcode: CodeArray) -> npt.NDArray[np.uint16]:
    """Per column of `codes` (words, m), its Hamming distance to `qcode`."""
    m = codes.shape[1]
    word = np.empty(m, dtype=np.uint64)
    count = np.empty(m, dtype=np.uint8)
    dist = np.zeros(m, dtype=np.uint16)
    for w in range(codes.shape[0]):
        np.bitwise_xor(codes[w], qcode[w], out=word)
        np.bitwise_count(word, out=count)
        np.add(dist, count, out=dist)
    return dist


def pool_size(k: int, rows: int) -> int:
    return max(POOL_MIN, POOL_PER_K * k, rows // POOL_DIVISOR)


def shortlist(
    codes: Codes, candidates: npt.NDArray[np.int64], q: FloatArray, k: int
) -> npt.NDArray[np.int64] | None:
    """The candidates (ascending rows) to rescore exactly: those whose code is at
    most the pool's boundary distance from the query's, ascending. None when the
    pass would not pay (few candidates, or a pool near the scope's size)."""
    n = len(candidates)
    want = pool_size(k, n)
    if not codes.trusted or n < QUANTIZED_MIN_ROWS or want > n * POOL_MAX_SHARE:
        return None
    bits = codes.bits
    lo, hi = int(candidates[0]), int(candidates[-1]) + 1
    scoped = bits[:, lo:hi] if hi - lo == n else np.take(bits, candidates, axis=1)
    dist = hamming(scoped, query_code(q, codes.center))
    counts = np.cumsum(np.bincount(dist, minlength=bits.shape[0] * _BITS + 1))
    bound = int(np.searchsorted(counts, want))
    if counts[bound] > n * POOL_MAX_SHARE:
        return None  # heavy ties at the boundary: the plain scan is as cheap
    pool: npt.NDArray[np.int64] = candidates[dist <= bound]
    return pool
