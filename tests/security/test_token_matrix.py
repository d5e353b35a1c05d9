"""The principal matrix with a real identity provider's tokens.

Keycloak 26 (tests/support/keycloak.py, started once for the session from Maven
Central) holds one realm per tenant (`acme`, `globex`: two issuers, each bound to
its tenant in `[[auth.issuers]]`), each with users `bob` (no group), `alice`
(group `hr`) and `carol` (group `board`), the realm role `gw-manage` (mapped to
the `manage` permission) and a confidential client. The server accepts API keys
and tokens side by side: the documents are pushed with the tenants' ingest keys,
and every probe of tests/security/test_principal_matrix.py (gRPC; Connect, the
OpenAI facade, the dashboard and MCP over HTTP) runs again with the users' real
access tokens (password grant) in place of the keys, plus gRPC-Web: `plain` is bob, `hr` alice,
`app` carol (her own `group:board`, no act_for header). Zero leaks, positive
controls, exact counts, as there.

Beside the matrix, with the real provider: the client-credentials grant's
service account reads only documents without an ACL; a token naming principals
for someone else is PERMISSION_DENIED; a real token tampered, re-signed with
`alg: none` or with HS256 keyed by the realm's public key, or re-addressed to
another issuer, is refused with its stable reason; a signing-key rotation in
Keycloak is picked up without a restart; the access log names the issuer and a
hash of the subject, never the token or the subject.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import httpx
import jwt
import pytest
from google.rpc import error_details_pb2, status_pb2

from groundwire.api.tokens import subject_hash
from groundwire.app.config import parse_config
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import ingestion_pb2_grpc, retriever_pb2_grpc
from groundwire_client.v1 import retriever_pb2 as rt
from tests.security import test_principal_matrix as pm
from tests.security.harness import decode_error
from tests.support.connect import ENVELOPE, split_envelopes
from tests.support.jwt_forge import tamper
from tests.support.keycloak import Keycloak, Realm, User
from tests.support.servers import RunningApp, serving

pytestmark = [pytest.mark.timeout(1800), pytest.mark.slow]

USERS = {"plain": "bob", "hr": "alice", "app": "carol"}
GROUPS = {"bob": [], "alice": ["hr"], "carol": ["board"]}


@pytest.fixture(scope="module")
def realms(keycloak: Keycloak) -> dict[str, Realm]:
    return {
        t: keycloak.realm(
            f"{t}{pm.RUN}",
            [User(u, GROUPS[u], ["gw-manage"]) for u in USERS.values()],
            roles=["gw-manage"],
        )
        for t in pm.TENANTS
    }


class Tokens:
    """Real access tokens per (tenant, user), fetched again before they expire."""

    def __init__(self, realms: dict[str, Realm]) -> None:
        self.realms = realms
        self._cache: dict[tuple[str, str], tuple[float, str]] = {}

    def of(self, tenant: str, user: str) -> str:
        hit = self._cache.get((tenant, user))
        if hit is None or time.monotonic() - hit[0] > 240:
            hit = (time.monotonic(), self.realms[tenant].password_token(user))
            self._cache[(tenant, user)] = hit
        return hit[1]


@pytest.fixture(scope="module")
def tokens(realms: dict[str, Realm]) -> Tokens:
    return Tokens(realms)


def issuers(realms: dict[str, Realm]) -> list[dict[str, object]]:
    return [
        {
            "id": f"kc-{t}",
            "issuer": realm.issuer,
            "audiences": [realm.audience],
            "tenant": t,
            "roles_claim": "realm_access.roles",
            "permissions": ["retrieve", "execute"],
            "role_permissions": {"gw-manage": ["manage"]},
            "max_permissions": ["retrieve", "execute", "manage"],
            # Keycloak in dev mode serves http on 127.0.0.1: opened for the test only.
            "allow_http": True,
            "allow_cidrs": ["127.0.0.1/32"],
            "min_refresh_seconds": 1,
            "refresh_seconds": 60,
            "max_key_age_seconds": 600,
        }
        for t, realm in realms.items()
    ]


@pytest.fixture(scope="module")
async def app(realms: dict[str, Realm]) -> AsyncIterator[RunningApp]:
    data = pm.config("memory", None)
    auth: dict[str, Any] = data["auth"]  # type: ignore[assignment]
    data["auth"] = {
        "mode": "api_keys_and_tokens",
        "keys": [k for k in auth["keys"] if str(k["id"]).endswith("-ingest")],
        "issuers": issuers(realms),
    }
    async with serving(parse_config(data), http=True) as running:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as ch:
            stub = ingestion_pb2_grpc.IngestionManagerServiceStub(ch)
            for t in pm.TENANTS:
                await stub.UpsertDocuments(
                    ing.UpsertDocumentsRequest(
                        index_name="shared",
                        documents=[
                            ing.PushedDocument(
                                document_id=pm.doc_id(t, kind),
                                title=f"Handbook {pm.title_marker(t, kind)}",
                                text=f"{pm.marker(t, kind)} {pm.COMMON}. {pm.marker(t, kind)} again.",
                                acl=acl,
                            )
                            for kind, acl in pm.KINDS.items()
                        ],
                    ),
                    metadata=(("authorization", f"Bearer {pm.ingest_key(t)}"),),
                )
        yield running


@pytest.fixture(autouse=True)
def token_callers(tokens: Tokens, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The matrix's callers carry their users' tokens instead of keys."""

    def metadata(tenant: str, caller: str) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {tokens.of(tenant, USERS[caller])}"),)

    monkeypatch.setattr(pm, "metadata", metadata)
    yield


