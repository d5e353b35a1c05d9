"""OpenTelemetry metrics exported in the Prometheus format on a separate port.

Instruments are created through the OpenTelemetry API wherever they are
recorded (they stay no-ops until this module installs a MeterProvider). Labels
are low-cardinality by construction: service, method, status code, mode,
outcome, agent id, index name — never query text, content, tenant or key ids.
"""

from __future__ import annotations

import logging

from opentelemetry import metrics
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from prometheus_client import start_http_server

log = logging.getLogger("groundwire.app")

# The stable RPC semantic convention's buckets (seconds).
RPC_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)
_installed: list[str] = []


def installed_port() -> int | None:
    """The port the process's exporter serves on, if one was installed (the first
    install wins: later configurations with another address share it)."""
    return int(_installed[0].rpartition(":")[2]) if _installed else None


def install_metrics(address: str) -> bool:
    """Install the global MeterProvider and serve /metrics on `address` (once per
    process; later calls are no-ops, whatever their address). Returns True when
    this call started the exporter."""
    if _installed:
        return False
    host, _, port = address.rpartition(":")
    reader = PrometheusMetricReader()
    provider = MeterProvider(
        metric_readers=[reader],
        views=[
            View(
                instrument_name="rpc.server.call.duration",
                aggregation=ExplicitBucketHistogramAggregation(RPC_BUCKETS),
            )
        ],
    )
    metrics.set_meter_provider(provider)
    start_http_server(int(port), addr=host.strip("[]") or "127.0.0.1")
    _installed.append(address)
    log.info("metrics exporter started", extra={"port": int(port)})
    return True
