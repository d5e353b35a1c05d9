"""Cross-tenant matrix: every RPC and path, every caller against every other owner.

Three owners hold documents in the same indexes, each with unique marker words
in text and titles, owner metadata, and shared "common" words so that ranking
alone would mix them: tenant `acme`, tenant `globex` (both through push with
their own keys) and untenanted documents (from the index's configured sources
and pushed by an untenanted key). A fourth index is stamped with tenant `acme`
by configuration. The whole matrix runs against the in-memory store and against
PostgreSQL (each implements scoping itself, in numpy masks and in SQL).

For every (caller, target owner) pair the matrix runs, over real gRPC with the
caller's API key:

- direct retrieval in all three modes, with the target's marker, the common
  words and the target's document ids as query, and with every request field
  that could widen scope: no scope, a metadata filter naming the target owner, a
  filter on a `tenant` key, the target's tenant in the `tenant` field, the
  largest top_k and leg depth;
- agent RAG through Execute and ExecuteStream (lexical and hybrid agents, and an
  agent with a configured filter), with the same queries and scope fields;
- the agentic `search_documents` tool: the offline model searching by itself,
  and a scripted model whose tool arguments try `tenant`, `filter`, `index` and
  the target's marker (what the tool returns to the model is checked too);
- ingestion push: upserting over the target's document ids, claiming the
  target's tenant, deleting the target's document ids;
- rerank (stateless: answers only about the candidates the caller sent);
- index listings; operation listings and status need MANAGE (see below).

Zero leaks means: no result, citation, candidate, context item, count, error
detail or event seen by the caller ever contains the target's document ids or
markers; the scope fields are refused (TENANT_MISMATCH) or can only narrow; and
the target's documents are unchanged afterwards. Positive controls prove every
probe would have found the target's documents had the caller been the target.

OPERATOR is the cross-tenant permission: index status (document and chunk
counts, running/last operation) and the operation history cover every tenant's
documents, whatever the key's tenant. MANAGE is scoped to the key's tenant: its
own counts, and the runs and ingestion control of indexes whose configured
tenant is its own. Tenant keys without MANAGE are refused on those RPCs; pushed
documents never appear in operations.

Visibility (`tenants` on an index or agent): every listing on every surface
(gRPC, Connect, OpenAI /v1/models, the MCP tools, the dashboard API) leaves out
what the caller's tenant may not see, and every RPC answers a hidden index or
agent exactly as a missing one.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import grpc
import httpx
import pytest

from groundwire.app.config import parse_config
from groundwire.domain.auth import hash_key
from groundwire.providers.chat.base import ChatResponse, ToolCall
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
from tests.security.harness import decode_error, dump, postgres_available, summary
from tests.support.chat import ScriptedModel
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(120)

RUN = uuid.uuid4().hex[:8]
OWNERS = ("acme", "globex", "")  # "" = untenanted
CALLERS = OWNERS


def label(owner: str) -> str:
    return owner or "untenanted"


KEYS = {owner: f"gw_matrix-{label(owner)}-{RUN}-0000000000000000000000" for owner in OWNERS}
OPS_KEY = f"gw_matrix-ops-{RUN}-00000000000000000000000000000"
ACME_OPS_KEY = f"gw_matrix-acme-ops-{RUN}-000000000000000000000000"
# A `manage` key per owner (its own tenant's indexes, counts and runs only).
MANAGER_KEYS = {
    owner: f"gw_matrix-{label(owner)}-mgr-{RUN}-0000000000000000000000" for owner in OWNERS
}
MARK = {owner: f"zq{label(owner)}mark{RUN}" for owner in OWNERS}
TITLE_MARK = {owner: f"zq{label(owner)}title{RUN}" for owner in OWNERS}
SOURCE_MARK = f"zquntenantedsource{RUN}"
ACMEKB_MARK = f"zqacmekbsource{RUN}"
COMMON = "quarterly roadmap budget"


def doc_ids(owner: str) -> list[str]:
    return [f"{label(owner)}-plan", f"{label(owner)}-memo"]


# Documents each owner can see in index "kb" (the untenanted one includes the
# configured source's document).
VISIBLE = {owner: set(doc_ids(owner)) for owner in OWNERS}
VISIBLE[""] |= {"source-1"}
ALL_MARKS = {owner: [MARK[owner], TITLE_MARK[owner], *doc_ids(owner)] for owner in OWNERS}
ALL_MARKS[""] += [SOURCE_MARK, "source-1"]
ACMEKB_MARKS = [ACMEKB_MARK, "acmekb-1"]

MODES = {
    "semantic": rt.RETRIEVAL_MODE_SEMANTIC,
    "lexical": rt.RETRIEVAL_MODE_LEXICAL,
    "hybrid": rt.RETRIEVAL_MODE_HYBRID,
}
QUERIES = ("marker", "common", "doc-ids")
SCOPES = ("none", "filter-owner", "filter-tenant-key", "tenant-field", "max-depth")
CHECKED: dict[str, int] = {}


def count(path: str) -> None:
    CHECKED[path] = CHECKED.get(path, 0) + 1


def config() -> dict[str, object]:
    perms = ["retrieve", "rerank", "execute", "ingest"]
    keys = [
        {"id": f"{label(o)}-app", "hash": hash_key(KEYS[o]), "tenant": o, "permissions": perms}
        for o in OWNERS
    ]
    keys += [
        # The cross-tenant operator (`operator` implies `manage`).
        {"id": "ops", "hash": hash_key(OPS_KEY), "permissions": ["operator"]},
        {
            "id": "acme-ops",
            "hash": hash_key(ACME_OPS_KEY),
            "tenant": "acme",
            "permissions": ["manage"],
        },
    ]
    keys += [
        {
            "id": f"{label(o)}-mgr",
            "hash": hash_key(MANAGER_KEYS[o]),
            "tenant": o,
            "permissions": ["manage", "retrieve"],
        }
        for o in OWNERS
    ]
    lexical = {"index": "kb", "retrieval_mode": "lexical", "mode": "open"}
    return {
        "auth": {"keys": keys},
        "embedders": {"hash": {"kind": "hashing", "dimensions": 128}},
        "indexes": {
            "kb": {
                "embedder": "hash",
                "sources": [
                    {
                        "kind": "inline",
                        "id": "source-1",
                        "title": "Source",
                        "text": f"Quarterly roadmap budget for everyone. {SOURCE_MARK} {MARK['']}.",
                        "metadata": {"owner": "untenanted", "team": "finance"},
                    }
                ],
                "ingestion": {"strategy": "on_startup"},
            },
            "acme-kb": {
                "embedder": "hash",
                "tenant": "acme",
                "sources": [
                    {
                        "kind": "inline",
                        "id": "acmekb-1",
                        "text": f"Quarterly roadmap budget {ACMEKB_MARK}.",
                    }
                ],
                "ingestion": {"strategy": "on_startup"},
            },
            "bm25probe": {},
            # Seen and used by tenant globex only (hidden from acme and untenanted).
            HIDDEN_INDEX: {
                "embedder": "hash",
                "tenant": "globex",
                "tenants": ["globex"],
                "sources": [
                    {"kind": "inline", "id": "globexonly-1", "text": f"Roadmap {HIDDEN_MARK}."}
                ],
                "ingestion": {"strategy": "on_startup"},
            },
        },
        "rerankers": {"overlap": {"kind": "offline"}},
        "models": {"offline": {"kind": "offline"}},
        "agents": {
            "rag-lexical": {"name": "Lexical", "model": "offline/extractive-v1", "rag": lexical},
            "acme-kb-agent": {
                "name": "Over acme-kb",
                "model": "offline/extractive-v1",
                "rag": {"index": "acme-kb", "retrieval_mode": "lexical"},
            },
            "rag-hybrid": {
                "name": "Hybrid",
                "model": "offline/extractive-v1",
                "rag": {
                    "index": "kb",
                    "retrieval_mode": "hybrid",
                    "reranking": {"enabled": True, "reranker": "overlap"},
                },
            },
            "rag-filtered": {
                "name": "Filtered",
                "model": "offline/extractive-v1",
                "rag": {**lexical, "filter": {"team": "finance"}},
            },
            "agentic": {
                "name": "Agentic",
                "model": "offline/extractive-v1",
                "tools": ["search_documents"],
                "rag": {"index": "kb", "retrieval_mode": "lexical", "agentic": True},
            },
            # Hidden from everyone but globex: its index is globex's only.
            HIDDEN_INDEX_AGENT: {
                "name": "Over globex-only",
                "description": f"Answers from {HIDDEN_MARK}",
                "model": "offline/extractive-v1",
                "rag": {"index": HIDDEN_INDEX, "retrieval_mode": "lexical"},
            },
            # Over the shared index, but listed for acme only.
            ACME_ONLY_AGENT: {
                "name": "Acme only",
                "model": "offline/extractive-v1",
                "tenants": ["acme"],
                "rag": lexical,
            },
            "agentic-scripted": {
                "name": "Agentic scripted",
                "model": "offline/extractive-v1",
                "tools": ["search_documents"],
                "max_tool_steps": 8,
                "rag": {"index": "kb", "retrieval_mode": "hybrid", "agentic": True},
            },
        },
    }


HIDDEN_INDEX = "globex-only"
HIDDEN_INDEX_AGENT = "globex-only-agent"
ACME_ONLY_AGENT = "acme-only-agent"
HIDDEN_MARK = f"zqglobexonly{RUN}"
# What each tenant may not see (configuration `tenants`; answered as missing).
HIDDEN_INDEXES = {"acme": {HIDDEN_INDEX}, "globex": set(), "": {HIDDEN_INDEX}}
HIDDEN_AGENTS = {
    "acme": {HIDDEN_INDEX_AGENT},
    "globex": {ACME_ONLY_AGENT},
    "": {HIDDEN_INDEX_AGENT, ACME_ONLY_AGENT},
}


def md(owner: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {KEYS[owner]}"),)


def foreign_marks(caller: str) -> list[str]:
    """Everything that identifies documents the caller must not see."""
    out = [m for o in OWNERS if o != caller for m in ALL_MARKS[o]]
    if caller != "acme":
        out += ACMEKB_MARKS
    if caller != "globex":
        out += [HIDDEN_MARK, "globexonly-1"]
    return out


def assert_clean(caller: str, *texts: str) -> None:
    for text in texts:
        low = text.lower()
        for mark in foreign_marks(caller):
            assert mark.lower() not in low, f"{label(caller)} saw {mark!r} in ...{text[:400]!r}"


@dataclass
class Stubs:
    retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub
    agents: agent_pb2_grpc.AgentServiceAsyncStub
    ingestion: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub
    reranker: reranker_pb2_grpc.RerankerServiceAsyncStub


STORES = [
    "memory",
    pytest.param(
        "postgres",
        marks=pytest.mark.skipif(not postgres_available(), reason="PostgreSQL store unavailable"),
    ),
]


@pytest.fixture(scope="module", params=STORES)
async def app(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RunningApp]:
    """The whole matrix runs once per store implementation."""
    data = config()
    if request.param == "postgres":
        data["store"] = {
            "kind": "postgres",
            "data_dir": str(tmp_path_factory.mktemp("matrix-pg") / "pgdata"),
        }
    async with serving(parse_config(data), http=True) as running:  # http: the dashboard API
        yield running


@pytest.fixture(scope="module")
async def stubs(app: RunningApp) -> AsyncIterator[Stubs]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        stubs = Stubs(
            retriever_pb2_grpc.RetrieverServiceStub(ch),
            agent_pb2_grpc.AgentServiceStub(ch),
            ingestion_pb2_grpc.IngestionManagerServiceStub(ch),
            reranker_pb2_grpc.RerankerServiceStub(ch),
        )
        for owner in OWNERS:
            docs = [
                ing.PushedDocument(
                    document_id=doc_id,
                    title=f"{'Plan' if i == 0 else 'Memo'} {TITLE_MARK[owner]}",
                    text=f"{COMMON.capitalize()} review. Secret marker {MARK[owner]} for {label(owner)}. "
                    f"The {COMMON} launch is confidential.",
                    metadata={"owner": label(owner), "team": "finance"},
                )
                for i, doc_id in enumerate(doc_ids(owner))
            ]
            up = await stubs.ingestion.UpsertDocuments(
                ing.UpsertDocumentsRequest(index_name="kb", documents=docs), metadata=md(owner)
            )
            assert up.upserted == len(docs) or up.unchanged == len(docs), up
        yield stubs


# -- requests ---------------------------------------------------------------------


def query_text(kind: str, target: str) -> str:
    if kind == "marker":
        return f"{MARK[target]} {TITLE_MARK[target]}"
    if kind == "common":
        return COMMON
    return " ".join(ALL_MARKS[target][2:])  # the target's document ids as terms


def scoped(scope: str, target: str) -> dict[str, Any]:
    if scope == "filter-owner":
        return {
            "filter": common_pb2.MetadataFilter(
                conditions=[common_pb2.MetadataCondition(key="owner", equals=label(target))]
            )
        }
    if scope == "filter-tenant-key":
        return {
            "filter": common_pb2.MetadataFilter(
                conditions=[
                    common_pb2.MetadataCondition(
                        key="tenant",
                        any_of=common_pb2.StringList(values=[target or "x", label(target)]),
                    )
                ]
            )
        }
    if scope == "tenant-field":
        return {"tenant": target}
    return {}


def expect_mismatch(caller: str, target: str, scope: str) -> bool:
    """Claiming another tenant in the `tenant` field is refused (an explicit ""
    is the same as leaving it unset, so it is no claim for a tenant key)."""
    return scope == "tenant-field" and target != "" and target != caller


def check_error(caller: str, err: grpc.aio.AioRpcError, reason: str) -> None:
    d = decode_error(err.code(), err.details(), err.trailing_metadata())
    assert d.code == grpc.StatusCode.PERMISSION_DENIED and [i.reason for i in d.infos] == [
        reason
    ], d
    assert_clean(caller, *d.texts())


PAIRS = [(c, t) for c in CALLERS for t in OWNERS if c != t]


def pair_id(pair: tuple[str, str]) -> str:
    return f"{label(pair[0])}->{label(pair[1])}"


# -- controls ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("owner", OWNERS, ids=label)
async def test_control_owners_find_their_own_documents(stubs: Stubs, owner: str, mode: str) -> None:
    """Every probe below would find the target's documents if the caller were the target."""
    for kind in QUERIES:
        resp = await stubs.retriever.Retrieve(
            rt.RetrieveRequest(
                query=rt.RagQuery(
                    index_name="kb", text=query_text(kind, owner), mode=MODES[mode], top_k=50
                )
            ),
            metadata=md(owner),
        )
        found = {r.document_id for r in resp.results}
        assert found <= VISIBLE[owner], found
        if kind != "doc-ids" or mode != "semantic":
            assert found & set(doc_ids(owner)), (owner, mode, kind)
    count("controls")


