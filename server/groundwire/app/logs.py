"""Structured, content-free logging. A log line is a constant message plus the
values passed explicitly via `extra`, so it cannot pick up request or document
content by accident; the request id is added from the interceptor's contextvar.

groundwire's own call sites never pass %-style arguments (a unit test checks
every logger call in server/). Neither formatter interpolates them: a
third-party library's arguments may hold URLs, DSNs or paths. Such a record's
placeholders read `<withheld>` and `args_withheld` counts them, so no line
passes a bare template off as the whole message; an exception is named by its
type only, never its text or traceback."""

from __future__ import annotations

import json
import logging
import re
import sys
import time

from pydantic import Field

from groundwire.app.config_base import StrictModel
from groundwire.domain.redaction import MAX_PREVIEW_CHARS, ContentPreviews

# LogRecord's own attributes: never emitted as fields, and `extra` may not set them.
_STANDARD = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


# A printf-style conversion specifier, as logging's %-formatting reads them.
_PLACEHOLDER = re.compile(r"%(\([^)]*\))?[-#0 +]*(\*|\d+)?(\.(\*|\d+))?[hlL]?[diouxXeEfFgGcrsa%]")


def message(record: logging.LogRecord) -> str:
    """The record's constant message; a third-party template's placeholders are
    replaced, never filled."""
    if not isinstance(record.msg, str):
        return type(record.msg).__name__
    if not record.args:
        return record.msg
    return _PLACEHOLDER.sub(lambda m: "%" if m.group() == "%%" else "<withheld>", record.msg)


def explicit_fields(record: logging.LogRecord) -> dict[str, object]:
    """The values a call site passed via `extra`, plus the exception's type name
    (never its text) when the record carries one."""
    out = {
        key: value
        for key, value in vars(record).items()
        if key not in _STANDARD and not key.startswith("_")
    }
    if record.exc_info and record.exc_info[0] is not None:
        out.setdefault("exception_type", record.exc_info[0].__name__)
    if record.args:
        out["args_withheld"] = len(record.args)
    return out


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        from groundwire.api.interceptors import request_id_var

        out: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": message(record),
        }
        rid = request_id_var.get()
        if rid != "-":
            out["request_id"] = rid
        out.update(explicit_fields(record))
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    """For a terminal: time, level, logger and the constant message, then the explicit
    fields as key=value. Like the JSON lines, it never fills a template's arguments
    and never prints an exception's text or traceback (only `exception_type`)."""

    def format(self, record: logging.LogRecord) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.created))
        line = f"{when},{int(record.msecs):03d} {record.levelname} {record.name} {message(record)}"
        fields = explicit_fields(record)
        if not fields:
            return line
        pairs = " ".join(f"{key}={json.dumps(value, default=str)}" for key, value in fields.items())
        return f"{line} {pairs}"


def configure_logging(level: str = "INFO", fmt: str = "json") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Third-party libraries may log request URLs or bodies at INFO/DEBUG; the MCP
    # SDK logs every stateless request's end ("Terminating session: None") and
    # tool failures at INFO, which groundwire's own access log already covers.
    # opensearch-py logs every request (bodies at DEBUG, a WARNING per 404 such as
    # a missing alias): the engine's calls are counted by groundwire's own metrics.
    noisy_loggers = (
        "httpx",
        "httpcore",
        "psycopg",
        "pgserver",
        "cohere",
        "openai",
        "mcp",
        "opensearch",
        "opensearchpy.trace",
    )
    for noisy in noisy_loggers:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger("opensearch").setLevel(logging.ERROR)


class ContentPreviewsConfig(StrictModel):
    """`[logging.previews]`: opt-in, bounded, redacted previews of queries and
    texts as DEBUG log fields of retrieval, reranking and agent executions (seed
    000). Off by default; for local debugging, never for production logs."""

    enabled: bool = False
    max_chars: int = Field(160, ge=16, le=MAX_PREVIEW_CHARS)
    max_items: int = Field(5, ge=0, le=50)
    include_query: bool = True

    def policy(self) -> ContentPreviews:
        """The domain policy the engines apply."""
        return ContentPreviews(self.enabled, self.max_chars, self.max_items, self.include_query)
