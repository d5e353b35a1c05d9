"""The request policy of `kind = "s3"` sources over real gRPC and real sockets, with
a loopback stand-in for the S3 endpoint (no S3 server needed): an endpoint whose
name resolves to a loopback address is refused unless allowed; a redirect to any
other host (another name of the same server, a metadata address) is never
followed; each fails the run as SOURCE_REFUSED with nothing published."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from groundwire_client.v1 import ingestion_pb2 as ing
from tests.support.s3_sources import KEY_ENV, SECRET_ENV, configuration, running
from tests.support.web_standin import Page, WebStandIn

pytestmark = pytest.mark.timeout(120)


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