# -- direct retrieval -------------------------------------------------------------


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("kind", QUERIES)
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
async def test_retrieve(
    stubs: Stubs, pair: tuple[str, str], mode: str, kind: str, scope: str
) -> None:
    caller, target = pair
    extra = scoped(scope, target)
    top_k = 100 if scope == "max-depth" else 20
    fusion = rt.FusionOptions(leg_depth=1000) if scope == "max-depth" and mode == "hybrid" else None
    req = rt.RetrieveRequest(
        query=rt.RagQuery(
            index_name="kb",
            text=query_text(kind, target),
            mode=MODES[mode],
            top_k=top_k,
            fusion=fusion,
            **extra,
        )
    )
    count(f"Retrieve {mode}")
    try:
        resp = await stubs.retriever.Retrieve(req, metadata=md(caller))
    except grpc.aio.AioRpcError as err:
        assert expect_mismatch(caller, target, scope), err
        check_error(caller, err, "TENANT_MISMATCH")
        return
    assert not expect_mismatch(caller, target, scope)
    assert {r.document_id for r in resp.results} <= VISIBLE[caller]
    assert_clean(caller, dump(resp))
    visible_chunks = len(VISIBLE[caller]) * 4
    assert (
        resp.diagnostics.semantic_hits <= visible_chunks
        and resp.diagnostics.lexical_hits <= visible_chunks
    )


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("caller", ["globex", ""], ids=label)
async def test_retrieve_index_stamped_with_another_tenant(
    stubs: Stubs, caller: str, mode: str
) -> None:
    resp = await stubs.retriever.Retrieve(
        rt.RetrieveRequest(
            query=rt.RagQuery(
                index_name="acme-kb", text=f"{ACMEKB_MARK} {COMMON}", mode=MODES[mode], top_k=100
            )
        ),
        metadata=md(caller),
    )
    assert list(resp.results) == []
    assert_clean(caller, dump(resp))
    own = await stubs.retriever.Retrieve(
        rt.RetrieveRequest(
            query=rt.RagQuery(
                index_name="acme-kb", text=f"{ACMEKB_MARK} {COMMON}", mode=MODES[mode]
            )
        ),
        metadata=md("acme"),
    )
    assert [r.document_id for r in own.results] == ["acmekb-1"]  # control
    count("Retrieve config-stamped index")


