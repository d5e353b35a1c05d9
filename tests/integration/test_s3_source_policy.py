"""The request policy of `kind = "s3"` sources over real gRPC and real sockets, with
a loopback stand-in for the S3 endpoint (no S3 server needed): an endpoint whose
name resolves to a loopback address is refused unless allowed; a redirect to any
other host (another name of the same server, a metadata address) is never
followed; each fails the run as SOURCE_REFUSED with nothing published. A TLS
endpoint is verified against the configured CA file (and by name)."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from groundwire_client.v1 import ingestion_pb2 as ing
from tests.support.s3_sources import KEY_ENV, SECRET_ENV, configuration, running
from tests.support.tls import make_pki
from tests.support.web_standin import Page, WebStandIn

pytestmark = pytest.mark.timeout(120)

EMPTY_LISTING = (
    b'<?xml version="1.0" encoding="UTF-8"?>'
    b'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
    b"<Name>team-docs</Name><Prefix>handbook/</Prefix><KeyCount>0</KeyCount>"
    b"<MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>"
)


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[WebStandIn]:
    monkeypatch.setenv(KEY_ENV, "AKIDPOLICYTEST")
    monkeypatch.setenv(SECRET_ENV, "policy-test-secret")
    with WebStandIn() as server:
        yield server


def s3(endpoint: str, **extra: object) -> dict[str, object]:
    return {
        "kind": "s3",
        "endpoint": endpoint,
        "bucket": "team-docs",
        "prefix": "handbook/",
        "addressing": "path",
        "access_key_id": {"env": KEY_ENV},
        "secret_access_key": {"env": SECRET_ENV},
        "connect_timeout_seconds": 5,
        "read_timeout_seconds": 5,
        **extra,
    }


async def run(src: dict[str, object]) -> ing.Operation:
    async with running(configuration(src)) as client:
        return await client.run()


async def test_a_loopback_endpoint_by_name_is_refused_unless_allowed(
    endpoint: WebStandIn,
) -> None:
    op = await run(s3(endpoint.url("", host="localhost")))
    assert op.state == ing.OPERATION_STATE_FAILED, op
    assert op.error_code == "SOURCE_REFUSED"
    assert endpoint.requests == []


@pytest.mark.parametrize(
    "target",
    ["http://localhost:{port}/elsewhere", "http://169.254.169.254/latest/meta-data/"],
)
async def test_a_redirect_to_another_host_is_never_followed(
    endpoint: WebStandIn, target: str
) -> None:
    endpoint.pages["/team-docs"] = Page(status=307, location=target.format(port=endpoint.port))
    endpoint.pages["/elsewhere"] = Page(b"<ListBucketResult/>", "application/xml")
    op = await run(s3(endpoint.url(""), allow_cidrs=["127.0.0.1/32"]))
    assert op.state == ing.OPERATION_STATE_FAILED, op
    assert op.error_code == "SOURCE_REFUSED"
    # Asked (botocore retries once), never followed.
    assert {path.split("?", 1)[0] for path, _ in endpoint.requests} == {"/team-docs"}


@pytest.mark.parametrize("trusted", [True, False])
async def test_tls_endpoints_are_verified_with_the_configured_ca(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trusted: bool
) -> None:
    monkeypatch.setenv(KEY_ENV, "AKIDPOLICYTEST")
    monkeypatch.setenv(SECRET_ENV, "policy-test-secret")
    pki = make_pki(tmp_path)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki.server_cert, pki.server_key)
    with WebStandIn(tls=ctx) as server:
        server.pages["/team-docs"] = Page(EMPTY_LISTING, "application/xml")
        extra: dict[str, object] = {"ca_file": str(pki.ca_cert)} if trusted else {}
        op = await run(s3(server.url("", host="localhost"), allow_hosts=["localhost"], **extra))
    if trusted:
        assert op.state == ing.OPERATION_STATE_SUCCEEDED, op
        assert op.counts.discovered == 0
        assert server.sni_names and server.sni_names[0] == "localhost"
    else:
        # The system trust store does not know the test CA: nothing is read.
        assert op.state == ing.OPERATION_STATE_FAILED, op
        assert op.error_code == "SOURCE_UNAVAILABLE"
