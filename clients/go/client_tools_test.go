// Live smoke of client-executed tools with the Go client. The agent
// GROUNDWIRE_TOOL_AGENT (scripts/smoke_clients.sh configures "tool-smoke",
// whose scripted model calls the caller's order_status tool once, then quotes
// its result) must be set, else these tests skip:
//
//	GROUNDWIRE_ADDR=127.0.0.1:50051 GROUNDWIRE_TOOL_AGENT=tool-smoke go test -count=1 -run ClientTool ./...
package groundwire_test

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	groundwire "github.com/groundwire/groundwire/clients/go"
	groundwirev1 "github.com/groundwire/groundwire/clients/go/groundwirev1"
)

const (
	orderQuestion = "Where is my order A-1?"
	orderOutput   = "shipped on 2026-03-02 with parcel 7731"
)

func toolAgent(t *testing.T) string {
	t.Helper()
	id := os.Getenv("GROUNDWIRE_TOOL_AGENT")
	if id == "" {
		t.Skip("GROUNDWIRE_TOOL_AGENT is not set: no agent whose model calls client tools")
	}
	return id
}

// orderInput is one turn that declares the caller's order_status tool.
func orderInput(t *testing.T, agent string) *groundwirev1.ExecutionInput {
	t.Helper()
	tool, err := groundwire.ClientTool("order_status", "Status of one of the user's orders.", map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"order_id": map[string]any{"type": "string", "minLength": 1}},
		"required":             []any{"order_id"},
		"additionalProperties": false,
	})
	if err != nil {
		t.Fatalf("ClientTool: %v", err)
	}
	in := groundwire.Input(agent, orderQuestion)
	in.ClientTools = []*groundwirev1.ClientTool{tool}
	in.ClientToolTimeout = durationpb.New(60 * time.Second)
	return in
}

func checkOrderArguments(t *testing.T, name, arguments string) {
	t.Helper()
	if name != "order_status" {
		t.Fatalf("tool name = %q, want order_status", name)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(arguments), &args); err != nil {
		t.Fatalf("arguments %q are not a JSON object: %v", arguments, err)
	}
	if args["order_id"] != "A-1" || len(args) != 1 {
		t.Fatalf("arguments = %v, want {order_id: A-1}", args)
	}
}

func checkAnsweredFromTool(t *testing.T, result *groundwirev1.AgentResult, callID string) {
	t.Helper()
	if result.GetStatus() != groundwirev1.ExecutionStatus_EXECUTION_STATUS_COMPLETED {
		t.Fatalf("status = %v, want COMPLETED", result.GetStatus())
	}
	if !strings.Contains(result.GetAnswer(), orderOutput) {
		t.Fatalf("answer %q does not quote the tool output %q", result.GetAnswer(), orderOutput)
	}
	if len(result.GetRequiredToolCalls()) != 0 {
		t.Fatalf("a completed result still requires %d calls", len(result.GetRequiredToolCalls()))
	}
	for _, trace := range result.GetToolCalls() {
		if trace.GetCallId() == callID {
			if !trace.GetClientExecuted() || !trace.GetSucceeded() {
				t.Fatalf("trace of %s: client_executed=%v succeeded=%v", callID, trace.GetClientExecuted(), trace.GetSucceeded())
			}
			return
		}
	}
	t.Fatalf("no tool call trace for %s", callID)
}

