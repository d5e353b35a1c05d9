"""A scripted OpenAI-compatible chat model that calls the caller's client tool,
run as its own process for the polyglot client smoke (scripts/smoke_clients.sh).

The offline extractive model never calls tools, so the smoke's `tool-smoke`
agent talks to this process instead: the chat completions stand-in
(tests/support/chat_completions_standin.py, the real wire protocol, unary and
streamed) with a responder that plays a model following one script:

- the request offers a tool named `order_status` and the conversation has no
  tool result yet: call it once, with `{"order_id": ...}` taken from the last
  user message (the first `LETTERS-DIGITS` token, e.g. "A-1");
- a tool result is present: answer with text that quotes it
  ("Order A-1: <output>"), the tool error included;
- no `order_status` tool is offered: say so in plain text.

    python -m tests.support.tool_calling_model --port-file PATH [--parent-pid PID]

Binds 127.0.0.1 on an ephemeral port, writes the port to PATH once it listens,
and serves until SIGTERM/SIGINT, or until the parent process is gone, so a
killed smoke never leaves it behind.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import threading
from pathlib import Path
from typing import Any

from tests.support.chat_completions_standin import ChatCompletionsStandIn, Reply, StandInToolCall

__all__ = ["MODEL", "TOOL_NAME", "main", "order_status_responder"]

TOOL_NAME = "order_status"
MODEL = "scripted-tools-v1"
_ORDER_ID = re.compile(r"\b[A-Z]+-\d+\b")


def _text(content: Any) -> str:
    """A message's content as text (a string, or the text parts of a list)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _offers_tool(body: dict[str, Any], name: str) -> bool:
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and (tool.get("function") or {}).get("name") == name:
            return True
    return False


def _quoted(output: str) -> str:
    """The tool output as a model would read it: groundwire sends a text result
    JSON-encoded (escaped data), a failure as a JSON error object."""
    try:
        decoded = json.loads(output)
    except ValueError:
        return output
    return decoded if isinstance(decoded, str) else json.dumps(decoded)


def order_status_responder(body: dict[str, Any]) -> Reply:
    """The script (see the module docstring) for one chat completions request."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    users = [m for m in messages if m.get("role") == "user"]
    found = _ORDER_ID.search(_text(users[-1].get("content")) if users else "")
    order_id = found.group(0) if found else "unknown"
    model = str(body.get("model") or MODEL)
    if not _offers_tool(body, TOOL_NAME):
        return Reply(content=f"No {TOOL_NAME} tool was offered.", model=model)
    results = [m for m in messages if m.get("role") == "tool"]
    if not results:
        arguments = json.dumps({"order_id": order_id})
        call = StandInToolCall(f"call_{order_id.lower()}", TOOL_NAME, arguments)
        return Reply(content="", tool_calls=[call], model=model)
    quoted = "; ".join(_quoted(_text(m.get("content"))) for m in results)
    return Reply(content=f"Order {order_id}: {quoted}", model=model)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--parent-pid", type=int, default=0)
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    standin = ChatCompletionsStandIn()
    standin.responder = order_status_responder
    with standin:
        port = standin.base_url.rsplit(":", 1)[1].split("/", 1)[0]
        tmp = args.port_file.with_suffix(".tmp")
        tmp.write_text(port + "\n")
        tmp.replace(args.port_file)  # the reader never sees a partial port
        while not stop.wait(1.0):
            if args.parent_pid and not _alive(args.parent_pid):
                break
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


if __name__ == "__main__":
    raise SystemExit(main())
