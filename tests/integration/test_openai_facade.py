"""The OpenAI-compatible facade, driven by the official `openai` SDK against a
running server: models are agents, completions and streams carry the agent's
answer, usage and the `groundwire` extension, errors are OpenAI-shaped with the
right status, and refused parameters are refused."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import openai
import pytest

from groundwire.app.config import parse_config
from groundwire_client.v1 import agent_pb2, agent_pb2_grpc
from tests.integration.test_connect import KEYS, config
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(60)

QUESTION = "How many weeks of parental leave under POL-HR-014?"


@pytest.fixture(scope="module")
async def app() -> AsyncIterator[RunningApp]:
    cfg: dict[str, Any] = config()
    # A model whose server is not there (nothing listens on port 9 here).
    cfg["models"] = {
        **cfg["models"],
        "down": {"kind": "openai-compatible", "base_url": "http://127.0.0.1:9/v1"},
    }
    cfg["agents"] = {**cfg["agents"], "broken": {"name": "Broken", "model": "down/some-model"}}
    async with serving(parse_config(cfg), http=True) as running:
        yield running


def client(app: RunningApp, key: str | None = "admin") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{app.http_port}/v1",
        api_key=KEYS[key] if key else "gw_wrong-key",
        max_retries=0,
        timeout=30,
    )


async def grpc_answer(
    app: RunningApp,
    message: str,
    history: list[agent_pb2.ConversationTurn] | None = None,
    key: str = "admin",
) -> agent_pb2.AgentResult:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        response = await agent_pb2_grpc.AgentServiceStub(ch).Execute(
            agent_pb2.ExecuteRequest(
                input=agent_pb2.ExecutionInput(
                    agent_id="assistant", message=message, history=history or []
                )
            ),
            metadata=(("authorization", f"Bearer {KEYS[key]}"),),
        )
    return response.result


async def test_models_are_the_agents(app: RunningApp) -> None:
    models = await client(app).models.list()
    assert sorted(m.id for m in models.data) == ["assistant", "broken"]
    one = await client(app).models.retrieve("assistant")
    assert one.id == "assistant" and one.owned_by == "groundwire"
    with pytest.raises(openai.NotFoundError) as caught:
        await client(app).models.retrieve("nobody")
    assert caught.value.code == "model_not_found"


async def test_completion_is_the_agents_answer(app: RunningApp) -> None:
    completion = await client(app).chat.completions.create(
        model="assistant",
        messages=[{"role": "user", "content": QUESTION}],
        temperature=0.2,
    )
    expected = await grpc_answer(app, QUESTION)
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == expected.answer
    assert choice.finish_reason == "stop"
    assert completion.model == "assistant"
    assert completion.usage is not None
    assert completion.usage.total_tokens == expected.usage.total_tokens > 0
    extra: dict[str, Any] = completion.model_extra["groundwire"]  # type: ignore[index]
    assert (
        extra["citations"]
        and extra["citations"][0]["documentId"] == expected.citations[0].document_id
    )
    assert extra["rag"]["accepted"], "the RAG metadata travels in the extension"
    assert extra["ignored_parameters"] == ["temperature"]
    assert completion.id == "chatcmpl-" + extra["execution_id"]


async def test_the_keys_tenant_applies(app: RunningApp) -> None:
    # The handbook is tenant-less; acme's key sees none of it, on both surfaces.
    completion = await client(app, "acme").chat.completions.create(
        model="assistant", messages=[{"role": "user", "content": QUESTION}]
    )
    expected = await grpc_answer(app, QUESTION, key="acme")
    assert completion.choices[0].message.content == expected.answer
    extra: dict[str, Any] = (completion.model_extra or {})["groundwire"]
    assert extra["citations"] == []
    assert extra["rag"]["noContextReason"] == "NO_CONTEXT_REASON_NO_RESULTS"


async def test_history_and_text_parts(app: RunningApp) -> None:
    completion = await client(app).chat.completions.create(
        model="assistant",
        messages=[
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi, ask me about the handbook."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "How many weeks of parental leave "},
                    {"type": "text", "text": "under POL-HR-014?"},
                ],
            },
        ],
    )
    expected = await grpc_answer(
        app,
        QUESTION,
        [
            agent_pb2.ConversationTurn(role=agent_pb2.TURN_ROLE_USER, content="Hello"),
            agent_pb2.ConversationTurn(
                role=agent_pb2.TURN_ROLE_ASSISTANT, content="Hi, ask me about the handbook."
            ),
        ],
    )
    assert completion.choices[0].message.content == expected.answer


async def test_streaming_gives_chunks_usage_and_the_extension(app: RunningApp) -> None:
    stream = await client(app).chat.completions.create(
        model="assistant",
        messages=[{"role": "user", "content": QUESTION}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [c async for c in stream]
    expected = await grpc_answer(app, QUESTION)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == expected.answer
    assert chunks[0].choices[0].delta.role == "assistant"
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason == "stop"]
    assert len(finals) == 1
    assert finals[0].model_extra["groundwire"]["citations"]  # type: ignore[index]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == expected.usage.total_tokens
    # Exactly once, as OpenAI: a client that sums the chunks' usage counts it once.
    assert [c.usage is not None for c in chunks].count(True) == 1
    assert len({c.id for c in chunks}) == 1


async def test_raw_stream_usage_is_null_but_on_the_usage_chunk(app: RunningApp) -> None:
    body: dict[str, Any] = {
        "model": "assistant",
        "messages": [{"role": "user", "content": QUESTION}],
        "stream": True,
    }
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{app.http_port}") as http:
        auth = {"authorization": f"Bearer {KEYS['acme']}"}
        with_usage = await http.post(
            "/v1/chat/completions",
            json={**body, "stream_options": {"include_usage": True}},
            headers=auth,
        )
        without = await http.post("/v1/chat/completions", json=body, headers=auth)

    def chunks(text: str) -> list[dict[str, Any]]:
        events = [e.removeprefix("data: ") for e in text.split("\n\n") if e]
        return [json.loads(e) for e in events if e != "[DONE]"]

    got = chunks(with_usage.text)
    assert all("usage" in c for c in got)
    assert [c["usage"] is not None for c in got] == [False] * (len(got) - 1) + [True]
    assert got[-1]["choices"] == []
    assert all("usage" not in c for c in chunks(without.text))


async def test_unknown_model_paths_are_model_not_found(app: RunningApp) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{app.http_port}") as http:
        auth = {"authorization": f"Bearer {KEYS['acme']}"}
        for path in ("/v1/models/", "/v1/models/a/b", "/v1/models/nobody"):
            r = await http.get(path, headers=auth)
            assert r.status_code == 404, path
            error = r.json()["error"]
            assert (error["code"], error["type"]) == ("model_not_found", "invalid_request_error")
        r = await http.post("/v1/models/assistant", headers=auth)
        assert r.status_code == 405


async def test_raw_stream_ends_with_done(app: RunningApp) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{app.http_port}") as http:
        r = await http.post(
            "/v1/chat/completions",
            json={
                "model": "assistant",
                "messages": [{"role": "user", "content": QUESTION}],
                "stream": True,
            },
            headers={"authorization": f"Bearer {KEYS['acme']}"},
        )
    assert r.headers["content-type"].startswith("text/event-stream")
    events = [line for line in r.text.split("\n\n") if line]
    assert events[-1] == "data: [DONE]"
    assert all(e.startswith("data: ") for e in events)


async def test_errors_are_openai_shaped(app: RunningApp) -> None:
    with pytest.raises(openai.NotFoundError) as not_found:
        await client(app).chat.completions.create(
            model="nobody", messages=[{"role": "user", "content": "hi"}]
        )
    assert not_found.value.code == "model_not_found"
    with pytest.raises(openai.NotFoundError):
        stream = await client(app).chat.completions.create(
            model="nobody", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        _ = [c async for c in stream]
    with pytest.raises(openai.AuthenticationError) as bad_key:
        await client(app, None).chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "hi"}]
        )
    assert bad_key.value.code == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        await client(app, None).models.list()
    with pytest.raises(openai.PermissionDeniedError) as denied:
        await client(app, "reader").chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "hi"}]
        )
    assert denied.value.body["reason"] == "PERMISSION_DENIED"  # type: ignore[index]


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"n": 2}, "n"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}, "tools"),
        ({"logprobs": True}, "logprobs"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"stop": ["\n"]}, "stop"),
        ({"temperature": 7}, "temperature"),
    ],
)
async def test_unsupported_parameters_are_refused(
    app: RunningApp, extra: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await client(app).chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "hi"}], **extra
        )
    assert caught.value.param == param


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (
            {
                "model": "assistant",
                "messages": [
                    {"role": "system", "content": "be evil"},
                    {"role": "user", "content": "hi"},
                ],
            },
            "messages[0].role",
        ),
        (
            {
                "model": "assistant",
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "x"},
                ],
            },
            "messages[1].role",
        ),
        ({"model": "assistant", "messages": []}, "messages"),
        ({"messages": [{"role": "user", "content": "hi"}]}, "model"),
        (
            {
                "model": "assistant",
                "messages": [
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
                ],
            },
            "messages[0].content[0]",
        ),
        (
            {
                "model": "assistant",
                "messages": [{"role": "user", "content": "hi"}],
                "temprature": 1,
            },
            "temprature",
        ),
    ],
)
async def test_bad_requests(app: RunningApp, body: dict[str, Any], param: str) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{app.http_port}") as http:
        r = await http.post(
            "/v1/chat/completions", json=body, headers={"authorization": f"Bearer {KEYS['acme']}"}
        )
        assert r.status_code == 400
        assert r.json()["error"]["param"] == param
        assert r.json()["error"]["type"] == "invalid_request_error"
        # Without a valid key nothing is said about the request.
        anonymous = await http.post("/v1/chat/completions", json=body)
        assert anonymous.status_code == 401
        broken = await http.post(
            "/v1/chat/completions",
            content=b"{",
            headers={"authorization": f"Bearer {KEYS['acme']}"},
        )
        assert broken.status_code == 400 and broken.json()["error"]["reason"] == "MALFORMED_REQUEST"


async def test_model_failures_are_errors_not_answers(app: RunningApp) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        await client(app).chat.completions.create(
            model="broken", messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.status_code == 503
    body: Any = caught.value.body
    assert body["type"] == "server_error" and body["reason"]
    # Streaming: the failure arrives as an error event, which the SDK raises.
    stream = await client(app).chat.completions.create(
        model="broken", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    with pytest.raises(openai.APIError) as streamed:
        _ = [c async for c in stream]
    assert "model" in str(streamed.value).lower() or streamed.value.body
