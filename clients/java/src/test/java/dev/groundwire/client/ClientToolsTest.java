package dev.groundwire.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.google.protobuf.Duration;
import dev.groundwire.v1.AgentResult;
import dev.groundwire.v1.ClientToolResults;
import dev.groundwire.v1.ExecuteInteractiveRequest;
import dev.groundwire.v1.ExecuteInteractiveResponse;
import dev.groundwire.v1.ExecuteStreamResponse;
import dev.groundwire.v1.ExecutionEventType;
import dev.groundwire.v1.ExecutionInput;
import dev.groundwire.v1.ExecutionStatus;
import dev.groundwire.v1.RequiredToolCall;
import dev.groundwire.v1.ToolCallEvent;
import dev.groundwire.v1.ToolCallTrace;
import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Live smoke of client-executed tools with the Java client. Needs GROUNDWIRE_ADDR and
 * GROUNDWIRE_TOOL_AGENT (scripts/smoke_clients.sh configures "tool-smoke", whose scripted model
 * calls the caller's order_status tool once, then quotes its result); skipped otherwise.
 */
class ClientToolsTest {
  private static final String ADDR = System.getenv("GROUNDWIRE_ADDR");
  private static final String AGENT = System.getenv("GROUNDWIRE_TOOL_AGENT");
  private static final String QUESTION = "Where is my order A-1?";
  private static final String OUTPUT = "shipped on 2026-03-02 with parcel 7731";
  private static ManagedChannel channel;

  @BeforeAll
  static void connect() {
    assumeTrue(
        ADDR != null && !ADDR.isEmpty() && AGENT != null && !AGENT.isEmpty(),
        "GROUNDWIRE_ADDR and GROUNDWIRE_TOOL_AGENT are not set: no agent whose model calls client tools");
    channel = Groundwire.plaintextChannel(ADDR);
  }

  @AfterAll
  static void close() throws InterruptedException {
    if (channel != null) {
      channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
  }

  /** One turn that declares the caller's order_status tool. */
  private static ExecutionInput orderInput() {
    return Groundwire.input(AGENT, QUESTION)
        .addClientTools(
            Groundwire.clientTool(
                "order_status",
                "Status of one of the user's orders.",
                Map.of(
                    "type", "object",
                    "properties", Map.of("order_id", Map.of("type", "string", "minLength", 1)),
                    "required", List.of("order_id"),
                    "additionalProperties", false)))
        .setClientToolTimeout(Duration.newBuilder().setSeconds(60))
        .build();
  }

  private static void assertOrderCall(String name, String arguments) {
    assertEquals("order_status", name);
    // A JSON object (no JSON library here: compared without insignificant whitespace).
    assertEquals("{\"order_id\":\"A-1\"}", arguments.replaceAll("\\s+", ""), arguments);
  }

  private static void assertAnsweredFromTool(AgentResult result, String callId) {
    assertEquals(ExecutionStatus.EXECUTION_STATUS_COMPLETED, result.getStatus());
    assertTrue(
        result.getAnswer().contains(OUTPUT),
        "answer " + result.getAnswer() + " does not quote the tool output");
    assertEquals(0, result.getRequiredToolCallsCount());
    ToolCallTrace trace =
        result.getToolCallsList().stream()
            .filter(t -> t.getCallId().equals(callId))
            .findFirst()
            .orElseThrow(() -> new AssertionError("no tool call trace for " + callId));
    assertTrue(trace.getClientExecuted() && trace.getSucceeded(), "trace " + trace);
  }

  /**
   * Execute declaring a client tool ends in REQUIRES_ACTION with the call to run; SubmitToolResults
   * continues it to a completed answer built from the tool's output.
   */
  @Test
  void requiresActionThenSubmittedResultCompletes() {
    var agents = Groundwire.agents(channel).withDeadlineAfter(20, TimeUnit.SECONDS);
    AgentResult waiting = Groundwire.execute(agents, orderInput());
    assertEquals(ExecutionStatus.EXECUTION_STATUS_REQUIRES_ACTION, waiting.getStatus());
    assertEquals("", waiting.getAnswer());
    assertTrue(waiting.hasActionDeadline(), "no action deadline");
    assertEquals(1, waiting.getRequiredToolCallsCount());
    RequiredToolCall required = waiting.getRequiredToolCalls(0);
    assertOrderCall(required.getToolName(), required.getArguments());

    AgentResult done =
        Groundwire.submitToolResults(
            agents,
            waiting.getExecutionId(),
            List.of(Groundwire.toolOutput(required.getCallId(), OUTPUT)));
    assertEquals(waiting.getExecutionId(), done.getExecutionId());
    assertTrue(done.getResumed(), "the continued result is not marked resumed");
    assertAnsweredFromTool(done, required.getCallId());

    // The call is answered: a second submission is refused with a stable reason.
    StatusRuntimeException err =
        assertThrows(
            StatusRuntimeException.class,
            () ->
                Groundwire.submitToolResults(
                    agents,
                    waiting.getExecutionId(),
                    List.of(Groundwire.toolOutput(required.getCallId(), OUTPUT))));
    assertEquals("TOOL_RESULT_DUPLICATE", Groundwire.errorReason(err));
  }

  /**
   * ExecuteInteractive, the bidirectional stream (async stub): the input first; the server sends
   * TOOL_CALL_REQUESTED and waits; the result goes back on the same stream and the execution
   * completes with an answer quoting it.
   */
  @Test
  void executeInteractiveAnswersOnTheSameStream() throws Exception {
    List<ExecuteStreamResponse> events = Collections.synchronizedList(new ArrayList<>());
    AtomicReference<String> callId = new AtomicReference<>("");
    AtomicReference<String> callError = new AtomicReference<>();
    CompletableFuture<Void> finished = new CompletableFuture<>();
    AtomicReference<StreamObserver<ExecuteInteractiveRequest>> requests = new AtomicReference<>();
    StreamObserver<ExecuteInteractiveResponse> responses =
        new StreamObserver<>() {
          @Override
          public void onNext(ExecuteInteractiveResponse res) {
            ExecuteStreamResponse ev = res.getEvent();
            events.add(ev);
            if (ev.getType() != ExecutionEventType.EXECUTION_EVENT_TYPE_TOOL_CALL_REQUESTED) {
              return;
            }
            ToolCallEvent call = ev.getToolCall();
            if (!callId.compareAndSet("", call.getCallId())) {
              callError.set("a second TOOL_CALL_REQUESTED: " + call.getCallId());
              return;
            }
            StreamObserver<ExecuteInteractiveRequest> out = requests.get();
            synchronized (out) {
              out.onNext(
                  ExecuteInteractiveRequest.newBuilder()
                      .setToolResults(
                          ClientToolResults.newBuilder()
                              .addResults(Groundwire.toolOutput(call.getCallId(), OUTPUT)))
                      .build());
              out.onCompleted();
            }
          }

          @Override
          public void onError(Throwable t) {
            finished.completeExceptionally(t);
          }

          @Override
          public void onCompleted() {
            finished.complete(null);
          }
        };
    StreamObserver<ExecuteInteractiveRequest> out =
        Groundwire.agentsAsync(channel)
            .withDeadlineAfter(20, TimeUnit.SECONDS)
            .executeInteractive(responses);
    requests.set(out);
    synchronized (out) {
      out.onNext(ExecuteInteractiveRequest.newBuilder().setInput(orderInput()).build());
    }
    finished.get(25, TimeUnit.SECONDS);

    assertEquals(null, callError.get());
    assertFalse(callId.get().isEmpty(), "no TOOL_CALL_REQUESTED in " + events.size() + " events");
    ToolCallEvent requested =
        events.stream()
            .filter(e -> e.getType() == ExecutionEventType.EXECUTION_EVENT_TYPE_TOOL_CALL_REQUESTED)
            .findFirst()
            .orElseThrow()
            .getToolCall();
    assertTrue(requested.getClientExecuted(), "the requested tool is not client-executed");
    assertOrderCall(requested.getToolName(), requested.getArguments());
    assertEquals(1, events.stream().filter(Groundwire::isTerminal).count(), "terminal events");
    ExecuteStreamResponse last = events.get(events.size() - 1);
    assertEquals(
        ExecutionEventType.EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED,
        last.getType(),
        "last event " + last.getType() + " " + last.getErrorCode());
    assertNotNull(last.getResult());
    assertAnsweredFromTool(last.getResult(), callId.get());
  }
}
