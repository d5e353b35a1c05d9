"""Store health: each configured store is checked on its own schedule
(`health_check_ms`), and the gRPC health service follows it.

With indexes on several PostgreSQL clusters, one cluster down must take only its
own indexes out: `groundwire.store.NAME` and `groundwire.index.X` of every index
placed on it turn NOT_SERVING (a load balancer or operator sees which store
failed, by its configured name, never a DSN), and back to SERVING when the store
answers again (an index only if it is ready). "" keeps meaning the process
serves: the other stores' indexes go on serving. Every check counts in
`groundwire.store.health_checks{store, outcome}`; transitions log one line.

Checks run as health checks (stores/request_scope.py): PostgreSQL answers them on a
connection of its own, outside the pool and the tenants' fair queues, so a store
that one tenant keeps busy still reads healthy.

A store without a `ping` (memory, a plug-in that offers none) is always healthy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping

from groundwire.api.server import Health, index_health_name
from groundwire.domain.errors import GroundwireError
from groundwire.indexes.catalog import IndexCatalog
from groundwire.instruments import STORE_HEALTH_CHECKS
from groundwire.stores import request_scope
from groundwire.stores.base import Store

log = logging.getLogger("groundwire.app")


def store_health_name(store_name: str) -> str:
    """Health service name of one configured store."""
    return f"groundwire.store.{store_name}"


class StoreHealth:
    """See module docstring. `start` checks every store once and starts the
    schedules; `close` stops them. `catalog` returns the catalog serving now (a
    reload may move indexes)."""

    def __init__(
        self,
        stores: Mapping[str, Store],
        interval_ms: Mapping[str, int],
        health: Health,
        catalog: Callable[[], IndexCatalog],
    ) -> None:
        self._stores = dict(stores)
        self._interval_s = {n: interval_ms.get(n, 1000) / 1000 for n in self._stores}
        self._health = health
        self._catalog = catalog
        self._available: dict[str, bool] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def available(self, store_name: str) -> bool:
        """Whether the store answered its last check (True before the first)."""
        return self._available.get(store_name, True)

    async def start(self) -> None:
        await asyncio.gather(*(self.check(n) for n in self._stores))
        for name, store in self._stores.items():
            if getattr(store, "ping", None) is not None:
                self._tasks.append(
                    asyncio.create_task(self._loop(name), name=f"groundwire-store-health-{name}")
                )

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def _loop(self, name: str) -> None:
        while True:
            await asyncio.sleep(self._interval_s[name])
            await self.check(name)

    async def check(self, name: str) -> bool:
        """Check one store now and move the health statuses if it changed."""
        ping: Callable[[], Awaitable[None]] | None = getattr(self._stores[name], "ping", None)
        reason = ""
        if ping is not None:
            # The store bounds its own check; this bounds a plug-in's that does not.
            try:
                with request_scope.health_check():
                    async with asyncio.timeout(self._interval_s[name] + 10.0):
                        await ping()
            except GroundwireError as err:
                reason = err.reason
            except TimeoutError:
                reason = "STORE_UNAVAILABLE"
            except Exception as exc:
                log.warning(
                    "store health check raised",
                    extra={"store": name, "exception_type": type(exc).__name__},
                )
                reason = "STORE_UNAVAILABLE"
        ok = not reason
        STORE_HEALTH_CHECKS.add(1, {"store": name, "outcome": "OK" if ok else "UNAVAILABLE"})
        before = self._available.get(name)
        self._available[name] = ok
        if before == ok:
            return ok
        if not ok:
            log.warning("store unavailable", extra={"store": name, "reason": reason})
        elif before is not None:
            log.info("store available again", extra={"store": name})
        await self._publish(name, ok)
        return ok

    async def _publish(self, name: str, ok: bool) -> None:
        await self._health.set_serving([store_health_name(name)], serving=ok)
        handles = [h for h in self._catalog().handles() if h.store_name == name]
        if ok:
            await self._health.set_serving([index_health_name(h.name) for h in handles if h.ready])
        else:
            await self._health.set_serving(
                [index_health_name(h.name) for h in handles], serving=False
            )
