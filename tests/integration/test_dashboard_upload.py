"""The dashboard API's raw file upload, POST /api/rag/indexes/{name}/files, over
loopback with a real HTTP client: a file's bytes become one UpsertDocuments
document (id and media type from its name, as the Python client makes them);
a file no loader reads is a named failure with its reason, not an error; the
body is bounded by the index's max_file_bytes (and http.max_upload_bytes),
not by server.max_message_bytes, and refused from its Content-Length before
it is read; keys, permissions and tenants are UpsertDocuments'; the logs
carry no file name, text or key."""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from groundwire.app.config import parse_config
from groundwire.domain.auth import hash_key
from tests.integration.test_dashboard_api import assert_error
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(240)

# name -> (secret, tenant, permissions)
KEYS_TABLE = {
    "admin": ("gw_upl-admin-key-00000000000000000000000000000000000", "", ["ingest", "operator"]),
    "acme": (
        "gw_upl-acme-key-000000000000000000000000000000000000",
        "acme",
        ["retrieve", "ingest"],
    ),
    "globex": (
        "gw_upl-globex-key-0000000000000000000000000000000000",
        "globex",
        ["retrieve", "ingest"],
    ),
    "reader": ("gw_upl-reader-key-0000000000000000000000000000000000", "acme", ["retrieve"]),
}
KEYS = {name: secret for name, (secret, _, _) in KEYS_TABLE.items()}
MARKER = "zquploadsecretmarker"
MAX_MESSAGE_BYTES = 64 * 1024
MAX_UPLOAD_BYTES = 60 * 1024 * 1024
BIG_FILE_BYTES = 50 * 1024 * 1024
# The "docs" index's file bound: an upload over it is refused before its body.
DOCS_MAX_FILE_BYTES = 1024 * 1024


def config() -> dict[str, Any]:
    return {
        "server": {"max_message_bytes": MAX_MESSAGE_BYTES},
        "http": {"max_upload_bytes": MAX_UPLOAD_BYTES},
        "auth": {
            "keys": [
                {"id": name, "hash": hash_key(secret), "tenant": tenant, "permissions": perms}
                for name, (secret, tenant, perms) in KEYS_TABLE.items()
            ]
        },
        "embedders": {"hash": {"kind": "hashing", "dimensions": 32}},
        "indexes": {
            "docs": {
                "embedder": "hash",
                "ingestion": {"strategy": "manual", "max_file_bytes": DOCS_MAX_FILE_BYTES},
            },
            # Files of 50 MB: allowed by the index, in large chunks.
            "big": {
                "embedder": "hash",
                "chunking": {"size": 20_000, "overlap": 0},
                "ingestion": {"strategy": "manual", "max_file_bytes": 55 * 1024 * 1024},
            },
        },
    }


@pytest.fixture(scope="module")
async def app() -> AsyncIterator[RunningApp]:
    async with serving(parse_config(config()), http=True) as running:
        yield running


@pytest.fixture
async def http(app: RunningApp) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{app.http_port}", timeout=120) as c:
        yield c


