// Smoke test of the generated Go client against a live groundwire server.
// It runs only when GROUNDWIRE_ADDR ("host:port") is set, for example by
// scripts/smoke_clients.sh, which starts a server over the demo handbook:
//
//	GROUNDWIRE_ADDR=127.0.0.1:50051 go test -count=1 ./...
package groundwire_test

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	groundwire "github.com/groundwire/groundwire/clients/go"
	groundwirev1 "github.com/groundwire/groundwire/clients/go/groundwirev1"
)

func connect(t *testing.T) *grpc.ClientConn {
	t.Helper()
	addr := os.Getenv("GROUNDWIRE_ADDR")
	if addr == "" {
		t.Skip("GROUNDWIRE_ADDR is not set: no live groundwire server to test against")
	}
	conn, err := groundwire.Dial(addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func callContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestHealthCheck(t *testing.T) {
	conn := connect(t)
	resp, err := healthpb.NewHealthClient(conn).Check(callContext(t), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("Health/Check: %v", err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Health/Check status = %v, want SERVING", resp.GetStatus())
	}
}

func TestRetrieveLexicalIdentifier(t *testing.T) {
	conn := connect(t)
	resp, err := groundwirev1.NewRetrieverServiceClient(conn).Retrieve(callContext(t), &groundwirev1.RetrieveRequest{
		Query: &groundwirev1.RagQuery{
			IndexName: "demo",
			Text:      "POL-HR-014",
			Mode:      groundwirev1.RetrievalMode_RETRIEVAL_MODE_LEXICAL,
			TopK:      proto.Int32(3),
		},
	})
	if err != nil {
		t.Fatalf("Retrieve: %v", err)
	}
	if len(resp.GetResults()) == 0 {
		t.Fatal("Retrieve returned no results")
	}
	if got := resp.GetResults()[0].GetDocumentId(); got != "policies/parental-leave.md" {
		t.Fatalf("first result = %q, want policies/parental-leave.md", got)
	}
	if got := resp.GetDiagnostics().GetAppliedMode(); got != groundwirev1.RetrievalMode_RETRIEVAL_MODE_LEXICAL {
		t.Fatalf("applied mode = %v, want LEXICAL", got)
	}
	score := resp.GetResults()[0].GetScore()
	if score.GetMetric() == groundwirev1.ScoreMetric_SCORE_METRIC_UNSPECIFIED || !score.GetHigherIsBetter() {
		t.Fatalf("lexical score semantics missing: %v", score)
	}
}

func TestUnknownIndexIsNotFoundWithReason(t *testing.T) {
	conn := connect(t)
	_, err := groundwirev1.NewRetrieverServiceClient(conn).Retrieve(callContext(t), &groundwirev1.RetrieveRequest{
		Query: &groundwirev1.RagQuery{IndexName: "no-such-index", Text: "anything"},
	})
	if err == nil {
		t.Fatal("Retrieve on an unknown index succeeded")
	}
	e := groundwire.DecodeError(err)
	if e.Code != codes.NotFound {
		t.Fatalf("code = %v, want NotFound (%v)", e.Code, err)
	}
	if e.Reason != "INDEX_NOT_FOUND" {
		t.Fatalf("ErrorInfo reason = %q, want INDEX_NOT_FOUND", e.Reason)
	}
}

const question = "How many weeks of parental leave do I get?"

// agentID is the agent the smoke asks: GROUNDWIRE_AGENT (scripts/smoke_clients.sh
// configures one with the offline extractive model), else the embedded
// default's "demo-assistant".
func agentID() string {
	if id := os.Getenv("GROUNDWIRE_AGENT"); id != "" {
		return id
	}
	return "demo-assistant"
}

func checkCitesParentalLeave(t *testing.T, result *groundwirev1.AgentResult) {
	t.Helper()
	if result == nil {
		t.Fatal("no result")
	}
	if strings.TrimSpace(result.GetAnswer()) == "" {
		t.Fatal("empty answer")
	}
	var cited []string
	for _, c := range result.GetCitations() {
		cited = append(cited, c.GetDocumentId())
	}
	if !slices.Contains(cited, "policies/parental-leave.md") {
		t.Fatalf("citations %v do not include policies/parental-leave.md", cited)
	}
	// Citations an application can render: title, span, snippet, display number.
	for i, c := range result.GetCitations() {
		if c.GetDisplayNumber() != uint32(i+1) || c.GetTitle() == "" || strings.TrimSpace(c.GetSnippet()) == "" || c.GetSpan().GetEnd() <= c.GetSpan().GetStart() {
			t.Fatalf("citation %d is not renderable: %v", i+1, c)
		}
	}
}

// TestExecuteStream: AgentService.ExecuteStream, a server stream ending in
// exactly one terminal event, here EXECUTION_COMPLETED with the result.
func TestExecuteStream(t *testing.T) {
	conn := connect(t)
	stream, err := groundwirev1.NewAgentServiceClient(conn).ExecuteStream(callContext(t), &groundwirev1.ExecuteStreamRequest{
		Input: &groundwirev1.ExecutionInput{AgentId: agentID(), Message: question},
	})
	if err != nil {
		t.Fatalf("ExecuteStream: %v", err)
	}
	var events []*groundwirev1.ExecuteStreamResponse
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("ExecuteStream after %d events: %v", len(events), err)
		}
		events = append(events, ev)
	}
	if len(events) == 0 {
		t.Fatal("no events")
	}
	if got := events[0].GetType(); got != groundwirev1.ExecutionEventType_EXECUTION_EVENT_TYPE_EXECUTION_STARTED {
		t.Fatalf("first event = %v, want EXECUTION_STARTED", got)
	}
	terminal := 0
	for i, ev := range events {
		if groundwire.IsTerminal(ev) {
			terminal++
		}
		if ev.GetSequence() != uint32(i) {
			t.Fatalf("event %d has sequence %d", i, ev.GetSequence())
		}
		if ev.GetExecutionId() != events[0].GetExecutionId() {
			t.Fatalf("event %d has execution id %q, want %q", i, ev.GetExecutionId(), events[0].GetExecutionId())
		}
	}
	if terminal != 1 {
		t.Fatalf("%d terminal events, want exactly 1", terminal)
	}
	last := events[len(events)-1]
	if last.GetType() != groundwirev1.ExecutionEventType_EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED {
		t.Fatalf("last event = %v (%s), want EXECUTION_COMPLETED", last.GetType(), last.GetErrorCode())
	}
	checkCitesParentalLeave(t, last.GetResult())
}

// TestExecuteHelpers: Clients.ExecuteStream (an iterator) and Clients.Execute.
func TestExecuteHelpers(t *testing.T) {
	gw := groundwire.NewClients(connect(t))
	ctx := callContext(t)
	var events []*groundwirev1.ExecuteStreamResponse
	for ev, err := range gw.ExecuteStream(ctx, groundwire.Input(agentID(), question)) {
		if err != nil {
			t.Fatalf("ExecuteStream: %v", err)
		}
		events = append(events, ev)
	}
	if len(events) == 0 || !groundwire.IsTerminal(events[len(events)-1]) {
		t.Fatalf("the stream of %d events does not end with a terminal event", len(events))
	}
	result, err := gw.Execute(ctx, groundwire.Input(agentID(), question))
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	checkCitesParentalLeave(t, result)
}
