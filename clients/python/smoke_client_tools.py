"""Live smoke of client-executed tools with the Python client (GroundwireClient:
client_tool, execute(client_tools=...), submit_tool_results).

Needs GROUNDWIRE_ADDR ("host:port") and GROUNDWIRE_TOOL_AGENT, an agent whose
model calls the caller's `order_status` tool (scripts/smoke_clients.sh
configures "tool-smoke" over a scripted stand-in model); skips without the
agent. Execute declaring the tool ends in REQUIRES_ACTION with one required
call; submit_tool_results continues it to an answer quoting the tool's output.
Prints one line per check and exits non-zero on any failure:

    GROUNDWIRE_ADDR=127.0.0.1:50051 GROUNDWIRE_TOOL_AGENT=tool-smoke \\
        .venv/bin/python clients/python/smoke_client_tools.py
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from groundwire_client import GroundwireClient
from groundwire_client.client import GroundwireError, client_tool
from groundwire_client.v1 import agent_pb2

TIMEOUT = 20.0
QUESTION = "Where is my order A-1?"
OUTPUT = "shipped on 2026-03-02 with parcel 7731"
ORDER_TOOL = client_tool(
    "order_status",
    "Status of one of the user's orders.",
    {
        "type": "object",
        "properties": {"order_id": {"type": "string", "minLength": 1}},
        "required": ["order_id"],
        "additionalProperties": False,
    },
)


async def check_requires_action_then_submit(addr: str, agent: str) -> None:
    async with GroundwireClient(addr, timeout=TIMEOUT) as gw:
        waiting = await gw.execute(
            agent, QUESTION, client_tools=[ORDER_TOOL], client_tool_timeout=60.0
        )
        assert waiting.status == agent_pb2.EXECUTION_STATUS_REQUIRES_ACTION, waiting.status
        assert not waiting.answer and waiting.HasField("action_deadline")
        assert len(waiting.required_tool_calls) == 1, waiting.required_tool_calls
        required = waiting.required_tool_calls[0]
        assert required.tool_name == "order_status", required.tool_name
        assert json.loads(required.arguments) == {"order_id": "A-1"}, required.arguments

        done = await gw.submit_tool_results(waiting.execution_id, {required.call_id: OUTPUT})
        assert done.status == agent_pb2.EXECUTION_STATUS_COMPLETED, done.status
        assert done.execution_id == waiting.execution_id and done.resumed
        assert OUTPUT in done.answer, done.answer
        trace = next(t for t in done.tool_calls if t.call_id == required.call_id)
        assert trace.client_executed and trace.succeeded, trace
        try:
            await gw.submit_tool_results(waiting.execution_id, {required.call_id: OUTPUT})
        except GroundwireError as err:
            assert err.reason == "TOOL_RESULT_DUPLICATE", err.reason
        else:
            raise AssertionError("a second submission was accepted")


def main() -> int:
    addr = os.environ.get("GROUNDWIRE_ADDR")
    agent = os.environ.get("GROUNDWIRE_TOOL_AGENT")
    if not addr:
        print("GROUNDWIRE_ADDR is not set", file=sys.stderr)
        return 2
    name = "client tool: REQUIRES_ACTION, then submit_tool_results completes"
    if not agent:
        print(f"skip {name}: GROUNDWIRE_TOOL_AGENT is not set")
        return 0
    try:
        asyncio.run(check_requires_action_then_submit(addr, agent))
    except Exception as exc:
        print(f"FAIL {name}: {type(exc).__name__}: {exc}")
        print("0 passed, 1 failed")
        return 1
    print(f"ok   {name}")
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