# -- agent RAG --------------------------------------------------------------------


def agent_ids(result: ag.AgentResult) -> set[str]:
    rag = result.rag
    ids = {
        i.document_id
        for i in [
            *rag.candidates,
            *rag.accepted,
            *rag.rejected,
            *rag.context_excluded,
            *rag.context,
        ]
    }
    ids |= {c.document_id for c in result.citations}
    ids |= {c.document_id for c in rag.reranking.candidates}
    return ids


M = TypeVar("M", ag.AgentResult, ag.ExecuteStreamResponse)


def without_query_echo(msg: M) -> M:
    """A copy without the agentic searches' query text: the model's rewrite of the
    caller's own message (a caller may type another tenant's marker), not data."""
    out = type(msg)()
    out.CopyFrom(msg)
    result = out if isinstance(out, ag.AgentResult) else getattr(out, "result", None)
    if result is not None:
        for search in result.rag.searches:
            search.ClearField("query")
    return out


def check_result(caller: str, result: ag.AgentResult) -> None:
    assert agent_ids(result) <= VISIBLE[caller], agent_ids(result)
    assert result.rag.candidate_count <= len(VISIBLE[caller]) * 4
    assert_clean(caller, dump(without_query_echo(result)), result.answer)


AGENT_SCOPES = ("none", "filter-owner", "filter-tenant-key", "tenant-field")


@pytest.mark.parametrize("scope", AGENT_SCOPES)
@pytest.mark.parametrize("kind", QUERIES)
@pytest.mark.parametrize("agent", ["rag-lexical", "rag-hybrid", "rag-filtered", "agentic"])
@pytest.mark.parametrize("api", ["Execute", "ExecuteStream"])
@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
async def test_agent(
    stubs: Stubs, pair: tuple[str, str], api: str, agent: str, kind: str, scope: str
) -> None:
    caller, target = pair
    inp = ag.ExecutionInput(
        agent_id=agent, message=query_text(kind, target), **scoped(scope, target)
    )
    count(f"{api} {agent}")
    try:
        if api == "Execute":
            resp = await stubs.agents.Execute(ag.ExecuteRequest(input=inp), metadata=md(caller))
            check_result(caller, resp.result)
            return
        events = [
            e
            async for e in stubs.agents.ExecuteStream(
                ag.ExecuteStreamRequest(input=inp), metadata=md(caller)
            )
        ]
    except grpc.aio.AioRpcError as err:
        assert expect_mismatch(caller, target, scope), err
        check_error(caller, err, "TENANT_MISMATCH")
        return
    assert not expect_mismatch(caller, target, scope)
    assert events[-1].type == ag.EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED, events[-1]
    for event in events:
        assert_clean(
            caller, dump(without_query_echo(event))
        )  # text deltas included: they must not quote the target
        if event.HasField("rag_search"):
            assert event.rag_search.candidate_count <= len(VISIBLE[caller]) * 4
    check_result(caller, events[-1].result)


def tool_attacks(target: str) -> list[str]:
    marker = MARK[target]
    return [
        f'{{"query": "{marker}"}}',
        f'{{"query": "{COMMON}", "top_k": 20}}',
        f'{{"query": "{marker}", "tenant": "{target}"}}',
        f'{{"query": "{marker}", "filter": {{"owner": "{label(target)}"}}}}',
        f'{{"query": "{marker}", "index": "acme-kb"}}',
        f'{{"query": "{marker}", "index_name": "acme-kb", "top_k": 20}}',
        f'{{"query": "{" ".join(doc_ids(target))}", "top_k": 20}}',
    ]


