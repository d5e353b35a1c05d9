"""Helpers shared by the evaluation modules: gRPC channel and error decoding,
durations, percentiles, run metadata and JSON output."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2, status_pb2

__all__ = [
    "RPC_OPTIONS",
    "RpcFailure",
    "decode_rpc_error",
    "duration_ms",
    "groundwire_version",
    "machine_info",
    "open_channel",
    "percentiles",
    "read_json",
    "utc_now",
    "write_json",
]

RUN_SCHEMA = "groundwire.eval.run/1"
COMPARE_SCHEMA = "groundwire.eval.compare/1"
# Large responses (top_k 1000 with long chunks) must not trip the 4 MiB default.
RPC_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
]


def open_channel(address: str) -> grpc.aio.Channel:
    """An insecure channel to `address` with generous message limits."""
    return grpc.aio.insecure_channel(address, options=RPC_OPTIONS)


def auth_metadata(api_key: str | None) -> tuple[tuple[str, str], ...]:
    """Call metadata carrying an API key, if any."""
    return (("authorization", f"Bearer {api_key}"),) if api_key else ()


@dataclass(frozen=True, slots=True)
class RpcFailure:
    """A failed call: status code name, ErrorInfo reason and metadata."""

    code: str
    reason: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """`CODE/REASON`, the key errors are counted by."""
        return f"{self.code}/{self.reason}" if self.reason else self.code


def decode_rpc_error(err: grpc.aio.AioRpcError) -> RpcFailure:
    """Decode groundwire's google.rpc.Status details (reason and metadata only;
    messages are not kept)."""
    reason = ""
    meta: dict[str, str] = {}
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                    info = error_details_pb2.ErrorInfo()
                    detail.Unpack(info)
                    reason = info.reason
                    meta.update(dict(info.metadata))
    return RpcFailure(err.code().name, reason, meta)


def duration_ms(d: duration_pb2.Duration) -> float:
    """A protobuf Duration in milliseconds."""
    return d.seconds * 1000.0 + d.nanos / 1e6


def percentiles(values: Sequence[float]) -> dict[str, float | int | None]:
    """n, mean, p50, p95, p99 and max (linear interpolation, as numpy's default)."""
    vals = sorted(v for v in values if math.isfinite(v))
    n = len(vals)
    if n == 0:
        return {"n": 0, "mean": None, "p50": None, "p95": None, "p99": None, "max": None}

    def pct(p: float) -> float:
        pos = (n - 1) * p / 100.0
        lo = math.floor(pos)
        hi = min(lo + 1, n - 1)
        return vals[lo] + (vals[hi] - vals[lo]) * (pos - lo)

    return {
        "n": n,
        "mean": sum(vals) / n,
        "p50": pct(50),
        "p95": pct(95),
        "p99": pct(99),
        "max": vals[-1],
    }


def groundwire_version() -> str:
    """The installed groundwire package version."""
    try:
        from importlib.metadata import version

        return version("groundwire")
    except Exception:  # pragma: no cover - not installed as a distribution
        from groundwire import __version__

        return __version__


def machine_info() -> dict[str, Any]:
    """Where the evaluation ran: cores, platform, Python, load average."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        usable = os.cpu_count() or 0
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover
        load = []
    return {
        "cores": os.cpu_count() or 0,
        "usable_cores": usable,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        "load_average": load,
    }


def utc_now() -> str:
    """ISO-8601 UTC timestamp, seconds precision."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write JSON (sorted keys off: the documents are ordered for people too)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def read_json(path: Path) -> dict[str, Any]:
    """Read a JSON object."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return data
