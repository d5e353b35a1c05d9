"""Commands for people at a terminal, all plain clients of the public API
(groundwire_client over gRPC), with the connection options of
app/client_options.py:

    groundwire search INDEX "text" [--mode M] [--top-k N] [--filter KEY=VALUE ...]
    groundwire ask AGENT "question"        the answer streams as it is produced,
                                           then the numbered citations
    groundwire indexes                     a table of the indexes and their state
    groundwire operations INDEX            a table of the index's recent operations
    groundwire push INDEX FILE|DIR ...     upload files, a progress bar, a summary

Output is readable on a terminal; `--json` prints machine output on stdout
instead (one JSON document). A failed call prints `error: REASON: message` (a
JSON object with `--json`) on stderr and exits 1; bad options exit 2; nothing
prints a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import sys
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from groundwire.app.client_options import Connection, OptionError, add_connection_args, connection
from groundwire_client import (
    GroundwireClient,
    GroundwireError,
    error_from_rpc,
    media_type_of,
    renumbered_answer,
)
from groundwire_client.v1 import agent_pb2, ingestion_pb2

COMMANDS = ("search", "ask", "indexes", "operations", "push")
_PAGE = 100
_MAX_PAGES = 100
# Documents per UpsertDocuments call of `push` (the server's limit is 256):
# small enough that the progress bar moves on a large upload.
_PUSH_BATCH = 32
# The default deadline of each UpsertDocuments call of `push` (--timeout): the
# server parses each file of a call in turn (each at most its parser_timeout_seconds,
# default 60 s), then embeds and publishes them. A call whose deadline passes
# publishes nothing (its files fail with DEADLINE_EXCEEDED; earlier calls stay).
PUSH_TIMEOUT_S = 600.0
# A file at least this large goes in a call of its own (a parse of its own deadline).
_ALONE_BYTES = 1024 * 1024


def add_commands(sub: Any) -> None:
    search = sub.add_parser("search", help="search an index (RetrieverService.Retrieve)")
    search.add_argument("index")
    search.add_argument("text")
    search.add_argument("--mode", choices=["semantic", "lexical", "hybrid"], default="semantic")
    search.add_argument("--top-k", type=int, help="maximum results (server default when absent)")
    search.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="metadata condition; repeat a key to accept any of several values",
    )
    ask = sub.add_parser("ask", help="ask an agent; the answer streams, then its citations")
    ask.add_argument("agent")
    ask.add_argument("question")
    sub.add_parser("indexes", help="list the indexes and their state")
    operations = sub.add_parser("operations", help="list an index's recent ingestion operations")
    operations.add_argument("index")
    operations.add_argument(
        "--limit", type=int, default=20, help="operations to show, newest first (default 20)"
    )
    push = sub.add_parser(
        "push", help="upload files (and the files under directories) as documents"
    )
    push.add_argument("index")
    push.add_argument("paths", nargs="+", metavar="FILE|DIR")
    for parser in (search, ask, sub.choices["indexes"], operations, push):
        add_connection_args(parser)
        parser.add_argument("--json", action="store_true", help="machine output (JSON)")
        parser.set_defaults(people_command=parser.prog.split()[-1])
    # A push call parses, embeds and publishes its files: a longer default deadline.
    for action in push._actions:
        if action.dest == "timeout":
            action.default = PUSH_TIMEOUT_S
            action.help = (
                f"deadline of each call in seconds (default {PUSH_TIMEOUT_S:g}); a call"
                " whose deadline passes publishes nothing"
            )


def _metadata(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    metadata: tuple[tuple[str, str], ...] = args.call_metadata
    return metadata


class UsageError(Exception):
    """A bad argument (exit status 2)."""


def run(args: argparse.Namespace) -> int:
    out, err = sys.stdout, sys.stderr
    try:
        conn = connection(args)
        args.call_metadata = conn.metadata
        handler = _HANDLERS[args.people_command]
        return asyncio.run(_run(handler, conn, args, out))
    except (OptionError, UsageError) as exc:
        print(f"groundwire {args.people_command}: {exc}", file=err)
        return 2
    except GroundwireError as exc:
        _report(exc, args.json, err)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`groundwire search ... | head`): not an error.
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (flushed at exit)
        return 0


async def _run(
    handler: Callable[[GroundwireClient, argparse.Namespace, TextIO], Any],
    conn: Connection,
    args: argparse.Namespace,
    out: TextIO,
) -> int:
    async with conn.client() as client:
        try:
            result: int = await handler(client, args, out)
        except grpc.aio.AioRpcError as exc:
            raise error_from_rpc(exc) from None
    return result


def _report(exc: GroundwireError, as_json: bool, err: TextIO) -> None:
    message = exc.message
    if exc.code == grpc.StatusCode.UNAVAILABLE and not exc.reason:
        message = "the server is unreachable (is it running at --address?)"
    if as_json:
        payload = {
            "error": {
                "reason": exc.reason or exc.code.name,
                "code": exc.code.name,
                "message": message,
                "fields": exc.fields,
                "request_id": exc.request_id,
            }
        }
        print(json.dumps(payload, ensure_ascii=False), file=err)
        return
    print(f"error: {exc.reason or exc.code.name}: {message}", file=err)
    for name, description in sorted(exc.fields.items()):
        print(f"  {name}: {description}", file=err)


def _dict(message: Message) -> dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def _dump(value: object, out: TextIO) -> None:
    out.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns, two spaces apart."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in (headers, *rows)
    ]
    return "\n".join(lines)


def _filters(raw: Sequence[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in raw:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--filter takes KEY=VALUE, not {item!r}")
        out.setdefault(key, []).append(value)
    return out


# -- search ----------------------------------------------------------------------


async def search(client: GroundwireClient, args: argparse.Namespace, out: TextIO) -> int:
    # Imported here: every `groundwire` command parses this module's arguments.
    from groundwire.api.mcp.tools import heading

    filters = _filters(args.filter)
    flt = {k: (v[0] if len(v) == 1 else v) for k, v in filters.items()}
    response = await client.retrieve(
        args.index, args.text, mode=args.mode, top_k=args.top_k, filter=flt or None
    )
    if args.json:
        _dump(_dict(response), out)
        return 0
    if not response.results:
        note = (
            " (your key's tenant has no documents in this index)"
            if response.diagnostics.tenant_scope_empty
            else ""
        )
        out.write(f"no results{note}\n")
        return 0
    for r in response.results:
        title = heading(r.title, r.section, r.document_id)
        relevance = f", relevance {r.score.relevance:.2f}" if r.score.HasField("relevance") else ""
        out.write(f"[{r.rank}] {title}\n")
        out.write(f"    {r.document_id}  score {r.score.raw_score:.4f}{relevance}\n")
        snippet = " ".join(r.content.split())
        if len(snippet) > 300:
            snippet = snippet[:300].rsplit(" ", 1)[0] + " ..."
        out.write(f"    {snippet}\n\n")
    return 0


# -- ask -------------------------------------------------------------------------


def _citations(result: agent_pb2.AgentResult, label: Callable[[agent_pb2.Citation], int]) -> str:
    from groundwire.api.mcp.tools import heading

    lines = []
    for c in result.citations:
        title = heading(c.title, c.section, c.document_id)
        lines.append(f"[{label(c)}] {title} ({c.document_id})")
        if c.snippet:
            snippet = " ".join(c.snippet.split())
            lines.append(f"    {snippet}{' ...' if c.snippet_truncated else ''}")
    return "\n".join(lines)


async def ask(client: GroundwireClient, args: argparse.Namespace, out: TextIO) -> int:
    result: agent_pb2.AgentResult | None = None
    streamed = False
    async for event in client.execute_stream(args.agent, args.question):
        kind = event.type
        if kind == agent_pb2.EXECUTION_EVENT_TYPE_TEXT_DELTA and not args.json:
            out.write(event.text_delta)
            out.flush()
            streamed = streamed or bool(event.text_delta)
        elif kind == agent_pb2.EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED:
            result = event.result
        elif kind == agent_pb2.EXECUTION_EVENT_TYPE_EXECUTION_FAILED:
            if streamed:
                out.write("\n")
            raise GroundwireError(
                grpc.StatusCode.INTERNAL,
                event.error_message or "the execution failed",
                reason=event.error_code or "INTERNAL",
            )
        elif kind == agent_pb2.EXECUTION_EVENT_TYPE_EXECUTION_REQUIRES_ACTION:
            raise GroundwireError(
                grpc.StatusCode.FAILED_PRECONDITION,
                "the agent asked for a tool this command does not run",
                reason="CLIENT_TOOL_INVALID",
            )
    if result is None:
        raise GroundwireError(grpc.StatusCode.INTERNAL, "the stream ended early", reason="INTERNAL")
    if args.json:
        payload = _dict(result)
        payload["answer_renumbered"] = renumbered_answer(result)
        _dump(payload, out)
        return 0
    if not streamed:
        out.write(result.answer)
    out.write("\n")
    if result.citations:
        # The streamed answer shows the markers as the model wrote them
        # ([source_number]): the list uses the same numbers, in reading order.
        out.write("\nSources:\n" + _citations(result, lambda c: c.source_number) + "\n")
    return 0


# -- indexes and operations ------------------------------------------------------

_STATES = {
    v.number: v.name.removeprefix("OPERATION_STATE_").lower()
    for v in ingestion_pb2.OperationState.DESCRIPTOR.values
}
_TRIGGERS = {
    v.number: v.name.removeprefix("OPERATION_TRIGGER_").lower()
    for v in ingestion_pb2.OperationTrigger.DESCRIPTOR.values
}


async def _all_indexes(
    client: GroundwireClient, args: argparse.Namespace
) -> list[ingestion_pb2.IndexDescription]:
    out: list[ingestion_pb2.IndexDescription] = []
    token = ""
    for _ in range(_MAX_PAGES):
        page = await client.ingestion.ListIndexes(
            ingestion_pb2.ListIndexesRequest(page_size=_PAGE, page_token=token),
            timeout=args.timeout,
            metadata=_metadata(args),
        )
        out.extend(page.indexes)
        token = page.next_page_token
        if not token:
            break
    return out


async def indexes(client: GroundwireClient, args: argparse.Namespace, out: TextIO) -> int:
    described = await _all_indexes(client, args)
    statuses: dict[str, ingestion_pb2.IndexStatus | None] = {}
    for ix in described:
        try:
            statuses[ix.name] = await client.index_status(ix.name)
        except GroundwireError as exc:
            # Status needs `manage`: without it, the descriptions alone.
            if exc.code != grpc.StatusCode.PERMISSION_DENIED:
                raise
            statuses[ix.name] = None
    if args.json:
        _dump(
            {
                "indexes": [
                    {
                        **_dict(ix),
                        "status": _dict(s) if (s := statuses[ix.name]) is not None else None,
                    }
                    for ix in described
                ]
            },
            out,
        )
        return 0
    if not described:
        out.write("no indexes\n")
        return 0
    rows = []
    for ix in described:
        s = statuses[ix.name]
        model = ix.embedding.model if ix.HasField("embedding") else "(lexical only)"
        if s is None:
            state = ["-", "-", "-", "-", "-"]
        else:
            running = s.running_operation if s.HasField("running_operation") else None
            last = s.last_operation if s.HasField("last_operation") else None
            op = (
                f"{_STATES[running.state]} ({running.counts.ingested}/{running.counts.discovered})"
                if running is not None
                else (_STATES[last.state] if last is not None else "none")
            )
            state = [
                "yes" if s.ready else "no",
                str(s.published_version),
                str(s.document_count),
                str(s.chunk_count),
                op,
            ]
        # The store's kind, and its name when it is not the default store.
        store = ix.store if ix.store_name in ("", "default") else f"{ix.store_name} ({ix.store})"
        rows.append([ix.name, *state, model, store])
    headers = [
        "NAME",
        "READY",
        "VERSION",
        "DOCUMENTS",
        "CHUNKS",
        "LAST OPERATION",
        "EMBEDDING",
        "STORE",
    ]
    out.write(table(headers, rows) + "\n")
    if any(s is None for s in statuses.values()):
        out.write("(state columns need a key with the manage permission)\n")
    return 0


def _time(op: ingestion_pb2.Operation) -> str:
    if not op.HasField("create_time"):
        return "-"
    return op.create_time.ToDatetime().strftime("%Y-%m-%d %H:%M:%S")


async def operations(client: GroundwireClient, args: argparse.Namespace, out: TextIO) -> int:
    if not 1 <= args.limit <= 1000:
        raise UsageError("--limit must be in [1, 1000]")
    ops: list[ingestion_pb2.Operation] = []
    token = ""
    while len(ops) < args.limit:
        page = await client.ingestion.ListOperations(
            ingestion_pb2.ListOperationsRequest(
                index_name=args.index, page_size=min(_PAGE, args.limit - len(ops)), page_token=token
            ),
            timeout=args.timeout,
            metadata=_metadata(args),
        )
        ops.extend(page.operations)
        token = page.next_page_token
        if not token:
            break
    if not ops:
        # An unknown index lists no operations: say which case this is (a key
        # with only `ingest` lists the operations it started and cannot ask).
        try:
            await client.index_status(args.index)
        except GroundwireError as exc:
            if exc.code != grpc.StatusCode.PERMISSION_DENIED:
                raise
    if args.json:
        _dump({"operations": [_dict(op) for op in ops]}, out)
        return 0
    if not ops:
        out.write(f"no operations for {args.index}\n")
        return 0
    rows = [
        [
            op.id,
            _STATES[op.state],
            _TRIGGERS[op.trigger],
            _time(op),
            f"{op.elapsed.ToTimedelta().total_seconds():.1f}s" if op.HasField("elapsed") else "-",
            str(op.counts.ingested),
            str(op.counts.unchanged),
            str(op.counts.failed),
            str(op.counts.skipped),
            op.error_code or "",
        ]
        for op in ops
    ]
    headers = [
        "ID",
        "STATE",
        "TRIGGER",
        "CREATED (UTC)",
        "ELAPSED",
        "INGESTED",
        "UNCHANGED",
        "FAILED",
        "SKIPPED",
        "ERROR",
    ]
    out.write(table(headers, rows) + "\n")
    return 0


# -- push ------------------------------------------------------------------------

# Media types the server's loaders read (PushedDocument.media_type), by extension.
MEDIA_TYPES = {
    ".pdf": "application/pdf",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".odt": "application/vnd.oasis.opendocument.text",
    ".epub": "application/epub+zip",
    ".html": "text/html",
    ".htm": "text/html",
    ".xhtml": "application/xhtml+xml",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".text": "text/plain",
    ".log": "text/plain",
    ".csv": "text/csv",
    ".tsv": "text/tab-separated-values",
    ".rst": "text/x-rst",
    ".json": "application/json",
    ".ndjson": "application/x-ndjson",
    ".jsonl": "application/x-ndjson",
    ".xml": "application/xml",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
}
# Bytes per UpsertDocuments call, under the server's default 4 MiB message bound.
_BATCH_BYTES = 3 * 1024 * 1024
# What one push call may carry (the server's bound on a push, ingestion/push.py);
# a larger file is not sent: it fails with TOO_LARGE and the way to ingest it.
PUSH_MAX_BYTES = 4 * 1024 * 1024
PUSH_ELSEWHERE = (
    "ingest it from a directory source instead (`groundwire ingest INDEX`; files over"
    " 10 MiB need the index's [ingestion] max_file_bytes raised)"
)
TOO_LARGE_HINT = (
    "TOO_LARGE: {size:.1f} MiB; a push carries at most {limit} MiB per call"
    " (UpsertDocuments' bound, and the server's [server] max_message_bytes); "
) + PUSH_ELSEWHERE


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


async def push(client: GroundwireClient, args: argparse.Namespace, out: TextIO) -> int:
    from tqdm import tqdm

    files = _files(args.paths)
    failures: dict[str, str] = {}
    docs: list[ingestion_pb2.PushedDocument] = []
    for path, doc_id in files:
        # Every file is sent: the server's loaders decide what they read (a type
        # they do not read comes back as UNSUPPORTED_FORMAT).
        media_type = MEDIA_TYPES.get(path.suffix.lower()) or media_type_of(path)
        try:
            size = path.stat().st_size
            if size > PUSH_MAX_BYTES:
                failures[doc_id] = _too_large(size, PUSH_MAX_BYTES)
                continue
            content = path.read_bytes()
        except OSError:
            failures[doc_id] = "UNREADABLE"
            continue
        docs.append(
            ingestion_pb2.PushedDocument(document_id=doc_id, content=content, media_type=media_type)
        )
    upserted = unchanged = chunks = truncated = version = 0
    timed_out = False
    bar = tqdm(total=len(files), unit="file", desc=args.index, file=sys.stderr, disable=args.json)
    bar.update(len(failures))
    pending = deque(_batches(docs))
    try:
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
                    timed_out = True
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
            upserted += response.upserted
            unchanged += response.unchanged
            chunks += response.chunks_written
            truncated += response.truncated_chunks
            version = max(version, response.published_version)
            failures.update({f.document_id: f.reason for f in response.failures})
            bar.update(len(batch))
    finally:
        bar.close()
    if args.json:
        _dump(
            {
                "index": args.index,
                "files": len(files),
                "ingested": upserted,
                "unchanged": unchanged,
                "failed": len(failures),
                "chunks_written": chunks,
                "truncated_chunks": truncated,
                "published_version": version,
                "failures": [{"document_id": k, "reason": v} for k, v in sorted(failures.items())],
            },
            out,
        )
    else:
        out.write(
            f"{len(files)} files: {upserted} ingested, {unchanged} unchanged, "
            f"{len(failures)} failed ({chunks} chunks written, index version {version})\n"
        )
        if truncated:
            # Embedded from their beginning only (the index's overlong_chunks = "truncate").
            out.write(
                f"  {truncated} of {chunks} chunks longer than the embedding model's window"
                " were embedded truncated\n"
            )
        for doc_id, reason in sorted(failures.items()):
            out.write(f"  failed  {doc_id}: {reason}\n")
        if timed_out:
            out.write(
                f"  a call's deadline ({args.timeout:g} s, --timeout) passed: nothing of it"
                " was published; push those files again with a larger --timeout\n"
            )
    return 1 if failures else 0


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


_HANDLERS: dict[str, Callable[[GroundwireClient, argparse.Namespace, TextIO], Any]] = {
    "search": search,
    "ask": ask,
    "indexes": indexes,
    "operations": operations,
    "push": push,
}
