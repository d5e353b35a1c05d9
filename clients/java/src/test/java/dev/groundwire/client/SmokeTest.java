package dev.groundwire.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.groundwire.v1.RagQuery;
import dev.groundwire.v1.RetrievalMode;
import dev.groundwire.v1.RetrieveRequest;
import dev.groundwire.v1.RetrieveResponse;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
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

  /**
   * AgentService.ExecuteStream: a server stream ending in exactly one terminal event. Skipped until
   * the block below is written.
   */
  @Test
  void executeStreamEndsWithOneTerminalEvent() {
    var agents = Groundwire.agents(channel).withDeadlineAfter(20, TimeUnit.SECONDS);
    assertTrue(agents != null);
    // ---- TODO(agents): ExecuteStream smoke ------------------------------------------------
    // Iterator<ExecuteStreamResponse> it =
    //     agents.executeStream(ExecuteStreamRequest.newBuilder()...build());
    // consume it; assert exactly one terminal event, and that it is the last one.
    // ----------------------------------------------------------------------------------------
    assumeTrue(false, "TODO(agents): the ExecuteStream smoke is not written yet");
  }
}
