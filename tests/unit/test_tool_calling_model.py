"""The scripted tool-calling model of the client smoke (tests/support/tool_calling_model.py):
its script over request bodies, and the process serving it over real HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support.tool_calling_model import order_status_responder

ROOT = Path(__file__).resolve().parents[2]
TOOLS = [{"type": "function", "function": {"name": "order_status", "parameters": {}}}]


def body(*messages: dict[str, Any], tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"model": "scripted-tools-v1", "messages": list(messages), "tools": tools or []}


USER = {"role": "user", "content": "Where is my order B-42?"}


def test_calls_the_declared_tool_once_then_quotes_its_result() -> None:
    first = order_status_responder(body(USER, tools=TOOLS))
    [call] = first.tool_calls
    assert call.name == "order_status" and json.loads(call.arguments) == {"order_id": "B-42"}
    assert first.finish() == "tool_calls" and not first.content
    assistant = {"role": "assistant", "content": None, "tool_calls": [{"id": call.id}]}
    result = {"role": "tool", "tool_call_id": call.id, "content": json.dumps("on its way")}
    second = order_status_responder(body(USER, assistant, result, tools=TOOLS))
    assert not second.tool_calls and second.content == "Order B-42: on its way"
    failed = {"role": "tool", "tool_call_id": call.id, "content": '{"error": "TOOL_FAILED"}'}
    assert (
        "TOOL_FAILED" in order_status_responder(body(USER, assistant, failed, tools=TOOLS)).content
    )


def test_without_the_tool_it_answers_in_text() -> None:
    reply = order_status_responder(body(USER))
    assert not reply.tool_calls and "order_status" in reply.content


@pytest.mark.timeout(30)
def test_the_process_serves_chat_completions_and_stops_on_sigterm(tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.tool_calling_model", "--port-file", str(port_file)],
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 15
        while not port_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        port = int(port_file.read_text())
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            data=json.dumps(body(USER, tools=TOOLS)).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            answer = json.load(response)
        [call] = answer["choices"][0]["message"]["tool_calls"]
        assert call["function"]["name"] == "order_status"
        proc.terminate()
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
