"""A version collection on a Qdrant server, with the read and write calls the
store makes on an embedded shard (`EdgeShard`'s scroll, query, count, facet,
retrieve; upsert and delete by filter as engine.py's `upsert` and
`delete_where`), so lexical.py, vectors.py and the store's document reads run
unchanged on either engine.

The store runs those calls in worker threads (engine.py's `call`); here each one
sends its request through the server's official async client on the event loop
that owns it and waits for the answer, its requests translated from the edge
models (translate.py)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import qdrant_edge as q
from qdrant_client import AsyncQdrantClient
from qdrant_client import models as m

from groundwire.stores.qdrant import translate

_T = TypeVar("_T")

# The client's HTTP library logs at DEBUG each response's headers (a server's,
# a proxy's) and at INFO each request's URL: never in groundwire's logs, whatever
# level the operator sets for the root logger (as app/logs.py does at start).
for _name in ("httpx", "httpcore", "qdrant_client"):
    logging.getLogger(_name).setLevel(logging.WARNING)


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """Where the Qdrant server is and how to reach it (the API key already
    resolved from its reference; never logged)."""

    url: str
    api_key: str | None = None
    ca_file: Path | None = None
    timeout_s: float = 30.0
    collection_prefix: str = "groundwire-"
    # How often a replica re-reads an index's alias (another replica's publish),
    # and how long a superseded collection outlives its last local reader.
    refresh_s: float = 1.0
    superseded_grace_s: float = 30.0
    # Calls waiting on the server at once (each holds a worker thread meanwhile).
    threads: int = 32


def connect(server: ServerSettings) -> AsyncQdrantClient:
    """The server's async client. `url` ":memory:" or "local:PATH" gives the
    client library's local mode (its in-process implementation of the server API,
    for tests)."""
    if server.url == ":memory:":
        return AsyncQdrantClient(location=":memory:")
    if server.url.startswith("local:"):
        return AsyncQdrantClient(path=server.url.removeprefix("local:"))
    kwargs: dict[str, Any] = {}
    if server.ca_file is not None:
        kwargs["verify"] = str(server.ca_file)
    return AsyncQdrantClient(
        url=server.url,
        port=None,
        api_key=server.api_key,
        timeout=max(1, round(server.timeout_s)),
        check_compatibility=False,
        **kwargs,
    )


@dataclass(frozen=True, slots=True)
class Record:
    """A scrolled point, as the embedded shard's records read."""

    id: uuid.UUID | int
    payload: dict[str, Any] | None
    vector: dict[str, Any] | None


def _edge_vectors(vectors: Any) -> dict[str, Any] | None:
    if not isinstance(vectors, dict):
        return None
    return {
        name: q.SparseVector(list(v.indices), list(v.values)) if hasattr(v, "indices") else v
        for name, v in vectors.items()
    }


class RemoteShard:
    """One collection of the server, answering the embedded shard's calls from a
    worker thread (see module docstring)."""

    def __init__(
        self, client: AsyncQdrantClient, collection: str, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.client = client
        self.collection = collection
        self._loop = loop

    def _wait(self, coro: Awaitable[_T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()  # type: ignore[arg-type]

    def scroll(
        self,
        *,
        offset: Any,
        limit: int,
        filter: q.Filter | None,
        with_payload: Any,
        with_vector: bool = False,
    ) -> tuple[list[Any], Any]:
        records, next_offset = self._wait(
            self.client.scroll(
                self.collection,
                scroll_filter=translate.filter_(filter),
                limit=limit,
                offset=None if offset is None else _point_id(offset),
                with_payload=translate.selector(with_payload),
                with_vectors=with_vector,
            )
        )
        # The records and the next page's first id in the edge models' form (a
        # UUID or an integer; sparse vectors as q.SparseVector), so a copied
        # record is a point again (versions.py's rebase).
        rows = [Record(_edge_id(r.id), r.payload, _edge_vectors(r.vector)) for r in records]
        return rows, None if next_offset is None else _edge_id(next_offset)

    def query(
        self,
        *,
        limit: int,
        query: Any,
        filter: q.Filter | None,
        with_payload: Any,
        params: q.SearchParams | None = None,
        score_threshold: float | None = None,
    ) -> list[Any]:
        assert isinstance(query, q.Query.Nearest)  # type: ignore[arg-type]  # a class (stubs: a function)
        result = self._wait(
            self.client.query_points(
                self.collection,
                query=translate.vector(query.query),
                using=query.using,
                query_filter=translate.filter_(filter),
                search_params=translate.search_params(params),
                limit=limit,
                score_threshold=score_threshold,
                with_payload=translate.selector(with_payload),
            )
        )
        return list(result.points)

    def count(self, request: q.CountRequest) -> int:
        result = self._wait(
            self.client.count(
                self.collection,
                count_filter=translate.filter_(request.filter),
                exact=request.exact,
            )
        )
        return int(result.count)

    def facet(self, request: q.FacetRequest) -> m.FacetResponse:
        return self._wait(
            self.client.facet(
                self.collection,
                key=request.key,
                facet_filter=translate.filter_(request.filter),
                limit=request.limit,
                exact=request.exact,
            )
        )

    def retrieve(self, ids: Sequence[Any], selector: Any, with_vector: bool) -> list[Any]:
        return list(
            self._wait(
                self.client.retrieve(
                    self.collection,
                    [_point_id(i) for i in ids],
                    with_payload=translate.selector(selector),
                    with_vectors=with_vector,
                )
            )
        )

    def upsert(self, points: Sequence[q.Point]) -> None:
        self._wait(
            self.client.upsert(self.collection, [translate.point(p) for p in points], wait=True)
        )

    def delete_where(self, flt: q.Filter) -> None:
        selector = m.FilterSelector(filter=translate.filter_(flt))
        self._wait(self.client.delete(self.collection, selector, wait=True))

    def optimize(self) -> None:
        """The server builds a collection's indexes itself (its optimizers)."""

    def flush(self) -> None:
        """Every write above waited for the server's acknowledgement."""

    def close(self) -> None:
        """Nothing to release: the client belongs to the store."""


def _point_id(i: Any) -> str | int:
    return i if isinstance(i, int) else str(i)


def _edge_id(i: Any) -> uuid.UUID | int:
    return i if isinstance(i, int) else uuid.UUID(str(i))
