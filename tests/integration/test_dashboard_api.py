"""The dashboard management REST API (seed 000) at /api/rag on the HTTP port,
over loopback with a real HTTP client: every route answers what the
IngestionManagerService RPC it wraps answers over Connect (projected to its
DTO), with the same keys, permissions, tenant rules, admission and body bound;
errors carry the stable reason with Connect's HTTP status; start and cancel run
a real ingestion; no answer carries document text, source paths or document ids
of failures."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import json_format

from groundwire.app.config import parse_config
from groundwire.domain.auth import hash_key
from groundwire_client.v1 import ingestion_pb2, ingestion_pb2_grpc
from tests.support.embedders import ControlledEmbedder
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(90)

KEYS = {
    "admin": "gw_dash-admin-key-0000000000000000000000000000000000",
    "acme": "gw_dash-acme-key-00000000000000000000000000000000000",
    "globex": "gw_dash-globex-key-000000000000000000000000000000000",
    "reader": "gw_dash-reader-key-000000000000000000000000000000000",
}
MARKER = "zqdashboardsecretmarker"
FILES = 12
BROKEN = "broken-binary.txt"
MAX_MESSAGE_BYTES = 64 * 1024


def config(docs: Path) -> dict[str, Any]:
    def key(name: str, tenant: str, permissions: list[str]) -> dict[str, Any]:
        return {
            "id": name,
            "hash": hash_key(KEYS[name]),
            "tenant": tenant,
            "permissions": permissions,
        }

    return {
        "server": {"max_message_bytes": MAX_MESSAGE_BYTES},
        "auth": {
            "keys": [
                # The cross-tenant operator (starts and cancels any index's runs).
                key("admin", "", ["retrieve", "ingest", "manage", "operator"]),
                key("acme", "acme", ["retrieve", "ingest"]),
                key("globex", "globex", ["retrieve", "ingest"]),
                key("reader", "acme", ["retrieve"]),
            ]
        },
        "embedders": {"hash": {"kind": "hashing"}},
        "indexes": {
            "docs": {
                "description": "acme's handbook",
                "embedder": "hash",
                "tenant": "acme",
                "sources": [{"kind": "directory", "path": str(docs), "glob": "**/*"}],
                "ingestion": {"embed_batch_size": 8},
            },
            "scheduled": {"ingestion": {"strategy": "scheduled", "schedule": "0 3 * * *"}},
        },
    }


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dashboard-docs")
    for i in range(FILES):
        (root / f"page{i:03d}.md").write_text(f"# Page {i}\n\n{MARKER} text {i}.\n")
    (root / BROKEN).write_bytes(b"\x00\x01\x02 not text")
    return root


@pytest.fixture(scope="module")
async def app(docs: Path) -> AsyncIterator[RunningApp]:
    async with serving(parse_config(config(docs)), http=True) as running:
        yield running


@pytest.fixture
async def http(app: RunningApp) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{app.http_port}", timeout=30) as c:
        yield c


def auth(key: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {KEYS.get(key, key)}"} if key else {}


def assert_error(r: httpx.Response, status: int, code: str, reason: str) -> None:
    assert r.status_code == status, r.text
    body = r.json()
    assert (body["code"], body["reason"]) == (code, reason), body


def assert_clean(text: str, docs: Path) -> None:
    """Nothing of the documents: no text, no source path, no document ids."""
    for needle in (MARKER, str(docs), docs.name, BROKEN, "page000"):
        assert needle not in text, needle


def without_defaults(value: Any) -> Any:
    """A DTO value as Connect's JSON prints it (default values left out); None
    when nothing is left."""
    if isinstance(value, dict):
        kept = {k: without_defaults(v) for k, v in value.items()}
        kept = {k: v for k, v in kept.items() if v is not None}
        return kept or None
    if isinstance(value, list):
        return [without_defaults(v) for v in value] or None
    return None if value in ("", 0, "0", False) else value


async def connect_json(http: httpx.AsyncClient, rpc: str, body: dict[str, Any]) -> Any:
    r = await http.post(
        f"/groundwire.v1.IngestionManagerService/{rpc}",
        json=body,
        headers={"content-type": "application/json", **auth("admin")},
    )
    assert r.status_code == 200, r.text
    return r.json()


async def test_listing_and_describing_indexes(http: httpx.AsyncClient, docs: Path) -> None:
    r = await http.get("/api/rag/indexes", headers=auth("reader"))
    assert r.status_code == 200, r.text
    listed = r.json()
    assert [i["name"] for i in listed["indexes"]] == ["docs", "scheduled"]
    assert listed["nextPageToken"] == ""
    first = listed["indexes"][0]
    assert first["description"] == "acme's handbook" and first["store"] == "memory"
    assert first["strategy"] == "INGESTION_STRATEGY_MANUAL" and first["sourceKinds"] == [
        "directory"
    ]
    assert first["embedding"]["provider"] == "hashing"
    assert listed["indexes"][1]["embedding"] is None
    assert listed["indexes"][1]["schedule"] == "0 3 * * *"
    # Pages, through ListIndexes' own tokens.
    page = (await http.get("/api/rag/indexes?pageSize=1", headers=auth("reader"))).json()
    assert [i["name"] for i in page["indexes"]] == ["docs"] and page["nextPageToken"]
    rest = await http.get(
        "/api/rag/indexes", params={"pageToken": page["nextPageToken"]}, headers=auth("reader")
    )
    assert [i["name"] for i in rest.json()["indexes"]] == ["scheduled"]
    # One index: the same projection of GetIndex as Connect's answer, plus its profile.
    one = await http.get("/api/rag/indexes/docs", headers=auth("reader"))
    assert one.status_code == 200, one.text
    dto = one.json()
    via_connect = (await connect_json(http, "GetIndex", {"indexName": "docs"}))["index"]
    for name, value in dto.items():
        if without_defaults(value) is not None:
            assert via_connect[name] == without_defaults(value), name
    assert dto["profile"]["fingerprint"] == via_connect["profile"]["fingerprint"]
    assert_clean(r.text + one.text, docs)


async def test_unknown_index_route_and_method(http: httpx.AsyncClient) -> None:
    for path in ("/api/rag/indexes/nope", "/api/rag/indexes/nope/status"):
        assert_error(
            await http.get(path, headers=auth("admin")), 404, "not_found", "INDEX_NOT_FOUND"
        )
    for action in ("start", "cancel"):
        r = await http.post(f"/api/rag/indexes/nope/ingestion/{action}", headers=auth("admin"))
        assert_error(r, 404, "not_found", "INDEX_NOT_FOUND")
    r = await http.get("/api/rag/indexes/docs/elsewhere", headers=auth("admin"))
    assert r.status_code == 404 and r.json()["reason"] == "METHOD_NOT_FOUND"
    r = await http.get("/api/rag/indexes/docs/ingestion/start", headers=auth("admin"))
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    r = await http.post("/api/rag/indexes/docs", headers=auth("admin"))
    assert r.status_code == 405 and r.headers["allow"] == "GET"


async def test_keys_and_permissions(
    http: httpx.AsyncClient, docs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="groundwire.access")
    routes = [
        ("GET", "/api/rag/indexes"),
        ("GET", "/api/rag/indexes/docs"),
        ("GET", "/api/rag/indexes/docs/status"),
        ("GET", "/api/rag/indexes/docs/operations"),
        ("POST", "/api/rag/indexes/docs/ingestion/start"),
        ("POST", "/api/rag/indexes/docs/ingestion/cancel"),
    ]
    for method, path in routes:
        for key in (None, "gw_wrong-key-000000000000000000000000000000000000"):
            r = await http.request(method, path, headers=auth(key))
            assert_error(r, 401, "unauthenticated", "UNAUTHENTICATED")
            assert "gw_wrong" not in r.text
    # `retrieve` only: status, history and ingestion control need manage (or ingest).
    for method, path in routes[2:]:
        r = await http.request(method, path, headers=auth("reader"))
        assert_error(r, 403, "permission_denied", "PERMISSION_DENIED")
        assert r.headers["x-request-id"]
    # A malformed query is refused only once the key is valid.
    assert_error(
        await http.get("/api/rag/indexes?pageSize=many"), 401, "unauthenticated", "UNAUTHENTICATED"
    )
    r = await http.get("/api/rag/indexes?pageSize=many", headers=auth("reader"))
    assert_error(r, 400, "invalid_argument", "MALFORMED_REQUEST")
    r = await http.get("/api/rag/indexes?pageSize=500", headers=auth("reader"))
    assert_error(r, 400, "invalid_argument", "FIELD_OUT_OF_RANGE")
    # The body bound is the gRPC port's (server.max_message_bytes), as on Connect.
    big = b"x" * (MAX_MESSAGE_BYTES + 1)
    r = await http.post("/api/rag/indexes/docs/ingestion/start", content=big, headers=auth("acme"))
    assert_error(r, 429, "resource_exhausted", "MESSAGE_TOO_LARGE")
    # The access log: the contract method, this transport, the key's id; never the key.
    lines = [r for r in caplog.records if getattr(r, "transport", "") == "dashboard_http"]
    assert lines
    denied = [
        r
        for r in lines
        if getattr(r, "method", "").endswith("/GetIndexStatus")
        and getattr(r, "reason", "") == "PERMISSION_DENIED"
    ]
    assert denied and denied[-1].key_id == "reader"  # type: ignore[attr-defined]
    for record in lines:
        text = str(record.__dict__)
        assert KEYS["reader"] not in text and "gw_wrong" not in text
        assert_clean(text, docs)


async def test_tenant_scoping(http: httpx.AsyncClient, docs: Path) -> None:
    """`docs` belongs to tenant acme. globex's key sees its configuration (as
    ListIndexes/GetIndex show every key) but no counts, no operations, and
    cannot start or cancel its ingestion; acme's `ingest` key controls it."""
    seen = []
    for path in ("/api/rag/indexes", "/api/rag/indexes/docs"):
        r = await http.get(path, headers=auth("globex"))
        assert r.status_code == 200, r.text
        assert "documentCount" not in r.text and "chunkCount" not in r.text
        seen.append(r.text)
    r = await http.get("/api/rag/indexes/docs/status", headers=auth("globex"))
    assert_error(r, 403, "permission_denied", "PERMISSION_DENIED")
    seen.append(r.text)
    for action in ("start", "cancel"):
        r = await http.post(f"/api/rag/indexes/docs/ingestion/{action}", headers=auth("globex"))
        assert_error(r, 403, "permission_denied", "PERMISSION_DENIED")
        seen.append(r.text)
    # acme's own index: its ingest key is let through to the manager (nothing runs).
    r = await http.post("/api/rag/indexes/docs/ingestion/cancel", headers=auth("acme"))
    assert_error(r, 400, "failed_precondition", "NO_RUNNING_INGESTION")
    assert_clean("".join(seen), docs)


