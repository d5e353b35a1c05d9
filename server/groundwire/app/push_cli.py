"""`groundwire push INDEX FILE|DIR ...` (app/people_cli.py registers it): every
file is sent and the server's loaders decide what they read.

Files under 1 MiB go in UpsertDocuments calls of at most 32 files and 3 MiB
(under the server's default 4 MiB message bound; a call refused for its size
goes again in halves). A file of 1 MiB or more is streamed alone to
UploadDocument in 1 MiB parts: its bound is the index's max_file_bytes (and the
server's [server] max_upload_bytes), not a message's, so files of tens of MB go
with the defaults. While such a file is embedded, the progress bar shows its
operation's phase and chunks embedded (WatchIngestion on the id the server
announces). Each call has its own deadline (--timeout, default 600 s); a call
whose deadline passes publishes nothing and its files fail with
DEADLINE_EXCEEDED, the others go on."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import sys
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import grpc

from groundwire.app.client_options import UsageError
from groundwire.app.client_options import call_metadata as _metadata
from groundwire.app.client_options import dump_json as _dump
from groundwire_client import (
    GroundwireClient,
    GroundwireError,
    PushResult,
    error_from_rpc,
    media_type_of,
    upload_document,
    upload_requests,
)
from groundwire_client.v1 import ingestion_pb2

# Documents per UpsertDocuments call (the server's limit is 256): small enough
# that the progress bar moves on a large upload.
_PUSH_BATCH = 32
# A file at least this large is streamed alone to UploadDocument.
_ALONE_BYTES = 1024 * 1024
OPERATION_ID_HEADER = "x-operation-id"

# Bytes per UpsertDocuments call, under the server's default 4 MiB message bound.
_BATCH_BYTES = 3 * 1024 * 1024
# What one UpsertDocuments call may carry (the server's bound, ingestion/push.py).
PUSH_MAX_BYTES = 4 * 1024 * 1024
PUSH_ELSEWHERE = (
    "ingest it from a directory source instead (`groundwire ingest INDEX`; files over"
    " 10 MiB need the index's [ingestion] max_file_bytes raised)"
)
TOO_LARGE_HINT = (
    "TOO_LARGE: {size:.1f} MiB; a push carries at most {limit} MiB per call"
    " (UpsertDocuments' bound, and the server's [server] max_message_bytes); "
) + PUSH_ELSEWHERE
FILE_TOO_LARGE_HINT = (
    "FILE_TOO_LARGE: {size:.1f} MiB; over the index's [ingestion] max_file_bytes"
    " (default 10 MiB) or the server's [server] max_upload_bytes (default 64 MiB)"
)


def _files(paths: Sequence[str]) -> list[tuple[Path, str]]:
    """(file, document id): a file's id is its name, a directory's files' ids are
    their paths relative to it (with "/"), as a directory source names them.
    Hidden files and directories are skipped."""
    out: list[tuple[Path, str]] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                rel = f.relative_to(p)
                if f.is_file() and not any(part.startswith(".") for part in rel.parts):
                    out.append((f, rel.as_posix()))
        elif p.is_file():
            out.append((p, p.name))
        else:
            raise UsageError(f"{raw}: no such file or directory")
    if not out:
        raise UsageError("no files to push")
    return out


def _batches(
    docs: Sequence[ingestion_pb2.PushedDocument],
) -> list[list[ingestion_pb2.PushedDocument]]:
    out: list[list[ingestion_pb2.PushedDocument]] = []
    size = 0
    for doc in docs:
        n = len(doc.content) + len(doc.document_id) + 64
        alone = n >= _ALONE_BYTES or bool(out and len(out[-1][0].content) + 64 >= _ALONE_BYTES)
        if out and not alone and size + n <= _BATCH_BYTES and len(out[-1]) < _PUSH_BATCH:
            out[-1].append(doc)
            size += n
        else:
            out.append([doc])
            size = n
    return out


@dataclass
class _Tally(PushResult):
    """What the calls of one push did, and whether a call's deadline passed."""

    timed_out: bool = False


@dataclass(frozen=True, slots=True)
class _Large:
    """A file streamed alone: read from `path` as it is sent, or `content` when
    already read."""

    path: Path
    document_id: str
    size: int
    content: bytes | None = None