# The matrix's own probes, run with tokens (the `app` fixture above serves them).
test_token_matrix_over_grpc = pm.test_principal_matrix_over_grpc
test_token_matrix_over_http = pm.test_principal_matrix_over_http


async def _retrieve(app: RunningApp, token: str, text: str = pm.COMMON) -> set[str]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        resp = await retriever_pb2_grpc.RetrieverServiceStub(ch).Retrieve(
            rt.RetrieveRequest(
                query=rt.RagQuery(
                    index_name="shared", text=text, mode=rt.RETRIEVAL_MODE_LEXICAL, top_k=50
                )
            ),
            metadata=(("authorization", f"Bearer {token}"),),
        )
    return {r.document_id for r in resp.results}


async def _refusal(app: RunningApp, token: str, extra: tuple[tuple[str, str], ...] = ()) -> Any:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
            await retriever_pb2_grpc.RetrieverServiceStub(ch).Retrieve(
                rt.RetrieveRequest(query=rt.RagQuery(index_name="shared", text=pm.COMMON)),
                metadata=(("authorization", f"Bearer {token}"), *extra),
            )
    err = caught.value
    assert token not in (err.details() or "")
    details = decode_error(err.code(), err.details(), err.trailing_metadata())
    return err.code(), [i.reason for i in details.infos]


async def test_client_credentials_reads_documents_without_an_acl(
    app: RunningApp, realms: dict[str, Realm]
) -> None:
    for t, realm in realms.items():
        token = realm.client_token()
        claims = jwt.decode(token, options={"verify_signature": False})
        assert claims["sub"] == realm.service_account_id()
        assert await _retrieve(app, token) == {pm.doc_id(t, "public")}


async def test_a_token_cannot_name_principals(app: RunningApp, tokens: Tokens) -> None:
    code, _ = await _refusal(
        app, tokens.of("acme", "bob"), (("x-groundwire-principals", "group:board"),)
    )
    assert code == grpc.StatusCode.PERMISSION_DENIED


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _reheader(token: str, header: dict[str, Any], body: dict[str, Any] | None = None) -> str:
    _, payload, _ = token.split(".")
    raw = _b64(json.dumps(body).encode()) if body is not None else payload
    return f"{_b64(json.dumps(header).encode())}.{raw}"