async def test_start_and_cancel_a_real_ingestion(
    app: RunningApp, http: httpx.AsyncClient, docs: Path
) -> None:
    handle = app.components.catalog.get("docs")
    original = handle.embedder
    gate = ControlledEmbedder(gated=True)
    handle.embedder = gate
    answers: list[str] = []
    try:
        r = await http.post("/api/rag/indexes/docs/ingestion/start", headers=auth("acme"))
        assert r.status_code == 202, r.text
        answers.append(r.text)
        started = r.json()
        assert started["indexName"] == "docs" and started["trigger"] == "OPERATION_TRIGGER_MANUAL"
        assert started["state"] in ("OPERATION_STATE_QUEUED", "OPERATION_STATE_RUNNING")
        await asyncio.wait_for(gate.entered.wait(), 30)  # the run is embedding now
        # A second start is the manager's conflict, with Connect's status for its code.
        again = await http.post("/api/rag/indexes/docs/ingestion/start", headers=auth("admin"))
        assert_error(again, 400, "failed_precondition", "INGESTION_ALREADY_RUNNING")
        status = await http.get("/api/rag/indexes/docs/status", headers=auth("admin"))
        answers.append(status.text)
        running = status.json()
        assert running["runningOperation"]["id"] == started["id"]
        assert running["runningOperation"]["state"] == "OPERATION_STATE_RUNNING"
        assert running["ready"] is True and running["publishedVersion"] == "0"
        cancel = await http.post("/api/rag/indexes/docs/ingestion/cancel", headers=auth("acme"))
        assert cancel.status_code == 200, cancel.text
        answers.append(cancel.text)
        cancelled = cancel.json()
        assert cancelled["id"] == started["id"]
        assert cancelled["state"] == "OPERATION_STATE_CANCELLED" and cancelled["endTime"]
        after = (await http.get("/api/rag/indexes/docs/status", headers=auth("admin"))).json()
        assert after["runningOperation"] is None
        assert after["lastOperation"]["id"] == started["id"]
        assert after["publishedVersion"] == "0"  # cancellation published nothing
    finally:
        gate.release.set()
        handle.embedder = original
    # A run to completion, waited for through WatchIngestion (no sleeping).
    r = await http.post("/api/rag/indexes/docs/ingestion/start", headers=auth("admin"))
    assert r.status_code == 202, r.text
    second = r.json()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        stub = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        watched = [
            m.operation
            async for m in stub.WatchIngestion(
                ingestion_pb2.WatchIngestionRequest(operation_id=second["id"]),
                metadata=(("authorization", f"Bearer {KEYS['admin']}"),),
                timeout=60,
            )
        ]
    assert watched[-1].state == ingestion_pb2.OPERATION_STATE_SUCCEEDED
    status = await http.get("/api/rag/indexes/docs/status", headers=auth("admin"))
    answers.append(status.text)
    done = status.json()
    assert done["runningOperation"] is None
    last = done["lastOperation"]
    assert last["id"] == second["id"] and last["state"] == "OPERATION_STATE_SUCCEEDED"
    assert last["counts"]["ingested"] == FILES and last["counts"]["discovered"] == FILES + 1
    assert last["counts"]["failed"] + last["counts"]["skipped"] == 1
    assert done["documentCount"] == str(FILES) and int(done["chunkCount"]) >= FILES
    assert done["publishedVersion"] == str(last["version"]) != "0"
    # The same numbers as Connect's GetIndexStatus (which also lists the broken
    # document's id: the dashboard DTO does not).
    via_connect = (await connect_json(http, "GetIndexStatus", {"indexName": "docs"}))["status"]
    assert via_connect["documentCount"] == done["documentCount"]
    assert BROKEN in str(via_connect)
    # History, newest first, through ListOperations.
    ops = await http.get("/api/rag/indexes/docs/operations?pageSize=1", headers=auth("admin"))
    assert ops.status_code == 200, ops.text
    answers.append(ops.text)
    page = ops.json()
    assert [o["id"] for o in page["operations"]] == [second["id"]] and page["nextPageToken"]
    older = await http.get(
        "/api/rag/indexes/docs/operations",
        params={"pageSize": "1", "pageToken": page["nextPageToken"]},
        headers=auth("admin"),
    )
    answers.append(older.text)
    assert [o["id"] for o in older.json()["operations"]] == [started["id"]]
    # Without `manage`, the history is ListOperations' own rule: refused, or only
    # the operations the caller's key started (never another tenant's runs).
    for key, own in (("globex", set()), ("acme", {started["id"]})):
        r = await http.get("/api/rag/indexes/docs/operations", headers=auth(key))
        answers.append(r.text)
        if r.status_code != 200:
            assert_error(r, 403, "permission_denied", "PERMISSION_DENIED")
            continue
        assert {o["id"] for o in r.json()["operations"]} == own, key
    assert_clean("".join(answers), docs)