// TestClientToolRequiresActionThenSubmit: Execute declaring a client tool ends
// in REQUIRES_ACTION with the call to run; SubmitToolResults continues it to a
// completed answer built from the tool's output.
func TestClientToolRequiresActionThenSubmit(t *testing.T) {
	agent := toolAgent(t)
	gw := groundwire.NewClients(connect(t))
	ctx := callContext(t)
	waiting, err := gw.Execute(ctx, orderInput(t, agent))
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if waiting.GetStatus() != groundwirev1.ExecutionStatus_EXECUTION_STATUS_REQUIRES_ACTION {
		t.Fatalf("status = %v (answer %q), want REQUIRES_ACTION", waiting.GetStatus(), waiting.GetAnswer())
	}
	if waiting.GetAnswer() != "" || waiting.GetActionDeadline() == nil {
		t.Fatalf("a waiting result has answer %q and deadline %v", waiting.GetAnswer(), waiting.GetActionDeadline())
	}
	if len(waiting.GetRequiredToolCalls()) != 1 {
		t.Fatalf("%d required tool calls, want 1", len(waiting.GetRequiredToolCalls()))
	}
	required := waiting.GetRequiredToolCalls()[0]
	checkOrderArguments(t, required.GetToolName(), required.GetArguments())

	done, err := gw.SubmitToolResults(ctx, waiting.GetExecutionId(),
		[]*groundwirev1.ToolResult{groundwire.ToolOutput(required.GetCallId(), orderOutput)})
	if err != nil {
		t.Fatalf("SubmitToolResults: %v", err)
	}
	if done.GetExecutionId() != waiting.GetExecutionId() || !done.GetResumed() {
		t.Fatalf("continued result: execution id %q (want %q), resumed=%v", done.GetExecutionId(), waiting.GetExecutionId(), done.GetResumed())
	}
	checkAnsweredFromTool(t, done, required.GetCallId())

	// The call is answered: a second submission is refused with a stable reason.
	_, err = gw.SubmitToolResults(ctx, waiting.GetExecutionId(),
		[]*groundwirev1.ToolResult{groundwire.ToolOutput(required.GetCallId(), orderOutput)})
	if reason := groundwire.Reason(err); reason != "TOOL_RESULT_DUPLICATE" {
		t.Fatalf("second SubmitToolResults: reason %q (%v), want TOOL_RESULT_DUPLICATE", reason, err)
	}
}

// TestClientToolExecuteInteractive: the bidirectional stream. The input goes
// first; the server sends TOOL_CALL_REQUESTED and waits; the result goes back
// on the same stream and the execution completes with an answer quoting it.
func TestClientToolExecuteInteractive(t *testing.T) {
	agent := toolAgent(t)
	gw := groundwire.NewClients(connect(t))
	stream, err := gw.Agents.ExecuteInteractive(callContext(t))
	if err != nil {
		t.Fatalf("ExecuteInteractive: %v", err)
	}
	if err := stream.Send(&groundwirev1.ExecuteInteractiveRequest{
		Kind: &groundwirev1.ExecuteInteractiveRequest_Input{Input: orderInput(t, agent)},
	}); err != nil {
		t.Fatalf("send the input: %v", err)
	}
	var events []*groundwirev1.ExecuteStreamResponse
	callID := ""
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("ExecuteInteractive after %d events: %v", len(events), err)
		}
		ev := resp.GetEvent()
		events = append(events, ev)
		if ev.GetType() == groundwirev1.ExecutionEventType_EXECUTION_EVENT_TYPE_TOOL_CALL_REQUESTED {
			if callID != "" {
				t.Fatalf("a second TOOL_CALL_REQUESTED (%s after %s)", ev.GetToolCall().GetCallId(), callID)
			}
			call := ev.GetToolCall()
			if !call.GetClientExecuted() {
				t.Fatal("TOOL_CALL_REQUESTED for a tool that is not client-executed")
			}
			checkOrderArguments(t, call.GetToolName(), call.GetArguments())
			callID = call.GetCallId()
			if err := stream.Send(&groundwirev1.ExecuteInteractiveRequest{
				Kind: &groundwirev1.ExecuteInteractiveRequest_ToolResults{ToolResults: &groundwirev1.ClientToolResults{
					Results: []*groundwirev1.ToolResult{groundwire.ToolOutput(callID, orderOutput)},
				}},
			}); err != nil {
				t.Fatalf("send the tool result: %v", err)
			}
			if err := stream.CloseSend(); err != nil {
				t.Fatalf("CloseSend: %v", err)
			}
		}
	}
	if callID == "" {
		t.Fatalf("no TOOL_CALL_REQUESTED in %d events", len(events))
	}
	terminal := 0
	for _, ev := range events {
		if groundwire.IsTerminal(ev) {
			terminal++
		}
	}
	last := events[len(events)-1]
	if terminal != 1 || last.GetType() != groundwirev1.ExecutionEventType_EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED {
		t.Fatalf("%d terminal events, last %v (%s); want exactly one EXECUTION_COMPLETED", terminal, last.GetType(), last.GetErrorCode())
	}
	checkAnsweredFromTool(t, last.GetResult(), callID)
}