@pytest.mark.parametrize("api", ["Execute", "ExecuteStream"])
@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
async def test_agentic_tool_arguments_cannot_widen_scope(
    app: RunningApp, stubs: Stubs, pair: tuple[str, str], api: str
) -> None:
    """A model steered into calling search_documents with the target's marker, tenant,
    filter or another index: invalid arguments are refused, valid ones search only
    the caller's scope, and nothing of the target reaches the model."""
    caller, target = pair
    attacks = tool_attacks(target)
    calls = tuple(ToolCall(f"call-{i}", "search_documents", args) for i, args in enumerate(attacks))
    model = ScriptedModel([ChatResponse("", calls), ChatResponse("done")])
    registry = app.components.agents
    original = registry.get("agentic-scripted")
    registry.register(replace(original, model=model))
    try:
        inp = ag.ExecutionInput(agent_id="agentic-scripted", message=query_text("marker", target))
        if api == "Execute":
            result = (
                await stubs.agents.Execute(ag.ExecuteRequest(input=inp), metadata=md(caller))
            ).result
        else:
            events = [
                e
                async for e in stubs.agents.ExecuteStream(
                    ag.ExecuteStreamRequest(input=inp), metadata=md(caller)
                )
            ]
            for event in events:
                assert_clean(caller, dump(without_query_echo(event)))
            result = events[-1].result
    finally:
        registry.register(original)
    check_result(caller, result)
    codes = [t.error_code for t in result.tool_calls]
    assert codes[2:6] == ["TOOL_INVALID_ARGUMENTS"] * 4, codes  # tenant, filter, index, index_name
    # What the tool gave the model: only the caller's documents.
    tool_messages = [m.content for m in model.calls[-1] if m.role == "tool"]
    assert len(tool_messages) == len(attacks)
    assert_clean(caller, *tool_messages)
    for _ in attacks:
        count(f"search_documents tool args ({api})")


# -- ingestion push ---------------------------------------------------------------


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
async def test_push_cannot_overwrite_claim_or_delete_another_owner(
    stubs: Stubs, pair: tuple[str, str]
) -> None:
    caller, target = pair
    victim = doc_ids(target)[0]
    # Ids are per tenant: pushing the target's id creates the caller's own document
    # (an answer indistinguishable from an unused id) and leaves the target's alone.
    hijack = ing.PushedDocument(document_id=victim, text=f"hijacked by {label(caller)} {COMMON}")
    resp = await stubs.ingestion.UpsertDocuments(
        ing.UpsertDocumentsRequest(index_name="kb", documents=[hijack]), metadata=md(caller)
    )
    assert (resp.upserted, list(resp.failures)) == (1, []), resp
    count("UpsertDocuments over another owner's id")
    if target:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stubs.ingestion.UpsertDocuments(
                ing.UpsertDocumentsRequest(
                    index_name="kb",
                    tenant=target,
                    documents=[ing.PushedDocument(document_id=f"claim-{RUN}", text="x")],
                ),
                metadata=md(caller),
            )
        check_error(caller, info.value, "TENANT_MISMATCH")
        count("UpsertDocuments claiming another tenant")
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stubs.ingestion.DeleteDocuments(
                ing.DeleteDocumentsRequest(
                    index_name="kb", tenant=target, document_ids=doc_ids(target)
                ),
                metadata=md(caller),
            )
        check_error(caller, info.value, "TENANT_MISMATCH")
        count("DeleteDocuments naming another tenant")
    # Deleting the target's ids deletes only the caller's own document of that id.
    deleted = await stubs.ingestion.DeleteDocuments(
        ing.DeleteDocumentsRequest(index_name="kb", document_ids=doc_ids(target)),
        metadata=md(caller),
    )
    assert deleted.deleted == 1
    count("DeleteDocuments of another owner's ids")
    # The target's documents are intact.
    own = await stubs.retriever.Retrieve(
        rt.RetrieveRequest(
            query=rt.RagQuery(
                index_name="kb", text=MARK[target], mode=rt.RETRIEVAL_MODE_LEXICAL, top_k=10
            )
        ),
        metadata=md(target),
    )
    assert set(doc_ids(target)) <= {r.document_id for r in own.results}
    assert all("hijacked" not in r.content for r in own.results)
    mine = await stubs.retriever.Retrieve(
        rt.RetrieveRequest(
            query=rt.RagQuery(
                index_name="kb", text="hijacked", mode=rt.RETRIEVAL_MODE_LEXICAL, top_k=10
            )
        ),
        metadata=md(target),
    )
    assert list(mine.results) == []


# -- rerank, listings, operations --------------------------------------------------


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
async def test_rerank_is_stateless(stubs: Stubs, pair: tuple[str, str]) -> None:
    """Naming another owner's document ids returns only what the caller sent."""
    caller, target = pair
    sent = [
        rr.RerankCandidate(document_id=d, chunk_id="0", content=f"caller text {COMMON}")
        for d in doc_ids(target)
    ]
    resp = await stubs.reranker.Rerank(
        rr.RerankRequest(query=MARK[target], candidates=sent, reranker="overlap"),
        metadata=md(caller),
    )
    assert sorted(c.document_id for c in resp.results) == sorted(doc_ids(target))
    text = dump(resp)
    for mark in (MARK[target], TITLE_MARK[target]):
        assert mark not in text
    count("Rerank")


@pytest.mark.parametrize("caller", CALLERS, ids=label)
async def test_index_listings_describe_configuration_only(stubs: Stubs, caller: str) -> None:
    listed = await stubs.ingestion.ListIndexes(ing.ListIndexesRequest(), metadata=md(caller))
    texts = [dump(listed)]
    for name in ("kb", "acme-kb"):
        texts.append(
            dump(
                await stubs.ingestion.GetIndex(
                    ing.GetIndexRequest(index_name=name), metadata=md(caller)
                )
            )
        )
    assert_clean(caller, *texts)
    for owner in OWNERS:
        for mark in (MARK[owner], TITLE_MARK[owner]):
            assert all(mark not in t for t in texts)
    count("ListIndexes/GetIndex")


MANAGE_RPCS = ("GetIndexStatus",)
# `ingest` starts, watches and cancels ingestion of its own tenant's indexes.
CONTROL_RPCS = ("StartIngestion", "CancelIngestion", "WatchIngestion")
# Index -> its configured tenant (the owner of its source documents).
INDEX_TENANTS = {"kb": "", "acme-kb": "acme"}


async def call_manage(
    stubs: Stubs, rpc: str, metadata: Any, index: str = "kb", operation_id: str = "x"
) -> Any:
    s = stubs.ingestion
    if rpc == "GetIndexStatus":
        return await s.GetIndexStatus(
            ing.GetIndexStatusRequest(index_name=index), metadata=metadata
        )
    if rpc == "StartIngestion":
        return await s.StartIngestion(
            ing.StartIngestionRequest(index_name=index), metadata=metadata
        )
    if rpc == "CancelIngestion":
        return await s.CancelIngestion(
            ing.CancelIngestionRequest(index_name=index), metadata=metadata
        )
    if rpc == "WatchIngestion":
        return [
            e
            async for e in s.WatchIngestion(
                ing.WatchIngestionRequest(operation_id=operation_id), metadata=metadata
            )
        ]
    return await s.ListOperations(ing.ListOperationsRequest(), metadata=metadata)


def check_missing_operator(caller: str, err: grpc.aio.AioRpcError) -> None:
    """Another tenant's index: neither `ingest` nor `manage` covers it."""
    check_error(caller, err, "PERMISSION_DENIED")
    d = decode_error(err.code(), err.details(), err.trailing_metadata())
    assert d.infos[0].metadata["permission"] == "operator", d
    assert "'operator' permission" in d.message, d


def check_missing_manage(caller: str, err: grpc.aio.AioRpcError) -> None:
    """PERMISSION_DENIED that names the missing permission, in the message and
    in ErrorInfo metadata."""
    check_error(caller, err, "PERMISSION_DENIED")
    d = decode_error(err.code(), err.details(), err.trailing_metadata())
    assert d.infos[0].metadata["permission"] == "manage", d
    assert "'manage' permission" in d.message, d


