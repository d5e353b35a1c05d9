"""What every result document shares: schema names, the error that stops an
evaluation, latency percentiles, run metadata (version, machine, time) and JSON
input and output. The gRPC side lives in `client`."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = [
    "COMPARE_SCHEMA",
    "RUN_SCHEMA",
    "EvalError",
    "Progress",
    "StrictFile",
    "groundwire_version",
    "machine_info",
    "percentiles",
    "read_json",
    "stderr_progress",
    "utc_now",
    "write_json",
]

RUN_SCHEMA = "groundwire.eval.run/1"
COMPARE_SCHEMA = "groundwire.eval.compare/1"


class StrictFile(BaseModel):
    """The base of the evaluation's TOML files (variants, release gate): unknown keys
    are errors and a loaded file is immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# Receives one human-readable progress line at a time.
Progress = Callable[[str], None]


class EvalError(RuntimeError):
    """The evaluation cannot proceed (bad index state, unreachable server...)."""


def stderr_progress(msg: str) -> None:
    """The default `Progress`: one line on stderr, flushed."""
    print(msg, file=sys.stderr, flush=True)


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
