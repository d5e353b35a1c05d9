package dev.groundwire.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.groundwire.v1.AgentResult;
import dev.groundwire.v1.Citation;
import dev.groundwire.v1.ExecuteStreamRequest;
import dev.groundwire.v1.ExecuteStreamResponse;
import dev.groundwire.v1.ExecutionEventType;
import dev.groundwire.v1.ExecutionInput;
import dev.groundwire.v1.RagQuery;
import dev.groundwire.v1.RetrievalMode;
import dev.groundwire.v1.RetrieveRequest;
import dev.groundwire.v1.RetrieveResponse;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Smoke test of the generated Java client against a live groundwire server at GROUNDWIRE_ADDR
 * ("host:port"), e.g. started by scripts/smoke_clients.sh. Skipped when GROUNDWIRE_ADDR is unset.
 */
class SmokeTest {
  private static final String ADDR = System.getenv("GROUNDWIRE_ADDR");
  private static ManagedChannel channel;

  @BeforeAll
  static void connect() {
    assumeTrue(ADDR != null && !ADDR.isEmpty(), "GROUNDWIRE_ADDR is not set: no live server");
    channel = Groundwire.plaintextChannel(ADDR);
  }

  @AfterAll
  static void close() throws InterruptedException {
    if (channel != null) {
      channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
  }

  @Test
  void emptyOrMalformedApiKeysAreRefused() {
    for (String key : new String[] {null, "", " ", "gw_a b", "gw_\n"}) {
      assertThrows(IllegalArgumentException.class, () -> Groundwire.apiKey(key));
    }
    Groundwire.apiKey("gw_ok");
  }

  @Test
  void healthCheckIsServing() {
    HealthCheckResponse res =
        Groundwire.health(channel)
            .withDeadlineAfter(20, TimeUnit.SECONDS)
            .check(HealthCheckRequest.newBuilder().setService("").build());
    assertEquals(HealthCheckResponse.ServingStatus.SERVING, res.getStatus());
  }

  @Test
  void retrieveFindsIdentifierLexically() {
    RetrieveResponse res =
        Groundwire.retriever(channel)
            .withDeadlineAfter(20, TimeUnit.SECONDS)
            .retrieve(
                RetrieveRequest.newBuilder()
                    .setQuery(
                        RagQuery.newBuilder()
                            .setIndexName("demo")
                            .setText("POL-HR-014")
                            .setMode(RetrievalMode.RETRIEVAL_MODE_LEXICAL)
                            .setTopK(3))
                    .build());
    assertFalse(res.getResultsList().isEmpty(), "no results");
    assertEquals("policies/parental-leave.md", res.getResults(0).getDocumentId());
    assertEquals(RetrievalMode.RETRIEVAL_MODE_LEXICAL, res.getDiagnostics().getAppliedMode());
    assertTrue(res.getResults(0).getScore().getHigherIsBetter());
  }

  @Test
  void unknownIndexIsNotFoundWithReason() {
    StatusRuntimeException err =
        assertThrows(
            StatusRuntimeException.class,
            () ->
                Groundwire.retriever(channel)
                    .withDeadlineAfter(20, TimeUnit.SECONDS)
                    .retrieve(
                        RetrieveRequest.newBuilder()
                            .setQuery(
                                RagQuery.newBuilder().setIndexName("no-such-index").setText("anything"))
                            .build()));
    Groundwire.ErrorDetails details = Groundwire.decodeError(err);
    assertEquals(Status.Code.NOT_FOUND, details.code());
    assertEquals("INDEX_NOT_FOUND", details.reason());
    assertEquals(Groundwire.ERROR_DOMAIN, details.domain());
  }

  /** The agent asked: GROUNDWIRE_AGENT, else the embedded default's "demo-assistant". */
  private static final String AGENT =
      System.getenv("GROUNDWIRE_AGENT") == null || System.getenv("GROUNDWIRE_AGENT").isEmpty()
          ? "demo-assistant"
          : System.getenv("GROUNDWIRE_AGENT");

  private static final String QUESTION = "How many weeks of parental leave do I get?";

  private static void assertCitesParentalLeave(AgentResult result) {
    assertFalse(result.getAnswer().isBlank(), "empty answer");
    List<String> cited = result.getCitationsList().stream().map(Citation::getDocumentId).toList();
    assertTrue(cited.contains("policies/parental-leave.md"), "citations: " + cited);
    // Citations an application can render: title, span, snippet, display number.
    for (int i = 0; i < result.getCitationsCount(); i++) {
      Citation c = result.getCitations(i);
      assertEquals(i + 1, c.getDisplayNumber());
      assertFalse(c.getTitle().isEmpty() || c.getSnippet().isBlank(), "citation " + (i + 1));
      assertTrue(c.getSpan().getEnd() > c.getSpan().getStart(), "citation " + (i + 1));
    }
  }

  /**
   * AgentService.ExecuteStream: a server stream ending in exactly one terminal event, here
   * EXECUTION_COMPLETED with the result.
   */
  @Test
  void executeStreamEndsWithOneTerminalEvent() {
    var agents = Groundwire.agents(channel).withDeadlineAfter(20, TimeUnit.SECONDS);
    Iterator<ExecuteStreamResponse> it =
        agents.executeStream(
            ExecuteStreamRequest.newBuilder()
                .setInput(ExecutionInput.newBuilder().setAgentId(AGENT).setMessage(QUESTION))
                .build());
    List<ExecuteStreamResponse> events = new ArrayList<>();
    it.forEachRemaining(events::add);
    assertFalse(events.isEmpty(), "no events");
    assertEquals(ExecutionEventType.EXECUTION_EVENT_TYPE_EXECUTION_STARTED, events.get(0).getType());
    assertEquals(
        1, events.stream().filter(Groundwire::isTerminal).count(), "terminal events: " + events.size());
    ExecuteStreamResponse last = events.get(events.size() - 1);
    assertEquals(
        ExecutionEventType.EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED,
        last.getType(),
        "last event " + last.getType() + " " + last.getErrorCode());
    for (int i = 0; i < events.size(); i++) {
      assertEquals(i, events.get(i).getSequence(), "sequence of event " + i);
      assertEquals(events.get(0).getExecutionId(), events.get(i).getExecutionId());
    }
    assertCitesParentalLeave(last.getResult());
  }

  /** Groundwire.executeStream / Groundwire.execute. */
  @Test
  void executeHelpers() {
    var agents = Groundwire.agents(channel).withDeadlineAfter(20, TimeUnit.SECONDS);
    List<ExecuteStreamResponse> events = new ArrayList<>();
    Groundwire.executeStream(agents, AGENT, QUESTION).forEachRemaining(events::add);
    assertFalse(events.isEmpty(), "no events");
    assertTrue(Groundwire.isTerminal(events.get(events.size() - 1)), "the last event is not terminal");
    assertCitesParentalLeave(Groundwire.execute(agents, AGENT, QUESTION));
  }
}
