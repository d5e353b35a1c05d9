"""AdminService: proto <-> the reloader (app/reload.py), nothing else."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from groundwire.domain.reload import ReloadReport
from groundwire_client.v1 import admin_pb2, admin_pb2_grpc

Reload = Callable[[bool], Awaitable[ReloadReport]]


class AdminServicer(admin_pb2_grpc.AdminServiceServicer):
    def __init__(self, reload: Reload) -> None:
        self._reload = reload

    async def ReloadConfiguration(
        self,
        request: admin_pb2.ReloadConfigurationRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> admin_pb2.ReloadConfigurationResponse:
        report = await self._reload(request.validate_only)
        return admin_pb2.ReloadConfigurationResponse(
            generation=report.generation,
            changed_sections=report.changed_sections,
            reingest_indexes=report.reingest_indexes,
            applied=report.applied,
        )
