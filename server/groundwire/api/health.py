"""grpc.health.v1 where an index's health name tells nothing to those who may not see
the index.

The stock servicer answers `groundwire.index.NAME` with the index's status to anyone
and NOT_FOUND for a name it does not know, so a caller without a key could probe which
index names exist (issue 44). Here, with authentication on and `[auth] index_health =
"visible"` (the default), an index's status is answered only to a caller that may see
the index: the key of the call (the interceptor's, or the `authorization` metadata a
call to the public health service carries) must see it. To anyone else the name
answers exactly as a missing one: Check is NOT_FOUND, Watch is SERVICE_UNKNOWN and
then silence. `"" `, the service names and `groundwire.store.NAME` (the operator's
configuration, no tenant's) stay public. `index_health = "public"` keeps every index
name answered to anyone, for probes that cannot send a key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc
from grpc_health.v1 import health, health_pb2

from groundwire.api.auth import AuthPolicy, principal_var
from groundwire.domain.errors import GroundwireError

INDEX_HEALTH_PREFIX = "groundwire.index."
_Context = grpc.aio.ServicerContext[health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse]


class IndexHealthServicer(health.aio.HealthServicer):
    """See module docstring. `policy` gives the serving generation's AuthPolicy; None
    (the default, or index_health = "public") answers every name to anyone."""

    def __init__(self) -> None:
        super().__init__()
        self.policy: Callable[[], AuthPolicy] | None = None

    def _hidden(self, service: str, context: _Context) -> bool:
        if self.policy is None or not service.startswith(INDEX_HEALTH_PREFIX):
            return False
        policy = self.policy()
        if policy.keys is None:
            return False  # authentication off: every index is everyone's
        principal = principal_var.get()
        if principal is None:
            # The public health service: the call's own key, if it sent one.
            authorization = next(
                (
                    str(value)
                    for key, value in context.invocation_metadata() or ()
                    if key == "authorization"
                ),
                None,
            )
            if authorization is None:
                return True
            try:
                principal = policy.keys.authenticate(authorization)
            except GroundwireError:
                return True
        return not principal.sees_index(service.removeprefix(INDEX_HEALTH_PREFIX))

    async def Check(
        self,
        request: health_pb2.HealthCheckRequest,
        context: _Context,
    ) -> health_pb2.HealthCheckResponse:
        if self._hidden(request.service, context):
            await context.abort(grpc.StatusCode.NOT_FOUND)
        response: health_pb2.HealthCheckResponse = await super().Check(request, context)
        return response

    async def Watch(
        self,
        request: health_pb2.HealthCheckRequest,
        context: _Context,
    ) -> None:
        if not self._hidden(request.service, context):
            await super().Watch(request, context)
            return
        # What a missing name's watch sees: SERVICE_UNKNOWN, then nothing ever again.
        await context.write(
            health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVICE_UNKNOWN)
        )
        await asyncio.Event().wait()
