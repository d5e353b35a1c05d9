"""The interceptor's side of tenant admission: which family each RPC belongs to,
which tenant a call counts against, and the error a refusal becomes.

The tenant is the API key's. With authentication disabled there is no key, so
the tenant the request declares is used (the one the servicer will run it as).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf.message import Message

from groundwire.api.auth import HEALTH_PREFIX, REFLECTION_PREFIXES
from groundwire.domain.admission import Refusal, Rejection, RpcFamily
from groundwire.domain.auth import MAX_TENANT_CHARS, Principal
from groundwire.domain.errors import ErrorKind, GroundwireError

_V1 = "/groundwire.v1."
_METHOD_FAMILIES: Mapping[str, RpcFamily] = {
    f"{_V1}RetrieverService/Retrieve": RpcFamily.RETRIEVE,
    f"{_V1}RerankerService/Rerank": RpcFamily.RERANK,
    f"{_V1}IngestionManagerService/UpsertDocuments": RpcFamily.INGEST,
    f"{_V1}IngestionManagerService/UploadDocument": RpcFamily.INGEST,
    f"{_V1}IngestionManagerService/DeleteDocuments": RpcFamily.INGEST,
    f"{_V1}IngestionManagerService/StartIngestion": RpcFamily.INGEST,
    f"{_V1}AgentService/Execute": RpcFamily.EXECUTE,
    f"{_V1}AgentService/ExecuteStream": RpcFamily.EXECUTE,
    f"{_V1}AgentService/ResumeExecution": RpcFamily.EXECUTE,
    f"{_V1}AgentService/ResumeExecutionStream": RpcFamily.EXECUTE,
    f"{_V1}AgentService/SubmitToolResults": RpcFamily.EXECUTE,
    f"{_V1}AgentService/ExecuteInteractive": RpcFamily.EXECUTE,
    # Runs the whole RAG sequence of an execution (everything but the model).
    f"{_V1}AgentService/PrepareExecution": RpcFamily.EXECUTE,
    # The OpenAI facade's embeddings: query embeddings, like a query's.
    "/v1/embeddings": RpcFamily.RETRIEVE,
}


def family_of(method: str) -> RpcFamily | None:
    """The admission family of a full method name; None for health and
    reflection, which are never limited (probes must keep answering)."""
    if method.startswith((HEALTH_PREFIX, *REFLECTION_PREFIXES)):
        return None
    return _METHOD_FAMILIES.get(method, RpcFamily.MANAGE)


# The admission key of every declared tenant longer than a tenant may be (refused by
# validation right after admission).
_OVERLONG_TENANT = "\x00overlong"


def admission_tenant(principal: Principal | None, request: Any) -> str:
    """The tenant a call is admitted against: the key's, else the declared one."""
    if principal is not None:
        return principal.tenant
    return _declared_tenant(request)


def _declared_tenant(request: Any) -> str:
    # The tenant field sits at the top (pushes) or one message down (query, input).
    if not isinstance(request, Message):
        return ""
    path = _tenant_path(request.DESCRIPTOR)
    if path is None:
        return ""
    holder: Any = request if not path else getattr(request, path)
    tenant = str(holder.tenant)
    # Admission runs before validation refuses an over-long tenant: such calls
    # share one key, so the admission state stays bounded whatever they send.
    return tenant if len(tenant) <= MAX_TENANT_CHARS else _OVERLONG_TENANT


# Message type -> where its declared tenant is: "" (its own `tenant` field), the name
# of the submessage holding it, or None. Looked up once per type: the descriptors'
# field maps cost microseconds a call on the Retrieve path (three lookups a call).
_TENANT_PATHS: dict[Any, str | None] = {}


def _tenant_path(descriptor: Any) -> str | None:
    if descriptor in _TENANT_PATHS:
        return _TENANT_PATHS[descriptor]
    path: str | None = None
    fields = descriptor.fields_by_name
    if "tenant" in fields:
        path = ""
    else:
        for name in ("query", "input"):
            field = fields.get(name)
            message = field.message_type if field is not None else None
            if message is not None and "tenant" in message.fields_by_name:
                path = name
                break
    _TENANT_PATHS[descriptor] = path
    return path


def refused(rejection: Rejection) -> GroundwireError:
    """The RESOURCE_EXHAUSTED error of a refused call, with the retry delay
    (google.rpc.RetryInfo); the message never names the tenant."""
    what = "calls per second" if rejection.refusal is Refusal.RATE else "concurrent calls"
    return GroundwireError(
        ErrorKind.RESOURCE_EXHAUSTED,
        rejection.refusal.value,
        f"the tenant is at its limit of {what} for {rejection.family.value} requests; retry later",
        retry_after_seconds=rejection.retry_after_seconds,
    )
