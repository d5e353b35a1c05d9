"""Versions of an index on the embedded engine: a shard per version, the
published one named by the index's manifest.

A staging version starts as a copy of the published shard (its files, taken
once it is flushed and no longer written) and receives the version's changes;
publishing optimizes and flushes it, then replaces the manifest in one atomic
rename: readers go from the old shard to the new in one step and never see a
mix or a gap. A version published after another was (two stagings of one
index at once) is first rebased: the newer published shard is copied again and
the version's own documents carried over, so the last publish of a document
wins and nothing the other version published is lost. A superseded shard is
closed and deleted once its last reader is done; unpublished leftovers of a
crash are deleted by the next `begin_version`.

The manifest also holds each tenant's statistics as of the published version
(documents, chunks, tokens and the range of average lengths its chunks were
staged with), which the lexical leg and the counts read without a scan."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import Executor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import qdrant_edge as q

from groundwire.stores.base import DocumentKey, IndexSpec, index_missing, publication_number
from groundwire.stores.qdrant.engine import (
    QdrantSettings,
    call,
    delete_where,
    scroll_all,
    scroll_pages,
    upsert,
    write_atomically,
)
from groundwire.stores.qdrant.filters import tenant_chunks
from groundwire.stores.qdrant.layout import (
    DOCUMENT,
    edge_config,
    match,
    match_any,
    payload_indexes,
)

_MANIFEST = "manifest.json"
_T = TypeVar("_T")
_PAGE = 1_000


@dataclass(slots=True)
class TenantStats:
    """A tenant's published documents, chunks and tokens, and the lowest and
    highest average chunk length its chunks' lexical vectors were staged with."""

    documents: int = 0
    chunks: int = 0
    tokens: int = 0
    a0_lo: float = 0.0
    a0_hi: float = 0.0
    # Characters of chunk text (domain.quotas); -1: not recorded (a manifest written
    # before they were), counted when read.
    characters: int = -1

    def widened(self, lo: float, hi: float) -> tuple[float, float]:
        if self.a0_lo == 0.0:
            return lo, hi
        return min(self.a0_lo, lo), max(self.a0_hi, hi)


@dataclass(slots=True)
class Shard:
    """An open version shard and the tenant statistics published with it."""

    version: int
    path: Path
    # An embedded `EdgeShard`, or a server collection (remote.RemoteShard, a
    # collection's name as `path`): engine.py's interface.
    edge: Any
    tenants: dict[str, TenantStats] = field(default_factory=dict)
    users: int = 0
    retired: bool = False


@dataclass(slots=True)
class Staging:
    """A version being staged: its shard (a copy of `base`, made on first write),
    the documents it touched in order, and each tenant's staged chunks, tokens
    and the average lengths their vectors were weighted with."""

    version: int
    spec: IndexSpec
    shard: Shard | None = None
    base: int = 0
    touched: dict[DocumentKey, None] = field(default_factory=dict)
    staged: dict[str, list[float]] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def note(self, tenant: str, chunks: int, tokens: int, a0: float) -> None:
        s = self.staged.setdefault(tenant, [0.0, 0.0, a0, a0])
        s[0] += chunks
        s[1] += tokens
        s[2] = min(s[2], a0)
        s[3] = max(s[3], a0)


@dataclass(slots=True)
class IndexFiles:
    """One groundwire index on disk: its directory, manifest and open shards."""

    name: str
    root: Path
    manifest: dict[str, Any]
    published: Shard | None = None
    stagings: dict[int, Staging] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def _stats(raw: dict[str, list[float]]) -> dict[str, TenantStats]:
    return {
        t: TenantStats(
            int(v[0]),
            int(v[1]),
            int(v[2]),
            float(v[3]),
            float(v[4]),
            int(v[5]) if len(v) > 5 else -1,
        )
        for t, v in raw.items()
    }


def _raw(stats: dict[str, TenantStats]) -> dict[str, list[float]]:
    return {
        t: [s.documents, s.chunks, s.tokens, s.a0_lo, s.a0_hi, s.characters]
        for t, s in stats.items()
    }


