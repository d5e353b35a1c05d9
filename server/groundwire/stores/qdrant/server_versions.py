"""Versions of an index on a Qdrant server: a collection per version, the
published one named by the index's alias, switched in one call.

The staging, rebasing and statistics logic is the embedded mode's (versions.py);
this class replaces only what touches storage: a version is a collection
`{prefix}{index hash}_v{n}` (a copy of the published one, point by point, or a
new empty one for a rebuild), publishing writes the version record (the
tenants' statistics and the index's descriptors) as a vector-less point into the
version's own collection and then moves the alias `{prefix}{index hash}` to it in
one `update_collection_aliases` call, so a reader resolving the alias gets the
collection and its statistics together, never a mix. The index's next version
number lives in `{prefix}{index hash}_meta`; a replica claims a number by creating
its version's collection at `begin_version` (Qdrant has no conditional write, but
creating a collection that exists fails), and takes the next one when another
replica created it first. A superseded collection is deleted once its last reader
in this process is done; leftovers of a crash by the next `begin_version`."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import qdrant_edge as q
from qdrant_client import AsyncQdrantClient
from qdrant_client import models as m
from qdrant_client.http.exceptions import UnexpectedResponse

from groundwire.domain.errors import GroundwireError
from groundwire.stores.base import IndexSpec, index_missing, store_unavailable
from groundwire.stores.qdrant import translate
from groundwire.stores.qdrant.engine import (
    QdrantSettings,
    acall,
    engine_error,
    scroll_pages,
    upsert,
)
from groundwire.stores.qdrant.layout import DENSE, SPARSE, hnsw_params, payload_indexes
from groundwire.stores.qdrant.remote import RemoteShard, ServerSettings
from groundwire.stores.qdrant.versions import (
    IndexFiles,
    Shard,
    Versions,
    _raw,
    _stats,
    descriptors,
)

_RECORD = str(uuid.UUID("0b6f2f4e-4d0c-5a55-8a3e-6f0b3f1f7e01"))
# Version numbers a begin tries before it reports the store busy.
_CLAIM_ATTEMPTS = 32


def _exists_error(exc: Exception) -> bool:
    """Creating a collection that exists: a server's 409, qdrant-client local mode's
    ValueError."""
    if isinstance(exc, UnexpectedResponse):
        return exc.status_code == 409
    return "already exists" in str(exc)


_DISTANCE = {"cosine": m.Distance.COSINE, "euclidean": m.Distance.EUCLID, "dot": m.Distance.DOT}


class ServerVersions(Versions):
    """The indexes of one store on a Qdrant server (see module docstring)."""

    def __init__(
        self, settings: QdrantSettings, client: AsyncQdrantClient, server: ServerSettings
    ) -> None:
        super().__init__(settings)
        self._client = client
        self._server = server
        self._prefix = server.collection_prefix
        # Superseded collections not deleted yet (read here, or in their grace).
        self._lingering: set[str] = set()
        self._later: set[asyncio.Task[None]] = set()
        # When each index's alias was last read.
        self._checked: dict[str, float] = {}
        # Collections this process created to claim a version number, not used yet.
        self._claimed: set[str] = set()
        # The shared search and read code (lexical.py, vectors.py) runs in worker
        # threads that wait on the server's answers (remote.py): a pool of its own,
        # so as many calls wait on the server at once as ServerSettings.threads (the
        # default pool has CPUs + 4 threads, 6 on two cores).
        self.executor = ThreadPoolExecutor(server.threads, thread_name_prefix="qdrant-server")

    def _base(self, name: str) -> str:
        return self._prefix + hashlib.sha256(name.encode()).hexdigest()[:24]

    async def _do(self, operation: str, coro: Any) -> Any:
        return await acall(self._label, operation, coro)

    @staticmethod
    def _loop() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def _shard(self, version: int, collection: str) -> Shard:
        return Shard(version, Path(collection), RemoteShard(self._client, collection, self._loop()))

    async def _record(self, collection: str) -> dict[str, Any] | None:
        found = await self._do(
            "retrieve", self._client.retrieve(collection, [_RECORD], with_payload=True)
        )
        return dict(found[0].payload["record"]) if found else None

    async def _load(self, name: str, spec: IndexSpec | None) -> IndexFiles:
        base = self._base(name)
        meta = base + "_meta"
        if await self._do("exists", self._client.collection_exists(meta)):
            manifest = await self._record(meta) or {}
        elif spec is None:
            raise index_missing(len(name))
        else:
            manifest = {"name": name, "next_version": 1, **descriptors(spec)}
            await self._do("create", self._client.create_collection(meta, vectors_config={}))
            await self._put(meta, manifest)
        manifest = {"published_version": 0, "shard": 0, "tenants": {}} | manifest
        files = IndexFiles(name, Path(base), manifest)
        await self._follow(files)
        return files

    async def _follow(self, files: IndexFiles) -> None:
        """Take the version the alias names now (another replica may have moved
        it): its collection and the statistics recorded in it."""
        self._checked[files.name] = time.monotonic()
        alias = str(files.root)
        found = await self._do("aliases", self._client.get_collection_aliases(alias))
        target = next((a.collection_name for a in found.aliases if a.alias_name == alias), None)
        if target is None:
            found = await self._do("aliases", self._client.get_aliases())
            target = next((a.collection_name for a in found.aliases if a.alias_name == alias), None)
        current = files.published
        if target is None or (current is not None and str(current.path) == target):
            return
        record = await self._record(target) or {}
        files.manifest = files.manifest | record
        shard = self._shard(int(record.get("shard", 0)), target)
        shard.tenants = _stats(record.get("tenants", {}))
        # The replaced collection is the publisher's to delete (after its grace).
        files.published = shard

    async def open(self, name: str, spec: IndexSpec | None) -> IndexFiles:
        """The index, its alias re-read at most every `refresh_s` (every store call
        opens it first)."""
        files = await super().open(name, spec)
        due = time.monotonic() - self._checked.get(name, 0.0) >= self._server.refresh_s
        # Under a publish of this process (which sets the published version
        # itself), the alias is read next time.
        if due and not files.lock.locked():
            async with files.lock:
                await self._follow(files)
        return files

    async def begin(self, files: IndexFiles, spec: IndexSpec) -> int:
        """A new version number from the server's record (another replica may have
        taken some), on top of the version the alias names now, claimed by creating
        its collection: a number another replica claimed first is passed over."""
        for _ in range(_CLAIM_ATTEMPTS):
            async with files.lock:
                await self._follow(files)
                meta = await self._record(f"{files.root}_meta") or {}
                files.manifest = files.manifest | {
                    "next_version": max(
                        int(meta.get("next_version", 1)), int(files.manifest["next_version"])
                    )
                }
            version = await super().begin(files, spec)
            if await self._claim(files, spec, version):
                return version
            files.stagings.pop(version, None)
        raise store_unavailable("could not claim a version number: other replicas kept taking them")

    async def _claim(self, files: IndexFiles, spec: IndexSpec, version: int) -> bool:
        """Create `version`'s collection unless it exists (False: another replica's)."""
        collection = f"{files.root}_v{version}"
        try:
            await self._client.create_collection(collection, **self._collection_config(spec))
        except (UnexpectedResponse, ValueError) as exc:
            if _exists_error(exc):
                return False
            raise engine_error(exc) from None
        except Exception as exc:
            raise engine_error(exc) from None
        await self._indexes_of(collection)
        self._claimed.add(collection)
        return True

    async def _put(self, collection: str, record: dict[str, Any]) -> None:
        point = m.PointStruct(id=_RECORD, vector={}, payload={"record": record})
        await self._do("upsert", self._client.upsert(collection, [point], wait=True))

    async def _write(self, files: IndexFiles, manifest: dict[str, Any]) -> None:
        keep = {"name", "next_version", "embedding", "dimensions", "chunking", "metric"}
        await self._put(f"{files.root}_meta", {k: v for k, v in manifest.items() if k in keep})
        files.manifest = manifest

    async def _sweep(self, files: IndexFiles) -> None:
        """Delete the index's collections below the published version that no
        reader here holds (superseded ones, a crash's unpublished leftovers once a
        later version published). Versions above it may be another replica's
        staging: left alone."""
        published = files.published.version if files.published is not None else 0
        keep = {str(st.shard.path) for st in files.stagings.values() if st.shard is not None}
        keep |= self._lingering | self._claimed
        listed = await self._do("list", self._client.get_collections())
        prefix = f"{files.root}_v"
        for c in listed.collections:
            number = c.name.removeprefix(prefix)
            if (
                c.name.startswith(prefix)
                and number.isdigit()
                # (a rebased copy of version n is named n + 1e9: versions.py)
                and int(number) % 1_000_000_000 < published
                and c.name not in keep
            ):
                await self._do("drop", self._client.delete_collection(c.name))

    async def _copy(self, files: IndexFiles, source: Shard, version: int) -> Shard:
        target = await self._create(files, None, version)
        source.users += 1
        try:

            def copy() -> None:
                for page in scroll_pages(source.edge, None, True, with_vector=True):  # type: ignore[arg-type]
                    points = [
                        q.Point(r.id, r.vector or {}, r.payload)
                        for r in page
                        if str(r.id) != _RECORD
                    ]
                    if points:
                        upsert(target.edge, points)

            await self._call("copy", copy)
        finally:
            await self.release(source)
        return target

    async def _create(self, files: IndexFiles, spec: IndexSpec | None, version: int) -> Shard:
        collection = f"{files.root}_v{version}"
        if collection in self._claimed:  # made at begin_version, with this version's spec
            self._claimed.discard(collection)
            return self._shard(version, collection)
        # A rebased copy (version + 1e9, versions.py): this process's own name.
        if await self._do("exists", self._client.collection_exists(collection)):
            await self._do("drop", self._client.delete_collection(collection))
        await self._do(
            "create",
            self._client.create_collection(collection, **self._collection_config(spec, files)),
        )
        await self._indexes_of(collection)
        return self._shard(version, collection)

    def _collection_config(
        self, spec: IndexSpec | None, files: IndexFiles | None = None
    ) -> dict[str, Any]:
        manifest = files.manifest if files is not None else {}
        d = spec.dimensions if spec is not None else manifest.get("dimensions")
        metric = spec.metric.value if spec is not None else manifest.get("metric", "cosine")
        s = self._settings
        return {
            "vectors_config": (
                {DENSE: m.VectorParams(size=int(d), distance=_DISTANCE[metric])} if d else {}
            ),
            "sparse_vectors_config": {SPARSE: m.SparseVectorParams(modifier=m.Modifier.IDF)},
            "hnsw_config": m.HnswConfigDiff(**hnsw_params(s)),
            "optimizers_config": m.OptimizersConfigDiff(indexing_threshold=s.indexing_threshold_kb),
        }

    async def _indexes_of(self, collection: str) -> None:
        for field, schema in payload_indexes():
            await self._do(
                "index",
                self._client.create_payload_index(
                    collection, field, field_schema=translate.index_schema(schema), wait=True
                ),
            )

    async def _rename(self, files: IndexFiles, fresh: Shard, version: int) -> Shard:
        return Shard(version, fresh.path, fresh.edge)

    async def _commit(self, files: IndexFiles, shard: Shard, manifest: dict[str, Any]) -> None:
        """The version record into the version's collection, then the alias moved
        to it in one call (readers see the old collection or the new, whole)."""
        record = {k: v for k, v in manifest.items() if k != "tenants"}
        record["tenants"] = _raw(shard.tenants)
        collection = str(shard.path)
        await self._put(collection, record)
        alias = str(files.root)
        ops: list[Any] = []
        if files.published is not None:
            ops.append(m.DeleteAliasOperation(delete_alias=m.DeleteAlias(alias_name=alias)))
        ops.append(
            m.CreateAliasOperation(
                create_alias=m.CreateAlias(collection_name=collection, alias_name=alias)
            )
        )
        await self._do("publish", self._client.update_collection_aliases(ops))
        await self._write(files, manifest)

    async def release(self, shard: Shard, *, held: bool = True) -> None:
        """A superseded collection is deleted `superseded_grace_s` after its last
        reader here is done (readers of other replicas follow the alias within
        `refresh_s`)."""
        if held:
            shard.users -= 1
        if not shard.retired:
            return
        self._lingering.add(str(shard.path))
        if shard.users == 0:
            shard.retired = False  # deleted once
            task = asyncio.create_task(self._drop_later(shard))
            self._later.add(task)
            task.add_done_callback(self._later.discard)

    async def _drop_later(self, shard: Shard) -> None:
        await asyncio.sleep(self._server.superseded_grace_s)
        with contextlib.suppress(GroundwireError):  # else the next begin's sweep does
            await self._drop(shard)

    async def _drop(self, shard: Shard) -> None:
        self._lingering.discard(str(shard.path))
        await self._do("drop", self._client.delete_collection(str(shard.path)))

    async def close(self) -> None:
        for task in list(self._later):
            task.cancel()  # the next begin_version's sweep deletes what is left
        self._indexes.clear()
