"""The OpenSearch store's connection: settings, the official async client, and
one place where the engine's failures become groundwire's error reasons.

Error messages carry the HTTP status and the engine's error type only: an
engine's error body can quote the query or a document, which never reaches a
groundwire error or log (the engine's own slow log is the operator's)."""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import orjson
from opensearchpy import AsyncOpenSearch
from opensearchpy import exceptions as os_errors
from opensearchpy.exceptions import SerializationError
from opensearchpy.serializer import JSONSerializer

from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.instruments import STORE_ENGINE_ERRORS, STORE_ENGINE_LATENCY
from groundwire.stores.base import store_unavailable

log = logging.getLogger("groundwire.stores.opensearch")

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class OpenSearchSettings:
    """How to reach a cluster and how indexes are laid out on it (see the
    `[stores.NAME] kind = "opensearch"` keys in the README)."""

    hosts: tuple[str, ...]
    username: str | None = None
    password: str | None = None
    api_key: str | None = None
    ca_file: Path | None = None
    verify_certs: bool = True
    request_timeout_s: float = 30.0
    # Long operations (a publish's copy of unchanged documents, waiting for
    # replicas) poll the engine's task API within this bound.
    publish_timeout_s: float = 3_600.0
    shards: int = 1
    replicas: int = 1
    index_prefix: str = "groundwire-"
    hnsw_m: int = 16
    hnsw_ef_construction: int = 100
    ef_search: int = 100
    # A tenant of at most this many chunks is searched exactly (vectors.py; 0: never).
    exact_search_chunks: int = 10_000
    bulk_chunks: int = 500
    bulk_bytes: int = 8 * 1024 * 1024
    bulk_max_retries: int = 8
    bulk_in_flight: int = 2
    # A tenant whose version holds at most this many chunks shares its index's pool
    # (pool.py; 0: every tenant has a physical index of its own).
    shared_tenant_chunks: int = 0
    # A first build is force-merged to at most this many segments (0: never).
    first_build_max_segments: int = 0
    superseded_grace_s: float = 30.0
    label: str = "default"


class FastJSON(JSONSerializer):
    """opensearch-py's JSON serializer on orjson. A bulk body is mostly vectors (384
    floats a chunk), which the standard library's encoder writes several times more
    slowly: filling SciFact's 13,747 chunks spent 3.3 of its 22.5 s in json.dumps
    (docs/explanation/benchmarks.md). The same values as the standard serializer's
    (UTF-8, no spaces; an exponent may be spelled 1e-8 for 1e-08); what orjson cannot
    write natively goes through the standard serializer's `default` (numpy values,
    decimals), so a float32 array is written as its float64 values, as before."""

    def dumps(self, data: Any) -> Any:
        if isinstance(data, (str, bytes)):
            return data
        try:
            return orjson.dumps(data, default=self.default, option=_ORJSON_OPTIONS).decode()
        except (orjson.JSONEncodeError, TypeError, ValueError) as e:
            raise SerializationError(data, e) from None

    def loads(self, s: str) -> Any:
        try:
            return orjson.loads(s)
        except orjson.JSONDecodeError as e:
            raise SerializationError(s, e) from None


_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_NON_STR_KEYS


def open_client(settings: OpenSearchSettings) -> AsyncOpenSearch:
    kwargs: dict[str, Any] = {
        "hosts": list(settings.hosts),
        "serializer": FastJSON(),
        "timeout": settings.request_timeout_s,
        # A dropped keep-alive connection is retried on another (every call is
        # idempotent: searches, bulk items by stable ids, alias swaps by name);
        # a timeout is not retried (the caller's deadline governs), nor is a 429
        # (bulk backs off itself).
        "max_retries": 2,
        "retry_on_timeout": False,
        "retry_on_status": (502, 503, 504),
        "http_compress": False,
    }
    if settings.username is not None:
        kwargs["http_auth"] = (settings.username, settings.password or "")
    if settings.api_key is not None:
        kwargs["headers"] = {"Authorization": f"ApiKey {settings.api_key}"}
    if any(h.startswith("https://") for h in settings.hosts):
        context = ssl.create_default_context(
            cafile=str(settings.ca_file) if settings.ca_file is not None else None
        )
        if not settings.verify_certs:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        kwargs["ssl_context"] = context
    return AsyncOpenSearch(**kwargs)


