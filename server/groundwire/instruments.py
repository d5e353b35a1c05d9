"""Metric instruments shared by every layer (OpenTelemetry API only: no-ops until
app/telemetry.py installs a provider). Cross-cutting like logging, so engines and
the api layer may both import it."""

from __future__ import annotations

import grpc
from opentelemetry import metrics

_meter = metrics.get_meter("groundwire")

RPC_DURATION = _meter.create_histogram(
    "rpc.server.call.duration",
    unit="s",
    description="Measures the duration of inbound RPCs (OpenTelemetry RPC semantic conventions)",
)
RETRIEVALS = _meter.create_counter(
    "groundwire.retrieval.requests",
    unit="{request}",
    description="Retrieve calls by mode and outcome",
)
EXECUTIONS = _meter.create_counter(
    "groundwire.agent.executions",
    unit="{execution}",
    description="Agent executions by agent, outcome and no-context reason",
)
INGESTIONS = _meter.create_counter(
    "groundwire.ingestion.operations",
    unit="{operation}",
    description="Finished ingestion operations by index, trigger and state",
)


def record_rpc(method: str, code: grpc.StatusCode, seconds: float) -> None:
    service, _, name = method.lstrip("/").partition("/")
    RPC_DURATION.record(
        seconds,
        {
            "rpc.system": "grpc",
            "rpc.service": service,
            "rpc.method": name,
            "rpc.grpc.status_code": code.value[0],
        },
    )
