"""`kind = "s3"` sources: a bucket's objects under a prefix, synced incrementally by
the objects' own identity.

- Discovery lists the prefix page by page (ListObjectsV2). An object is a document
  when its key, relative to the prefix, matches an `include` glob and no `exclude`
  glob; folder markers (keys ending in "/") and hidden parts (a leading dot) are not
  documents, as in directories. Its document id, and so its citation, is
  `s3://bucket/key`: never an endpoint, a credential or a presigned URL.
- Change detection without download: the stored hash of an object's document
  carries its source state, the listed ETag, size and last-modified time (plus a
  fingerprint of tenant, metadata and ACL). An object listed with the same state is
  UNCHANGED and not read. A changed one is read, and skipped still when its content
  hash is the same (nothing is re-embedded for unchanged text).
- Bounds before any byte: an object larger than the source's `max_bytes` (default
  the index's `max_file_bytes`) fails TOO_LARGE from the listing; one whose
  extension no loader of the source reads is skipped UNSUPPORTED_FORMAT from the
  listing. A body longer than its declared size is refused (TOO_LARGE).
- Reading: the body is streamed to a private temporary file named after the key and
  loaded by the same parser workers and bounds as a directory's files (formats from
  the extension, gzip, plug-in loaders).
- A listing or read that fails at the server (credentials refused, unreachable,
  stopped mid-run) fails the run with a source error (ingestion/s3_client.py):
  nothing is published and the previous version keeps serving.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import tempfile
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from groundwire.domain.operations import DocumentFailureReason
from groundwire.indexes.loaders import Loader
from groundwire.indexes.sources import S3Source, SourceConfig
from groundwire.ingestion.loaders import (
    GZIP_EXTENSION,
    DocumentFormat,
    LoadedDocument,
    LoadFailure,
    content_suffix,
)
from groundwire.ingestion.parsing import parsers
from groundwire.ingestion.s3_client import TRANSPORT_ERRORS, S3Client, open_client
from groundwire.ingestion.sources import (
    UNCHANGED,
    SourceItem,
    Unchanged,
    discover,
    glob_matches,
    path_acl,
    source_formats,
    source_id_for,
)

_STATE_TAG = "s3v1"
_CHUNK = 64 * 1024
# Keys longer than this make no document id (S3 allows 1024 bytes).
MAX_KEY_CHARS = 1024


@dataclass(frozen=True, slots=True)
class S3Item:
    """One listed object of an s3 source."""

    document_id: str  # s3://bucket/key
    source: S3Source
    key: str
    size: int
    etag: str
    last_modified: str
    formats: Mapping[str, DocumentFormat | None] = field(default_factory=dict)
    acl: frozenset[str] = frozenset()


AnyItem = SourceItem | S3Item


def object_id(bucket: str, key: str) -> str:
    return f"s3://{bucket}/{key}"


def _wanted(src: S3Source, relative: str) -> bool:
    if not relative or relative.endswith("/"):
        return False
    if any(part.startswith(".") for part in relative.split("/")):
        return False
    if not any(glob_matches(g, relative) for g in src.include):
        return False
    return not any(glob_matches(g, relative) for g in src.exclude)


async def list_source(src: S3Source, extensions: Sequence[str]) -> list[S3Item]:
    """Every document of the source, in key order. Raises the run's error when the
    bucket cannot be listed."""
    formats = source_formats(src.extensions, extensions)
    items: list[S3Item] = []
    async with open_client(src) as s3:
        try:
            pages = s3.client.get_paginator("list_objects_v2").paginate(
                Bucket=src.bucket, Prefix=src.prefix
            )
            async for page in pages:
                for obj in page.get("Contents", ()):
                    key = str(obj["Key"])
                    relative = key[len(src.prefix) :]
                    if len(key) > MAX_KEY_CHARS or not _wanted(src, relative):
                        continue
                    items.append(
                        S3Item(
                            object_id(src.bucket, key),
                            src,
                            key,
                            int(obj.get("Size", 0)),
                            str(obj.get("ETag", "")).strip('"')[:256],
                            obj["LastModified"].isoformat() if obj.get("LastModified") else "",
                            formats,
                            path_acl(src, relative),
                        )
                    )
        except TRANSPORT_ERRORS as exc:
            raise s3.failure(exc) from None
    items.sort(key=lambda i: i.key)
    return items


async def discover_all(sources: Sequence[SourceConfig], extensions: Sequence[str]) -> list[AnyItem]:
    """Every document of the index's sources, in a deterministic order (sources in
    their configured order; buckets are listed over the network)."""
    items: list[AnyItem] = []
    for src in sources:
        if isinstance(src, S3Source):
            items.extend(await list_source(src, extensions))
        else:
            items.extend(discover([src], extensions))
    return items


# --- change detection --------------------------------------------------------------


def _b64(value: str) -> str:
    return base64.urlsafe_b64encode(value.encode()).decode("ascii")


def object_state(item: S3Item, tenant: str, metadata: Mapping[str, str]) -> str:
    """The source state stored with an object's document: what the listing says
    identifies this version of it, and what else its stored rows depend on."""
    fields: list[object] = [tenant, sorted(metadata.items()), sorted(item.acl)]
    fp = hashlib.sha256(json.dumps(fields, ensure_ascii=False).encode()).hexdigest()[:16]
    return f"{_STATE_TAG}|{fp}|{_b64(item.etag)}|{item.size}|{_b64(item.last_modified)}"


def listed_unchanged(
    item: S3Item, previous: str | None, tenant: str, metadata: Mapping[str, str]
) -> bool:
    """Whether the stored hash `previous` was made from this very listing state."""
    if previous is None or "|" not in previous:
        return False
    return previous.split("|", 1)[1] == object_state(item, tenant, metadata)


# --- reading -----------------------------------------------------------------------


class S3Readers:
    """The open clients of one run's s3 sources (one per source), and a private
    temporary directory for the objects being parsed; closed at the run's end."""

    def __init__(self) -> None:
        self._stack = AsyncExitStack()
        self._clients: dict[S3Source, S3Client] = {}
        self._opening = asyncio.Lock()
        self._tmp: Path | None = None

    async def __aenter__(self) -> S3Readers:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def client(self, src: S3Source) -> S3Client:
        async with self._opening:  # one client per source, however many reads ask
            found = self._clients.get(src)
            if found is None:
                found = await self._stack.enter_async_context(open_client(src))
                self._clients[src] = found
            return found

    def scratch(self) -> Path:
        if self._tmp is None:
            self._tmp = Path(self._stack.enter_context(tempfile.TemporaryDirectory()))
        return self._tmp


