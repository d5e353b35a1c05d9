"""Canary test: content never reaches logs, metrics, errors or event metadata.

Unique canary strings (`CANARY-<name>-<uuid>`) are planted in every kind of
content the server handles: document text, titles and metadata values (pushed,
read from files and inline sources), query text, filter values, agent messages,
history, hidden agent instructions, tool arguments, a tool's exception text, a
model's exception text, rerank queries and candidate content, the API key
value, a rejected API key, the tenant name, a tenant a request tries to claim,
and the provider credentials (environment secrets) of the remote chat model,
embedder and Cohere reranker, whose local stand-ins echo the request's texts
and credentials in their error bodies, as some real servers do.

Then every RPC runs, successes and failures alike: bad input, unknown
indexes/agents/rerankers, auth failures, deadline expiry, embedding/reranking/
model failures (the offline reranker's misbehaviours, a scripted chat model that
fails or raises, the stand-ins' 4xx/5xx/malformed answers), tool failures, and
ingestion runs with failing documents and a failing embedder.

Everything the server says is collected and searched for every canary:

- every log record, formatted by the project's JsonFormatter on a DEBUG root
  handler (with the production logger levels of `configure_logging`), plus
  pytest's `caplog` text and every record's message, args and extra fields,
  plus whatever reached the process's stdout/stderr;
- the Prometheus exposition of the metrics port;
- every error: status code, message, google.rpc.Status details (ErrorInfo
  reason, domain and metadata; BadRequest violations; any other detail) and
  all initial and trailing metadata;
- every streamed event (ExecuteStream, WatchIngestion) and every response of a
  content-free RPC, except where content legitimately belongs to the caller:
  TEXT_DELTA text, the answer, the caller's own rewritten query, and Retrieve
  results (their diagnostics are searched).

Positive controls prove the canaries really flowed: Retrieve returns the
planted text, and the stand-ins received the canary credentials and messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from groundwire.app import telemetry
from groundwire.app.config import parse_config
from groundwire.app.logs import JsonFormatter, configure_logging
from groundwire.domain.auth import hash_key
from groundwire.providers.chat.base import ChatResponse, ToolCall, Usage, model_error
from groundwire_client.v1 import agent_pb2 as ag
from groundwire_client.v1 import (
    agent_pb2_grpc,
    common_pb2,
    ingestion_pb2_grpc,
    reranker_pb2_grpc,
    retriever_pb2_grpc,
)
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import reranker_pb2 as rr
from groundwire_client.v1 import retriever_pb2 as rt
from tests.security.harness import (
    contains_any,
    decode_error,
    dump,
    postgres_available,
    report,
)
from tests.support.chat import ScriptedModel
from tests.support.chat_completions_standin import Behaviour as ChatBehaviour
from tests.support.chat_completions_standin import ChatCompletionsStandIn
from tests.support.cohere_standin import CohereStandIn
from tests.support.openai_embeddings_standin import Behaviour as EmbedBehaviour
from tests.support.openai_embeddings_standin import OpenAIEmbeddingsStandIn
from tests.support.rerank_standin import Behaviour as RerankBehaviour
from tests.support.servers import RunningApp, free_port, serving

pytestmark = pytest.mark.timeout(180)

_RUN = uuid.uuid4().hex[:12]


def canary(name: str) -> str:
    return f"CANARY-{name}-{_RUN}"


# Content: must never appear outside results/answers.
CONTENT = {
    name: canary(name)
    for name in (
        "doctext",
        "doctitle",
        "docmeta",
        "filetext",
        "filetitle",
        "inlinetext",
        "badfile",
        "query",
        "filtervalue",
        "message",
        "history",
        "instructions",
        "toolargs",
        "toolexception",
        "modelexception",
        "rerankquery",
        "rerankcontent",
        "remotetext",
    )
}
# Credentials and identities: must never appear anywhere the server writes.
SECRETS = {
    "apikey": "gw_" + canary("apikey"),
    "badkey": "gw_" + canary("badkey"),
    "providerkey": "sk-" + canary("providerkey"),
    "tenant": canary("tenant"),
    "claimedtenant": canary("claimedtenant"),
}
# Caller-chosen identifiers of things that do not exist (never echoed either).
IDENTIFIERS = {
    "indexname": canary("indexname").lower(),
    "agentid": canary("agentid").lower(),
    "rerankername": canary("rerankername"),
}
ALL = {**CONTENT, **SECRETS, **IDENTIFIERS}
PROVIDER_ENV = "GW_SECURITY_TEST_PROVIDER_KEY"
OPS_KEY = "gw_ops-key-canary-test-0000000000000000000000000"


@dataclass
class Collected:
    """Every text the server produced, by channel, plus counters."""

    texts: list[tuple[str, str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, channel: str, text: str) -> None:
        self.texts.append((channel, text))
        self.counts[channel] = self.counts.get(channel, 0) + 1

    def leaks(self, texts: list[tuple[str, str]] | None = None) -> list[str]:
        """Every canary found, case-insensitively (the lexical analyzer lowercases),
        and any bare run id (a canary cut into tokens still carries it)."""
        needles = {v.lower(): k for k, v in ALL.items()} | {_RUN: "run id"}
        out = []
        for channel, text in self.texts if texts is None else texts:
            for needle, excerpt in contains_any([text.lower()], list(needles)):
                out.append(f"{channel}: canary '{needles[needle]}' in ...{excerpt!r}...")
        return out


COLLECTED = Collected()


def write_sources(root: Path) -> tuple[Path, Path]:
    good = root / "good"
    good.mkdir()
    (good / "handbook.md").write_text(
        f"# Travel policy {CONTENT['filetitle']}\n\n"
        f"Travel must be booked two weeks ahead. {CONTENT['filetext']} applies to all trips.\n"
    )
    bad = root / "bad"
    bad.mkdir()
    (bad / "ok.txt").write_text("An ordinary document about quarterly planning.\n")
    (bad / "too-big.txt").write_text(("padding " * 400) + CONTENT["badfile"])
    (bad / "broken.pdf").write_bytes(b"%PDF-1.4 not really " + CONTENT["badfile"].encode())
    (bad / "binary.html").write_bytes(b"\xff\xfe\x00" + CONTENT["badfile"].encode() + b"\x00\xff")
    return good, bad


def config(
    good: Path,
    bad: Path,
    chat: ChatCompletionsStandIn,
    emb: OpenAIEmbeddingsStandIn,
    cohere: CohereStandIn,
    metrics_port: int,
) -> dict[str, object]:
    tenant = SECRETS["tenant"]
    lexical = {"index": "docs", "retrieval_mode": "lexical"}
    return {
        "auth": {
            "keys": [
                {
                    "id": "main",
                    "hash": hash_key(SECRETS["apikey"]),
                    "tenant": tenant,
                    "permissions": ["retrieve", "rerank", "execute", "ingest", "manage"],
                },
                {
                    "id": "ops",
                    "hash": hash_key(OPS_KEY),
                    # The cross-tenant operator: every tenant's runs and counts.
                    "permissions": ["manage", "retrieve", "ingest", "operator"],
                },
            ]
        },
        "metrics": {"enabled": True, "address": f"127.0.0.1:{metrics_port}"},
        "embedders": {
            "hash": {"kind": "hashing", "dimensions": 64},
            "remote": {
                "kind": "openai-compatible",
                "base_url": emb.base_url,
                "model": "standin-embed",
                "dimensions": 16,
                "api_key": {"env": PROVIDER_ENV},
                "timeout_seconds": 5,
            },
        },
        "indexes": {
            "docs": {
                "embedder": "hash",
                "tenant": tenant,
                "sources": [
                    {"kind": "directory", "path": str(good), "glob": "*.md"},
                    {
                        "kind": "inline",
                        "id": "inline-1",
                        "title": "Inline",
                        "text": f"Inline note {CONTENT['inlinetext']} about travel.",
                    },
                ],
                "ingestion": {"strategy": "on_startup"},
            },
            "bad-files": {
                "embedder": "hash",
                "tenant": tenant,
                "sources": [{"kind": "directory", "path": str(bad), "glob": "*"}],
                "ingestion": {"max_file_bytes": 1000},
            },
            "remote-files": {
                "embedder": "remote",
                "tenant": tenant,
                "sources": [{"kind": "directory", "path": str(good), "glob": "*.md"}],
            },
            "remote": {"embedder": "remote", "tenant": tenant},
            "lexical-only": {"tenant": tenant},
        },
        "rerankers": {
            "overlap": {"kind": "offline"},
            "unavailable": {"kind": "offline", "behaviour": "unavailable"},
            "exploding": {"kind": "offline", "behaviour": "error"},
            "hanging": {"kind": "offline", "behaviour": "hang"},
            "nonfinite": {"kind": "offline", "behaviour": "non_finite"},
            "unknownid": {"kind": "offline", "behaviour": "unknown"},
            "cohere": {
                "kind": "cohere",
                "api_key": {"env": PROVIDER_ENV},
                "base_url": cohere.base_url,
                "http_timeout_seconds": 5,
            },
            "llm": {
                "kind": "llm",
                "base_url": chat.base_url,
                "model": "standin-judge",
                "api_key": {"env": PROVIDER_ENV},
                "http_timeout_seconds": 5,
            },
        },
        "reranking": {"default_reranker": "overlap"},
        "models": {
            "offline": {"kind": "offline"},
            "remote": {
                "kind": "openai-compatible",
                "base_url": chat.base_url,
                "api_key": {"env": PROVIDER_ENV},
                "timeout_seconds": 5,
            },
        },
        "tools": {
            "weather": {"import_path": "tests.support.agent_tools:get_weather"},
            "explode": {"import_path": "tests.support.agent_tools:explode"},
        },
        "agents": {
            "grounded": {
                "name": "Grounded",
                "model": "offline/extractive-v1",
                "instructions": f"Hidden instructions {CONTENT['instructions']}",
                "rag": {**lexical, "mode": "grounded", "no_context_behavior": "return_not_found"},
            },
            "hybrid": {
                "name": "Hybrid reranked",
                "model": "offline/extractive-v1",
                "rag": {
                    "index": "docs",
                    "retrieval_mode": "hybrid",
                    "reranking": {"enabled": True, "reranker": "overlap"},
                    "query_rewriting": "history",
                },
            },
            "rerank-fail": {
                "name": "F",
                "model": "offline/extractive-v1",
                "rag": {
                    **lexical,
                    "reranking": {
                        "enabled": True,
                        "reranker": "unavailable",
                        "failure_policy": "fail",
                    },
                },
            },
            "rerank-error": {
                "name": "E",
                "model": "offline/extractive-v1",
                "rag": {
                    **lexical,
                    "reranking": {
                        "enabled": True,
                        "reranker": "exploding",
                        "failure_policy": "use_original_order",
                    },
                },
            },
            "rerank-cohere": {
                "name": "C",
                "model": "offline/extractive-v1",
                "rag": {
                    **lexical,
                    "reranking": {
                        "enabled": True,
                        "reranker": "cohere",
                        "failure_policy": "fail",
                        "timeout_seconds": 3,
                    },
                },
            },
            "required": {
                "name": "R",
                "model": "offline/extractive-v1",
                "rag": {**lexical, "mode": "required", "no_context_behavior": "fail"},
            },
            "agentic": {
                "name": "Agentic",
                "model": "offline/extractive-v1",
                "tools": ["search_documents"],
                "rag": {**lexical, "agentic": True},
            },
            "scripted": {
                "name": "Scripted",
                "model": "offline/extractive-v1",
                "tools": ["weather", "explode"],
                "max_tool_steps": 3,
                "rag": {**lexical, "mode": "open"},
            },
            "remote-model": {
                "name": "Remote",
                "model": "remote/standin-chat",
                "rag": {**lexical, "mode": "grounded"},
            },
            "remote-search": {
                "name": "Remote search",
                "model": "offline/extractive-v1",
                "rag": {"index": "remote", "retrieval_mode": "semantic"},
            },
        },
    }


# -- fixtures ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def standins() -> Iterator[tuple[ChatCompletionsStandIn, OpenAIEmbeddingsStandIn, CohereStandIn]]:
    os.environ[PROVIDER_ENV] = SECRETS["providerkey"]
    with (
        ChatCompletionsStandIn(delay=1.0) as chat,
        OpenAIEmbeddingsStandIn(dimensions=16, delay=1.0) as emb,
        CohereStandIn(delay=1.0) as cohere,
    ):
        yield chat, emb, cohere
    os.environ.pop(PROVIDER_ENV, None)


@pytest.fixture(scope="module")
def log_stream() -> Iterator[io.StringIO]:
    """The production logging set-up (JSON on the root logger, noisy third-party
    loggers at WARNING) at DEBUG, writing into a buffer; pytest's own capture
    handlers are kept."""
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    saved_levels = {
        n: logging.getLogger(n).level
        for n in ("groundwire", "httpx", "httpcore", "psycopg", "pgserver", "cohere", "openai")
    }
    configure_logging("DEBUG", "json")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.setLevel(logging.DEBUG)
    root.handlers[:] = [*saved_handlers, handler]
    logging.getLogger("groundwire").setLevel(logging.DEBUG)
    yield stream
    root.handlers[:] = saved_handlers
    root.setLevel(saved_level)
    for name, level in saved_levels.items():
        logging.getLogger(name).setLevel(level)


@pytest.fixture(
    scope="module",
    params=[
        "memory",
        pytest.param(
            "postgres",
            marks=pytest.mark.skipif(not postgres_available(), reason="no PostgreSQL store"),
        ),
    ],
)
async def app(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    standins: tuple[ChatCompletionsStandIn, OpenAIEmbeddingsStandIn, CohereStandIn],
    log_stream: io.StringIO,
) -> AsyncIterator[RunningApp]:
    """Every scenario runs on the in-memory store and on PostgreSQL (whose errors,
    logs and driver messages are one more place content could escape)."""
    good, bad = write_sources(tmp_path_factory.mktemp("canary-sources"))
    chat, emb, cohere = standins
    data = config(good, bad, chat, emb, cohere, free_port())
    if request.param == "postgres":
        pgdata = tmp_path_factory.mktemp("canary-pg") / "pgdata"
        data["store"] = {"kind": "postgres", "data_dir": str(pgdata)}
    async with serving(parse_config(data)) as running:
        yield running


@pytest.fixture(scope="module")
async def channel(app: RunningApp) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        yield ch


@pytest.fixture(autouse=True)
def _collect_caplog(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG)
    yield
    COLLECTED.add("caplog.text", caplog.text)
    standard = set(vars(logging.makeLogRecord({})))
    for record in caplog.records:
        COLLECTED.add("log record message", record.getMessage())
        for key, value in vars(record).items():
            if _accountable(record.name, key, value):
                continue
            if key not in standard or key in ("args", "exc_text", "stack_info"):
                COLLECTED.add(f"log record field {key}", repr(value))


def _accountable(logger: str, key: str, value: object) -> bool:
    """The access log names the caller's key id and the key's own tenant (issue 29,
    item 5): that one field may carry the tenant canary. A tenant a request claims
    must still never appear, nor the tenant anywhere else."""
    return logger == "groundwire.access" and key == "tenant" and value == SECRETS["tenant"]


def md(key: str = SECRETS["apikey"]) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)


MAIN = md()
OPS = md(OPS_KEY)


# -- calling and collecting -------------------------------------------------------


async def unary(label: str, call: Any, *, scan_response: bool = True) -> Any:
    """Await a unary call; collect its error or (for content-free RPCs) its response
    and metadata. Returns the response or the AioRpcError."""
    try:
        response = await call
    except grpc.aio.AioRpcError as err:
        collect_error(label, err)
        return err
    with contextlib.suppress(Exception):
        for key, value in (await call.initial_metadata()) or ():
            COLLECTED.add(f"{label} initial metadata", f"{key}={value!r}")
        for key, value in (await call.trailing_metadata()) or ():
            COLLECTED.add(f"{label} trailing metadata", f"{key}={value!r}")
    if scan_response:
        COLLECTED.add(f"{label} response", dump(response))
    return response


def collect_error(label: str, err: grpc.aio.AioRpcError) -> None:
    d = decode_error(err.code(), err.details(), err.trailing_metadata())
    COLLECTED.add(f"{label} error", err.code().name)
    for text in d.texts():
        COLLECTED.add(f"{label} error", text)
    COLLECTED.add(f"{label} error debug string", err.debug_error_string() or "")
    for key, value in err.initial_metadata() or ():
        COLLECTED.add(f"{label} error initial metadata", f"{key}={value!r}")
    for key, value in err.trailing_metadata() or ():
        COLLECTED.add(f"{label} error trailing metadata", f"{key}={value!r}")
    COLLECTED.counts["errors"] = COLLECTED.counts.get("errors", 0) + 1


def event_without_content(event: ag.ExecuteStreamResponse) -> ag.ExecuteStreamResponse:
    clean = ag.ExecuteStreamResponse()
    clean.CopyFrom(event)
    clean.text_delta = ""
    if clean.HasField("result"):
        strip_result(clean.result)
    return clean


def strip_result(result: ag.AgentResult) -> None:
    """The caller's own content: the answer, the rewritten query, and the title,
    section and snippet of the evidence it was given and cites."""
    result.answer = ""
    result.rag.ClearField("rewritten_query")
    for citation in result.citations:
        citation.title = citation.section = citation.snippet = ""
    for item in result.rag.context:
        item.title = item.section = item.snippet = ""
    # An agentic search's query is the model's own rewrite (like rewritten_query).
    for search in result.rag.searches:
        search.ClearField("query")


async def stream(label: str, call: Any) -> list[Any]:
    events = []
    try:
        async for event in call:
            events.append(event)
            scanned = (
                event_without_content(event)
                if isinstance(event, ag.ExecuteStreamResponse)
                else event
            )
            COLLECTED.add(f"{label} event", dump(scanned))
            COLLECTED.counts["events"] = COLLECTED.counts.get("events", 0) + 1
    except grpc.aio.AioRpcError as err:
        collect_error(label, err)
    with contextlib.suppress(Exception):
        for key, value in (await call.trailing_metadata()) or ():
            COLLECTED.add(f"{label} trailing metadata", f"{key}={value!r}")
    return events


async def execute(
    agents: agent_pb2_grpc.AgentServiceAsyncStub,
    label: str,
    inp: ag.ExecutionInput,
    metadata: Any = MAIN,
) -> tuple[Any, list[Any]]:
    """Execute and ExecuteStream with the same input; the unary result is
    searched without its answer and rewritten query."""
    result = await unary(
        f"{label} Execute",
        agents.Execute(ag.ExecuteRequest(input=inp), metadata=metadata),
        scan_response=False,
    )
    if isinstance(result, ag.ExecuteResponse):
        clean = ag.ExecuteResponse()
        clean.CopyFrom(result)
        strip_result(clean.result)
        COLLECTED.add(f"{label} Execute response", dump(clean))
    events = await stream(
        f"{label} ExecuteStream",
        agents.ExecuteStream(ag.ExecuteStreamRequest(input=inp), metadata=metadata),
    )
    return result, events


def assert_no_leaks(since: int) -> None:
    leaks = COLLECTED.leaks(COLLECTED.texts[since:])
    assert not leaks, "\n".join(leaks[:20])


def q(
    text: str, mode: Any = rt.RETRIEVAL_MODE_LEXICAL, index: str = "docs", **kw: Any
) -> rt.RetrieveRequest:
    return rt.RetrieveRequest(query=rt.RagQuery(index_name=index, text=text, mode=mode, **kw))


def doc_filter(value: str) -> common_pb2.MetadataFilter:
    return common_pb2.MetadataFilter(
        conditions=[common_pb2.MetadataCondition(key="team", equals=value)]
    )


# -- scenarios --------------------------------------------------------------------


async def test_ingestion_rpcs(app: RunningApp, channel: grpc.aio.Channel, standins: Any) -> None:
    _, emb, _ = standins
    since = len(COLLECTED.texts)
    stub = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
    doc = ing.PushedDocument(
        document_id="pushed-1",
        title=f"Pushed {CONTENT['doctitle']}",
        text=f"Quarterly planning memo. {CONTENT['doctext']} is the launch code.",
        metadata={"team": CONTENT["docmeta"]},
    )
    up = await unary(
        "UpsertDocuments",
        stub.UpsertDocuments(
            ing.UpsertDocumentsRequest(index_name="docs", documents=[doc]), metadata=MAIN
        ),
    )
    assert up.upserted == 1
    await unary(
        "UpsertDocuments unchanged",
        stub.UpsertDocuments(
            ing.UpsertDocumentsRequest(index_name="docs", documents=[doc]), metadata=MAIN
        ),
    )
    bad_docs = [
        ing.PushedDocument(
            document_id="bad-meta",
            text=CONTENT["doctext"],
            metadata={"team": CONTENT["docmeta"] * 20},
        ),
        ing.PushedDocument(
            document_id="bad-key",
            text=CONTENT["doctext"],
            metadata={f"{CONTENT['docmeta']} !": "x"},
        ),
        ing.PushedDocument(document_id="bad-format", text=CONTENT["doctext"], format=cast(Any, 99)),
        ing.PushedDocument(document_id="", text=CONTENT["doctext"]),
    ]
    for i, bad in enumerate(bad_docs):
        await unary(
            f"UpsertDocuments invalid {i}",
            stub.UpsertDocuments(
                ing.UpsertDocumentsRequest(index_name="docs", documents=[bad]), metadata=MAIN
            ),
        )
    await unary(
        "UpsertDocuments html",
        stub.UpsertDocuments(
            ing.UpsertDocumentsRequest(
                index_name="docs",
                documents=[
                    ing.PushedDocument(
                        document_id="html-1",
                        text=f"<html><body><p>{CONTENT['doctext']}</p><script>{CONTENT['doctext']}",
                        format=ing.DOCUMENT_FORMAT_HTML,
                    )
                ],
            ),
            metadata=MAIN,
        ),
    )
    await unary(
        "UpsertDocuments claimed tenant",
        stub.UpsertDocuments(
            ing.UpsertDocumentsRequest(
                index_name="docs", tenant=SECRETS["claimedtenant"], documents=[doc]
            ),
            metadata=MAIN,
        ),
    )
    await unary(
        "UpsertDocuments unknown index",
        stub.UpsertDocuments(
            ing.UpsertDocumentsRequest(index_name=IDENTIFIERS["indexname"], documents=[doc]),
            metadata=MAIN,
        ),
    )
    await unary(
        "UpsertDocuments bad key",
        stub.UpsertDocuments(
            ing.UpsertDocumentsRequest(index_name="docs", documents=[doc]),
            metadata=md(SECRETS["badkey"]),
        ),
    )
    await unary(
        "UpsertDocuments no key",
        stub.UpsertDocuments(ing.UpsertDocumentsRequest(index_name="docs", documents=[doc])),
    )
    await unary(
        "UpsertDocuments basic auth",
        stub.UpsertDocuments(
            ing.UpsertDocumentsRequest(index_name="docs", documents=[doc]),
            metadata=(("authorization", f"Basic {SECRETS['badkey']}"),),
        ),
    )
    # A remote embedder: works, then fails with bodies that echo texts and the key.
    remote_doc = ing.PushedDocument(
        document_id="remote-1", text=f"Remote memo {CONTENT['remotetext']}"
    )
    ok = await unary(
        "UpsertDocuments remote",
        stub.UpsertDocuments(
            ing.UpsertDocumentsRequest(index_name="remote", documents=[remote_doc]), metadata=MAIN
        ),
    )
    assert ok.upserted == 1
    for behaviour in (
        EmbedBehaviour.SERVER_ERROR,
        EmbedBehaviour.BAD_REQUEST,
        EmbedBehaviour.MALFORMED_JSON,
        EmbedBehaviour.WRONG_DIMENSION,
        EmbedBehaviour.NAN_VALUES,
    ):
        emb.behaviour = behaviour
        changed = ing.PushedDocument(
            document_id="remote-2", text=f"{behaviour.value} {CONTENT['remotetext']}"
        )
        await unary(
            f"UpsertDocuments remote {behaviour.value}",
            stub.UpsertDocuments(
                ing.UpsertDocumentsRequest(index_name="remote", documents=[changed]), metadata=MAIN
            ),
        )
    emb.behaviour = EmbedBehaviour.NORMAL
    assert any(SECRETS["providerkey"] in str(r.headers) for r in emb.requests), "control: key sent"
    assert any(CONTENT["remotetext"] in str(r.body) for r in emb.requests), "control: text sent"
    await unary(
        "DeleteDocuments",
        stub.DeleteDocuments(
            ing.DeleteDocumentsRequest(
                index_name="docs", document_ids=["html-1", CONTENT["doctext"]]
            ),
            metadata=MAIN,
        ),
    )
    await unary(
        "DeleteDocuments invalid",
        stub.DeleteDocuments(
            ing.DeleteDocumentsRequest(
                index_name="docs", document_ids=[f"{CONTENT['doctext']}\x00"]
            ),
            metadata=MAIN,
        ),
    )
    # Source ingestion with failing documents, and with a failing embedder.
    runs: tuple[tuple[str, EmbedBehaviour | None], ...] = (
        ("bad-files", None),
        ("remote-files", EmbedBehaviour.SERVER_ERROR),
        ("docs", None),
    )
    for index, fault in runs:
        if fault is not None:
            emb.behaviour = fault
        op = await unary(
            f"StartIngestion {index}",
            stub.StartIngestion(ing.StartIngestionRequest(index_name=index), metadata=MAIN),
        )
        assert isinstance(op, ing.StartIngestionResponse)
        await stream(
            f"WatchIngestion {index}",
            stub.WatchIngestion(
                ing.WatchIngestionRequest(operation_id=op.operation.id), metadata=MAIN
            ),
        )
        emb.behaviour = EmbedBehaviour.NORMAL
    statuses = await unary(
        "ListOperations", stub.ListOperations(ing.ListOperationsRequest(), metadata=OPS)
    )
    states = {
        o.index_name: (o.state, o.error_code, [f.reason for f in o.failures])
        for o in statuses.operations
    }
    assert (
        states["bad-files"][0] == ing.OPERATION_STATE_SUCCEEDED and len(states["bad-files"][2]) >= 2
    ), states
    assert states["remote-files"][0] == ing.OPERATION_STATE_FAILED, states
    await unary(
        "ListOperations bad token",
        stub.ListOperations(ing.ListOperationsRequest(page_token=CONTENT["query"]), metadata=OPS),
    )
    for name in ("docs", "bad-files", "remote", IDENTIFIERS["indexname"]):
        await unary(
            f"GetIndexStatus {name}",
            stub.GetIndexStatus(ing.GetIndexStatusRequest(index_name=name), metadata=OPS),
        )
        await unary(
            f"GetIndex {name}", stub.GetIndex(ing.GetIndexRequest(index_name=name), metadata=MAIN)
        )
    await unary("ListIndexes", stub.ListIndexes(ing.ListIndexesRequest(), metadata=MAIN))
    await unary(
        "ListIndexes bad token",
        stub.ListIndexes(ing.ListIndexesRequest(page_token=CONTENT["query"]), metadata=MAIN),
    )
    await unary(
        "CancelIngestion idle",
        stub.CancelIngestion(ing.CancelIngestionRequest(index_name="docs"), metadata=MAIN),
    )
    await stream(
        "WatchIngestion unknown",
        stub.WatchIngestion(
            ing.WatchIngestionRequest(operation_id=CONTENT["query"]), metadata=MAIN
        ),
    )
    assert_no_leaks(since)


async def test_retrieve_rpcs(app: RunningApp, channel: grpc.aio.Channel, standins: Any) -> None:
    _, emb, _ = standins
    since = len(COLLECTED.texts)
    stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
    text = f"launch code {CONTENT['doctext']} {CONTENT['query']}"
    found = False
    for mode in (rt.RETRIEVAL_MODE_SEMANTIC, rt.RETRIEVAL_MODE_LEXICAL, rt.RETRIEVAL_MODE_HYBRID):
        resp = await unary(
            f"Retrieve {mode}", stub.Retrieve(q(text, mode), metadata=MAIN), scan_response=False
        )
        COLLECTED.add("Retrieve diagnostics", dump(resp.diagnostics))
        found |= any(CONTENT["doctext"] in r.content for r in resp.results)
        filtered = await unary(
            f"Retrieve filtered {mode}",
            stub.Retrieve(q(text, mode, filter=doc_filter(CONTENT["filtervalue"])), metadata=MAIN),
            scan_response=False,
        )
        COLLECTED.add("Retrieve diagnostics", dump(filtered.diagnostics))
    assert found, "control: the planted document is retrievable"
    failing = [
        ("unknown index", q(text, index=IDENTIFIERS["indexname"])),
        ("unterminated phrase", q(f'"{CONTENT["query"]}')),
        ("too long", q(CONTENT["query"] * 200)),
        ("empty", q(" \n ")),
        ("lexical-only semantic", q(text, rt.RETRIEVAL_MODE_SEMANTIC, "lexical-only")),
        ("bad filter value", q(text, filter=doc_filter(CONTENT["filtervalue"] * 20))),
        (
            "bad filter key",
            q(
                text,
                filter=common_pb2.MetadataFilter(
                    conditions=[
                        common_pb2.MetadataCondition(key=f"{CONTENT['filtervalue']} x", equals="y")
                    ]
                ),
            ),
        ),
        ("bad mode", q(text, cast(Any, 42))),
        ("bad top_k", q(text, top_k=100_000)),
        ("claimed tenant", q(text, tenant=SECRETS["claimedtenant"])),
    ]
    for label, req in failing:
        await unary(f"Retrieve {label}", stub.Retrieve(req, metadata=MAIN))
    await unary("Retrieve bad key", stub.Retrieve(q(text), metadata=md(SECRETS["badkey"])))
    for behaviour in (
        EmbedBehaviour.SERVER_ERROR,
        EmbedBehaviour.RATE_LIMITED,
        EmbedBehaviour.MALFORMED_JSON,
        EmbedBehaviour.WRONG_COUNT,
    ):
        emb.behaviour = behaviour
        for mode in (rt.RETRIEVAL_MODE_SEMANTIC, rt.RETRIEVAL_MODE_HYBRID):
            await unary(
                f"Retrieve remote {behaviour.value}",
                stub.Retrieve(
                    q(f"{behaviour.value} {CONTENT['query']}", mode, "remote"), metadata=MAIN
                ),
            )
    emb.behaviour = EmbedBehaviour.SLOW
    await unary(
        "Retrieve deadline",
        stub.Retrieve(
            q(f"slow {CONTENT['query']}", rt.RETRIEVAL_MODE_SEMANTIC, "remote"),
            metadata=MAIN,
            timeout=0.3,
        ),
    )
    emb.behaviour = EmbedBehaviour.NORMAL
    assert_no_leaks(since)


async def test_rerank_rpcs(app: RunningApp, channel: grpc.aio.Channel, standins: Any) -> None:
    _, _, cohere = standins
    since = len(COLLECTED.texts)
    stub = reranker_pb2_grpc.RerankerServiceStub(channel)

    def req(
        reranker: str, policy: Any = rr.RERANK_FAILURE_POLICY_FAIL, **kw: Any
    ) -> rr.RerankRequest:
        candidates = [
            rr.RerankCandidate(
                document_id=f"d{i}",
                chunk_id="c0",
                content=f"{CONTENT['rerankcontent']} passage {i} travel",
            )
            for i in range(3)
        ]
        return rr.RerankRequest(
            query=f"travel {CONTENT['rerankquery']}",
            candidates=candidates,
            reranker=reranker,
            failure_policy=policy,
            **kw,
        )

    for name in (
        "overlap",
        "unavailable",
        "exploding",
        "nonfinite",
        "unknownid",
        "cohere",
        IDENTIFIERS["rerankername"],
    ):
        for policy in (rr.RERANK_FAILURE_POLICY_FAIL, rr.RERANK_FAILURE_POLICY_USE_ORIGINAL_ORDER):
            await unary(f"Rerank {name} {policy}", stub.Rerank(req(name, policy), metadata=MAIN))
    await unary(
        "Rerank hang",
        stub.Rerank(req("hanging", timeout=Duration(nanos=200_000_000)), metadata=MAIN),
    )
    for behaviour in (
        RerankBehaviour.SERVER_ERROR,
        RerankBehaviour.BAD_REQUEST,
        RerankBehaviour.UNAUTHORIZED,
        RerankBehaviour.MALFORMED_JSON,
        RerankBehaviour.NAN_SCORE,
        RerankBehaviour.RATE_LIMITED,
    ):
        cohere.behaviour = behaviour
        await unary(f"Rerank cohere {behaviour.value}", stub.Rerank(req("cohere"), metadata=MAIN))
    cohere.behaviour = RerankBehaviour.NORMAL
    # The LLM reranker: the chat stand-in echoes the prompt (the query and the
    # candidates) and the key in its error bodies; its answers here are prose.
    chat, _, _ = standins
    for chat_behaviour in (
        ChatBehaviour.NORMAL,
        ChatBehaviour.SERVER_ERROR,
        ChatBehaviour.UNAUTHORIZED,
        ChatBehaviour.RATE_LIMITED,
        ChatBehaviour.MALFORMED_JSON,
    ):
        chat.behaviour = chat_behaviour
        await unary(f"Rerank llm {chat_behaviour.value}", stub.Rerank(req("llm"), metadata=MAIN))
    chat.behaviour = ChatBehaviour.NORMAL
    assert any(
        CONTENT["rerankcontent"] in str(r.body) and SECRETS["providerkey"] in str(r.headers)
        for r in chat.requests
    ), "control: the LLM reranker sent the candidates and the key"
    dup = req("overlap")
    dup.candidates.append(dup.candidates[0])
    await unary("Rerank duplicate", stub.Rerank(dup, metadata=MAIN))
    long = req("overlap")
    long.candidates[1].content = CONTENT["rerankcontent"] * 3000
    await unary("Rerank too long", stub.Rerank(long, metadata=MAIN))
    empty = req("overlap")
    empty.query = " "
    await unary("Rerank empty query", stub.Rerank(empty, metadata=MAIN))
    await unary("Rerank bad key", stub.Rerank(req("overlap"), metadata=md(SECRETS["badkey"])))
    assert any(SECRETS["providerkey"] in str(r.headers) for r in cohere.requests), (
        "control: key sent"
    )
    assert_no_leaks(since)


async def test_agent_rpcs(app: RunningApp, channel: grpc.aio.Channel, standins: Any) -> None:
    chat, _, cohere = standins
    since = len(COLLECTED.texts)
    stub = agent_pb2_grpc.AgentServiceStub(channel)
    history = [
        ag.ConversationTurn(role=ag.TURN_ROLE_USER, content=f"earlier {CONTENT['history']} travel"),
        ag.ConversationTurn(role=ag.TURN_ROLE_ASSISTANT, content=f"noted {CONTENT['history']}"),
    ]

    def inp(agent: str, message: str = "", **kw: Any) -> ag.ExecutionInput:
        return ag.ExecutionInput(
            agent_id=agent,
            message=message or f"launch code {CONTENT['doctext']} travel {CONTENT['message']}",
            history=history,
            **kw,
        )

    await unary("ListAgents", stub.ListAgents(ag.ListAgentsRequest(), metadata=MAIN))
    await unary(
        "GetAgent grounded", stub.GetAgent(ag.GetAgentRequest(agent_id="grounded"), metadata=MAIN)
    )
    await unary(
        "GetAgent unknown",
        stub.GetAgent(ag.GetAgentRequest(agent_id=IDENTIFIERS["agentid"]), metadata=MAIN),
    )
    answers = []
    for agent in (
        "grounded",
        "hybrid",
        "rerank-fail",
        "rerank-error",
        "required",
        "agentic",
        "remote-search",
    ):
        result, _ = await execute(stub, agent, inp(agent))
        answers.append(result)
        await execute(
            stub, f"{agent} filtered", inp(agent, filter=doc_filter(CONTENT["filtervalue"]))
        )
        await execute(stub, f"{agent} no match", inp(agent, message=f"zebra {CONTENT['message']}"))
    # The positive control asks what the evidence answers (the offline model refuses
    # when the question's other words are nowhere in the evidence, as the probes' are).
    control, _ = await execute(
        stub, "grounded control", inp("grounded", message=f"launch code {CONTENT['doctext']}")
    )
    answers.append(control)
    assert any(
        isinstance(a, ag.ExecuteResponse) and CONTENT["doctext"] in a.result.answer for a in answers
    ), "control"
    for behaviour in (RerankBehaviour.SERVER_ERROR, RerankBehaviour.MALFORMED_JSON):
        cohere.behaviour = behaviour
        await execute(stub, f"rerank-cohere {behaviour.value}", inp("rerank-cohere"))
    cohere.behaviour = RerankBehaviour.NORMAL
    # Invalid input and auth failures.
    for label, bad in (
        ("unknown agent", inp(IDENTIFIERS["agentid"])),
        ("empty message", inp("grounded", message=" ")),
        ("too long", inp("grounded", message=CONTENT["message"] * 1000)),
        (
            "bad role",
            ag.ExecutionInput(
                agent_id="grounded",
                message=CONTENT["message"],
                history=[ag.ConversationTurn(role=cast(Any, 9), content=CONTENT["history"])],
            ),
        ),
        (
            "empty turn",
            ag.ExecutionInput(
                agent_id="grounded",
                message=CONTENT["message"],
                history=[ag.ConversationTurn(role=ag.TURN_ROLE_USER, content=" ")],
            ),
        ),
        ("claimed tenant", inp("grounded", tenant=SECRETS["claimedtenant"])),
        ("bad filter", inp("grounded", filter=doc_filter(CONTENT["filtervalue"] * 30))),
    ):
        await execute(stub, label, bad)
    await execute(stub, "bad key", inp("grounded"), metadata=md(SECRETS["badkey"]))
    # The remote chat model: works, then every failure mode (bodies echo messages and the key).
    await execute(stub, "remote-model ok", inp("remote-model"))
    for chat_behaviour in (
        ChatBehaviour.SERVER_ERROR,
        ChatBehaviour.UNAUTHORIZED,
        ChatBehaviour.RATE_LIMITED,
        ChatBehaviour.MALFORMED_JSON,
        ChatBehaviour.MALFORMED_CHUNK,
        ChatBehaviour.NO_CHOICES,
        ChatBehaviour.BAD_TOOL_CALL,
        ChatBehaviour.ERROR_EVENT,
        ChatBehaviour.STREAM_CUT,
        ChatBehaviour.STREAM_TRUNCATED,
    ):
        chat.behaviour = chat_behaviour
        await execute(stub, f"remote-model {chat_behaviour.value}", inp("remote-model"))
    assert any(SECRETS["providerkey"] in str(r.headers) for r in chat.requests), "control: key sent"
    assert any(CONTENT["message"] in str(r.body) for r in chat.requests), "control: message sent"
    chat.reset()
    assert_no_leaks(since)


async def test_scripted_model_tools_and_failures(
    app: RunningApp, channel: grpc.aio.Channel
) -> None:
    since = len(COLLECTED.texts)
    stub = agent_pb2_grpc.AgentServiceStub(channel)
    registry = app.components.agents
    original = registry.get("scripted")

    def tool_round() -> list[Any]:
        return [
            ChatResponse(
                "",
                (
                    ToolCall("call-1", "weather", f'{{"city": "{CONTENT["toolargs"]}"}}'),
                    ToolCall("call-2", "explode", f'{{"reason": "{CONTENT["toolexception"]}"}}'),
                    ToolCall("call-3", "weather", f'{{"cty": "{CONTENT["toolargs"]}"}}'),
                    ToolCall("call-4", "explode", f"not json {CONTENT['toolargs']}"),
                ),
                usage=Usage(5, 5),
            ),
            ChatResponse("final answer [1]", usage=Usage(5, 5)),
        ]

    scenarios: list[tuple[str, list[Any]]] = [
        ("tools", tool_round()),
        (
            "model unavailable",
            [model_error("MODEL_UNAVAILABLE", "the model provider is unavailable")],
        ),
        (
            "model rejected",
            [model_error("MODEL_REJECTED", "the model provider rejected the request")],
        ),
        ("model raises", [RuntimeError(f"provider exploded {CONTENT['modelexception']}")]),
        (
            "model steps exhausted",
            [ChatResponse("", (ToolCall("c", "weather", f'{{"city": "{CONTENT["toolargs"]}"}}'),))]
            * 6,
        ),
    ]
    message = f"travel {CONTENT['message']}"
    try:
        for label, script in scenarios:
            for api in ("Execute", "ExecuteStream"):
                registry.register(replace(original, model=ScriptedModel(list(script))))
                request_input = ag.ExecutionInput(agent_id="scripted", message=message)
                if api == "Execute":
                    result = await unary(
                        f"scripted {label} Execute",
                        stub.Execute(ag.ExecuteRequest(input=request_input), metadata=MAIN),
                        scan_response=False,
                    )
                    if isinstance(result, ag.ExecuteResponse):
                        strip_result(result.result)
                        COLLECTED.add(f"scripted {label} Execute response", dump(result))
                else:
                    await stream(
                        f"scripted {label} ExecuteStream",
                        stub.ExecuteStream(
                            ag.ExecuteStreamRequest(input=request_input), metadata=MAIN
                        ),
                    )
    finally:
        registry.register(original)
    assert_no_leaks(since)


def test_the_scanner_finds_planted_canaries() -> None:
    """The search itself can fail: planted canaries are found in any case, as JSON,
    as protobuf text, and as a bare run id."""
    probe = Collected()
    probe.add("json", '{"msg": "x", "q": "' + CONTENT["query"].upper() + '"}')
    probe.add("proto", dump(ag.ExecuteStreamResponse(error_message=SECRETS["apikey"])))
    probe.add("tokens", f"terms: canary doctext {_RUN}")
    probe.add("clean", "nothing to see")
    found = {leak.split(":", 1)[0] for leak in probe.leaks()}
    assert found == {"json", "proto", "tokens"}, found


async def test_tool_name_invented_by_the_model_is_not_echoed(
    app: RunningApp, channel: grpc.aio.Channel
) -> None:
    """A model (steered by document text) may call a tool that does not exist with
    a name quoting that text: the TOOL_UNKNOWN trace and events must not repeat it."""
    invented = canary("modeltoolname")
    stub = agent_pb2_grpc.AgentServiceStub(channel)
    registry = app.components.agents
    original = registry.get("scripted")
    script = [ChatResponse("", (ToolCall("call-1", invented, "{}"),)), ChatResponse("done")]
    texts: list[str] = []
    try:
        registry.register(replace(original, model=ScriptedModel(list(script))))
        request_input = ag.ExecutionInput(agent_id="scripted", message="travel")
        result = await stub.Execute(ag.ExecuteRequest(input=request_input), metadata=MAIN)
        assert [t.error_code for t in result.result.tool_calls] == ["TOOL_UNKNOWN"]
        texts.append(dump(result.result.tool_calls[0]))
        registry.register(replace(original, model=ScriptedModel(list(script))))
        async for event in stub.ExecuteStream(
            ag.ExecuteStreamRequest(input=request_input), metadata=MAIN
        ):
            texts.append(dump(event_without_content(event)))
    finally:
        registry.register(original)
    assert not contains_any(texts, [invented])


async def test_no_canary_in_logs_metrics_or_output(
    app: RunningApp,
    channel: grpc.aio.Channel,
    log_stream: io.StringIO,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Runs last: everything collected above, the JSON log and the metrics."""
    lines = log_stream.getvalue().splitlines()
    assert any('"msg": "rpc"' in line for line in lines), "control: access logs were captured"
    own_tenant = '"tenant": "' + SECRETS["tenant"] + '"'
    for line in lines:
        if '"logger": "groundwire.access"' in line:
            line = line.replace(own_tenant, '"tenant": "<key tenant>"')
        COLLECTED.add("json log", line)
    address = telemetry._installed[0]
    body = await asyncio.to_thread(
        lambda: urllib.request.urlopen(f"http://{address}/metrics", timeout=5).read().decode()
    )
    assert "rpc_server_call_duration_seconds_bucket" in body, "control: metrics were scraped"
    COLLECTED.add("prometheus metrics", body)
    out, err = capfd.readouterr()
    COLLECTED.add("process stdout", out)
    COLLECTED.add("process stderr", err)
    # Content previews are opt-in ([logging.previews]): with the default
    # configuration and DEBUG logging, no preview record or field exists at all.
    assert not app.components.config.logging.previews.enabled
    for line in lines:
        assert "preview" not in json.loads(line).get("msg", ""), line
        assert '"query_preview"' not in line and '"text_previews"' not in line, line
    assert not [ch for ch, _ in COLLECTED.texts if "preview" in ch]
    leaks = COLLECTED.leaks()
    channels = len(COLLECTED.texts)
    report(
        "canary",
        f"{len(ALL)} canaries searched in {channels} texts: {COLLECTED.counts.get('errors', 0)} errors, "
        f"{COLLECTED.counts.get('events', 0)} streamed events, {len(lines)} JSON log lines, "
        f"{len(body)} bytes of metrics; leaks: {len(leaks)}",
    )
    assert not leaks, "\n".join(leaks[:30])