def auth(key: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {KEYS[key]}"} if key else {}


def server_logs(caplog: pytest.LogCaptureFixture) -> str:
    """What the server logged (not this test's HTTP client, httpx). uvicorn's own
    access log (which would print the request line, query and all) is off in the
    server (access_log=False: no handler, no propagation); the test's capture
    handlers alone reach it."""
    assert not logging.getLogger("uvicorn.access").propagate
    client = ("uvicorn.", "httpx", "httpcore")
    return "\n".join(str(rec.__dict__) for rec in caplog.records if not rec.name.startswith(client))


async def upload(
    http: httpx.AsyncClient,
    name: str,
    content: bytes,
    key: str | None = "acme",
    *,
    index: str = "docs",
    media_type: str | None = None,
    **params: str,
) -> httpx.Response:
    headers = {**auth(key), "content-type": media_type or "application/octet-stream"}
    return await http.post(
        f"/api/rag/indexes/{index}/files",
        params={"name": name, **params},
        content=content,
        headers=headers,
    )


async def retrieve(http: httpx.AsyncClient, key: str, text: str, index: str = "docs") -> Any:
    r = await http.post(
        "/groundwire.v1.RetrieverService/Retrieve",
        json={"query": {"indexName": index, "text": text, "mode": "RETRIEVAL_MODE_LEXICAL"}},
        headers={"content-type": "application/json", **auth(key)},
    )
    assert r.status_code == 200, r.text
    return r.json()


async def test_a_markdown_file_lands_and_is_retrievable(
    http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    body = f"# Onboarding guide\n\nEvery {MARKER} badge opens the east door.\n".encode()
    r = await upload(http, "onboarding-guide.md", body)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer == {
        "publishedVersion": answer["publishedVersion"],
        "upserted": 1,
        "unchanged": 0,
        "chunksWritten": 1,
        "truncatedChunks": 0,
        "failures": [],
    }
    assert int(answer["publishedVersion"]) >= 1
    found = await retrieve(http, "acme", MARKER)
    results = found["results"]
    # The id is the file name; the media type came from it (Markdown: its title).
    assert [x["documentId"] for x in results] == ["onboarding-guide.md"]
    assert results[0]["title"] == "Onboarding guide"
    # Another tenant's key does not see it (the key's tenant was stamped on it).
    assert (await retrieve(http, "globex", MARKER)).get("results", []) == []
    # The same bytes again: unchanged. An explicit document id and media type win.
    r = await upload(http, "onboarding-guide.md", body)
    assert (r.json()["upserted"], r.json()["unchanged"]) == (0, 1)
    r = await upload(
        http, "notes.txt", body, documentId="guide-2", media_type="text/plain; charset=utf-8"
    )
    assert r.json()["upserted"] == 1, r.text
    ids = {x["documentId"] for x in (await retrieve(http, "acme", MARKER))["results"]}
    assert ids == {"onboarding-guide.md", "guide-2"}
    # Nothing of the file (name, text) nor the key reaches the logs.
    logged = server_logs(caplog)
    for needle in (MARKER, "onboarding-guide", "east door", KEYS["acme"]):
        assert needle not in logged, needle
    uploads = [
        rec
        for rec in caplog.records
        if getattr(rec, "transport", "") == "dashboard_http"
        and getattr(rec, "method", "").endswith("/UpsertDocuments")
    ]
    assert uploads and all(getattr(rec, "key_id", "") == "acme" for rec in uploads)


async def test_an_unsupported_file_is_a_named_failure_and_a_good_one_lands(
    http: httpx.AsyncClient,
) -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
    r = await upload(http, "diagram.png", png)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert (answer["upserted"], answer["chunksWritten"]) == (0, 0)
    assert answer["failures"] == [
        {
            "documentId": "diagram.png",
            "reason": "UNSUPPORTED_FORMAT",
            "message": "no loader reads this media type",
        }
    ]
    # Not text although named .txt: the loader's own reason, named.
    r = await upload(http, "garbage.txt", b"\xff\xfe\x00\x01 not utf-8 \x00\x00")
    [failure] = r.json()["failures"]
    assert failure["documentId"] == "garbage.txt" and failure["reason"] in ("NOT_UTF8", "BINARY")
    r = await upload(http, "empty.md", b"")
    assert r.json()["failures"][0]["reason"] == "EMPTY", r.text
    # The good file, in a request of its own, lands.
    r = await upload(http, "faq.md", b"# FAQ\n\nThe zqfaqanswer is forty-two.\n")
    assert (r.json()["upserted"], r.json()["failures"]) == (1, [])
    results = (await retrieve(http, "acme", "zqfaqanswer"))["results"]
    assert [x["documentId"] for x in results] == ["faq.md"]


def _raw_request(port: int, head: bytes) -> tuple[int, bytes]:
    """Send a request's head only (no body) and read the answer: a refusal that
    comes back proves the server never waited for the body."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        head_end = data.index(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in data[:head_end].split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(data) < head_end + 4 + length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        return int(data.split(b" ", 2)[1]), data[head_end + 4 :]


async def test_content_length_over_the_bound_is_refused_before_the_body(
    app: RunningApp, http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="groundwire.access")
    port = app.http_port
    assert port is not None

    def head(length: int | None, index: str = "docs") -> bytes:
        lines = [
            f"POST /api/rag/indexes/{index}/files?name=huge.txt HTTP/1.1",
            f"host: 127.0.0.1:{port}",
            f"authorization: Bearer {KEYS['acme']}",
            "content-type: text/plain",
        ]
        lines.append(f"content-length: {length}" if length is not None else "")
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    # Over the index's max_file_bytes (1 MiB), though under the server-wide bound.
    status, body = await asyncio.to_thread(_raw_request, port, head(DOCS_MAX_FILE_BYTES + 1))
    assert status == 413, body
    assert b'"reason":"FILE_TOO_LARGE"' in body
    # Over http.max_upload_bytes, whatever the index allows; without a key too.
    status, body = await asyncio.to_thread(
        _raw_request, port, head(MAX_UPLOAD_BYTES + 1, index="big")
    )
    assert status == 413 and b"FILE_TOO_LARGE" in body
    # A chunked body, without Content-Length: 411.
    chunked = head(None).replace(b"\r\n\r\n\r\n", b"\r\ntransfer-encoding: chunked\r\n\r\n")
    status, body = await asyncio.to_thread(_raw_request, port, chunked)
    assert status == 411 and b'"reason":"LENGTH_REQUIRED"' in body
    # A file at the index's bound is taken (it is not server.max_message_bytes, 64 KiB).
    r = await upload(http, "at-bound.txt", b"word " * (DOCS_MAX_FILE_BYTES // 5))
    assert (r.status_code, r.json()["upserted"]) == (200, 1), r.text
    # The refusals are in the access log with their reason and the key's id.
    refused = [
        rec
        for rec in caplog.records
        if rec.getMessage() == "refused" and getattr(rec, "transport", "") == "dashboard_http"
    ]
    reasons = [(getattr(rec, "reason", ""), getattr(rec, "http_status", 0)) for rec in refused]
    assert reasons.count(("FILE_TOO_LARGE", 413)) == 2 and ("LENGTH_REQUIRED", 411) in reasons
    assert all(getattr(rec, "key_id", "") == "acme" for rec in refused)
    assert all(KEYS["acme"] not in str(rec.__dict__) for rec in refused)


async def test_keys_permissions_and_tenants(
    http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="groundwire.access")
    body = f"# Secret\n\n{MARKER} payroll.\n".encode()
    for key in (None,):
        r = await upload(http, "payroll.md", body, key)
        assert_error(r, 401, "unauthenticated", "UNAUTHENTICATED")
    r = await http.post(
        "/api/rag/indexes/docs/files",
        params={"name": "payroll.md"},
        content=body,
        headers={"authorization": "Bearer gw_wrong-key-0000000000000000000000000000000"},
    )
    assert_error(r, 401, "unauthenticated", "UNAUTHENTICATED")
    assert "gw_wrong" not in r.text
    # `retrieve` only: no push.
    r = await upload(http, "payroll.md", body, "reader")
    assert_error(r, 403, "permission_denied", "PERMISSION_DENIED")
    assert r.headers["x-request-id"]
    # Another tenant than the key's: refused.
    r = await upload(http, "payroll.md", body, "acme", tenant="globex")
    assert_error(r, 403, "permission_denied", "TENANT_MISMATCH")
    # The key's own tenant, repeated: taken.
    r = await upload(http, "payroll.md", body, "acme", tenant="acme")
    assert r.status_code == 200, r.text
    assert (await retrieve(http, "globex", MARKER)).get("results", []) == []
    # No file name: refused after the key, as an undecodable request.
    r = await http.post("/api/rag/indexes/docs/files", content=body, headers=auth("acme"))
    assert_error(r, 400, "invalid_argument", "MALFORMED_REQUEST")
    # Hidden or missing index: INDEX_NOT_FOUND.
    r = await upload(http, "payroll.md", body, index="nope")
    assert_error(r, 404, "not_found", "INDEX_NOT_FOUND")
    # GET is not the route's method.
    r = await http.get("/api/rag/indexes/docs/files", headers=auth("acme"))
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    logged = server_logs(caplog)
    for needle in (MARKER, "payroll", *KEYS.values(), "gw_wrong"):
        assert needle not in logged, needle


def _peak_rss_mib() -> float:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def test_a_50_mb_file_pushes_with_bounded_memory(http: httpx.AsyncClient) -> None:
    line = b"The quarterly zqbigfilemarker report lists every shipment of the year.\n"
    content = line * (BIG_FILE_BYTES // len(line) + 1)
    content = content[:BIG_FILE_BYTES]
    before = _peak_rss_mib()
    start = time.perf_counter()
    r = await upload(http, "annual-report.txt", content, "acme", index="big")
    elapsed = time.perf_counter() - start
    growth = _peak_rss_mib() - before
    assert r.status_code == 200, r.text
    answer = r.json()
    assert (answer["upserted"], answer["failures"]) == (1, []), answer
    # 50 MiB in chunks of 20,000 characters: far past a batch's 1024-chunk bound.
    assert answer["chunksWritten"] >= BIG_FILE_BYTES // 20_000
    print(
        f"\n50 MiB upload: {elapsed:.1f} s ({BIG_FILE_BYTES / 2**20 / elapsed:.1f} MiB/s),"
        f" peak RSS growth {growth:.0f} MiB (client and server in this process)"
    )
    # The process (client, server and the test's own copy of the file) stays
    # within a bounded multiple of the file: never unbounded buffering.
    assert growth < 20 * BIG_FILE_BYTES / 2**20
    found = await retrieve(http, "acme", "zqbigfilemarker", index="big")
    assert found["results"][0]["documentId"] == "annual-report.txt"