# Objects downloaded ahead of the one being staged: their reads overlap (a GET's
# latency, not its bytes, is what an object costs), at most this many at once.
READ_AHEAD = 8

_T = TypeVar("_T")


async def read_ahead(
    items: Sequence[AnyItem],
    load: Callable[[AnyItem], Awaitable[_T]],
    ahead: int = READ_AHEAD,
) -> AsyncGenerator[tuple[AnyItem, _T], None]:
    """(item, load(item)) in the items' order. Objects of s3 sources are loaded up
    to `ahead` items in advance, concurrently; every other item is loaded when its
    turn comes, as before. Loads still pending when the caller stops (an error,
    a cancellation) are cancelled."""
    pending: dict[int, asyncio.Task[_T]] = {}
    try:
        for i, item in enumerate(items):
            for j in range(i, min(i + ahead, len(items))):
                if j not in pending and isinstance(items[j], S3Item):
                    pending[j] = asyncio.ensure_future(load(items[j]))
            task = pending.pop(i, None)
            yield item, (await task if task is not None else await load(item))
    finally:
        for task in pending.values():
            task.cancel()
        if pending:
            await asyncio.gather(*pending.values(), return_exceptions=True)


def _precheck(item: S3Item, max_bytes: int) -> DocumentFailureReason | None:
    """Refusals from the listing alone (nothing is downloaded)."""
    if item.size > max_bytes:
        return DocumentFailureReason.TOO_LARGE
    suffix = PurePosixPath(item.key).suffix.lower()
    inner = content_suffix(PurePosixPath(item.key))
    if suffix == GZIP_EXTENSION and GZIP_EXTENSION in item.formats:
        suffix = inner
    if suffix and suffix not in item.formats:
        return DocumentFailureReason.UNSUPPORTED_FORMAT
    return None


async def _download(s3: S3Client, item: S3Item, target: Path) -> DocumentFailureReason | None:
    """Stream the object to `target`, refusing more bytes than were listed (or
    than the response declares). Raises the run's error on a transport failure."""
    src = item.source
    try:
        response: dict[str, Any] = await s3.client.get_object(Bucket=src.bucket, Key=item.key)
        declared = min(item.size, int(response.get("ContentLength", item.size)))
        written = 0
        async with response["Body"] as body:
            with target.open("wb") as out:
                while True:
                    chunk = await body.read(_CHUNK)
                    if not chunk:
                        break
                    written += len(chunk)
                    if written > declared:
                        return DocumentFailureReason.TOO_LARGE
                    out.write(chunk)
    except TRANSPORT_ERRORS as exc:
        code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
        if code in ("NoSuchKey", "404"):
            # Deleted between the listing and the read: the next run drops it.
            return DocumentFailureReason.FETCH_FAILED
        raise s3.failure(exc) from None
    if written < declared:
        return DocumentFailureReason.FETCH_FAILED
    return None


async def load_s3_item(
    item: S3Item,
    readers: S3Readers,
    *,
    tenant: str,
    metadata: Mapping[str, str],
    max_file_bytes: int,
    loaders: Mapping[str, Loader],
    previous: str | None,
) -> LoadedDocument | LoadFailure | Unchanged:
    """Load one object (see the module docstring). `previous` is the stored hash of
    its published document (None to read unconditionally, e.g. on a rebuild)."""
    if listed_unchanged(item, previous, tenant, metadata):
        return UNCHANGED
    max_bytes = item.source.max_bytes or max_file_bytes
    refused = _precheck(item, max_bytes)
    if refused is not None:
        return LoadFailure(item.document_id, refused)
    s3 = await readers.client(item.source)
    name = PurePosixPath(item.key).name
    target = Path(tempfile.mkdtemp(dir=readers.scratch())) / name
    try:
        failed = await _download(s3, item, target)
        if failed is not None:
            return LoadFailure(item.document_id, failed)
        loaded = await parsers().load_file(
            target,
            item.document_id,
            source_id_for(item.document_id),
            max_bytes=max_bytes,
            metadata=metadata,
            loaders=loaders,
            formats=item.formats,
        )
    finally:
        target.unlink(missing_ok=True)
        target.parent.rmdir()
    if isinstance(loaded, LoadFailure):
        return loaded
    return replace(loaded, source_state=object_state(item, tenant, metadata))
