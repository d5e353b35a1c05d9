"""app/logs.py: every log line carries its values as explicit fields, and every
logger call in server/ passes them that way (a constant message, values in
`extra`), so no line reads "applied store migration %d"."""

from __future__ import annotations

import ast
import json
import logging
import re
from pathlib import Path

import pytest

from groundwire.app.logs import JsonFormatter, TextFormatter

SERVER = Path(__file__).resolve().parents[2] / "server" / "groundwire"
LEVELS = {"debug", "info", "warning", "error", "exception", "critical"}
# Keys `extra` may not use: LogRecord's own attributes (logging raises KeyError
# for some, on whatever rare path logs them) and the JSON formatter's own keys.
RESERVED = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "ts", "level", "logger"}


def record(
    msg: str, *args: object, exc: BaseException | None = None, **extra: object
) -> logging.LogRecord:
    exc_info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    rec = logging.getLogger("groundwire.test").makeRecord(
        "groundwire.test", logging.WARNING, __file__, 1, msg, args, exc_info, extra=extra
    )
    return rec


def test_json_line_carries_explicit_fields() -> None:
    line = json.loads(
        JsonFormatter().format(record("applied store migration", migration_version=3))
    )
    assert line["msg"] == "applied store migration"
    assert line["migration_version"] == 3
    assert {"ts", "level", "logger"} <= line.keys()


def test_json_line_never_interpolates_args_but_says_it_withheld_them() -> None:
    # A third-party library's arguments may be a URL or a DSN: never printed.
    line = json.loads(
        JsonFormatter().format(record("connect to %s failed", "postgres://u:pw@h/db"))
    )
    assert "pw" not in json.dumps(line)
    assert line["msg"] == "connect to <withheld> failed"
    assert line["args_withheld"] == 1


def test_only_real_placeholders_are_withheld() -> None:
    rec = record("%(name)r at 100%% after %5.1f s", {"name": "x"})
    line = json.loads(JsonFormatter().format(rec))
    assert line["msg"] == "<withheld> at 100% after <withheld> s"
    # Without args logging does not %-format, so neither is anything replaced.
    assert json.loads(JsonFormatter().format(record("100% done")))["msg"] == "100% done"


def test_json_line_names_the_exception_type_not_its_text() -> None:
    try:
        raise ValueError("document text must not leak")
    except ValueError as exc:
        rec = record("index maintenance after publish failed", exc=exc)
    out = JsonFormatter().format(rec)
    assert json.loads(out)["exception_type"] == "ValueError"
    assert "leak" not in out


def test_text_line_shows_the_explicit_fields() -> None:
    line = TextFormatter().format(record("serving", port=50051, index="demo"))
    assert line.endswith('WARNING groundwire.test serving port=50051 index="demo"')


def test_text_line_names_the_exception_type_never_its_text_or_traceback() -> None:
    try:
        raise ValueError("document text must not leak")
    except ValueError as exc:
        rec = record("maintenance failed", exc=exc, index="demo")
    line = TextFormatter().format(rec)
    assert line.endswith('maintenance failed index="demo" exception_type="ValueError"')
    assert "leak" not in line and "Traceback" not in line and "\n" not in line


def test_text_line_withholds_third_party_arguments() -> None:
    rec = logging.LogRecord(
        "httpx", logging.WARNING, __file__, 1, "GET %s failed", ("http://u:pw@h/x",), None
    )
    line = TextFormatter().format(rec)
    assert "GET <withheld> failed" in line and "pw" not in line


def logger_calls() -> list[tuple[str, ast.Call]]:
    calls = []
    for path in sorted(SERVER.rglob("*.py")):
        if "_pb2" in path.name:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in LEVELS
                and isinstance(node.func.value, ast.Name)
                and re.search(r"(^|_)log(ger)?$", node.func.value.id)
            ):
                calls.append((f"{path.relative_to(SERVER)}:{node.lineno}", node))
    return calls


def test_the_scan_sees_the_logger_calls() -> None:
    calls = logger_calls()
    messages = {c.args[0].value for _, c in calls if c.args and isinstance(c.args[0], ast.Constant)}
    assert {"applied store migration", "serving", "rpc", "ingestion ended"} <= messages
    assert len({where.split(":")[0] for where, _ in calls}) >= 5


@pytest.mark.parametrize(("where", "call"), [pytest.param(w, c, id=w) for w, c in logger_calls()])
def test_every_logger_call_has_a_constant_message_and_explicit_fields(
    where: str, call: ast.Call
) -> None:
    assert len(call.args) == 1, f"{where}: pass values via extra={{...}}, not %-args"
    message = call.args[0]
    assert isinstance(message, ast.Constant) and isinstance(message.value, str), (
        f"{where}: the message must be a constant string"
    )
    assert not re.search(r"%[-#0 +]*\d*(\.\d+)?[sdifrx]", message.value), where
    for kw in call.keywords:
        if kw.arg == "extra" and isinstance(kw.value, ast.Dict):
            keys = {k.value for k in kw.value.keys if isinstance(k, ast.Constant)}
            assert not keys & RESERVED, f"{where}: extra uses reserved keys {keys & RESERVED}"
