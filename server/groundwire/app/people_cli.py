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
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from groundwire.app.client_options import (
    Connection,
    OptionError,
    UsageError,
    add_connection_args,
    connection,
)
from groundwire.app.client_options import call_metadata as _metadata
from groundwire.app.client_options import dump_json as _dump
from groundwire_client import (
    GroundwireClient,
    GroundwireError,
    error_from_rpc,
    renumbered_answer,
)
from groundwire_client.v1 import agent_pb2, ingestion_pb2

COMMANDS = ("search", "ask", "indexes", "operations", "push")
_PAGE = 100
_MAX_PAGES = 100
# The default deadline of each UpsertDocuments call of `push` (--timeout): the
# server parses each file of a call in turn (each at most its parser_timeout_seconds,
# default 60 s), then embeds and publishes them. A call whose deadline passes
# publishes nothing (its files fail with DEADLINE_EXCEEDED; earlier calls stay).
PUSH_TIMEOUT_S = 600.0


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
    push.add_argument(
        "--acl",
        default="",
        metavar="PRINCIPALS",
        help="comma-separated access list of every pushed document (group:ID,user:ID):"
        " only callers holding one of them read it (default: the whole tenant)",
    )
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


async def _push(client: GroundwireClient, args: argparse.Namespace, out: TextIO) -> int:
    from groundwire.app.push_cli import push

    return await push(client, args, out)


_HANDLERS: dict[str, Callable[[GroundwireClient, argparse.Namespace, TextIO], Any]] = {
    "search": search,
    "ask": ask,
    "indexes": indexes,
    "operations": operations,
    "push": _push,
}