@pytest.mark.parametrize("rpc", MANAGE_RPCS)
@pytest.mark.parametrize("caller", CALLERS, ids=label)
async def test_operations_need_manage(stubs: Stubs, caller: str, rpc: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call_manage(stubs, rpc, md(caller))
    check_missing_manage(caller, info.value)
    count("operations without MANAGE")


@pytest.mark.parametrize("caller", CALLERS, ids=label)
async def test_ingest_lists_only_the_operations_its_key_started(stubs: Stubs, caller: str) -> None:
    # Its own (possibly none yet), never another key's or the server's.
    listed = await call_manage(stubs, "ListOperations", md(caller))
    assert {o.started_by_key_id for o in listed.operations} <= {f"{label(caller)}-app"}
    assert_clean(caller, dump(listed))
    count("ListOperations of the key's own operations")


async def last_operation_id(stubs: Stubs, index: str) -> str:
    """The index's newest ingestion run (pushes are their tenant's own operations)."""
    ops = await stubs.ingestion.ListOperations(
        ing.ListOperationsRequest(index_name=index),
        metadata=(("authorization", f"Bearer {OPS_KEY}"),),
    )
    runs = [o for o in ops.operations if o.trigger != ing.OPERATION_TRIGGER_PUSH]
    return runs[0].id


@pytest.mark.parametrize("index", sorted(INDEX_TENANTS))
@pytest.mark.parametrize("rpc", CONTROL_RPCS)
@pytest.mark.parametrize("caller", CALLERS, ids=label)
async def test_ingest_controls_ingestion_of_its_own_tenants_indexes_only(
    stubs: Stubs, caller: str, rpc: str, index: str
) -> None:
    operation_id = await last_operation_id(stubs, index)
    try:
        got = await call_manage(stubs, rpc, md(caller), index, operation_id)
    except grpc.aio.AioRpcError as err:
        if INDEX_TENANTS[index] != caller:
            check_missing_operator(caller, err)
            count("ingestion control of another tenant's index")
            return
        # Allowed; cancelling or starting may still meet the index's state.
        assert err.code() != grpc.StatusCode.PERMISSION_DENIED, err
        assert err.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.ABORTED), err
        count("ingestion control of its own tenant's index")
        return
    else:
        assert INDEX_TENANTS[index] == caller, f"{label(caller)} controlled {index}"
        if rpc == "StartIngestion":
            # Let it finish before the next test reads the index.
            await call_manage(stubs, "WatchIngestion", md(caller), index, got.operation.id)
    if rpc == "WatchIngestion":
        assert_clean(caller, *(dump(e) for e in got))
    count("ingestion control of its own tenant's index")


@pytest.mark.parametrize("key", [OPS_KEY], ids=["ops"])
async def test_manage_is_an_operator_permission_not_scoped_to_tenants(
    stubs: Stubs, key: str
) -> None:
    """Documented semantics: an OPERATOR key, whatever its tenant, sees index-wide
    counts and every operation; pushed documents never appear in operations.
    (A MANAGE key is scoped to its tenant: test_manage_sees_its_own_tenant_only.)"""
    metadata = (("authorization", f"Bearer {key}"),)
    status = (
        await stubs.ingestion.GetIndexStatus(
            ing.GetIndexStatusRequest(index_name="kb"), metadata=metadata
        )
    ).status
    assert (
        status.document_count >= sum(len(doc_ids(o)) for o in OWNERS) + 1
    )  # every owner's documents
    ops = await stubs.ingestion.ListOperations(ing.ListOperationsRequest(), metadata=metadata)
    assert {o.index_name for o in ops.operations} >= {"kb", "acme-kb"}
    text = dump(ops)
    for owner in OWNERS:
        for mark in (MARK[owner], TITLE_MARK[owner], *doc_ids(owner)):
            assert mark not in text
    count("operations with MANAGE")


# -- whose documents a key sees ---------------------------------------------------


@pytest.mark.parametrize("caller", CALLERS, ids=label)
async def test_an_empty_tenant_scope_is_reported_to_its_caller(stubs: Stubs, caller: str) -> None:
    """acme-kb's source documents belong to tenant acme (its configured tenant):
    every other caller's scope holds nothing there, and Retrieve and Execute
    say so (a fact about the caller's own scope, never about another's)."""
    owns = caller == "acme"
    for mode in MODES.values():
        resp = await stubs.retriever.Retrieve(
            rt.RetrieveRequest(query=rt.RagQuery(index_name="acme-kb", text=COMMON, mode=mode)),
            metadata=md(caller),
        )
        assert bool(resp.results) == owns
        assert resp.diagnostics.tenant_scope_empty == (not owns)
        assert_clean(caller, dump(resp))
    # A query that finds nothing in a scope that does hold documents is no empty scope.
    miss = await stubs.retriever.Retrieve(
        rt.RetrieveRequest(
            query=rt.RagQuery(index_name="kb", text="xylophone", mode=rt.RETRIEVAL_MODE_LEXICAL)
        ),
        metadata=md(caller),
    )
    assert not miss.results and not miss.diagnostics.tenant_scope_empty
    result = (
        await stubs.agents.Execute(
            ag.ExecuteRequest(input=ag.ExecutionInput(agent_id="acme-kb-agent", message=COMMON)),
            metadata=md(caller),
        )
    ).result
    assert result.rag.tenant_scope_empty == (not owns)
    assert result.rag.context_accepted == owns
    if not owns:
        assert result.rag.no_context_reason == ag.NO_CONTEXT_REASON_NO_RESULTS
    assert_clean(caller, dump(result))
    count("empty tenant scope reported")


# -- regressions of fixed findings ------------------------------------------------


async def test_bm25_scores_do_not_depend_on_other_tenants_documents(stubs: Stubs) -> None:
    probe = f"zqprobe{RUN}"

    async def acme_score() -> float:
        resp = await stubs.retriever.Retrieve(
            rt.RetrieveRequest(
                query=rt.RagQuery(
                    index_name="bm25probe", text=probe, mode=rt.RETRIEVAL_MODE_LEXICAL
                )
            ),
            metadata=md("acme"),
        )
        assert [r.document_id for r in resp.results] == ["acme-probe"]
        return resp.results[0].score.raw_score

    await stubs.ingestion.UpsertDocuments(
        ing.UpsertDocumentsRequest(
            index_name="bm25probe",
            documents=[
                ing.PushedDocument(document_id="acme-probe", text=f"alpha {probe} beta gamma")
            ],
        ),
        metadata=md("acme"),
    )
    before = await acme_score()
    globex_docs = [
        ing.PushedDocument(document_id=f"globex-probe-{i}", text=f"delta {probe} epsilon")
        for i in range(20)
    ]
    await stubs.ingestion.UpsertDocuments(
        ing.UpsertDocumentsRequest(index_name="bm25probe", documents=globex_docs),
        metadata=md("globex"),
    )
    after = await acme_score()
    count("BM25 side channel")
    assert after == pytest.approx(before), (
        f"acme's score moved from {before} to {after} because of globex's documents"
    )


