"""The OpenAI-compatible facade: `POST /v1/chat/completions`, `GET /v1/models`
and `GET /v1/models/{id}`, where a model is an agent. Every call runs the
contract's RPC (AgentService Execute / ExecuteStream / ListAgents / GetAgent)
through api/http/rpc.py, so the key, its tenant and permissions, admission,
the snapshot, the access log and the metrics are the gRPC port's.

Translation, in one place:
- `model` is the agent id; the last message (role user) is the agent's
  message and the earlier user/assistant messages its history. System and
  developer messages are refused: an agent's instructions (and its grounding
  rules) are the server's.
- `stream: true` answers with server-sent events in OpenAI's chunk format,
  ending with `data: [DONE]`; `stream_options.include_usage` adds the
  usage-only chunk (empty `choices`) before it, and every other chunk then has
  `usage: null`, as OpenAI does: usage is given exactly once per stream.
- An unknown model (`GET /v1/models/{id}` of no agent, any deeper path) is
  404 with code `model_not_found`.
- The answer's citations and RAG metadata travel in the `groundwire` object of
  the completion (of the final chunk when streaming); clients that ignore
  unknown fields are unaffected.
- Parameters are refused (400, code `unsupported_parameter`) when honouring them
  is impossible and ignoring them would change what the caller gets (n > 1,
  tools, logprobs, response_format other than text, stop, audio, ...), and
  ignored when they only tune the model's sampling or budget, which the
  agent's configuration owns (IGNORED below); the ignored ones are listed in
  `groundwire.ignored_parameters`. Unknown parameters are refused.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import error_details_pb2

from groundwire.api.auth import PRINCIPALS_HEADER
from groundwire.api.http.asgi import (
    BodyTooLarge,
    CancelOnDisconnect,
    ClientGone,
    Receive,
    Scope,
    Send,
    header,
    read_body,
    respond_json,
)
from groundwire.api.http.connect import HTTP_STATUS
from groundwire.api.http.rpc import Procedures, RpcAborted, RpcCall, transport_error
from groundwire_client.v1 import agent_pb2

_AGENT = "/groundwire.v1.AgentService/"
TRANSPORT = "openai_http"
_PAGE = 100
# The facade's routes, as the access log names them (any other path reads "/v1/*").
_ROUTES = frozenset({"/v1/chat/completions", "/v1/embeddings", "/v1/models"})
_MAX_AGENT_PAGES = 100

# Accepted and ignored: the agent's configured model settings apply.
IGNORED = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "presence_penalty",
        "frequency_penalty",
        "seed",
        "user",
        "metadata",
        "store",
        "service_tier",
        "reasoning_effort",
        "parallel_tool_calls",
    }
)
# Refused whenever present with a value other than the neutral one.
_REFUSED = frozenset(
    {
        "tools",
        "functions",
        "logit_bias",
        "top_logprobs",
        "stop",
        "audio",
        "prediction",
        "web_search_options",
    }
)
_KNOWN = frozenset(
    {
        "model",
        "messages",
        "stream",
        "stream_options",
        "n",
        "logprobs",
        "response_format",
        "tool_choice",
        "function_call",
        "modalities",
        *IGNORED,
        *_REFUSED,
    }
)
# ErrorInfo reason -> OpenAI's error code, where OpenAI has one.
_OPENAI_CODES = {
    "AGENT_NOT_FOUND": "model_not_found",
    # /v1/embeddings: the model is an index.
    "INDEX_NOT_FOUND": "model_not_found",
    "UNAUTHENTICATED": "invalid_api_key",
}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "invalid_request_error",
    429: "rate_limit_error",
}


class BadRequest(Exception):
    """A request the facade refuses before any RPC (400)."""

    def __init__(self, message: str, param: str | None, reason: str) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.reason = reason


def _unsupported(param: str, why: str) -> BadRequest:
    return BadRequest(
        f"{param} is not supported by groundwire: {why}", param, "UNSUPPORTED_PARAMETER"
    )


def _invalid(param: str, what: str) -> BadRequest:
    return BadRequest(f"{param} {what}", param, "MALFORMED_REQUEST")


def _text(content: object, param: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text":
                raise _unsupported(f"{param}[{i}]", "only text content parts are accepted")
            text = part.get("text")
            if not isinstance(text, str):
                raise _invalid(f"{param}[{i}].text", "must be a string")
            parts.append(text)
        return "".join(parts)
    raise _invalid(param, "must be a string or an array of text parts")


def execution_input(body: Mapping[str, Any]) -> tuple[agent_pb2.ExecutionInput, list[str]]:
    """The agent execution a chat completion request asks for, and the names of
    the parameters it ignores; raises BadRequest."""
    for key in body:
        if key not in _KNOWN:
            raise BadRequest(f"unrecognized request argument: {key}", key, "UNSUPPORTED_PARAMETER")
    for key in _REFUSED:
        value = body.get(key)
        if value not in (None, [], {}, ""):
            raise _unsupported(key, "agents answer in text from their own configured tools")
    if body.get("n") not in (None, 1):
        raise _unsupported("n", "one choice per request (n = 1)")
    if body.get("logprobs") not in (None, False):
        raise _unsupported("logprobs", "token log probabilities are not returned")
    fmt = body.get("response_format")
    if fmt is not None and fmt != {"type": "text"}:
        raise _unsupported("response_format", 'only {"type": "text"}')
    for key in ("tool_choice", "function_call"):
        if body.get(key) not in (None, "none"):
            raise _unsupported(key, "agents call only their own configured tools")
    if body.get("modalities") not in (None, ["text"]):
        raise _unsupported("modalities", 'only ["text"]')
    _check_sampling(body)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _invalid("model", "is required (an agent id; GET /v1/models lists them)")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _invalid("messages", "is required: a non-empty array")
    turns: list[agent_pb2.ConversationTurn] = []
    for i, message in enumerate(messages):
        param = f"messages[{i}]"
        if not isinstance(message, dict):
            raise _invalid(param, "must be an object")
        role = message.get("role")
        if role in ("system", "developer"):
            raise _unsupported(
                f"{param}.role", f"{role} messages: the agent's instructions are configured"
            )
        if role not in ("user", "assistant"):
            raise _unsupported(f"{param}.role", "roles are user and assistant")
        if message.get("tool_calls") or message.get("function_call") or message.get("audio"):
            raise _unsupported(param, "assistant messages carry text only")
        text = _text(message.get("content"), f"{param}.content")
        turns.append(
            agent_pb2.ConversationTurn(
                role=agent_pb2.TURN_ROLE_USER if role == "user" else agent_pb2.TURN_ROLE_ASSISTANT,
                content=text,
            )
        )
    if turns[-1].role != agent_pb2.TURN_ROLE_USER:
        raise _invalid(f"messages[{len(turns) - 1}].role", "must be user (the question to answer)")
    ignored = sorted(k for k in body if k in IGNORED and body[k] is not None)
    return (
        agent_pb2.ExecutionInput(agent_id=model, message=turns[-1].content, history=turns[:-1]),
        ignored,
    )


def _check_sampling(body: Mapping[str, Any]) -> None:
    """Ignored parameters must still be well-formed: nonsense is refused, not ignored."""
    ranges = {
        "temperature": (0.0, 2.0),
        "top_p": (0.0, 1.0),
        "presence_penalty": (-2.0, 2.0),
        "frequency_penalty": (-2.0, 2.0),
    }
    for key, (low, high) in ranges.items():
        value = body.get(key)
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not low <= value <= high
        ):
            raise _invalid(key, f"must be a number in [{low:g}, {high:g}]")
    for key in ("max_tokens", "max_completion_tokens", "seed"):
        value = body.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise _invalid(key, "must be an integer")
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise _invalid("stream", "must be a boolean")
    options = body.get("stream_options")
    if options is not None:
        if not isinstance(options, dict) or set(options) - {"include_usage"}:
            raise _unsupported("stream_options", "only include_usage")
        if not stream:
            raise _invalid("stream_options", "is only allowed with stream: true")


def _usage(result: agent_pb2.AgentResult) -> dict[str, int]:
    return {
        "prompt_tokens": result.usage.prompt_tokens,
        "completion_tokens": result.usage.completion_tokens,
        "total_tokens": result.usage.total_tokens,
    }


def _dict(message: Message) -> dict[str, Any]:
    return json_format.MessageToDict(message)


def extension(result: agent_pb2.AgentResult, ignored: list[str]) -> dict[str, Any]:
    """The `groundwire` object: what an OpenAI completion has no field for."""
    out: dict[str, Any] = {
        "execution_id": result.execution_id,
        "agent_id": result.agent_id,
        "model_provider": result.model_provider,
        "model": result.model,
        "citations": [_dict(c) for c in result.citations],
        "rag": _dict(result.rag),
        "tool_calls": [_dict(t) for t in result.tool_calls],
        "ignored_parameters": ignored,
    }
    if result.HasField("duration"):
        out["duration"] = json_format.MessageToDict(result)["duration"]
    return out


def _retry_after(err: RpcAborted) -> float | None:
    if err.status is not None:
        for detail in err.status.details:
            retry = error_details_pb2.RetryInfo()
            if detail.Unpack(retry):
                return float(retry.retry_delay.ToNanoseconds()) / 1e9
    return None


def openai_error(message: str, status: int, reason: str, param: str | None) -> dict[str, Any]:
    code = _OPENAI_CODES.get(reason, reason.lower())
    return {
        "error": {
            "message": message,
            "type": _ERROR_TYPES.get(status, "server_error" if status >= 500 else "api_error"),
            "param": param,
            "code": code,
            "reason": reason,  # groundwire's ErrorInfo reason, exactly
        }
    }


def _param(err: RpcAborted) -> str | None:
    """The request field an INVALID_ARGUMENT names (its first BadRequest violation)."""
    if err.status is not None:
        for detail in err.status.details:
            bad = error_details_pb2.BadRequest()
            if detail.Unpack(bad) and bad.field_violations:
                return str(bad.field_violations[0].field)
    return None


async def send_error(send: Send, err: RpcAborted) -> None:
    status = HTTP_STATUS.get(err.code, 500)
    if status == 499:
        status = 408
    headers = []
    retry = _retry_after(err)
    if retry is not None:
        headers.append((b"retry-after", str(max(1, math.ceil(retry))).encode()))
    await respond_json(
        send, status, openai_error(err.message, status, err.reason, _param(err)), headers
    )


def metadata(scope: Scope) -> tuple[tuple[str, str], ...]:
    out = []
    for name in (b"authorization", b"x-request-id", PRINCIPALS_HEADER.encode()):
        value = header(scope, name)
        if value is not None:
            out.append((name.decode(), value))
    return tuple(out)


def _sse(payload: object) -> bytes:
    return (
        b"data: "
        + json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        + b"\n\n"
    )


class OpenAIChatApp:
    """The facade's three routes (ASGI callables)."""

    def __init__(self, procedures: Procedures, max_message_bytes: int) -> None:
        self._procedures = procedures
        self._limit = max_message_bytes

    def _refused(self, scope: Scope, err: RpcAborted, status: int) -> None:
        """The access log line of a request refused before any RPC ran."""
        route = str(scope["path"]) if scope["path"] in _ROUTES else "/v1/*"
        self._procedures.refused(route, err, metadata(scope), TRANSPORT, status)

    async def _unary(self, method: str, request: Message, call: RpcCall) -> Any:
        procedure = self._procedures.get(_AGENT + method)
        assert procedure is not None
        return await self._procedures.unary(procedure, request, call)

    async def list_models(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "GET":
            await respond_json(send, 405, openai_error("use GET", 405, "METHOD_NOT_FOUND", None))
            return
        call = RpcCall(metadata(scope), None, TRANSPORT)
        models: list[dict[str, Any]] = []
        token = ""
        try:
            for _ in range(_MAX_AGENT_PAGES):
                page = await self._unary(
                    "ListAgents",
                    agent_pb2.ListAgentsRequest(page_size=_PAGE, page_token=token),
                    call,
                )
                models.extend(_model(agent) for agent in page.agents)
                token = page.next_page_token
                if not token:
                    break
        except RpcAborted as err:
            await send_error(send, err)
            return
        await respond_json(send, 200, {"object": "list", "data": models})

    async def get_model(self, scope: Scope, receive: Receive, send: Send) -> None:
        agent_id = scope["path"].removeprefix("/v1/models/")
        if scope["method"] != "GET":
            await respond_json(send, 405, openai_error("use GET", 405, "METHOD_NOT_FOUND", None))
            return
        if not agent_id or "/" in agent_id:
            # No agent has such an id (OpenAI's answer for a model it does not have).
            err = transport_error(
                grpc.StatusCode.NOT_FOUND, "AGENT_NOT_FOUND", "no model has that id"
            )
            await send_error(send, err)
            return
        call = RpcCall(metadata(scope), None, TRANSPORT)
        try:
            response = await self._unary(
                "GetAgent", agent_pb2.GetAgentRequest(agent_id=agent_id), call
            )
        except RpcAborted as err:
            await send_error(send, err)
            return
        await respond_json(send, 200, _model(response.agent))

    async def chat_completions(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            await respond_json(send, 405, openai_error("use POST", 405, "METHOD_NOT_FOUND", None))
            return
        try:
            raw = await read_body(receive, self._limit)
        except BodyTooLarge:
            self._refused(scope, too_large(), 413)
            await respond_json(
                send,
                413,
                openai_error("the request body is too large", 413, "MESSAGE_TOO_LARGE", None),
            )
            return
        except ClientGone:
            return
        call = RpcCall(metadata(scope), None, TRANSPORT)
        try:
            body = _parse(raw)
            execution, ignored = execution_input(body)
        except BadRequest as bad:
            # Authenticate first, as the RPC would: a caller without a valid key
            # learns nothing about the request's validity.
            if not await self._authenticated(send, call):
                return
            self._refused(
                scope,
                transport_error(grpc.StatusCode.INVALID_ARGUMENT, bad.reason, bad.message),
                400,
            )
            await respond_json(send, 400, openai_error(bad.message, 400, bad.reason, bad.param))
            return
        async with CancelOnDisconnect(receive):
            if body.get("stream"):
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                await self._stream(send, execution, ignored, include_usage, call)
            else:
                await self._complete(send, execution, ignored, call)

    async def _authenticated(self, send: Send, call: RpcCall) -> bool:
        """Whether the caller's key may execute agents (GetAgent of no agent checks
        exactly that: the same permission, no work); answers the error if not."""
        try:
            await self._unary("GetAgent", agent_pb2.GetAgentRequest(agent_id=""), call)
        except RpcAborted as err:
            if err.code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                await send_error(send, err)
                return False
        return True

    async def _complete(
        self, send: Send, execution: agent_pb2.ExecutionInput, ignored: list[str], call: RpcCall
    ) -> None:
        try:
            response = await self._unary("Execute", agent_pb2.ExecuteRequest(input=execution), call)
        except RpcAborted as err:
            await send_error(send, err)
            return
        result: agent_pb2.AgentResult = response.result
        await respond_json(
            send,
            200,
            {
                "id": "chatcmpl-" + result.execution_id,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": execution.agent_id,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": result.answer, "refusal": None},
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
                "usage": _usage(result),
                "system_fingerprint": None,
                "groundwire": extension(result, ignored),
            },
            _request_id_header(call),
        )

    async def _stream(
        self,
        send: Send,
        execution: agent_pb2.ExecutionInput,
        ignored: list[str],
        include_usage: bool,
        call: RpcCall,
    ) -> None:
        procedure = self._procedures.get(_AGENT + "ExecuteStream")
        assert procedure is not None
        events: AsyncIterator[agent_pb2.ExecuteStreamResponse] = self._procedures.stream(
            procedure, agent_pb2.ExecuteStreamRequest(input=execution), call
        )  # type: ignore[assignment]
        created = int(time.time())
        try:
            # Errors before the first event (auth, unknown agent, limits) are
            # answered with their HTTP status, like a non-streaming request.
            first = await anext(events)
        except RpcAborted as err:
            await send_error(send, err)
            return
        except StopAsyncIteration:
            first = None
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream; charset=utf-8"),
                    (b"cache-control", b"no-cache"),
                    *_request_id_header(call),
                ],
            }
        )
        chunk_id = "chatcmpl-" + (first.execution_id if first is not None else "")

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            out: dict[str, Any] = {
                "id": chunk_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": execution.agent_id,
                "system_fingerprint": None,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
            if include_usage:
                # As OpenAI: null on every chunk but the last, usage-only one.
                out["usage"] = None
            return out

        async def emit(payload: object) -> None:
            await send({"type": "http.response.body", "body": _sse(payload), "more_body": True})

        await emit(chunk({"role": "assistant", "content": ""}))

        async def all_events() -> AsyncIterator[agent_pb2.ExecuteStreamResponse]:
            if first is not None:
                yield first
            async for event in events:
                yield event

        try:
            async for event in all_events():
                if event.type == agent_pb2.EXECUTION_EVENT_TYPE_TEXT_DELTA and event.text_delta:
                    await emit(chunk({"content": event.text_delta}))
                elif event.type == agent_pb2.EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED:
                    final = chunk({}, "stop")
                    final["groundwire"] = extension(event.result, ignored)
                    await emit(final)
                    if include_usage:
                        usage_only = chunk({})
                        usage_only["choices"] = []
                        usage_only["usage"] = _usage(event.result)
                        await emit(usage_only)
                elif event.type == agent_pb2.EXECUTION_EVENT_TYPE_EXECUTION_FAILED:
                    await emit(
                        openai_error(
                            event.error_message or "the execution failed",
                            500,
                            event.error_code or "INTERNAL",
                            None,
                        )
                    )
        except RpcAborted as err:
            status = HTTP_STATUS.get(err.code, 500)
            await emit(openai_error(err.message, status, err.reason, None))
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


def too_large() -> RpcAborted:
    return transport_error(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "MESSAGE_TOO_LARGE",
        "the request is larger than the server's message size bound",
    )


def _parse(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        raise BadRequest("the body is not valid JSON", None, "MALFORMED_REQUEST") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object", None, "MALFORMED_REQUEST")
    return body


def _model(agent: agent_pb2.AgentDescription) -> dict[str, Any]:
    return {"id": agent.id, "object": "model", "created": 0, "owned_by": "groundwire"}


def _request_id_header(call: RpcCall) -> list[tuple[bytes, bytes]]:
    rid = call.request_id()
    return [(b"x-request-id", rid.encode())] if rid else []