async def test_admission_is_the_grpc_calls(docs: Path) -> None:
    """The manage family's per-tenant rate limit admits the dashboard's reads
    exactly as it admits the RPCs (one bucket), with Retry-After."""
    cfg = config(docs)
    cfg["limits"] = {"manage": {"requests_per_second": 0.01, "burst": 2}}
    async with (
        serving(parse_config(cfg), http=True) as running,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{running.http_port}", timeout=30) as http,
    ):
        assert (await http.get("/api/rag/indexes", headers=auth("reader"))).status_code == 200
        await connect_json(http, "ListIndexes", {})  # admin: another tenant's bucket
        via_connect = await http.post(
            "/groundwire.v1.IngestionManagerService/ListIndexes",
            json={},
            headers=auth("acme"),
        )
        assert via_connect.status_code == 200  # acme's second token
        r = await http.get("/api/rag/indexes", headers=auth("reader"))
        assert_error(r, 429, "resource_exhausted", "TENANT_RATE_LIMITED")
        assert int(r.headers["retry-after"]) >= 1


async def test_every_strategy_has_a_manual_run(app: RunningApp, http: httpx.AsyncClient) -> None:
    """A SCHEDULED index starts by hand too (the strategy governs automatic runs)."""
    r = await http.post("/api/rag/indexes/scheduled/ingestion/start", headers=auth("admin"))
    assert r.status_code == 202, r.text
    assert r.json()["trigger"] == "OPERATION_TRIGGER_MANUAL"
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        stub = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        async for _ in stub.WatchIngestion(
            ingestion_pb2.WatchIngestionRequest(operation_id=r.json()["id"]),
            metadata=(("authorization", f"Bearer {KEYS['admin']}"),),
            timeout=60,
        ):
            pass
    status = (await http.get("/api/rag/indexes/scheduled/status", headers=auth("admin"))).json()
    assert status["lastOperation"]["id"] == r.json()["id"] and status["nextRunTime"]


