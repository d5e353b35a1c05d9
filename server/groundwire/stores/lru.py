"""A small thread-safe LRU bounded by a cost, for the stores' in-process caches
(PostgreSQL's block-max directories, filters and admitted sets; OpenSearch's tenant
sizes)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any


class LRU:
    """A small thread-safe LRU bounded by a cost (bytes, entries)."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._used = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            self._items.move_to_end(key)
            return found[0]

    def put(self, key: Hashable, value: Any, cost: int) -> None:
        if cost > self._capacity:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._used -= old[1]
            self._items[key] = (value, cost)
            self._used += cost
            while self._used > self._capacity:
                _, (_, c) = self._items.popitem(last=False)
                self._used -= c
