// Live smoke of client-executed tools with the TypeScript client. Needs
// GROUNDWIRE_ADDR and GROUNDWIRE_TOOL_AGENT (scripts/smoke_clients.sh
// configures "tool-smoke", whose scripted model calls the caller's
// order_status tool once, then quotes its result); skipped otherwise.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { MessageInitShape } from "@bufbuild/protobuf";
import {
  createGroundwireClient,
  decodeError,
  execute,
  ExecutionEventType,
  ExecutionStatus,
  isTerminalEvent,
  submitToolResults,
  type AgentResult,
  type ExecuteInit,
  type ExecuteInteractiveRequestSchema,
  type ExecuteStreamResponse,
} from "../src/index.js";

const addr = process.env.GROUNDWIRE_ADDR;
const agentId = process.env.GROUNDWIRE_TOOL_AGENT;
const skip =
  addr && agentId ? false : "GROUNDWIRE_ADDR and GROUNDWIRE_TOOL_AGENT are not set: no agent whose model calls client tools";
const gw = addr ? createGroundwireClient(`http://${addr}`) : undefined;
const timeoutMs = 20_000;

const question = "Where is my order A-1?";
const output = "shipped on 2026-03-02 with parcel 7731";
const withOrderTool: ExecuteInit = {
  clientTools: [
    {
      name: "order_status",
      description: "Status of one of the user's orders.",
      parameters: {
        type: "object",
        properties: { order_id: { type: "string", minLength: 1 } },
        required: ["order_id"],
        additionalProperties: false,
      },
    },
  ],
  clientToolTimeout: { seconds: 60n },
};

function assertOrderCall(name: string, args: string): void {
  assert.equal(name, "order_status");
  assert.deepEqual(JSON.parse(args), { order_id: "A-1" });
}

function assertAnsweredFromTool(result: AgentResult | undefined, callId: string): void {
  assert.ok(result, "no result");
  assert.equal(result.status, ExecutionStatus.COMPLETED, `status ${ExecutionStatus[result.status]}`);
  assert.ok(result.answer.includes(output), `answer ${JSON.stringify(result.answer)} does not quote the tool output`);
  assert.equal(result.requiredToolCalls.length, 0);
  const trace = result.toolCalls.find((t) => t.callId === callId);
  assert.ok(trace, `no tool call trace for ${callId}`);
  assert.ok(trace.clientExecuted && trace.succeeded, `trace ${JSON.stringify({ ...trace, duration: undefined })}`);
}

test("client tool: Execute ends in REQUIRES_ACTION, SubmitToolResults completes it", { skip }, async () => {
  const waiting = await execute(gw!.agents, agentId!, question, withOrderTool, { timeoutMs });
  assert.equal(waiting.status, ExecutionStatus.REQUIRES_ACTION, `status ${ExecutionStatus[waiting.status]}`);
  assert.equal(waiting.answer, "");
  assert.ok(waiting.actionDeadline, "no action deadline");
  assert.equal(waiting.requiredToolCalls.length, 1);
  const [required] = waiting.requiredToolCalls;
  assertOrderCall(required.toolName, required.arguments);

  const done = await submitToolResults(gw!.agents, waiting.executionId, [{ callId: required.callId, output }], {
    timeoutMs,
  });
  assert.equal(done.executionId, waiting.executionId);
  assert.ok(done.resumed, "the continued result is not marked resumed");
  assertAnsweredFromTool(done, required.callId);

  // The call is answered: a second submission is refused with a stable reason.
  await assert.rejects(
    submitToolResults(gw!.agents, waiting.executionId, [{ callId: required.callId, output }], { timeoutMs }),
    (err: unknown) => {
      assert.equal(decodeError(err).reason, "TOOL_RESULT_DUPLICATE");
      return true;
    },
  );
});

test("client tool: ExecuteInteractive answers the call on the same stream", { skip }, async () => {
  type Request = MessageInitShape<typeof ExecuteInteractiveRequestSchema>;
  // The request stream: the input now, the tool result once the server asks.
  let answer!: (req: Request) => void;
  const toolResult = new Promise<Request>((resolve) => (answer = resolve));
  async function* requests(): AsyncGenerator<Request> {
    yield { kind: { case: "input", value: { agentId: agentId!, message: question, ...withOrderTool } } };
    yield await toolResult; // then the request side closes
  }
  const events: ExecuteStreamResponse[] = [];
  let callId = "";
  for await (const res of gw!.agents.executeInteractive(requests(), { timeoutMs })) {
    const ev = res.event;
    assert.ok(ev, "a response without an event");
    events.push(ev);
    if (ev.type === ExecutionEventType.TOOL_CALL_REQUESTED) {
      assert.equal(callId, "", "a second TOOL_CALL_REQUESTED");
      const call = ev.toolCall;
      assert.ok(call?.clientExecuted, "TOOL_CALL_REQUESTED for a tool that is not client-executed");
      assertOrderCall(call.toolName, call.arguments);
      callId = call.callId;
      answer({ kind: { case: "toolResults", value: { results: [{ callId, output }] } } });
    }
  }
  const types = events.map((e) => ExecutionEventType[e.type]);
  assert.notEqual(callId, "", `no TOOL_CALL_REQUESTED in ${types.join(", ")}`);
  assert.equal(events.filter(isTerminalEvent).length, 1, `terminal events in ${types.join(", ")}`);
  const last = events[events.length - 1];
  assert.equal(last.type, ExecutionEventType.EXECUTION_COMPLETED, `last event ${types.at(-1)} ${last.errorCode}`);
  assertAnsweredFromTool(last.result, callId);
});