async def test_forged_real_tokens_are_refused(
    app: RunningApp, realms: dict[str, Realm], tokens: Tokens
) -> None:
    import hashlib
    import hmac

    realm = realms["acme"]
    token = tokens.of("acme", "alice")
    header = jwt.get_unverified_header(token)
    body = jwt.decode(token, options={"verify_signature": False})
    s = token.split(".")[2]
    cases: dict[str, str] = {}
    # Claims changed under the provider's signature (alice becomes carol's groups).
    cases["TOKEN_SIGNATURE_INVALID"] = (
        f"{_reheader(token, header, {**body, 'groups': ['/board']})}.{s}"
    )
    cases["TOKEN_ALGORITHM_REFUSED"] = _reheader(token, {**header, "alg": "none"}) + "."
    # HS256 keyed with the realm's published public key (PEM).
    async with httpx.AsyncClient(timeout=30) as http:
        jwks = (await http.get(realm.jwks_url)).json()
    public = jwt.PyJWK(next(k for k in jwks["keys"] if k["kid"] == header["kid"])).key
    from cryptography.hazmat.primitives import serialization

    pem = public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    signing_input = _reheader(token, {**header, "alg": "HS256"})
    mac = hmac.new(pem, signing_input.encode(), hashlib.sha256).digest()
    hs256 = f"{signing_input}.{_b64(mac)}"
    cases["TOKEN_HEADER_REFUSED"] = (
        f"{_reheader(token, {**header, 'jku': 'https://evil.example.test/k'})}.{s}"
    )
    cases["TOKEN_ISSUER_UNKNOWN"] = (
        f"{_reheader(token, header, {**body, 'iss': realm.issuer + 'x'})}.{s}"
    )
    for reason, forged in cases.items():
        code, reasons = await _refusal(app, forged)
        assert (code, reasons) == (grpc.StatusCode.UNAUTHENTICATED, [reason]), reason
    code, reasons = await _refusal(app, hs256)
    assert (code, reasons) == (grpc.StatusCode.UNAUTHENTICATED, ["TOKEN_ALGORITHM_REFUSED"])
    # The untouched token still works (the refusals changed nothing).
    assert await _retrieve(app, token) == {pm.doc_id("acme", "public"), pm.doc_id("acme", "hr")}


async def test_a_rotated_signing_key_is_picked_up_without_restart(
    app: RunningApp, realms: dict[str, Realm]
) -> None:
    realm = realms["globex"]
    before = realm.password_token("alice")
    assert await _retrieve(app, before) == {
        pm.doc_id("globex", "public"),
        pm.doc_id("globex", "hr"),
    }
    realm.rotate_key()
    after = realm.password_token("alice")
    assert jwt.get_unverified_header(after)["kid"] != jwt.get_unverified_header(before)["kid"]
    # The first token naming the new kid makes the server refresh the realm's key
    # set (at most once per min_refresh_seconds = 1): wait on the condition.
    deadline = time.monotonic() + 60
    while True:
        try:
            found = await _retrieve(app, after)
            break
        except grpc.aio.AioRpcError as err:
            details = decode_error(err.code(), err.details(), err.trailing_metadata())
            assert [i.reason for i in details.infos] == ["TOKEN_KEY_UNKNOWN"]
            assert time.monotonic() < deadline, "the rotated key was never picked up"
            await asyncio.sleep(0.2)  # polling the condition: the refresh interval must pass
    assert found == {pm.doc_id("globex", "public"), pm.doc_id("globex", "hr")}
    # The old key is still published: tokens signed before the rotation still work.
    assert await _retrieve(app, before) == found


async def test_access_log_names_issuer_and_subject_hash_only(
    app: RunningApp, realms: dict[str, Realm], tokens: Tokens, caplog: pytest.LogCaptureFixture
) -> None:
    token = tokens.of("acme", "carol")
    sub = jwt.decode(token, options={"verify_signature": False})["sub"]
    with caplog.at_level(logging.INFO, logger="groundwire.access"):
        await _retrieve(app, token)
    records = [r for r in caplog.records if r.name == "groundwire.access"]
    assert records
    expected = f"kc-acme/{subject_hash(realms['acme'].issuer, sub)}"
    assert any(getattr(r, "key_id", None) == expected for r in records)
    for record in records:
        flat = json.dumps(record.__dict__, default=str)
        assert sub not in flat and token not in flat and token[-40:] not in flat


class TcpProxy:
    """127.0.0.1:port -> the provider, closable: the provider unreachable for the
    server under test, without stopping the Keycloak the session shares."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self, port: int = 0) -> TcpProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        self._writers.clear()
        await self._server.wait_closed()


async def _list_indexes(app: RunningApp, token: str) -> str:
    """ "ok", or the refusal's reason."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        try:
            await ingestion_pb2_grpc.IngestionManagerServiceStub(ch).ListIndexes(
                ing.ListIndexesRequest(), metadata=(("authorization", f"Bearer {token}"),)
            )
        except grpc.aio.AioRpcError as err:
            details = decode_error(err.code(), err.details(), err.trailing_metadata())
            return ",".join(i.reason for i in details.infos)
    return "ok"


