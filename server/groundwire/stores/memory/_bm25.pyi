"""Types of the compiled BM25 top k (_bm25.c)."""

import numpy as np
import numpy.typing as npt

def top_k(
    positions: tuple[npt.NDArray[np.int64], ...],
    contributions: tuple[npt.NDArray[np.float64], ...],
    tenant_rows: npt.NDArray[np.int64],
    live: npt.NDArray[np.bool_],
    n: int,
    k: int,
    /,
) -> tuple[list[int], list[float]]: ...