def engine_error(exc: BaseException) -> GroundwireError:
    """The groundwire error for an engine failure (content-free)."""
    if isinstance(exc, GroundwireError):
        return exc
    if isinstance(exc, os_errors.ConnectionTimeout | asyncio.TimeoutError):
        return store_unavailable("search engine did not answer in time")
    if isinstance(exc, os_errors.ConnectionError):
        return store_unavailable("search engine unreachable")
    if isinstance(exc, os_errors.TransportError):
        status = exc.status_code if isinstance(exc.status_code, int) else 0
        kind = _error_type(exc)
        if status == 429:
            return store_unavailable("search engine is overloaded (429); retry")
        if status == 400 and _at_shard_bound(exc):
            return GroundwireError(
                ErrorKind.RESOURCE_EXHAUSTED,
                "STORE_CAPACITY_EXHAUSTED",
                "search engine has no room for another index: the cluster is at its shard "
                "bound (cluster.max_shards_per_node); add nodes or raise the bound",
            )
        if status in (400, 413) and kind.split("/")[0] in _REJECTED:
            return GroundwireError(
                ErrorKind.INVALID_ARGUMENT,
                "STORE_DATA_REJECTED",
                f"search engine rejected the data ({kind})",
            )
        return store_unavailable(f"search engine failed ({status} {kind})")
    return store_unavailable(f"search engine call failed ({type(exc).__name__})")


_REJECTED = frozenset({"mapper_parsing_exception", "illegal_argument_exception"})


_SHARD_BOUND = re.compile(r"maximum (?:[A-Z_]+ )?shards open")


def _at_shard_bound(exc: Any) -> bool:
    """A validation failure for the cluster's shard bound (its reason is read here,
    never passed on: it names no request data, but reasons in general may)."""
    info = getattr(exc, "info", None)
    error = info.get("error") if isinstance(info, dict) else None
    if not isinstance(error, dict) or error.get("type") != "validation_exception":
        return False
    # 2.x: "... maximum shards open"; 3.x names the shard kind ("maximum
    # LOCAL_ONLY shards open").
    return _SHARD_BOUND.search(str(error.get("reason", ""))) is not None


def _error_type(exc: Any) -> str:
    """The engine's error type and its root cause's (identifiers, never the
    reason text, which may quote the request)."""
    info = getattr(exc, "info", None)
    if isinstance(info, dict):
        error = info.get("error")
        if isinstance(error, dict):
            kinds = [error.get("type")]
            causes = error.get("root_cause")
            if isinstance(causes, list) and causes and isinstance(causes[0], dict):
                kinds.append(causes[0].get("type"))
            safe = [k for k in kinds if isinstance(k, str) and k.replace("_", "").isalnum()]
            if safe:
                return "/".join(dict.fromkeys(safe))
    return "error"


class _Raise:
    pass


RAISE = _Raise()


async def call(
    store: str,
    operation: str,
    fn: Callable[[], Awaitable[_T]],
    *,
    missing: _T | _Raise = RAISE,
) -> _T:
    """Run one engine call: its latency recorded by operation, its failure mapped;
    a 404 (an index or document that does not exist) returns `missing` when given."""
    started = time.perf_counter()
    outcome = "ok"
    try:
        return await fn()
    except os_errors.NotFoundError:
        if isinstance(missing, _Raise):
            outcome = "error"
            lost = store_unavailable(f"search engine lost an index or document ({operation})")
            lost.metadata["store"] = store
            raise lost from None
        return missing
    except Exception as exc:
        outcome = "error"
        err = engine_error(exc)
        # The store's configured name, as PostgreSQL stores give it (never a URL).
        err.metadata.setdefault("store", store)
        STORE_ENGINE_ERRORS.add(1, {"store": store, "operation": operation, "reason": err.reason})
        raise err from None
    finally:
        STORE_ENGINE_LATENCY.record(
            time.perf_counter() - started,
            {"store": store, "operation": operation, "outcome": outcome},
        )