async def push(client: GroundwireClient, args: argparse.Namespace, out: TextIO) -> int:
    from tqdm import tqdm

    files = _files(args.paths)
    tally = _Tally()
    docs: list[ingestion_pb2.PushedDocument] = []
    large: list[_Large] = []
    where = {doc_id: path for path, doc_id in files}
    for path, doc_id in files:
        # Every file is sent: the server's loaders decide what they read (a type
        # they do not read comes back as UNSUPPORTED_FORMAT).
        media_type = media_type_of(path)
        try:
            size = path.stat().st_size
            if size >= _ALONE_BYTES:
                large.append(_Large(path, doc_id, size))
                continue
            content = path.read_bytes()
        except OSError:
            tally.failures[doc_id] = "UNREADABLE"
            continue
        docs.append(
            ingestion_pb2.PushedDocument(
                document_id=doc_id, content=content, media_type=media_type, acl=_acl(args)
            )
        )
    bar = tqdm(total=len(files), unit="file", desc=args.index, file=sys.stderr, disable=args.json)
    bar.update(len(tally.failures))
    try:
        # A file over a call's chunk bound on its own is streamed alone too.
        alone = await _push_batches(client, args, docs, tally, bar)
        large += [
            _Large(where[d.document_id], d.document_id, len(d.content), d.content) for d in alone
        ]
        for item in large:
            await _upload(client, args, item, tally, bar)
            bar.update(1)
    finally:
        bar.close()
    _summary(args, len(files), tally, out)
    return 1 if tally.failures else 0


