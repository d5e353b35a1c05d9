"""Following an operation in this process: whatever holds its latest snapshot (an
ingestion run, ingestion/manager.py; a running push, push_operations.py) bumps
`seq` and notifies `changed` on every change, and `follow` yields each snapshot
a watcher has not seen yet, until the terminal one."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from typing import Protocol

from groundwire.domain.operations import Operation


class Followed(Protocol):
    operation: Operation
    seq: int
    changed: asyncio.Condition


def _changed_since(holder: Followed, seen: int) -> bool:
    return holder.seq != seen


async def follow(holder: Followed) -> AsyncIterator[Operation]:
    """The holder's current snapshot, then each newer one, until a terminal one."""
    seen = -1
    while True:
        async with holder.changed:
            await holder.changed.wait_for(functools.partial(_changed_since, holder, seen))
            seen = holder.seq
            snapshot = holder.operation
        yield snapshot
        if snapshot.state.terminal:
            return
