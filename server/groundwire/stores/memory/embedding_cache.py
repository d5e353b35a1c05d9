"""Document vectors cached in process memory (the memory store's embedding cache,
stores/embedding_cache.py): a least-recently-used table bounded by bytes.

The bound counts each entry's vector bytes plus a fixed per-entry overhead (key,
dictionary slot, array header), so it holds about 170,000 vectors of 384
dimensions, 43,000 of 1,536, in the default 256 MiB. A lookup that hits makes the
entry the most recently used; an insert past the budget evicts the least
recently used entries first. Every method runs without awaiting, so on one event
loop each is atomic. Stored vectors are private read-only copies.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence

import numpy as np

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
# Key bytes object, OrderedDict slot and ndarray header, roughly.
ENTRY_OVERHEAD_BYTES = 200


class MemoryEmbeddingCache:
    """`EmbeddingCache` in process memory (see module docstring)."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def used_bytes(self) -> int:
        return self._bytes

    async def get_many(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        out: dict[bytes, np.ndarray] = {}
        for key in keys:
            vector = self._entries.get(key)
            if vector is not None:
                self._entries.move_to_end(key)
                out[key] = vector
        return out

    async def put_many(self, items: Mapping[bytes, np.ndarray]) -> None:
        for key, vector in items.items():
            if key in self._entries:
                self._entries.move_to_end(key)
                continue
            stored = np.array(vector, dtype=np.float32, copy=True)
            stored.setflags(write=False)
            size = stored.nbytes + ENTRY_OVERHEAD_BYTES
            if size > self.max_bytes:
                continue
            self._entries[key] = stored
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, old = self._entries.popitem(last=False)
                self._bytes -= old.nbytes + ENTRY_OVERHEAD_BYTES