async def _push_batches(
    client: GroundwireClient,
    args: argparse.Namespace,
    docs: Sequence[ingestion_pb2.PushedDocument],
    tally: _Tally,
    bar: Any,
) -> list[ingestion_pb2.PushedDocument]:
    """Push `docs` in batches; returns the files a call may not carry alone
    (over its chunk bound), to stream."""
    failures = tally.failures
    alone: list[ingestion_pb2.PushedDocument] = []
    pending = deque(_batches(docs))
    while pending:
        batch = pending.popleft()
        request = ingestion_pb2.UpsertDocumentsRequest(index_name=args.index, documents=batch)
        try:
            response = await client.ingestion.UpsertDocuments(
                request, timeout=args.timeout, metadata=_metadata(args)
            )
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                # The server published nothing of this call (its work stopped);
                # the calls before it stay published.
                failures.update({d.document_id: "DEADLINE_EXCEEDED" for d in batch})
                tally.timed_out = True
                bar.update(len(batch))
                continue
            bound = _message_bound(exc)
            if bound is not None and len(batch) == 1:
                # One file larger than the server's message bound.
                failures[batch[0].document_id] = _too_large(len(batch[0].content), bound)
                bar.update(1)
                continue
            if bound is not None:
                # A call larger than the server's message bound: in halves.
                pending.extendleft([batch[len(batch) // 2 :], batch[: len(batch) // 2]])
                continue
            refused = _refused_files(error_from_rpc(exc), batch)
            if refused is None:
                raise
            if len(batch) == 1 and refused.get(batch[0].document_id, "").startswith("TOO_LARGE"):
                alone.append(batch[0])
                continue
            # The call was refused for some of its files: those fail, the
            # others go again (a call over the push's bounds in halves).
            for doc_id, reason in refused.items():
                failures[doc_id] = reason
            bar.update(len(refused))
            rest = [d for d in batch if d.document_id not in refused]
            half = len(rest) // 2
            parts = [rest] if refused else [rest[:half], rest[half:]]
            pending.extendleft(reversed([part for part in parts if part]))
            continue
        tally.add(response)
        bar.update(len(batch))
    return alone


async def _upload(
    client: GroundwireClient, args: argparse.Namespace, item: _Large, tally: _Tally, bar: Any
) -> None:
    """Stream one file to UploadDocument, its operation's progress on `bar`."""
    unreadable: list[bool] = []
    requests = upload_requests(
        args.index, item.path, document_id=item.document_id, content=item.content, acl=_acl(args)
    )
    try:
        header = next(requests)
    except OSError:
        tally.failures[item.document_id] = "UNREADABLE"
        return

    def parts() -> Iterator[ingestion_pb2.UploadDocumentRequest]:
        yield header
        try:
            yield from requests
        except OSError:
            # The stream ends short: the server refuses it, and the file fails
            # as UNREADABLE.
            unreadable.append(True)

    watchers: list[asyncio.Task[None]] = []

    def watch(call: Any) -> None:
        watchers.append(asyncio.create_task(_show(client, args, call, item, bar)))

    try:
        response = await upload_document(
            client.ingestion,
            parts(),
            timeout=args.timeout,
            metadata=_metadata(args),
            started=None if bar.disable else watch,
        )
    except grpc.aio.AioRpcError as exc:
        tally.failures[item.document_id] = _upload_failure(exc, item, tally, bool(unreadable))
        return
    finally:
        for watcher in watchers:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        bar.set_postfix_str("")
    tally.add(response)


def _upload_failure(
    exc: grpc.aio.AioRpcError, item: _Large, tally: _Tally, unreadable: bool
) -> str:
    """The failure of a refused upload (raised when it is not about the file)."""
    if unreadable:
        return "UNREADABLE"
    if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        tally.timed_out = True
        return "DEADLINE_EXCEEDED"
    err = error_from_rpc(exc)
    if err.reason == "FILE_TOO_LARGE":
        return FILE_TOO_LARGE_HINT.format(size=item.size / (1024 * 1024))
    if err.code == grpc.StatusCode.INVALID_ARGUMENT and any(
        name.startswith("header.") for name in err.fields
    ):
        return f"{err.reason}: {err.message}"
    raise exc


async def _show(
    client: GroundwireClient, args: argparse.Namespace, call: Any, item: _Large, bar: Any
) -> None:
    """The upload's operation on the progress bar, until it ends (cosmetic: a
    key that may not watch it, or a server that does not announce it, shows none)."""
    with contextlib.suppress(grpc.aio.AioRpcError):
        operation_id = dict(await call.initial_metadata()).get(OPERATION_ID_HEADER)
        if not operation_id:
            return
        watch = client.ingestion.WatchIngestion(
            ingestion_pb2.WatchIngestionRequest(operation_id=operation_id),
            timeout=args.timeout,
            metadata=_metadata(args),
        )
        async for message in watch:
            op = message.operation
            phase = ingestion_pb2.OperationPhase.Name(op.phase).removeprefix("OPERATION_PHASE_")
            bar.set_postfix_str(
                f"{item.document_id}: {phase.lower()}, {op.counts.chunks_written} chunks embedded"
            )


def _summary(args: argparse.Namespace, files: int, tally: _Tally, out: TextIO) -> None:
    failures = tally.failures
    if args.json:
        _dump(
            {
                "index": args.index,
                "files": files,
                "ingested": tally.upserted,
                "unchanged": tally.unchanged,
                "failed": len(failures),
                "chunks_written": tally.chunks_written,
                "truncated_chunks": tally.truncated_chunks,
                "published_version": tally.published_version,
                "failures": [{"document_id": k, "reason": v} for k, v in sorted(failures.items())],
            },
            out,
        )
        return
    out.write(
        f"{files} files: {tally.upserted} ingested, {tally.unchanged} unchanged, "
        f"{len(failures)} failed ({tally.chunks_written} chunks written,"
        f" index version {tally.published_version})\n"
    )
    if tally.truncated_chunks:
        # Embedded from their beginning only (the index's overlong_chunks = "truncate").
        out.write(
            f"  {tally.truncated_chunks} of {tally.chunks_written} chunks longer than the"
            " embedding model's window were embedded truncated\n"
        )
    for doc_id, reason in sorted(failures.items()):
        out.write(f"  failed  {doc_id}: {reason}\n")
    if tally.timed_out:
        out.write(
            f"  a call's deadline ({args.timeout:g} s, --timeout) passed: nothing of it"
            " was published; push those files again with a larger --timeout\n"
        )


def _too_large(size: int, limit: int) -> str:
    return TOO_LARGE_HINT.format(size=size / (1024 * 1024), limit=f"{limit / (1024 * 1024):g}")


def _refused_files(
    err: GroundwireError, batch: Sequence[ingestion_pb2.PushedDocument]
) -> dict[str, str] | None:
    """The files a refused call fails (document id -> reason), {} when the call
    goes again in halves (it was over a push's bounds), None when the refusal is
    not about its files (raised)."""
    if err.code != grpc.StatusCode.INVALID_ARGUMENT:
        return None
    out: dict[str, str] = {}
    for name in err.fields:
        found = re.fullmatch(r"documents\[(\d+)\](?:\..*)?", name)
        if found is not None and int(found.group(1)) < len(batch):
            doc = batch[int(found.group(1))]
            out[doc.document_id] = f"{err.reason}: {err.fields[name] or err.message}"
    if out:
        return out
    if "documents" not in err.fields or err.reason != "FIELD_OUT_OF_RANGE":
        return None
    if len(batch) > 1:
        return {}
    # One file over a push's bounds (the chunks it makes, its bytes).
    # The server's advice (fewer documents per call) cannot help one file: cut it.
    bound = err.message.split(";", 1)[0]
    return {batch[0].document_id: f"TOO_LARGE: {bound}; {PUSH_ELSEWHERE}"}


def _message_bound(exc: grpc.aio.AioRpcError) -> int | None:
    """The server's message bound when grpc refused the call for its size
    ("... larger than max (N vs. M)"), else None (another refusal)."""
    if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    found = re.search(r"larger than max \(\d+ vs\. (\d+)\)", exc.details() or "")
    return int(found.group(1)) if found else None


def _acl(args: argparse.Namespace) -> list[str]:
    """--acl as the principals each pushed document carries (checked by the server)."""
    return [p.strip() for p in str(getattr(args, "acl", "") or "").split(",") if p.strip()]
