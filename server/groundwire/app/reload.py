"""Live reconfiguration: SIGHUP and AdminService.ReloadConfiguration.

Seed 003's UpdateOptions "applies the delegate to a cloned options snapshot and
swaps it into the pipeline when complete, so in-flight queries continue using the
previous snapshot". Here the whole configuration file is that delegate:

1. The file is read and validated completely (the same `load_config` as at
   start-up). Invalid: CONFIG_INVALID naming every offending key; nothing changed.
2. Keys only a restart can apply (RESTART_ONLY) are compared with the running
   configuration. Changed: CONFIG_RESTART_REQUIRED naming them; nothing changed
   (never half-applied). TLS certificate files are re-read and checked (app/tls.py).
3. Everything the request path reads is built anew by the start-up factories
   (`build_components`), reusing the open store, the embedders and rerankers
   whose configuration and secrets did not change (a local model is not loaded
   again), and the index handles that did not change. Building happens off the
   serving path: file reads, secrets, model loading (ONNX sessions, tokenizers,
   load probes) and each index's handle run in worker threads, so the event
   loop only takes short steps (store calls, the swap) and health checks and
   in-flight calls keep being answered (tests/integration/test_reload_serving.py,
   bench/bench_reload_stall.py). New top-level keys take part without code
   here: a section is "changed" when its value differs, and whatever the
   factories build from it is rebuilt. A build failure rolls the store's index
   specs back and changes nothing.
4. One new immutable `ServingSnapshot` (api/snapshot.py) is swapped in with one
   assignment; calls already running finish on theirs. New TLS handshakes use
   the re-read certificates. The retired snapshot's
   providers are closed once its last call ended.
5. An index whose ingestion inputs changed (chunking, embedding model, sources,
   ...) is scheduled as a start-up change is: ON_STARTUP,
   BACKGROUND_ON_STARTUP and WATCH indexes get an ingestion run (serving their published
   version meanwhile: a reload never takes an index offline), the others report
   `rebuild_pending` until someone starts one.

Reloads are serialized; each successful one increments the generation. Every
reload (applied, validated or refused) counts in `groundwire.config.reloads` by
outcome and logs one content-free line (keys, never values, paths or secrets).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import re
import time
from collections.abc import Awaitable, Iterable, Iterator
from pathlib import Path
from typing import Protocol

from opentelemetry import metrics
from pydantic import BaseModel

from groundwire.api.pagination import PageTokens
from groundwire.api.server import Health, index_health_name
from groundwire.api.services import public_servicers
from groundwire.api.snapshot import ServingSnapshot, SnapshotHolder
from groundwire.app.config import GroundwireConfig, SecretRef, load_config
from groundwire.app.config_base import ConfigError
from groundwire.app.factories import Components, auth_policy, build_components, build_embedder
from groundwire.app.logs import configure_logging
from groundwire.app.tls import RotatingTls, load_certificates
from groundwire.domain.errors import FieldViolation, GroundwireError
from groundwire.domain.indexes import IngestionStrategy, StoreKind
from groundwire.domain.operations import OperationTrigger
from groundwire.domain.reload import (
    ReloadReport,
    config_invalid,
    reload_unavailable,
    restart_required,
)
from groundwire.indexes.catalog import IndexCatalog, IndexHandle
from groundwire.ingestion.manager import IngestionManager
from groundwire.providers.embeddings.base import EmbeddingProvider
from groundwire.providers.rerankers.base import Reranker
from groundwire.stores.placement import PlacedOperationLog

log = logging.getLogger("groundwire.app")

_meter = metrics.get_meter("groundwire")
RELOADS = _meter.create_counter(
    "groundwire.config.reloads",
    unit="{reload}",
    description="Configuration reloads by outcome (APPLIED, VALIDATED or the refusal reason)",
)
RELOAD_DURATION = _meter.create_histogram(
    "groundwire.config.reload.duration",
    unit="s",
    description="From the reload request (signal or RPC) to the new snapshot serving",
)

# Keys a running server cannot apply, with why; a reload that changes one is
# refused as a whole.
RESTART_ONLY: dict[str, str] = {
    "server.address": "the listening socket is bound once",
    # New certificate, key and CA files (or renewed ones at the same paths) are
    # live (app/tls.py); turning TLS or mutual TLS on or off rebinds the port.
    "server.tls": "TLS on or off is how the port was bound",
    "server.tls.client_ca_file": "mutual TLS on or off is how the port was bound",
    "server.reflection": "reflection is registered before the server starts",
    "auth.index_health": "the health service is set up at start-up",
    "server.max_message_bytes": "a channel option of the bound server",
    "server.max_concurrent_rpcs": "a limit of the bound server",
    # Page tokens already handed out must stay valid.
    "server.page_token_key": "page tokens already issued would stop verifying",
    # The open connection pool, and the data every index lives in.
    "store": "the open store holds every index",
    "stores": "the open stores hold their indexes",
    # The exporter owns its own listening port.
    "metrics": "the exporter's port is bound once",
    # The HTTP port (its address and CORS policy) is bound at start-up.
    "http": "the HTTP port is bound once",
    # The parser worker processes are started with their limits (rlimits are set
    # in each worker once).
    "ingestion": "the parser workers are started with their limits",
}

# Index handle fields that change how an index is served, not what ingestion
# writes: changing only these needs no re-ingestion. Every other field (and every
# field added later) counts as an ingestion input. The embedder object is
# excluded because what it makes is in `spec` (its descriptor).
_SERVING_ONLY_FIELDS = frozenset(
    {
        "store",
        "embedder",
        "description",
        "strategy",
        "schedule",
        "ready",
        "embed_batch_size",
        "watch_debounce_ms",
        "watch_poll_seconds",
        # Quotas bound the writes to come; what is stored stays valid.
        "storage_quota",
    }
)
_STARTUP_STRATEGIES = frozenset(
    {
        IngestionStrategy.ON_STARTUP,
        IngestionStrategy.BACKGROUND_ON_STARTUP,
        IngestionStrategy.WATCH,
    }
)
_VIOLATION = re.compile(r"^\s{2}(\S[^:]*): (.*)$")
# A single-line error of a factory, "section.key: what is wrong".
_KEYED = re.compile(r"^([A-Za-z_][\w-]*(?:\.[\w-]+)+): (.*)$")
_PATHLIKE = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]*:)?//?[^\s'\"]+(?:/[^\s'\"]*)*")
_MAX_DESCRIPTION = 240


class LiveApp(Protocol):
    """What the reloader swaps components into (app/lifecycle.py's RunningApp)."""

    components: Components


def changed_sections(old: GroundwireConfig, new: GroundwireConfig) -> tuple[str, ...]:
    """Top-level sections whose value differs (every section, present or future)."""
    return tuple(
        sorted(name for name in type(new).model_fields if getattr(old, name) != getattr(new, name))
    )


def restart_keys(
    old: GroundwireConfig, new: GroundwireConfig, *, address_overridden: bool = False
) -> list[str]:
    """RESTART_ONLY keys whose value differs (the address not when the command line
    overrides it: the file's value is not the one in use)."""
    out = []
    for key in RESTART_ONLY:
        if key == "server.address" and address_overridden:
            continue
        if _restart_value(old, key) != _restart_value(new, key):
            out.append(key)
    return out


def _restart_value(cfg: GroundwireConfig, key: str) -> object:
    tls = cfg.server.tls
    if key == "server.tls":
        return tls is not None
    if key == "server.tls.client_ca_file":
        return tls is not None and tls.client_ca_file is not None
    return _lookup(cfg, key)


def _lookup(cfg: BaseModel, dotted: str) -> object:
    value: object = cfg
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def serving_snapshot(
    generation: int, components: Components, manager: IngestionManager, page_tokens: PageTokens
) -> ServingSnapshot:
    """What the request path reads of one configuration generation: its keys,
    limits and the servicers bound to its engines (start-up's and each reload's)."""
    return ServingSnapshot(
        generation=generation,
        auth=auth_policy(components.config),
        admission=components.admission,
        servicers=public_servicers(
            retriever=components.retriever,
            catalog=components.catalog,
            manager=manager,
            agents=components.agents,
            runtime=components.runtime,
            reranking=components.reranking,
            page_tokens=page_tokens,
            citation_snippet_chars=components.config.agent_limits.citation_snippet_chars,
            max_upload_bytes=components.config.server.max_upload_bytes,
        ),
    )


def reingest_needed(old: IndexHandle | None, new: IndexHandle) -> bool:
    """Whether ingestion would write something else for `new` than it did for
    `old` (a new index always needs its first ingestion)."""
    if old is None:
        return True
    if old is new:
        return False
    return any(
        getattr(old, f.name) != getattr(new, f.name)
        for f in dataclasses.fields(new)
        if f.name not in _SERVING_ONLY_FIELDS
    )


def _secrets(model: object) -> Iterator[SecretRef]:
    if isinstance(model, SecretRef):
        yield model
    elif isinstance(model, BaseModel):
        for name in type(model).model_fields:
            yield from _secrets(getattr(model, name))
    elif isinstance(model, list | tuple):
        for item in model:
            yield from _secrets(item)
    elif isinstance(model, dict):
        for item in model.values():
            yield from _secrets(item)


def secrets_digest(model: BaseModel) -> str:
    """A digest of the resolved values of every secret a section references, so a
    rotated secret file or variable rebuilds the provider that holds it."""
    h = hashlib.sha256()
    for ref in _secrets(model):
        h.update((ref.resolve() or "").encode())
        h.update(b"\x00")
    return h.hexdigest()


def _digests(cfg: GroundwireConfig) -> dict[str, str]:
    """`secrets_digest` of every embedder and reranker, by "section.name"."""
    out = {f"embedders.{n}": secrets_digest(e) for n, e in cfg.embedders.items()}
    out.update({f"rerankers.{n}": secrets_digest(r) for n, r in cfg.rerankers.items()})
    return out


def violations_of(error: ConfigError, path: Path) -> list[FieldViolation]:
    """The offending keys of a ConfigError, with paths scrubbed from descriptions."""
    lines = str(error).splitlines()
    out = []
    for line in lines[1:]:
        m = _VIOLATION.match(line)
        if m:
            out.append(FieldViolation(m.group(1), _scrub(m.group(2), path)))
    if not out and lines and (m := _KEYED.match(lines[0])):
        out.append(FieldViolation(m.group(1), _scrub(m.group(2), path)))
    if not out:
        out.append(FieldViolation("<file>", _scrub(lines[0] if lines else "invalid", path)))
    return out


def _scrub(text: str, path: Path) -> str:
    for p in (str(path), str(path.parent)):
        text = text.replace(p, "<config>")
    text = _PATHLIKE.sub("<path>", text)
    return text[:_MAX_DESCRIPTION]


class Reloader:
    """Applies a new configuration file to a running app; see module docstring."""

    def __init__(
        self,
        *,
        path: Path | None,
        app: LiveApp,
        snapshots: SnapshotHolder,
        manager: IngestionManager,
        health: Health,
        page_tokens: PageTokens,
        address_overridden: bool,
        tls: RotatingTls | None = None,
    ) -> None:
        self._path = path
        self._app = app
        self._snapshots = snapshots
        self._manager = manager
        self._health = health
        self._page_tokens = page_tokens
        self._address_overridden = address_overridden
        self._tls = tls
        self._lock = asyncio.Lock()
        self._retiring: list[asyncio.Task[None]] = []
        self._retired: list[ServingSnapshot] = []
        self._digests = _digests(app.components.config)
        # Whether the process's logging follows `[logging]` (set by `groundwire serve`).
        self.manage_logging = False

    @property
    def generation(self) -> int:
        return self._snapshots.current.generation

    async def reload(self, validate_only: bool = False) -> ReloadReport:
        """Validate the file and, unless `validate_only`, swap it in; raises a
        GroundwireError (and changes nothing) when it cannot. A caller that goes
        away (cancelled, deadline passed) does not stop a reload half-way."""
        return await asyncio.shield(self._serialized(validate_only))

    async def _serialized(self, validate_only: bool) -> ReloadReport:
        started = time.perf_counter()
        async with self._lock:
            try:
                report = await self._reload(validate_only)
            except GroundwireError as err:
                RELOADS.add(1, {"outcome": err.reason})
                log.warning(
                    "configuration reload refused",
                    extra={
                        "reason": err.reason,
                        "keys": [v.field for v in err.violations],
                        "generation": self.generation,
                    },
                )
                raise
        seconds = time.perf_counter() - started
        outcome = "APPLIED" if report.applied else "VALIDATED"
        RELOADS.add(1, {"outcome": outcome})
        if report.applied:
            RELOAD_DURATION.record(seconds)
        log.info(
            "configuration reload",
            extra={
                "outcome": outcome,
                "generation": report.generation,
                "changed_sections": list(report.changed_sections),
                "reingest_indexes": list(report.reingest_indexes),
                "duration_ms": round(seconds * 1000, 3),
            },
        )
        return report

    async def reload_on_signal(self) -> None:
        """SIGHUP: reload, logging (never raising) a refusal or a failure."""
        try:
            await self.reload()
        except GroundwireError:
            return  # logged and counted by reload()
        except Exception as exc:
            log.error("configuration reload failed", extra={"exception_type": type(exc).__name__})

    async def _reload(self, validate_only: bool) -> ReloadReport:
        if self._path is None:
            raise reload_unavailable()
        try:
            cfg = await asyncio.to_thread(load_config, self._path)
        except ConfigError as exc:
            raise config_invalid(violations_of(exc, self._path)) from None
        old = self._app.components
        changed = changed_sections(old.config, cfg)
        restart = restart_keys(old.config, cfg, address_overridden=self._address_overridden)
        if restart:
            raise restart_required(restart)
        certificates = None
        if self._tls is not None and cfg.server.tls is not None:
            # Re-read on every reload: renewed files at the same paths rotate too.
            try:
                certificates = await asyncio.to_thread(load_certificates, cfg.server.tls)
            except ConfigError as exc:
                raise config_invalid(violations_of(exc, self._path)) from None
        if validate_only:
            return ReloadReport(self.generation, changed, (), applied=False)
        new, digests = await self._build(cfg, old)
        stuck = await _vectors_kept_in_memory(old, new)
        if stuck:
            await self._roll_back(old, ())
            await _close_unshared(new, old)
            raise restart_required(stuck)
        reingest = tuple(
            h.name
            for h in new.catalog.handles()
            if reingest_needed(_handle(old.catalog, h.name), h)
        )
        await self._swap(new, old)
        if self._tls is not None and certificates is not None:
            self._tls.stage(certificates)
        self._digests = digests
        await self._schedule(new.catalog, reingest)
        return ReloadReport(self.generation, changed, reingest, applied=True)

    async def _build(
        self, cfg: GroundwireConfig, old: Components
    ) -> tuple[Components, dict[str, str]]:
        """The new components, or an error with nothing changed."""
        # Secrets may be files: read off the event loop.
        digests = await asyncio.to_thread(_digests, cfg)
        embedders: dict[str, EmbeddingProvider] = {}
        built: list[EmbeddingProvider] = []
        try:
            for name, e in cfg.embedders.items():
                key = f"embedders.{name}"
                if (
                    name in old.embedders
                    and old.config.embedders.get(name) == e
                    and self._digests.get(key) == digests[key]
                ):
                    embedders[name] = old.embedders[name]
                else:
                    # A local model loads for a while: off the event loop serving calls.
                    embedders[name] = await asyncio.to_thread(build_embedder, e, name)
                    built.append(embedders[name])
            new = await build_components(
                cfg,
                stores=old.stores,
                reuse_embedders=embedders,
                reuse_rerankers=self._unchanged_rerankers(cfg, old, embedders, digests),
                previous_catalog=old.catalog,
            )
            auth_policy(cfg)  # raises on a key it cannot use, before anything is swapped
        except BaseException as exc:
            await self._roll_back(old, built)
            if isinstance(exc, ConfigError):
                assert self._path is not None
                raise config_invalid(violations_of(exc, self._path)) from None
            if isinstance(exc, GroundwireError | asyncio.CancelledError):
                raise
            if not isinstance(exc, Exception):
                raise
            log.warning(
                "configuration could not be built", extra={"exception_type": type(exc).__name__}
            )
            raise config_invalid(
                [FieldViolation("<root>", f"could not be built ({type(exc).__name__})")]
            ) from None
        # Process-wide state stays with the process.
        new.operation_log = old.operation_log
        if (cfg.limits, cfg.agent_limits.max_concurrent_executions) == (
            old.config.limits,
            old.config.agent_limits.max_concurrent_executions,
        ):
            # Unchanged limits keep their counters (in-flight calls, token buckets).
            new.admission = old.admission
        return new, digests

    def _unchanged_rerankers(
        self,
        cfg: GroundwireConfig,
        old: Components,
        embedders: dict[str, EmbeddingProvider],
        digests: dict[str, str],
    ) -> dict[str, Reranker]:
        """The running rerankers the new configuration keeps as they are: same
        configuration, same secrets and (for one built on an embedder) the same
        embedder object. A local cross-encoder is not loaded again by a reload
        that does not change it."""
        out: dict[str, Reranker] = {}
        for name, r in cfg.rerankers.items():
            key = f"rerankers.{name}"
            if (
                name not in old.reranking.names
                or old.config.rerankers.get(name) != r
                or self._digests.get(key) != digests[key]
            ):
                continue
            embedder = getattr(r, "embedder", None)
            if isinstance(embedder, str) and embedders.get(embedder) is not old.embedders.get(
                embedder
            ):
                continue
            out[name] = old.reranking.get(name)
        return out

    async def _roll_back(self, old: Components, built: Iterable[EmbeddingProvider]) -> None:
        """Undo what building touched: index specs in the store, new providers."""
        for handle in old.catalog.handles():
            try:
                await handle.store.ensure_index(handle.spec)
            except Exception as exc:
                log.error(
                    "could not restore an index spec after a failed reload",
                    extra={"index": handle.name, "exception_type": type(exc).__name__},
                )
        for embedder in built:
            await _close_quietly(embedder.aclose())

    async def _swap(self, new: Components, old: Components) -> None:
        snapshot = serving_snapshot(self.generation + 1, new, self._manager, self._page_tokens)
        # One assignment each, with no await between them: a call starting now
        # sees the new snapshot, and an ingestion it starts runs on the new catalog.
        retired = self._snapshots.swap(snapshot)
        self._app.components = new
        if isinstance(new.operation_log, PlacedOperationLog):
            # Operations of an index moved to another store are recorded there.
            new.operation_log.place({h.name: h.store_name for h in new.catalog.handles()})
        await self._manager.replace_catalog(new.catalog)
        added = [n for n in new.catalog.names() if n not in old.catalog.names()]
        removed = [n for n in old.catalog.names() if n not in new.catalog.names()]
        await self._health.set_serving(
            [index_health_name(n) for n in added if new.catalog.get(n).ready]
        )
        await self._health.set_serving([index_health_name(n) for n in removed], serving=False)
        if self.manage_logging and new.config.logging != old.config.logging:
            configure_logging(new.config.logging.level, new.config.logging.format)
        self._retired.append(retired)
        self._retiring.append(asyncio.create_task(self._retire(retired, old, new)))
        self._retiring = [t for t in self._retiring if not t.done()]

    async def _schedule(self, catalog: IndexCatalog, names: Iterable[str]) -> None:
        """Start-up strategies ingest a changed index now, as a start-up would."""
        for name in names:
            handle = catalog.get(name)
            if handle.strategy not in _STARTUP_STRATEGIES:
                continue
            try:
                await self._manager.start(name, OperationTrigger.RELOAD)
            except GroundwireError as err:
                log.warning(
                    "reload ingestion not started", extra={"index": name, "reason": err.reason}
                )

    async def _retire(self, snapshot: ServingSnapshot, old: Components, new: Components) -> None:
        """Close what only the retired generation used, once no call runs on it or
        on any older one (which may share it)."""
        for earlier in [s for s in self._retired if s.generation <= snapshot.generation]:
            await self._snapshots.drained(earlier)
        self._retired = [s for s in self._retired if s.generation > snapshot.generation]
        await _close_unshared(old, new)

    async def aclose(self) -> None:
        """Let a reload in progress end, then finish retiring old generations (the
        server has stopped: none has calls)."""
        async with self._lock:
            await asyncio.gather(*self._retiring, return_exceptions=True)


async def _vectors_kept_in_memory(old: Components, new: Components) -> list[str]:
    """The in-memory store keeps one vector matrix per index, so it cannot stage a
    rebuild with vectors of another dimension next to the published ones: such a
    change needs a restart there (which starts empty and ingests afresh)."""
    out = []
    for handle in new.catalog.handles():
        if handle.store.kind != StoreKind.MEMORY:
            continue
        before = _handle(old.catalog, handle.name)
        if before is None or before.spec.dimensions == handle.spec.dimensions:
            continue
        if (await handle.store.index_state(handle.name)).chunk_count:
            out.append(f"indexes.{handle.name}.embedder")
    return out


async def _close_unshared(gone: Components, kept: Components) -> None:
    """Close the providers of `gone` that `kept` does not use (never the store)."""
    keep = {id(e) for e in kept.embedders.values()}
    for embedder in gone.embedders.values():
        if id(embedder) not in keep:
            await _close_quietly(embedder.aclose())
    if gone.reranking is not kept.reranking:
        # Only the rerankers `kept` did not take over (a reload keeps unchanged ones).
        shared = {id(kept.reranking.get(n)) for n in kept.reranking.names}
        for name in sorted(gone.reranking.names):
            reranker = gone.reranking.get(name)
            if id(reranker) not in shared:
                await _close_quietly(reranker.aclose())
    models = {id(kept.agents.get(a).model) for a in kept.agents.ids()}
    for agent_id in gone.agents.ids():
        model = gone.agents.get(agent_id).model
        if id(model) not in models:
            await _close_quietly(model.aclose())


def _handle(catalog: IndexCatalog, name: str) -> IndexHandle | None:
    return catalog.get(name) if name in catalog.names() else None


async def _close_quietly(closing: Awaitable[None]) -> None:
    try:
        await closing
    except Exception as exc:
        log.warning(
            "closing a retired provider failed", extra={"exception_type": type(exc).__name__}
        )