async def test_the_api_can_be_switched_off(docs: Path) -> None:
    cfg = config(docs)
    cfg["http"] = {"dashboard_api": False}
    async with (
        serving(parse_config(cfg), http=True) as running,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{running.http_port}", timeout=30) as http,
    ):
        r = await http.get("/api/rag/indexes", headers=auth("admin"))
        assert r.status_code == 404 and r.json()["code"] == "unimplemented", r.text
        # The RPCs themselves still answer over Connect.
        assert (await connect_json(http, "ListIndexes", {}))["indexes"]


def test_dtos_are_projections_of_the_messages() -> None:
    """Every DTO field is a field of the message it projects (so a renamed field
    cannot silently vanish) and failures' document ids are never among them."""
    from groundwire.api.http import dashboard

    for message, fields in (
        (ingestion_pb2.IndexDescription(), dashboard._INDEX_FIELDS),
        (ingestion_pb2.IndexStatus(), dashboard._STATUS_FIELDS),
        (ingestion_pb2.Operation(), dashboard._OPERATION_FIELDS),
        (ingestion_pb2.OperationCounts(), dashboard._COUNT_FIELDS),
    ):
        names = {f.json_name for f in message.DESCRIPTOR.fields}
        assert set(fields) <= names, set(fields) - names
    assert "failures" not in dashboard._OPERATION_FIELDS
    assert "skipped" not in dashboard._OPERATION_FIELDS
    op = ingestion_pb2.Operation(
        id="op-1", failures=[ingestion_pb2.DocumentFailure(document_id="secret/path.md")]
    )
    assert "secret/path.md" in json_format.MessageToJson(op)
    assert "secret/path.md" not in str(dashboard.operation_dto(op))