async def test_provider_unreachable_cached_keys_then_fail_closed(
    realms: dict[str, Realm],
) -> None:
    """Keycloak unreachable (its port closed through a proxy the JWKS is read
    through): cached keys keep working until their maximum age (10 s here), then
    the issuer's tokens fail closed; reachable again, they work again."""
    realm = realms["acme"]
    upstream = int(realm.keycloak.url.rsplit(":", 1)[1])
    proxy = await TcpProxy(upstream).start()
    path = realm.jwks_url.removeprefix(realm.keycloak.url)
    issuer = {
        **issuers({"acme": realm})[0],
        "jwks_url": f"http://127.0.0.1:{proxy.port}{path}",
        "refresh_seconds": 10,
        "min_refresh_seconds": 1,
        "max_key_age_seconds": 10,
    }
    data = pm.config("memory", None)
    data["auth"] = {"mode": "tokens", "issuers": [issuer]}
    token = realm.password_token("alice")
    async with serving(parse_config(data)) as app:
        assert await _list_indexes(app, token) == "ok"
        fetched = time.monotonic()
        await proxy.close()
        assert await _list_indexes(app, token) == "ok"  # the cached key
        while (outcome := await _list_indexes(app, token)) == "ok":
            assert time.monotonic() - fetched < 60, "never failed closed"
            await asyncio.sleep(0.5)  # polling the condition: the key set's age
        assert outcome == "TOKEN_KEYS_UNAVAILABLE"
        assert time.monotonic() - fetched >= 9.0, "failed closed before the maximum age"
        proxy = await TcpProxy(upstream).start(proxy.port)
        try:
            deadline = time.monotonic() + 60
            while (outcome := await _list_indexes(app, token)) != "ok":
                assert outcome == "TOKEN_KEYS_UNAVAILABLE"
                assert time.monotonic() < deadline, "never recovered"
                await asyncio.sleep(0.5)  # polling: the next allowed refresh
        finally:
            await proxy.close()


@pytest.mark.parametrize(("tenant", "caller"), pm.CASES)
async def test_token_matrix_over_grpc_web(
    app: RunningApp, tokens: Tokens, tenant: str, caller: str
) -> None:
    """gRPC-Web (binary) Retrieve with the user's token: exactly their documents;
    a tampered token is UNAUTHENTICATED with its reason in the trailer."""
    token = tokens.of(tenant, USERS[caller])
    request = rt.RetrieveRequest(
        query=rt.RagQuery(
            index_name="shared", text=pm.COMMON, mode=rt.RETRIEVAL_MODE_LEXICAL, top_k=50
        )
    ).SerializeToString()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{app.http_port}", timeout=60) as http:

        async def call(credential: str) -> tuple[list[tuple[int, bytes]], dict[str, str]]:
            r = await http.post(
                "/groundwire.v1.RetrieverService/Retrieve",
                content=ENVELOPE.pack(0, len(request)) + request,
                headers={
                    "content-type": "application/grpc-web+proto",
                    "x-grpc-web": "1",
                    "authorization": f"Bearer {credential}",
                },
            )
            assert r.status_code == 200, r.status_code
            frames = split_envelopes(r.content)
            flags, trailer = frames[-1]
            assert flags == 0x80
            fields = dict(line.split(": ", 1) for line in trailer.decode().split("\r\n") if line)
            return frames[:-1], fields

        frames, fields = await call(token)
        assert fields["grpc-status"] == "0", fields
        found = {r.document_id for r in rt.RetrieveResponse.FromString(frames[0][1]).results}
        assert found == pm.visible(tenant, caller)
        forged = tamper(token)
        frames, fields = await call(forged)
        assert fields["grpc-status"] == str(grpc.StatusCode.UNAUTHENTICATED.value[0])
        raw = fields["grpc-status-details-bin"]
        status = status_pb2.Status.FromString(base64.b64decode(raw + "=" * (-len(raw) % 4)))
        info = error_details_pb2.ErrorInfo()
        assert status.details[0].Unpack(info)
        assert info.reason == "TOKEN_SIGNATURE_INVALID"
        assert forged.split(".")[1] not in fields.get("grpc-message", "")
