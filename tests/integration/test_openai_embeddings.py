"""`POST /v1/embeddings` of the OpenAI facade, driven by the official `openai`
SDK against a running server: the model is an index, the vectors are its
embedder's query vectors (equal to what the embedder gives in process), the
answer is OpenAI-shaped with usage, inputs are bounded, the key needs
`retrieve`, and the usage lands in the key's tenant totals (UsageService)."""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import numpy as np
import openai
import pytest

from groundwire.api.http.openai_embeddings import MAX_INPUT_CHARS, MAX_INPUTS
from groundwire.app.config import parse_config
from groundwire.app.factories import build_embedder
from groundwire.domain.auth import hash_key
from groundwire.providers.embeddings.base import EmbeddingTask
from groundwire_client.v1 import usage_pb2, usage_pb2_grpc
from tests.integration.test_connect import KEYS, config
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
async def app() -> AsyncIterator[RunningApp]:
    cfg: dict[str, Any] = config()
    cfg["auth"]["keys"].append(
        {
            "id": "acme-admin",
            "hash": hash_key(ACME_ADMIN),
            "tenant": "acme",
            "permissions": ["manage"],
        }
    )
    async with serving(parse_config(cfg), http=True) as running:
        yield running


ACME_ADMIN = "gw_acme-admin-key-000000000000000000000000000000000"


def client(app: RunningApp, key: str = "acme") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{app.http_port}/v1",
        api_key=KEYS.get(key, key),
        max_retries=0,
        timeout=30,
    )


async def acme_usage(app: RunningApp) -> Any:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        return await usage_pb2_grpc.UsageServiceStub(ch).GetUsage(
            usage_pb2.GetUsageRequest(), metadata=(("authorization", f"Bearer {ACME_ADMIN}"),)
        )


async def test_embeddings_are_the_index_embedders_query_vectors(app: RunningApp) -> None:
    before = await acme_usage(app)
    texts = ["parental leave policy", "remote work on Fridays"]
    embedder = build_embedder(parse_config(config()).embedders["hash"], "hash")
    expected = await embedder.embed(texts, EmbeddingTask.QUERY)
    # Left to itself the SDK asks for base64 and decodes it; float and base64
    # asked for explicitly come back as they are.
    for fmt in (openai.NOT_GIVEN, "float", "base64"):
        answer = await client(app).embeddings.create(
            model="demo",
            input=texts,
            encoding_format=fmt,  # type: ignore[arg-type]
        )
        assert answer.object == "list" and answer.model == "demo"
        assert [d.index for d in answer.data] == [0, 1]
        rows: list[Any] = [d.embedding for d in answer.data]
        if fmt == "base64":
            rows = [np.frombuffer(base64.b64decode(r), dtype="<f4") for r in rows]
        got = np.array(rows, dtype=np.float32)
        assert got.shape == expected.shape
        assert np.allclose(got, expected, atol=1e-6)
        assert answer.usage.prompt_tokens == answer.usage.total_tokens > 0
    one = await client(app).embeddings.create(model="demo", input="parental leave")
    assert len(one.data) == 1
    # The usage is the acme tenant's, through the gRPC calls' metering.
    after = await acme_usage(app)
    assert after.tenant == "acme"
    assert after.query.texts - before.query.texts == 7
    assert after.query.input_tokens - before.query.input_tokens == (
        3 * answer.usage.prompt_tokens + one.usage.prompt_tokens
    )


async def test_unknown_models_and_bounds(app: RunningApp) -> None:
    with pytest.raises(openai.NotFoundError) as nf:
        await client(app).embeddings.create(model="nowhere", input="x")
    assert nf.value.code == "model_not_found"
    cases: list[tuple[Any, str, str]] = [
        (["a"] * (MAX_INPUTS + 1), "input", "field_out_of_range"),
        ("x" * (MAX_INPUT_CHARS + 1), "input[0]", "field_too_long"),
        ([], "input", "malformed_request"),
        ([[1, 2, 3]], "input[0]", "unsupported_parameter"),
    ]
    for value, param, code in cases:
        with pytest.raises(openai.BadRequestError) as bad:
            await client(app).embeddings.create(model="demo", input=value)
        assert (bad.value.param, bad.value.code) == (param, code)
    with pytest.raises(openai.BadRequestError) as dims:
        await client(app).embeddings.create(model="demo", input="x", dimensions=3)
    assert dims.value.param == "dimensions"


async def test_keys_and_permissions(app: RunningApp, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="groundwire.access")
    with pytest.raises(openai.AuthenticationError):
        await client(app, "gw_wrong").embeddings.create(model="demo", input="x")
    # acme-admin holds only `manage`: no `retrieve`, no embeddings.
    with pytest.raises(openai.PermissionDeniedError):
        await client(app, ACME_ADMIN).embeddings.create(model="demo", input="x")
    line = [r for r in caplog.records if getattr(r, "method", "") == "/v1/embeddings"][-1]
    assert (line.key_id, line.tenant, line.reason) == (  # type: ignore[attr-defined]
        "acme-admin",
        "acme",
        "PERMISSION_DENIED",
    )
    # Unauthenticated callers learn nothing about the body (refused before it is read).
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{app.http_port}") as http:
        r = await http.post("/v1/embeddings", content=b"not json")
        assert r.status_code == 401
        r = await http.post(
            "/v1/embeddings",
            content=b"not json",
            headers={"authorization": f"Bearer {KEYS['acme']}"},
        )
        assert r.status_code == 400 and r.json()["error"]["code"] == "malformed_request"
