"""`POST /v1/embeddings` of the OpenAI-compatible facade: the `model` is an
index name, and the vectors are that index's embedder's query vectors (the
vectors the index is searched with, query prefix included), so a client can
embed with exactly the space an index was built in.

- `input` is a string or an array of strings: at most MAX_INPUTS strings of at
  most MAX_INPUT_CHARS characters each, none empty; token arrays are refused.
- `encoding_format` is `float` (the default) or `base64` (little-endian
  float32, what the official SDKs ask for); `dimensions`, when given, must be
  the embedder's own (vectors are never shortened); `user` is ignored.
- The answer is OpenAI's shape, with `usage.prompt_tokens` the input tokens
  the embedder consumed.

The call runs through the gRPC port's interceptor (api/http/rpc.py) as the
method `/v1/embeddings`: the caller's key must hold `retrieve`, admission
(the retrieve family), the snapshot, the content-free access log and the RPC
metrics are the other calls', and the embedding usage is metered and added to
the key's tenant totals exactly as for a gRPC query.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import grpc
import numpy as np
from google.protobuf import empty_pb2

from groundwire.api.auth import index_visible, principal_var
from groundwire.api.http.asgi import (
    BodyTooLarge,
    CancelOnDisconnect,
    ClientGone,
    Receive,
    Scope,
    Send,
    read_body,
    respond_json,
)
from groundwire.api.http.openai_chat import (
    TRANSPORT,
    metadata,
    openai_error,
    send_error,
    too_large,
)
from groundwire.api.http.rpc import Procedure, Procedures, RpcAborted, RpcCall
from groundwire.domain.auth import Permission
from groundwire.domain.errors import ErrorKind, GroundwireError, invalid
from groundwire.providers.embeddings.base import EmbeddingProvider, EmbeddingTask, embed_all
from groundwire.providers.embeddings.usage import metered

METHOD = "/v1/embeddings"
MAX_INPUTS = 256
MAX_INPUT_CHARS = 32_768
_KNOWN = frozenset({"model", "input", "encoding_format", "dimensions", "user"})

# Index name -> its embedder in the running call's configuration snapshot
# (None: no such index, or an index without an embedder).
EmbedderLookup = Callable[[str], EmbeddingProvider | None]


@dataclass(frozen=True, slots=True)
class _Request:
    body: Mapping[str, Any] | None  # None: not a JSON object


def _model_not_found() -> GroundwireError:
    # The contract's reason for a missing index; OpenAI's code model_not_found.
    return GroundwireError(
        ErrorKind.NOT_FOUND,
        "INDEX_NOT_FOUND",
        "no index with an embedder has that name (the model of /v1/embeddings is an index)",
    )


def _inputs(body: Mapping[str, Any]) -> list[str]:
    for key in body:
        if key not in _KNOWN:
            raise invalid("UNSUPPORTED_PARAMETER", key, "unrecognized request argument")
    raw = body.get("input")
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list) or not texts:
        raise invalid(
            "MALFORMED_REQUEST", "input", "is required: a string or a non-empty array of strings"
        )
    if len(texts) > MAX_INPUTS:
        raise invalid("FIELD_OUT_OF_RANGE", "input", f"at most {MAX_INPUTS} strings per request")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise invalid(
                "UNSUPPORTED_PARAMETER", f"input[{i}]", "only strings (token arrays are refused)"
            )
        if not text.strip():
            raise invalid("EMPTY_QUERY", f"input[{i}]", "must not be empty")
        if len(text) > MAX_INPUT_CHARS:
            raise invalid("FIELD_TOO_LONG", f"input[{i}]", f"exceeds {MAX_INPUT_CHARS} characters")
    return texts


def _encoding(body: Mapping[str, Any]) -> str:
    encoding = body.get("encoding_format")
    if encoding is None:
        return "float"
    if encoding not in ("float", "base64"):
        raise invalid("UNSUPPORTED_PARAMETER", "encoding_format", "float or base64")
    return str(encoding)


class OpenAIEmbeddingsApp:
    """The ASGI callable of `POST /v1/embeddings`."""

    def __init__(
        self, procedures: Procedures, max_message_bytes: int, embedders: EmbedderLookup
    ) -> None:
        self._procedures = procedures
        self._limit = max_message_bytes
        self._embedders = embedders
        handler: Any = grpc.unary_unary_rpc_method_handler(self._embed)
        self._procedure = Procedure(
            method=METHOD,
            input_type=empty_pb2.Empty,
            output_type=empty_pb2.Empty,
            server_streaming=False,
            handler=handler,
        )

    async def _embed(self, request: _Request, context: object) -> dict[str, Any]:
        """Runs inside the interceptor's scope (key, snapshot, metering)."""
        del context
        principal = principal_var.get()
        if principal is not None:
            principal.require(Permission.RETRIEVE)
        body = request.body
        if body is None:
            raise GroundwireError(
                ErrorKind.INVALID_ARGUMENT, "MALFORMED_REQUEST", "the body must be a JSON object"
            )
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise invalid("MALFORMED_REQUEST", "model", "is required (an index name)")
        texts = _inputs(body)
        encoding = _encoding(body)
        # A hidden index is no model, exactly as a missing one.
        embedder = self._embedders(model) if index_visible(model) else None
        if embedder is None:
            raise _model_not_found()
        dimensions = body.get("dimensions")
        if dimensions is not None and (
            isinstance(dimensions, bool) or dimensions != embedder.info.dimensions
        ):
            raise invalid(
                "UNSUPPORTED_PARAMETER",
                "dimensions",
                f"only the embedder's own ({embedder.info.dimensions})",
            )
        with metered() as meter:
            vectors = await embed_all(embedder, texts, EmbeddingTask.QUERY)
        tokens = meter.total.input_tokens
        data = []
        for i, row in enumerate(vectors):
            vector: object
            if encoding == "base64":
                vector = base64.b64encode(row.astype("<f4").tobytes()).decode()
            else:
                vector = [float(v) for v in row.astype(np.float64)]
            data.append({"object": "embedding", "index": i, "embedding": vector})
        return {
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            await respond_json(send, 405, openai_error("use POST", 405, "METHOD_NOT_FOUND", None))
            return
        try:
            raw = await read_body(receive, self._limit)
        except BodyTooLarge:
            self._procedures.refused(METHOD, too_large(), metadata(scope), TRANSPORT, 413)
            await respond_json(
                send,
                413,
                openai_error("the request body is too large", 413, "MESSAGE_TOO_LARGE", None),
            )
            return
        except ClientGone:
            return
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):
            body = None
        call = RpcCall(metadata(scope), None, TRANSPORT)
        # A body that is not an object is refused inside the call, after the key.
        request = _Request(body if isinstance(body, dict) else None)
        async with CancelOnDisconnect(receive):
            try:
                response: Any = await self._procedures.unary(self._procedure, request, call)
            except RpcAborted as err:
                await send_error(send, err)
                return
            await respond_json(send, 200, response)
