"""Structured, content-free logging. Only fields passed explicitly via `extra`
are emitted, so a log line cannot pick up request or document content by
accident; the request id is added from the interceptor's contextvar."""

from __future__ import annotations

import json
import logging
import sys
import time

_STANDARD = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        from groundwire.api.interceptors import request_id_var

        out: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.msg if isinstance(record.msg, str) else type(record.msg).__name__,
        }
        rid = request_id_var.get()
        if rid != "-":
            out["request_id"] = rid
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        return json.dumps(out, default=str)


def configure_logging(level: str = "INFO", fmt: str = "json") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Third-party libraries may log request URLs or bodies at INFO/DEBUG.
    for noisy in ("httpx", "httpcore", "psycopg", "pgserver", "cohere", "openai"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