async def test_upsert_does_not_reveal_that_another_tenant_uses_an_id(stubs: Stubs) -> None:
    probe = ing.PushedDocument(document_id=doc_ids("globex")[1], text=f"acme text {COMMON}")
    absent = ing.PushedDocument(document_id=f"never-used-{RUN}", text=f"acme text {COMMON}")
    taken = await stubs.ingestion.UpsertDocuments(
        ing.UpsertDocumentsRequest(index_name="kb", documents=[probe]), metadata=md("acme")
    )
    free = await stubs.ingestion.UpsertDocuments(
        ing.UpsertDocumentsRequest(index_name="kb", documents=[absent]), metadata=md("acme")
    )
    await stubs.ingestion.DeleteDocuments(
        ing.DeleteDocumentsRequest(index_name="kb", document_ids=[absent.document_id]),
        metadata=md("acme"),
    )
    count("document id existence oracle")
    # Indistinguishable answers would mean no oracle.
    assert (taken.upserted, [f.reason for f in taken.failures]) == (
        free.upserted,
        [f.reason for f in free.failures],
    )


async def test_auth_error_reasons_are_declared_in_the_contract(stubs: Stubs) -> None:
    from groundwire_client.v1 import errors_pb2

    declared = {
        v.name.removeprefix("ERROR_REASON_") for v in errors_pb2.ErrorReason.DESCRIPTOR.values
    }
    seen = set()
    for metadata, req in (
        ((("authorization", "Bearer gw_unknown"),), q_lexical("x")),
        (md("acme"), q_lexical("x", tenant="globex")),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stubs.retriever.Retrieve(req, metadata=metadata)
        d = decode_error(info.value.code(), info.value.details(), info.value.trailing_metadata())
        seen |= {i.reason for i in d.infos}
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stubs.ingestion.GetIndexStatus(
            ing.GetIndexStatusRequest(index_name="kb"), metadata=md("acme")
        )
    d = decode_error(info.value.code(), info.value.details(), info.value.trailing_metadata())
    seen |= {i.reason for i in d.infos}
    assert seen == {"UNAUTHENTICATED", "TENANT_MISMATCH", "PERMISSION_DENIED"}
    assert seen <= declared, sorted(seen - declared)


# -- the dashboard management REST API (/api/rag): the same RPCs over HTTP -------


@pytest.mark.parametrize("index", sorted(INDEX_TENANTS))
@pytest.mark.parametrize("caller", CALLERS, ids=label)
async def test_dashboard_api_follows_the_rpcs_tenant_rules(
    app: RunningApp, stubs: Stubs, caller: str, index: str
) -> None:
    """Configuration for every key; counts need MANAGE (refused like
    GetIndexStatus); cancel is ingestion control of the caller's own tenant's
    indexes only; nothing of another owner's documents in any answer."""
    headers = {"authorization": f"Bearer {KEYS[caller]}"}
    base = f"/api/rag/indexes/{index}"
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{app.http_port}", timeout=30) as h:
        texts = [(await h.get(p, headers=headers)).text for p in ("/api/rag/indexes", base)]
        status = await h.get(f"{base}/status", headers=headers)
        assert status.status_code == 403 and status.json()["reason"] == "PERMISSION_DENIED"
        assert "'manage' permission" in status.json()["message"]
        cancel = await h.post(f"{base}/ingestion/cancel", headers=headers)
        if INDEX_TENANTS[index] == caller:
            assert cancel.status_code == 400, cancel.text  # let through: nothing runs
            assert cancel.json()["reason"] == "NO_RUNNING_INGESTION"
        else:
            assert cancel.status_code == 403 and cancel.json()["reason"] == "PERMISSION_DENIED"
        texts += [status.text, cancel.text]
        # MANAGE sees the index-wide counts GetIndexStatus gives over gRPC.
        ops = await h.get(f"{base}/status", headers={"authorization": f"Bearer {OPS_KEY}"})
    assert_clean(caller, *texts)
    assert all("documentCount" not in t for t in texts)
    want = await call_manage(
        stubs, "GetIndexStatus", (("authorization", f"Bearer {OPS_KEY}"),), index
    )
    assert ops.json()["documentCount"] == str(want.status.document_count)
    count("dashboard REST API")


def q_lexical(text: str, **kw: Any) -> rt.RetrieveRequest:
    return rt.RetrieveRequest(
        query=rt.RagQuery(index_name="kb", text=text, mode=rt.RETRIEVAL_MODE_LEXICAL, **kw)
    )


@summary("tenant-matrix")
def matrix_size() -> str | None:
    """The number of checked combinations per path."""
    total = sum(CHECKED.values())
    if total == 0:
        return None
    combos = len(PAIRS) * len(MODES) * len(QUERIES) * len(SCOPES)
    return (
        f"{total} cross-tenant combinations checked over the memory and PostgreSQL stores "
        f"({len(PAIRS)} caller->owner pairs; Retrieve {combos} per store): "
        + ", ".join(f"{k} {v}" for k, v in sorted(CHECKED.items()))
    )


# -- visibility: what a tenant may not see is listed nowhere and answers as missing --

ALL_INDEXES = {"kb", "acme-kb", "bm25probe", HIDDEN_INDEX}
ALL_AGENTS = {
    "rag-lexical",
    "acme-kb-agent",
    "rag-hybrid",
    "rag-filtered",
    "agentic",
    HIDDEN_INDEX_AGENT,
    ACME_ONLY_AGENT,
    "agentic-scripted",
}
MISSING_INDEX = f"no-such-index-{RUN}"
MISSING_AGENT = f"no-such-agent-{RUN}"


def error_signature(err: grpc.aio.AioRpcError) -> tuple[Any, ...]:
    """Everything a caller reads in an error but the request id."""
    d = decode_error(err.code(), err.details(), err.trailing_metadata())
    return (
        d.code,
        d.message,
        [(i.reason, i.domain, sorted(i.metadata.items())) for i in d.infos],
        [(v.field, v.description) for v in d.violations],
    )


async def grpc_error(call: Any) -> tuple[Any, ...]:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        if hasattr(call, "__aiter__"):  # a server stream
            [e async for e in call]
        else:
            await call
    return error_signature(info.value)


def http_signature(r: httpx.Response) -> tuple[Any, ...]:
    body = r.json()
    body.pop("requestId", None)
    return (r.status_code, json_without_request_id(body))


def json_without_request_id(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: json_without_request_id(v)
            for k, v in value.items()
            if k.lower() not in ("requestid", "request_id")
        }
    if isinstance(value, list):
        return [json_without_request_id(v) for v in value]
    return value


@pytest.mark.parametrize("caller", CALLERS, ids=label)
async def test_listings_leave_out_what_the_tenant_may_not_see(
    app: RunningApp, stubs: Stubs, caller: str
) -> None:
    """gRPC, Connect, OpenAI /v1/models, the MCP tools and the dashboard API list
    exactly the indexes and agents the caller's tenant may see."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    configured: dict[str, Any] = config()
    assert set(configured["indexes"]) == ALL_INDEXES and set(configured["agents"]) == ALL_AGENTS
    want_indexes = ALL_INDEXES - HIDDEN_INDEXES[caller]
    want_agents = ALL_AGENTS - HIDDEN_AGENTS[caller]
    texts: list[str] = []
    # gRPC (one index per page: the pages walk the visible names only).
    names: list[str] = []
    token = ""
    while True:
        page = await stubs.ingestion.ListIndexes(
            ing.ListIndexesRequest(page_size=1, page_token=token), metadata=md(caller)
        )
        names += [i.name for i in page.indexes]
        texts.append(dump(page))
        token = page.next_page_token
        if not token:
            break
    assert set(names) == want_indexes and len(names) == len(want_indexes)
    agents = await stubs.agents.ListAgents(ag.ListAgentsRequest(), metadata=md(caller))
    assert {a.id for a in agents.agents} == want_agents
    texts.append(dump(agents))
    headers = {"authorization": f"Bearer {KEYS[caller]}"}
    base = f"http://127.0.0.1:{app.http_port}"
    async with httpx.AsyncClient(base_url=base, timeout=30) as h:
        # Connect (JSON).
        r = await h.post(
            "/groundwire.v1.IngestionManagerService/ListIndexes",
            json={},
            headers={**headers, "content-type": "application/json"},
        )
        assert r.status_code == 200, r.text
        assert {i["name"] for i in r.json()["indexes"]} == want_indexes
        texts.append(r.text)
        r = await h.post(
            "/groundwire.v1.AgentService/ListAgents",
            json={},
            headers={**headers, "content-type": "application/json"},
        )
        assert r.status_code == 200, r.text
        assert {a["id"] for a in r.json()["agents"]} == want_agents
        texts.append(r.text)
        # The OpenAI facade: a model is an agent.
        r = await h.get("/v1/models", headers=headers)
        assert r.status_code == 200, r.text
        assert {m["id"] for m in r.json()["data"]} == want_agents
        texts.append(r.text)
        # The dashboard API.
        r = await h.get("/api/rag/indexes", headers=headers)
        assert r.status_code == 200, r.text
        assert {i["name"] for i in r.json()["indexes"]} == want_indexes
        texts.append(r.text)
    # The MCP tools that name indexes and agents.
    import httpx2

    http = httpx2.AsyncClient(headers=headers, timeout=30)
    async with Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
        listed = await client.call_tool("list_indexes", {})
        assert not listed.is_error
        assert {i["name"] for i in listed.structured_content["indexes"]} == want_indexes
        texts.append(str(listed.content) + str(listed.structured_content))
        listed = await client.call_tool("list_agents", {})
        assert not listed.is_error
        assert {a["id"] for a in listed.structured_content["agents"]} == want_agents
        texts.append(str(listed.content) + str(listed.structured_content))
        tools = await client.list_tools()
        texts.append(str(tools))
    assert_clean(caller, *texts)
    for hidden in HIDDEN_INDEXES[caller] | HIDDEN_AGENTS[caller]:
        assert all(hidden not in t for t in texts), hidden
    count("listings by visibility (gRPC, Connect, OpenAI, MCP, dashboard)")


@pytest.mark.parametrize("caller", CALLERS, ids=label)
async def test_a_hidden_index_answers_exactly_as_a_missing_one(stubs: Stubs, caller: str) -> None:
    """Every RPC that names an index: the same code, reason, message and details
    for an index the caller may not see as for one that does not exist."""
    hidden = sorted(HIDDEN_INDEXES[caller])
    if not hidden:
        pytest.skip("this tenant sees every index")
    s = stubs.ingestion
    mgr = (("authorization", f"Bearer {MANAGER_KEYS[caller]}"),)

    def calls(name: str) -> dict[str, Any]:
        doc = ing.PushedDocument(document_id="x", text=f"probe {COMMON}")
        return {
            "Retrieve": lambda: stubs.retriever.Retrieve(
                rt.RetrieveRequest(query=rt.RagQuery(index_name=name, text=COMMON)),
                metadata=md(caller),
            ),
            "GetIndex": lambda: s.GetIndex(
                ing.GetIndexRequest(index_name=name), metadata=md(caller)
            ),
            "GetIndexStatus": lambda: s.GetIndexStatus(
                ing.GetIndexStatusRequest(index_name=name), metadata=mgr
            ),
            "ListOperations": lambda: s.ListOperations(
                ing.ListOperationsRequest(index_name=name), metadata=mgr
            ),
            "StartIngestion": lambda: s.StartIngestion(
                ing.StartIngestionRequest(index_name=name), metadata=md(caller)
            ),
            "StartIngestion (manage)": lambda: s.StartIngestion(
                ing.StartIngestionRequest(index_name=name), metadata=mgr
            ),
            "CancelIngestion": lambda: s.CancelIngestion(
                ing.CancelIngestionRequest(index_name=name), metadata=md(caller)
            ),
            "ListDocuments": lambda: s.ListDocuments(
                ing.ListDocumentsRequest(index_name=name), metadata=md(caller)
            ),
            "GetDocument": lambda: s.GetDocument(
                ing.GetDocumentRequest(index_name=name, document_id="globexonly-1"),
                metadata=md(caller),
            ),
            "UpsertDocuments": lambda: s.UpsertDocuments(
                ing.UpsertDocumentsRequest(index_name=name, documents=[doc]), metadata=md(caller)
            ),
            "DeleteDocuments": lambda: s.DeleteDocuments(
                ing.DeleteDocumentsRequest(index_name=name, document_ids=["globexonly-1"]),
                metadata=md(caller),
            ),
        }

    for index in hidden:
        missing, seen = calls(MISSING_INDEX), calls(index)
        for rpc in missing:
            want = await grpc_error(missing[rpc]())
            got = await grpc_error(seen[rpc]())
            assert want[0] == grpc.StatusCode.NOT_FOUND, (rpc, want)
            assert got == want, (rpc, got, want)
            count("hidden index answers as missing")
    # The owner's documents are untouched, and the owner (positive control) sees it.
    own = await stubs.retriever.Retrieve(
        rt.RetrieveRequest(
            query=rt.RagQuery(
                index_name=HIDDEN_INDEX, text=HIDDEN_MARK, mode=rt.RETRIEVAL_MODE_LEXICAL
            )
        ),
        metadata=md("globex"),
    )
    assert [r.document_id for r in own.results] == ["globexonly-1"]


@pytest.mark.parametrize("caller", CALLERS, ids=label)
async def test_a_hidden_agent_answers_exactly_as_a_missing_one(
    app: RunningApp, stubs: Stubs, caller: str
) -> None:
    """GetAgent, Execute, ExecuteStream and the OpenAI facade (model and chat)."""
    a = stubs.agents

    def calls(agent: str) -> dict[str, Any]:
        inp = ag.ExecutionInput(agent_id=agent, message=COMMON)
        return {
            "GetAgent": lambda: a.GetAgent(ag.GetAgentRequest(agent_id=agent), metadata=md(caller)),
            "Execute": lambda: a.Execute(ag.ExecuteRequest(input=inp), metadata=md(caller)),
            "ExecuteStream": lambda: a.ExecuteStream(
                ag.ExecuteStreamRequest(input=inp), metadata=md(caller)
            ),
        }

    headers = {"authorization": f"Bearer {KEYS[caller]}"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{app.http_port}", timeout=30) as h:

        async def openai(agent: str) -> list[tuple[Any, ...]]:
            model = await h.get(f"/v1/models/{agent}", headers=headers)
            chat = await h.post(
                "/v1/chat/completions",
                json={"model": agent, "messages": [{"role": "user", "content": COMMON}]},
                headers=headers,
            )
            return [http_signature(model), http_signature(chat)]

        for agent in sorted(HIDDEN_AGENTS[caller]):
            missing, seen = calls(MISSING_AGENT), calls(agent)
            for rpc in missing:
                want = await grpc_error(missing[rpc]())
                got = await grpc_error(seen[rpc]())
                assert want[0] == grpc.StatusCode.NOT_FOUND, (rpc, want)
                assert got == want, (rpc, got, want)
            want_http, got_http = await openai(MISSING_AGENT), await openai(agent)
            assert [w[0] for w in want_http] == [404, 404], want_http
            assert got_http == want_http
            count("hidden agent answers as missing")
        # A visible agent over the same shared index still answers (control).
        visible = sorted(ALL_AGENTS - HIDDEN_AGENTS[caller] - {"agentic-scripted"})
        shown = await a.GetAgent(ag.GetAgentRequest(agent_id=visible[0]), metadata=md(caller))
        assert shown.agent.id == visible[0]


@pytest.mark.parametrize("caller", CALLERS, ids=label)
async def test_a_hidden_index_is_no_embeddings_model(app: RunningApp, caller: str) -> None:
    """/v1/embeddings names an index as its model: a hidden one is a missing one."""
    if not HIDDEN_INDEXES[caller]:
        pytest.skip("this tenant sees every index")
    headers = {"authorization": f"Bearer {KEYS[caller]}"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{app.http_port}", timeout=30) as h:
        answers = [
            await h.post("/v1/embeddings", json={"model": m, "input": "x"}, headers=headers)
            for m in (MISSING_INDEX, HIDDEN_INDEX)
        ]
        control = await h.post(
            "/v1/embeddings",
            json={"model": HIDDEN_INDEX, "input": "x"},
            headers={"authorization": f"Bearer {KEYS['globex']}"},
        )
    want, got = (http_signature(r) for r in answers)
    assert want[0] == 404 and got == want, (got, want)
    assert control.status_code == 200, control.text
    count("hidden index answers as missing")


@pytest.mark.parametrize("caller", CALLERS, ids=label)
async def test_the_dashboard_answers_a_hidden_index_as_a_missing_one(
    app: RunningApp, caller: str
) -> None:
    headers = {"authorization": f"Bearer {MANAGER_KEYS[caller]}"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{app.http_port}", timeout=30) as h:
        for index in sorted(HIDDEN_INDEXES[caller]):
            for suffix, method in (("", "GET"), ("/status", "GET"), ("/operations", "GET")):
                want, got = [
                    await h.request(method, f"/api/rag/indexes/{name}{suffix}", headers=headers)
                    for name in (MISSING_INDEX, index)
                ]
                assert want.status_code == 404, want.text
                assert http_signature(got) == http_signature(want), (suffix, got.text)
                count("dashboard: hidden index answers as missing")
            # The file upload (UpsertDocuments, with the caller's `ingest` key).
            want, got = [
                await h.post(
                    f"/api/rag/indexes/{name}/files",
                    params={"name": "a.md"},
                    content=b"# a file",
                    headers={"authorization": f"Bearer {KEYS[caller]}"},
                )
                for name in (MISSING_INDEX, index)
            ]
            assert want.status_code == 404, want.text
            assert http_signature(got) == http_signature(want), got.text
            count("dashboard: hidden index answers as missing")
        # What it may see answers (control).
        r = await h.get("/api/rag/indexes/kb/status", headers=headers)
        assert r.status_code == 200, r.text


async def walk_documents(stubs: Stubs, owner: str, index: str) -> tuple[int, int]:
    """The owner's documents and chunks in the index, through ListDocuments."""
    docs = chunks = 0
    token = ""
    while True:
        page = await stubs.ingestion.ListDocuments(
            ing.ListDocumentsRequest(index_name=index, page_size=100, page_token=token),
            metadata=md(owner),
        )
        docs += len(page.documents)
        chunks += sum(d.chunk_count for d in page.documents)
        token = page.next_page_token
        if not token:
            return docs, chunks


@pytest.mark.parametrize("owner", OWNERS, ids=label)
async def test_manage_sees_its_own_tenant_only(stubs: Stubs, owner: str) -> None:
    """A MANAGE key: its own tenant's counts, the runs and ingestion control of
    indexes whose configured tenant is its own; another tenant's index needs
    OPERATOR; the operator's counts are every tenant's."""
    mgr = (("authorization", f"Bearer {MANAGER_KEYS[owner]}"),)
    ops = (("authorization", f"Bearer {OPS_KEY}"),)
    s = stubs.ingestion
    total = [0, 0]
    for other in OWNERS:
        d, c = await walk_documents(stubs, other, "kb")
        total[0] += d
        total[1] += c
    for index in ("kb", "acme-kb"):
        status = (
            await s.GetIndexStatus(ing.GetIndexStatusRequest(index_name=index), metadata=mgr)
        ).status
        assert (status.document_count, status.chunk_count) == await walk_documents(
            stubs, owner, index
        )
        own_index = INDEX_TENANTS[index] == owner
        assert status.HasField("last_operation") == own_index, (index, status)
        assert_clean(owner, dump(status))
    every = (
        await s.GetIndexStatus(ing.GetIndexStatusRequest(index_name="kb"), metadata=ops)
    ).status
    assert [every.document_count, every.chunk_count] == total

    # Runs of its own tenant's indexes only; its tenant's pushes (into any index it
    # may push to) are its own too (tests/integration/test_push_operations.py).
    def run_names(ops: Any) -> set[str]:
        return {o.index_name for o in ops if o.trigger != ing.OPERATION_TRIGGER_PUSH}

    listed = await s.ListOperations(ing.ListOperationsRequest(page_size=1), metadata=mgr)
    names = run_names(listed.operations)
    token = listed.next_page_token
    while token:
        page = await s.ListOperations(
            ing.ListOperationsRequest(page_size=1, page_token=token), metadata=mgr
        )
        names |= run_names(page.operations)
        token = page.next_page_token
    configured = {**INDEX_TENANTS, "bm25probe": "", HIDDEN_INDEX: "globex"}
    own = {n for n, t in configured.items() if t == owner}
    assert names and names <= own, names
    for index, tenant in INDEX_TENANTS.items():
        if tenant == owner:
            continue
        for call in (
            s.StartIngestion(ing.StartIngestionRequest(index_name=index), metadata=mgr),
            s.CancelIngestion(ing.CancelIngestionRequest(index_name=index), metadata=mgr),
            s.ListOperations(ing.ListOperationsRequest(index_name=index), metadata=mgr),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await call
            check_missing_operator(owner, info.value)
    count("manage scoped to its tenant")


async def test_operator_sees_every_index_and_agent(stubs: Stubs) -> None:
    ops = (("authorization", f"Bearer {OPS_KEY}"),)
    listed = await stubs.ingestion.ListIndexes(ing.ListIndexesRequest(), metadata=ops)
    assert {i.name for i in listed.indexes} == ALL_INDEXES
    status = await stubs.ingestion.GetIndexStatus(
        ing.GetIndexStatusRequest(index_name=HIDDEN_INDEX), metadata=ops
    )
    assert status.status.document_count == 1 and status.status.HasField("last_operation")
    count("operator sees everything")
