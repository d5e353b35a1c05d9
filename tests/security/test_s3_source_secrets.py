"""A hostile S3 endpoint cannot make groundwire repeat its secrets or its words.

An s3 source's endpoint (a loopback stand-in, admitted by allow_cidrs) answers every
request with an S3 error whose code, message and headers carry canaries, the
request's own Authorization header (the access key id) and redirect targets. The
run fails with the right code, and no canary, key id or secret appears in any log
record (root at DEBUG, botocore's own records included), in the operation, or in
the error the run recorded."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator

import pytest

from groundwire_client.v1 import ingestion_pb2 as ing
from tests.support.s3_sources import KEY_ENV, SECRET_ENV, configuration, running
from tests.support.web_standin import Page, WebStandIn

pytestmark = pytest.mark.timeout(120)

KEY_ID = f"AKIDCANARY{uuid.uuid4().hex[:10].upper()}"
SECRET = f"secret-canary-{uuid.uuid4().hex}"
CANARY = f"CANARY-s3-{uuid.uuid4().hex}"


def hostile(status: int, code: str) -> Callable[[WebStandIn], Page]:
    def page(server: WebStandIn) -> Page:
        _, headers = server.requests[-1]
        echoed = headers.get("authorization", "")
        body = (
            f"<?xml version='1.0'?><Error><Code>{code}</Code>"
            f"<Message>{CANARY} {echoed}</Message><Resource>{CANARY}</Resource></Error>"
        ).encode()
        return Page(body, "application/xml", status, headers={"x-amz-request-id": CANARY})

    return page


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[WebStandIn]:
    monkeypatch.setenv(KEY_ENV, KEY_ID)
    monkeypatch.setenv(SECRET_ENV, SECRET)
    with WebStandIn() as server:
        yield server


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (403, "InvalidAccessKeyId", "SOURCE_ACCESS_DENIED"),
        (403, f"{CANARY}-{KEY_ID}", "SOURCE_ACCESS_DENIED"),
        (500, CANARY, "SOURCE_UNAVAILABLE"),
        (404, "NoSuchBucket", "SOURCE_UNAVAILABLE"),
    ],
    # Stable ids: the canaries are random per process, and pytest-xdist's workers must
    # collect the same test names.
    ids=["known-code", "canary-code-403", "canary-code-500", "no-such-bucket"],
)
async def test_a_hostile_endpoint_gets_no_echo(
    endpoint: WebStandIn,
    status: int,
    code: str,
    expected: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    endpoint.pages["/team-docs"] = hostile(status, code)
    src = {
        "kind": "s3",
        "endpoint": endpoint.url(""),
        "bucket": "team-docs",
        "prefix": "handbook/",
        "addressing": "path",
        "allow_cidrs": ["127.0.0.1/32"],
        "access_key_id": {"env": KEY_ENV},
        "secret_access_key": {"env": SECRET_ENV},
        "read_timeout_seconds": 5,
    }
    caplog.set_level(logging.DEBUG)
    async with running(configuration(src)) as client:
        op = await client.run()
    assert op.state == ing.OPERATION_STATE_FAILED, op
    assert op.error_code == expected
    # Positive control: the stand-in was asked, signed with the canary key id.
    assert any(KEY_ID in h.get("authorization", "") for _, h in endpoint.requests)
    said = caplog.text + "".join(str(r.__dict__) for r in caplog.records) + str(op)
    assert "s3://team-docs/handbook/" in said
    for secret in (CANARY, KEY_ID, SECRET):
        assert secret not in said
