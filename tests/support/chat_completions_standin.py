"""A local stand-in for an OpenAI-compatible `POST /v1/chat/completions` server.

It speaks the real wire protocol over HTTP/1.1 on 127.0.0.1 (an ephemeral port):
unary JSON answers, and for `"stream": true` a `text/event-stream` body in
chunked transfer encoding (`data: {chunk}\\n\\n` events ending with
`data: [DONE]`), the way OpenAI, vLLM, Ollama and LM Studio send it. Content
arrives as one delta per word; each tool call arrives split across several
chunks (id, type and name in the first, the arguments in pieces), optionally
interleaved between parallel calls; usage comes in a final chunk with no
choices when the request asks for it (`stream_options.include_usage`).

It records every request, remembers how each stream ended (completed, or
aborted because the client went away), and can be switched to the failure
modes real servers exhibit. Error bodies deliberately echo the request's
messages and credentials, as some servers do, so tests can prove the client
never repeats them.
"""

from __future__ import annotations

import enum
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support.http_standin import JsonRequestHandler, LoopbackStandIn, RecordedRequest

__all__ = [
    "Behaviour",
    "ChatCompletionsStandIn",
    "RecordedRequest",
    "Reply",
    "StandInToolCall",
    "StreamRecord",
]


class Behaviour(enum.Enum):
    """How the stand-in answers the next requests."""

    NORMAL = "normal"
    RATE_LIMITED = "rate_limited"  # HTTP 429
    SERVER_ERROR = "server_error"  # HTTP 500
    UNAUTHORIZED = "unauthorized"  # HTTP 401
    MALFORMED_JSON = "malformed_json"  # HTTP 200, truncated JSON body (unary)
    MALFORMED_CHUNK = "malformed_chunk"  # one SSE event whose data is not JSON
    NO_CHOICES = "no_choices"  # a completion object without `choices`
    BAD_TOOL_CALL = "bad_tool_call"  # a tool call without a function name
    SLOW = "slow"  # waits `delay` seconds before answering
    STALL_MID_STREAM = "stall_mid_stream"  # first chunks, then silence for `delay`
    STREAM_CUT = "stream_cut"  # connection dropped mid-body (incomplete chunked body)
    STREAM_TRUNCATED = "stream_truncated"  # body ends cleanly, but no finish_reason, no [DONE]
    ERROR_EVENT = "error_event"  # a mid-stream `{"error": {...}}` event
    IGNORE_STREAM_OPTIONS = "ignore_stream_options"  # never sends a usage chunk


@dataclass(frozen=True)
class StandInToolCall:
    id: str
    name: str
    arguments: str


@dataclass
class Reply:
    """What the stand-in answers (unary and streamed alike)."""

    content: str = "Hello from the stand-in."
    tool_calls: list[StandInToolCall] = field(default_factory=list)
    model: str = "standin-chat-v1-2025"
    finish_reason: str | None = None  # default: "tool_calls" if any, else "stop"
    prompt_tokens: int = 11
    completion_tokens: int = 7
    refusal: str | None = None
    interleave_tool_calls: bool = False  # stream argument pieces round-robin

    def finish(self) -> str:
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"


@dataclass
class StreamRecord:
    """How one streamed response went from the server's side."""

    events_planned: int
    events_sent: int = 0
    outcome: str = "running"  # running | completed | aborted | cut
    done: threading.Event = field(default_factory=threading.Event)