def chunk_characters(edge: q.EdgeShard, tenant: str, documents: list[str] | None = None) -> int:
    """The characters of chunk text of `tenant`'s chunks, or of those of `documents`
    (a scroll of their offsets, page by page, in a worker thread)."""
    must = tenant_chunks(tenant)
    if documents is not None:
        if not documents:
            return 0
        must = [*must, match_any("document_id", documents)]
    offsets = q.PayloadSelector.Include(["start", "end"])
    return sum(
        int(payload["end"]) - int(payload["start"])
        for page in scroll_pages(edge, q.Filter(must=must), offsets)
        for payload in (r.payload or {} for r in page)
    )


class Versions:
    """The indexes under one path (see module docstring)."""

    def __init__(self, settings: QdrantSettings) -> None:
        self._settings = settings
        self._label = settings.label
        self._indexes: dict[str, IndexFiles] = {}
        self._open_lock = asyncio.Lock()
        # Where engine calls run (None: the default thread pool).
        self.executor: Executor | None = None

    def _call(self, operation: str, fn: Callable[[], _T]) -> Awaitable[_T]:
        return call(self._label, operation, fn, self.executor)

    def _dir(self, name: str) -> Path:
        import hashlib

        return self._settings.path / hashlib.sha256(name.encode()).hexdigest()[:32]

    # -- the manifest ---------------------------------------------------------------

    async def open(self, name: str, spec: IndexSpec | None) -> IndexFiles:
        """The index's files, opened on first use; created when `spec` is given."""
        found = self._indexes.get(name)
        if found is not None:
            return found
        async with self._open_lock:
            found = self._indexes.get(name)
            if found is None:
                found = self._indexes[name] = await self._load(name, spec)
            return found

    async def _load(self, name: str, spec: IndexSpec | None) -> IndexFiles:
        """The index's manifest and published shard read (or the index created)."""
        root = self._dir(name)
        path = root / _MANIFEST
        if path.exists():
            manifest = json.loads(path.read_text())
        elif spec is None:
            raise index_missing(len(name))
        else:
            root.mkdir(parents=True, exist_ok=True)
            manifest = {
                "name": name,
                "published_version": 0,
                "next_version": 1,
                "shard": 0,
                "tenants": {},
                **descriptors(spec),
            }
            await asyncio.to_thread(write_atomically, path, json.dumps(manifest).encode())
        files = IndexFiles(name, root, manifest)
        shard_version = int(manifest.get("shard", 0))
        if shard_version:
            edge = await self._call(
                "load", lambda: q.EdgeShard.load(str(root / f"v{shard_version}"))
            )
            files.published = Shard(
                shard_version, root / f"v{shard_version}", edge, _stats(manifest["tenants"])
            )
        return files

    async def _write(self, files: IndexFiles, manifest: dict[str, Any]) -> None:
        data = json.dumps(manifest).encode()
        await asyncio.to_thread(write_atomically, files.root / _MANIFEST, data)
        files.manifest = manifest

    # -- staging --------------------------------------------------------------------

    async def begin(self, files: IndexFiles, spec: IndexSpec) -> int:
        async with files.lock:
            version = int(files.manifest["next_version"])
            await self._write(files, files.manifest | {"next_version": version + 1})
            await self._sweep(files)
            files.stagings[version] = Staging(version, spec)
            return version

    async def _sweep(self, files: IndexFiles) -> None:
        """Delete shard directories of versions neither published nor staging (a
        crash's leftovers)."""
        keep = {f"v{v}" for v in files.stagings}
        if files.published is not None:
            keep.add(files.published.path.name)
        stale = [
            p
            for p in files.root.iterdir()
            if p.is_dir() and p.name.startswith("v") and p.name not in keep
        ]
        for p in stale:
            await asyncio.to_thread(shutil.rmtree, p, True)

    def staging(self, files: IndexFiles, version: int) -> Staging:
        st = files.stagings.get(version)
        if st is None:
            raise index_missing(len(files.name))
        return st

    async def writable(self, files: IndexFiles, st: Staging) -> Shard:
        """The staging shard, made on first use: a copy of the published shard when
        it holds the same vectors, else a new empty one (a rebuild)."""
        if st.shard is not None:
            return st.shard
        published = files.published
        if published is not None and _compatible(files.manifest, st.spec):
            st.shard = await self._copy(files, published, st.version)
            st.base = published.version
        else:
            st.shard = await self._create(files, st.spec, st.version)
            st.base = -1 if published is not None else 0
        return st.shard

    async def _copy(self, files: IndexFiles, source: Shard, version: int) -> Shard:
        target = files.root / f"v{version}"
        await asyncio.to_thread(shutil.rmtree, target, True)
        source.users += 1
        try:
            await self._call("copy", lambda: shutil.copytree(source.path, target))
        finally:
            await self.release(source)
        edge = await self._call("load", lambda: q.EdgeShard.load(str(target)))
        return Shard(version, target, edge)

    async def _create(self, files: IndexFiles, spec: IndexSpec, version: int) -> Shard:
        target = files.root / f"v{version}"
        await asyncio.to_thread(shutil.rmtree, target, True)
        config = edge_config(spec, self._settings)

        def create() -> q.EdgeShard:
            edge = q.EdgeShard.create(str(target), config)
            for name, schema in payload_indexes():
                edge.update(q.UpdateOperation.create_field_index(name, schema))
            return edge

        return Shard(version, target, await self._call("create", create))

    # -- publishing -----------------------------------------------------------------

    async def publish(self, files: IndexFiles, version: int, spec: IndexSpec) -> None:
        async with files.lock:
            st = self.staging(files, version)
            async with st.lock:
                shard = await self._current(files, st)
                await self._call("optimize", lambda: _settle(shard.edge))
                stats = dict(files.published.tenants) if files.published is not None else {}
                if st.base == -1:
                    stats = {}
                tenants = {k.tenant for k in st.touched} | set(st.staged)
                before = files.published if st.base != -1 else None
                for tenant in tenants:
                    stats[tenant] = await self._tenant_stats(
                        shard, tenant, stats.get(tenant), st, before
                    )
                stats = {t: s for t, s in stats.items() if s.documents or s.chunks}
                shard.tenants = stats
                number, next_version = publication_number(
                    int(files.manifest["published_version"]),
                    version,
                    int(files.manifest["next_version"]),
                )
                manifest = files.manifest | descriptors(spec)
                manifest |= {
                    "published_version": number,
                    "next_version": next_version,
                    "shard": shard.version,
                    "tenants": _raw(stats),
                    "document_count": sum(s.documents for s in stats.values()),
                    "chunk_count": sum(s.chunks for s in stats.values()),
                }
                await self._commit(files, shard, manifest)
                old, files.published = files.published, shard
                del files.stagings[version]
                if old is not None and old is not shard:
                    old.retired = True
                    await self.release(old, held=False)

    async def _current(self, files: IndexFiles, st: Staging) -> Shard:
        """The staging shard on top of the currently published one: rebased when
        another version was published since it was copied."""
        published = files.published
        if st.shard is None:
            if published is not None and not st.touched and _compatible(files.manifest, st.spec):
                # Nothing staged: the version publishes the current shard as it is.
                st.shard, st.base = published, published.version
                return published
            return await self.writable(files, st)
        if st.base == -1 or published is None or published.version == st.base:
            return st.shard
        stale = st.shard
        fresh = await self._copy(files, published, st.version + 1_000_000_000)
        for key in st.touched:
            await self._carry(stale, fresh, key)
        await self._drop(stale)
        st.shard = await self._rename(files, fresh, st.version)
        st.base = published.version
        return st.shard

    async def _rename(self, files: IndexFiles, fresh: Shard, version: int) -> Shard:
        """A rebased copy made the staging shard of `version`."""
        target = files.root / f"v{version}"
        await self._call("close", fresh.edge.close)
        await asyncio.to_thread(shutil.move, str(fresh.path), str(target))
        edge = await self._call("load", lambda: q.EdgeShard.load(str(target)))
        return Shard(version, target, edge)

    async def _commit(self, files: IndexFiles, shard: Shard, manifest: dict[str, Any]) -> None:
        """Publish: readers switch to `shard` in one step (the manifest's rename)."""
        await self._write(files, manifest)

    async def _carry(self, source: Shard, target: Shard, key: DocumentKey) -> None:
        """Replace `key`'s points in `target` with those `source` holds (none when
        the version deleted it)."""
        by_doc = q.Filter(must=[match("tenant", key.tenant), match("document_id", key.document_id)])

        def carry() -> None:
            delete_where(target.edge, by_doc)
            records = scroll_all(source.edge, by_doc, True, with_vector=True)
            for start in range(0, len(records), _PAGE):
                points = [
                    q.Point(r.id, r.vector or {}, r.payload) for r in records[start : start + _PAGE]
                ]
                upsert(target.edge, points)

        await self._call("rebase", carry)

    async def _tenant_stats(
        self,
        shard: Shard,
        tenant: str,
        before: TenantStats | None,
        st: Staging,
        previous: Shard | None,
    ) -> TenantStats:
        """A touched tenant's statistics, counted on the new shard. Its characters of
        chunk text move by what its touched documents held in `previous` (the shard
        published before) and hold now, so a publish reads the chunks it changed,
        not the tenant's; counted whole when nothing is known before."""
        touched = [k.document_id for k in st.touched if k.tenant == tenant]
        known_before = before is not None and before.characters >= 0
        incremental = known_before and previous is not None and previous is not shard

        def count_characters() -> int:
            if not incremental:
                return chunk_characters(shard.edge, tenant)
            assert before is not None and previous is not None
            gone = chunk_characters(previous.edge, tenant, touched)
            return before.characters - gone + chunk_characters(shard.edge, tenant, touched)

        def count() -> tuple[int, int, int, int]:
            docs = shard.edge.count(
                q.CountRequest(
                    exact=True,
                    filter=q.Filter(must=[match("tenant", tenant), match("kind", DOCUMENT)]),
                )
            )
            corpus = q.Filter(must=tenant_chunks(tenant))
            chunks = shard.edge.count(q.CountRequest(exact=True, filter=corpus))
            tokens = 0
            if chunks:
                facet = shard.edge.facet(
                    q.FacetRequest("dl", limit=1_000_000, exact=True, filter=corpus)
                )
                tokens = sum(int(_facet_value(h)) * int(h.count) for h in facet.hits)
            return docs, chunks, tokens, count_characters() if chunks else 0

        docs, chunks, tokens, characters = await self._call("stats", count)
        staged = st.staged.get(tenant)
        base = before or TenantStats()
        lo, hi = (base.a0_lo, base.a0_hi)
        if staged is not None:
            lo, hi = base.widened(staged[2], staged[3])
        return TenantStats(docs, chunks, tokens, lo, hi, characters)

    async def discard(self, files: IndexFiles, version: int) -> None:
        async with files.lock:
            st = files.stagings.pop(version, None)
            if st is not None and st.shard is not None and st.shard is not files.published:
                await self._drop(st.shard)

    async def _drop(self, shard: Shard) -> None:
        await self._call("close", shard.edge.close)
        await asyncio.to_thread(shutil.rmtree, shard.path, True)

    # -- reading --------------------------------------------------------------------

    @asynccontextmanager
    async def reading(self, files: IndexFiles) -> AsyncIterator[Shard | None]:
        """The published shard, kept open until the caller is done with it."""
        shard = files.published
        if shard is None:
            yield None
            return
        shard.users += 1
        try:
            yield shard
        finally:
            await self.release(shard)

    async def release(self, shard: Shard, *, held: bool = True) -> None:
        if held:
            shard.users -= 1
        if shard.retired and shard.users == 0:
            shard.retired = False  # dropped once
            await self._drop(shard)

    def indexes(self) -> Iterator[IndexFiles]:
        return iter(list(self._indexes.values()))

    async def close(self) -> None:
        for files in self.indexes():
            shards = [st.shard for st in files.stagings.values() if st.shard is not None]
            if files.published is not None:
                shards.append(files.published)
            for shard in dict.fromkeys(id(s) for s in shards):
                s = next(x for x in shards if id(x) == shard)
                await self._call("close", s.edge.close)
        self._indexes.clear()


def _settle(edge: q.EdgeShard) -> None:
    """Build the version's indexes (HNSW, payload) and make it durable."""
    edge.optimize()
    edge.flush()


def _facet_value(hit: Any) -> int:
    value = hit.value
    return int(value if isinstance(value, int) else str(value).strip("Int()"))


def descriptors(spec: IndexSpec) -> dict[str, Any]:
    return {
        "embedding": spec.embedding,
        "dimensions": spec.dimensions,
        "chunking": spec.chunking,
        "metric": spec.metric.value,
    }


def _compatible(manifest: dict[str, Any], spec: IndexSpec) -> bool:
    """Whether a staging version may start from the published shard: the same
    vectors (model, dimension, metric); a change rebuilds from an empty shard."""
    return (
        manifest.get("embedding") == spec.embedding
        and manifest.get("dimensions") == spec.dimensions
        and manifest.get("metric", spec.metric.value) == spec.metric.value
    )
