// Smoke test of the generated TypeScript client against a live groundwire
// server at GROUNDWIRE_ADDR ("host:port"), e.g. started by
// scripts/smoke_clients.sh. Run: GROUNDWIRE_ADDR=127.0.0.1:50051 npm run smoke
import assert from "node:assert/strict";
import { test } from "node:test";
import { Code } from "@connectrpc/connect";
import {
  createGroundwireTransport,
  createGroundwireClient,
  decodeError,
  execute,
  executeStream,
  ExecutionEventType,
  HealthCheckResponse_ServingStatus,
  isTerminalEvent,
  RetrievalMode,
  type AgentResult,
  type ExecuteStreamResponse,
} from "../src/index.js";

const addr = process.env.GROUNDWIRE_ADDR;
const skip = addr ? false : "GROUNDWIRE_ADDR is not set: no live groundwire server to test against";
const gw = addr ? createGroundwireClient(`http://${addr}`) : undefined;
const timeoutMs = 20_000;

test("Health/Check reports SERVING", { skip }, async () => {
  const res = await gw!.health.check({ service: "" }, { timeoutMs });
  assert.equal(res.status, HealthCheckResponse_ServingStatus.SERVING);
});

test("Retrieve finds POL-HR-014 lexically", { skip }, async () => {
  const res = await gw!.retriever.retrieve(
    { query: { indexName: "demo", text: "POL-HR-014", mode: RetrievalMode.LEXICAL, topK: 3 } },
    { timeoutMs },
  );
  assert.ok(res.results.length > 0, "no results");
  assert.equal(res.results[0].documentId, "policies/parental-leave.md");
  assert.equal(res.diagnostics?.appliedMode, RetrievalMode.LEXICAL);
  assert.equal(res.results[0].score?.higherIsBetter, true);
});

test("unknown index is NotFound with reason INDEX_NOT_FOUND", { skip }, async () => {
  await assert.rejects(
    gw!.retriever.retrieve({ query: { indexName: "no-such-index", text: "anything" } }, { timeoutMs }),
    (err: unknown) => {
      const e = decodeError(err);
      assert.equal(e.code, Code.NotFound);
      assert.equal(e.reason, "INDEX_NOT_FOUND");
      assert.equal(e.domain, "groundwire.dev");
      return true;
    },
  );
});

// AgentService.ExecuteStream: a server stream ending in exactly one terminal
// event, here EXECUTION_COMPLETED with the result. The agent is GROUNDWIRE_AGENT
// (scripts/smoke_clients.sh configures one with the offline extractive model);
// "demo-assistant" is the embedded default's.
const agentId = process.env.GROUNDWIRE_AGENT || "demo-assistant";
const question = "How many weeks of parental leave do I get?";

function assertCitesParentalLeave(result: AgentResult | undefined): void {
  assert.ok(result, "no result");
  assert.ok(result.answer.trim().length > 0, "empty answer");
  const cited = result.citations.map((c) => c.documentId);
  assert.ok(cited.includes("policies/parental-leave.md"), `citations: ${cited.join(", ")}`);
  // Citations an application can render: title, span, snippet, display number.
  result.citations.forEach((c, i) => {
    assert.equal(c.displayNumber, i + 1);
    assert.ok(c.title.length > 0 && c.snippet.trim().length > 0, `citation ${i + 1}: no title or snippet`);
    assert.ok((c.span?.end ?? 0) > (c.span?.start ?? 0), `citation ${i + 1}: no span`);
  });
}

test("AgentService.ExecuteStream streams to one terminal event", { skip }, async () => {
  const events: ExecuteStreamResponse[] = [];
  for await (const ev of gw!.agents.executeStream({ input: { agentId, message: question } }, { timeoutMs })) {
    events.push(ev);
  }
  assert.ok(events.length > 0, "no events");
  const types = events.map((e) => ExecutionEventType[e.type]);
  assert.equal(events[0].type, ExecutionEventType.EXECUTION_STARTED, `first event ${types[0]}`);
  const terminal = events.filter(isTerminalEvent);
  assert.equal(terminal.length, 1, `terminal events in ${types.join(", ")}`);
  const last = events[events.length - 1];
  assert.equal(last.type, ExecutionEventType.EXECUTION_COMPLETED, `last event ${types.at(-1)} ${last.errorCode}`);
  assert.deepEqual(
    events.map((e) => e.sequence),
    events.map((_, i) => i),
    "sequence numbers are not 0..n-1",
  );
  assert.equal(new Set(events.map((e) => e.executionId)).size, 1, "execution id differs between events");
  assertCitesParentalLeave(last.result);
});

test("execute/executeStream helpers", { skip }, async () => {
  const events: ExecuteStreamResponse[] = [];
  for await (const ev of executeStream(gw!.agents, agentId, question, {}, { timeoutMs })) events.push(ev);
  assert.equal(events.filter(isTerminalEvent).length, 1);
  assert.ok(isTerminalEvent(events[events.length - 1]), "the terminal event is not last");
  assertCitesParentalLeave(await execute(gw!.agents, agentId, question, {}, { timeoutMs }));
});

test("an empty or malformed API key is refused, not sent", () => {
  for (const apiKey of ["", " ", "gw_a b", "gw_\n"]) {
    assert.throws(() => createGroundwireTransport("http://127.0.0.1:9", { apiKey }), TypeError);
  }
  assert.ok(createGroundwireTransport("http://127.0.0.1:9", { apiKey: "gw_ok" }));
  assert.ok(createGroundwireTransport("http://127.0.0.1:9", {}));
});