class _ChatHandler(JsonRequestHandler):
    """Answers or streams under the stand-in's behaviour."""

    # HTTP/1.1 for chunked streaming; still one request per connection (below).
    protocol_version = "HTTP/1.1"
    standin: ChatCompletionsStandIn

    def do_POST(self) -> None:
        standin = self.standin
        # One request per connection: nothing idles past a test.
        self.close_connection = True
        headers, body = self.read_json()
        if self.path.rstrip("/") != "/v1/chat/completions":
            self.send_json(404, b'{"error": {"message": "not found"}}')
            return
        if not isinstance(body, dict):
            self.send_json(400, b'{"error": {"message": "body is not a JSON object"}}')
            return
        behaviour = standin.behaviour
        if behaviour is Behaviour.RATE_LIMITED:
            self.send_json(429, _error_body("Rate limit reached", body, headers))
        elif behaviour is Behaviour.SERVER_ERROR:
            self.send_json(500, _error_body("internal server error", body, headers))
        elif behaviour is Behaviour.UNAUTHORIZED:
            self.send_json(401, _error_body("Incorrect API key provided", body, headers))
        elif behaviour is Behaviour.SLOW and standin.wait(standin.delay):
            self.send_json(503, b"{}")
        elif body.get("stream"):
            self._stream(body)
        elif behaviour is Behaviour.MALFORMED_JSON:
            self.send_json(200, b'{"id": "chatcmpl-standin", "choices": [{"index": 0, "mess')
        else:
            self.send_json(200, json.dumps(standin.completion(body)).encode())

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _stream(self, body: dict[str, Any]) -> None:
        standin = self.standin
        behaviour = standin.behaviour
        events = [b"data: " + json.dumps(c).encode() + b"\n\n" for c in standin.chunks(body)]
        events.append(b"data: [DONE]\n\n")
        half = max(1, len(events) // 2)
        if behaviour is Behaviour.MALFORMED_CHUNK:
            events.insert(half, b'data: {"id": "chatcmpl-standin", "choices": [{"delta": \n\n')
        elif behaviour is Behaviour.ERROR_EVENT:
            events.insert(half, b'data: {"error": {"message": "overloaded"}}\n\n')
        elif behaviour in (Behaviour.STREAM_CUT, Behaviour.STREAM_TRUNCATED):
            events = events[:half]
        record = standin._new_stream(len(events))
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            for i, event in enumerate(events):
                if i and standin.chunk_delay and standin.wait(standin.chunk_delay):
                    break
                if behaviour is Behaviour.STALL_MID_STREAM and i == half:
                    standin.wait(standin.delay)
                self._write_chunk(event)
                record.events_sent += 1
            if behaviour is Behaviour.STREAM_CUT:
                # Leave the chunked body unterminated: the connection just closes.
                record.outcome = "cut"
                return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            record.outcome = "completed"
        except (BrokenPipeError, ConnectionResetError):
            record.outcome = "aborted"
        finally:
            record.done.set()


class ChatCompletionsStandIn(LoopbackStandIn):
    """A threaded HTTP server on 127.0.0.1; use as a context manager.

    `base_url` is the value to give a client (it ends in `/v1`). `delay` is the
    SLOW / STALL wait; `chunk_delay` the pause between streamed events.
    """

    url_prefix = "/v1"
    handler_class = _ChatHandler

    def __init__(self, *, delay: float = 1.5, chunk_delay: float = 0.0) -> None:
        super().__init__()
        self.delay = delay
        self.chunk_delay = chunk_delay
        self.behaviour = Behaviour.NORMAL
        self.reply = Reply()
        # When set, plays the model: computes each answer from the request body
        # (e.g. a judge that reads the prompt) instead of the fixed `reply`.
        self.responder: Callable[[dict[str, Any]], Reply] | None = None
        self._streams: list[StreamRecord] = []

    @property
    def streams(self) -> list[StreamRecord]:
        with self._lock:
            return list(self._streams)

    def reset(self) -> None:
        """Back to normal behaviour and the default reply, with empty logs."""
        super().reset()
        with self._lock:
            self._streams.clear()
        self.behaviour = Behaviour.NORMAL
        self.reply = Reply()
        self.responder = None
        self.chunk_delay = 0.0

    def _new_stream(self, planned: int) -> StreamRecord:
        record = StreamRecord(planned)
        with self._lock:
            self._streams.append(record)
        return record

    # -- payloads -------------------------------------------------------------

    def _reply(self, body: dict[str, Any]) -> Reply:
        return self.responder(body) if self.responder is not None else self.reply

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        reply = self._reply(body)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
        if reply.refusal is not None:
            message["refusal"] = reply.refusal
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in reply.tool_calls
            ]
        if self.behaviour is Behaviour.BAD_TOOL_CALL:
            message["tool_calls"] = [{"id": "call_x", "type": "function", "function": {}}]
        out: dict[str, Any] = {
            "id": "chatcmpl-standin",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": reply.model,
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish()}],
            "usage": {
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            },
        }
        if self.behaviour is Behaviour.NO_CHOICES:
            del out["choices"]
        return out

    def chunks(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The stream's chunk objects, in order (without [DONE])."""
        reply = self._reply(body)
        base = {"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": 1}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                **base,
                "model": reply.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        out = [chunk({"role": "assistant", "content": ""})]
        words = reply.content.split(" ") if reply.content else []
        for i, word in enumerate(words):
            out.append(chunk({"content": word if i == 0 else " " + word}))
        if reply.refusal is not None:
            out.append(chunk({"refusal": reply.refusal}))
        pieces: list[list[dict[str, Any]]] = []
        for index, call in enumerate(reply.tool_calls):
            head = {
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            third = max(1, len(call.arguments) // 3)
            parts = [call.arguments[i : i + third] for i in range(0, len(call.arguments), third)]
            pieces.append([head] + [{"index": index, "function": {"arguments": p}} for p in parts])
        if reply.interleave_tool_calls:
            longest = max((len(p) for p in pieces), default=0)
            ordered = [p[i] for i in range(longest) for p in pieces if i < len(p)]
        else:
            ordered = [d for p in pieces for d in p]
        out.extend(chunk({"tool_calls": [d]}) for d in ordered)
        if self.behaviour is Behaviour.BAD_TOOL_CALL:
            out.append(chunk({"tool_calls": [{"index": 0, "id": "call_x", "function": {}}]}))
        out.append(chunk({}, reply.finish()))
        options = body.get("stream_options") or {}
        if options.get("include_usage") and self.behaviour is not Behaviour.IGNORE_STREAM_OPTIONS:
            out.append(
                {
                    **base,
                    "model": reply.model,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": reply.prompt_tokens,
                        "completion_tokens": reply.completion_tokens,
                        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                    },
                }
            )
        return out


def _error_body(message: str, body: Any, headers: dict[str, str]) -> bytes:
    echo = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "messages": body.get("messages") if isinstance(body, dict) else None,
            "authorization": headers.get("authorization"),
        }
    }
    return json.dumps(echo).encode()
