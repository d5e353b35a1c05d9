#!/usr/bin/env bash
# Start ONE groundwire server and run the Python, TypeScript, Go and Java smoke
# tests against it (Health/Check, a lexical Retrieve, a rich NOT_FOUND error and
# one AgentService.ExecuteStream consumed to its terminal event, with the
# offline extractive model); then client-executed tools (declare a tool,
# REQUIRES_ACTION, SubmitToolResults; the bidirectional ExecuteInteractive in
# Go, TypeScript and Java) with the agent "tool-smoke", whose model is a
# scripted OpenAI-compatible stand-in run as its own process
# (tests/support/tool_calling_model.py: calls the caller's `order_status`
# tool, then quotes its result); print one pass/fail line per
# language and a final "N passed, M failed" line; stop the server and the
# stand-in; exit non-zero on any failure.
#
#   scripts/smoke_clients.sh                  all four languages
#   SMOKE_LANGS="go java" scripts/smoke_clients.sh
#   SMOKE_CONFIG=default scripts/smoke_clients.sh   the embedded default (MiniLM)
#                                                   instead of the hashing embedder
#   SMOKE_VERBOSE=1 ...                        print every log, not only failures
#
# Needs: .venv (make setup), go, node + npm, mvn + java. Installs the pinned
# TypeScript dependencies itself (npm ci, via scripts/gen_clients.sh --npm-only);
# Go and Maven fetch their pinned modules/artifacts on first use. The generated
# stubs are committed, so no code generator runs here.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
PY="$ROOT/.venv/bin/python"
GROUNDWIRE="$ROOT/.venv/bin/groundwire"
LANGS="${SMOKE_LANGS:-python typescript go java}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/groundwire-smoke.XXXXXX")"
SERVER_PID=""
MODEL_PID=""

stop_model() {
  if [[ -n "$MODEL_PID" ]] && kill -0 "$MODEL_PID" 2>/dev/null; then
    kill -TERM "$MODEL_PID" 2>/dev/null
    wait "$MODEL_PID" 2>/dev/null
  fi
  MODEL_PID=""
}
stop_server() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null
    for _ in $(seq 1 60); do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.25
    done
    kill -0 "$SERVER_PID" 2>/dev/null && kill -KILL "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID" 2>/dev/null
  fi
  SERVER_PID=""
}
cleanup() {
  stop_server
  stop_model
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() {
  echo "smoke: $*" >&2
  exit 1
}

[[ -x "$PY" && -x "$GROUNDWIRE" ]] || die ".venv is missing: run make setup"

# ---- tool-calling model stand-in ----------------------------------------------
# A scripted OpenAI-compatible chat model on 127.0.0.1 (ephemeral port) for the
# client-tool smokes; it exits with this script even if the script is killed.
start_model() {
  "$PY" -m tests.support.tool_calling_model --port-file "$WORK/model.port" --parent-pid $$ \
    >"$WORK/model.log" 2>&1 &
  MODEL_PID=$!
  for _ in $(seq 1 100); do
    [[ -s "$WORK/model.port" ]] && break
    kill -0 "$MODEL_PID" 2>/dev/null || break
    sleep 0.1
  done
  [[ -s "$WORK/model.port" ]] || { cat "$WORK/model.log" >&2; die "the tool-calling model stand-in did not start"; }
  MODEL_PORT="$(cat "$WORK/model.port")"
}

# ---- server ------------------------------------------------------------------
PORT="$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
ADDR="127.0.0.1:$PORT"
if [[ "${SMOKE_CONFIG:-}" == "default" ]]; then
  CONFIG_ARGS=()
  AGENT=demo-assistant
  TOOL_AGENT=""  # the embedded default has no tool-calling model: those smokes skip
else
  AGENT=smoke-assistant
  TOOL_AGENT=tool-smoke
  start_model
  HANDBOOK="$("$PY" -c 'from groundwire.app.defaults import HANDBOOK_DIR; print(HANDBOOK_DIR)')"
  cat >"$WORK/groundwire.toml" <<TOML
[server]
grace_period_seconds = 2

# Loopback-only test server: no API keys.
[auth]
mode = "disabled"

[embedders.hash]
kind = "hashing"

[indexes.demo]
embedder = "hash"
sources = [{ kind = "directory", path = "$HANDBOOK", glob = "**/*.md" }]
ingestion = { strategy = "on_startup" }

# The offline extractive model: answers (with [n] citations) from the evidence,
# no network. The agent retrieves lexically: the hashing embedder is fast but
# carries no meaning, so semantic relevance would not reflect the question.
[models.offline]
kind = "offline"

[agents.smoke-assistant]
name = "Smoke Assistant"
description = "Answers handbook questions for the client smoke tests."
model = "offline/extractive-v1"

[agents.smoke-assistant.rag]
index = "demo"
retrieval_mode = "lexical"
mode = "grounded"
no_context_behavior = "return_not_found"

# A scripted stand-in for an OpenAI-compatible model that calls tools
# (tests/support/tool_calling_model.py), on loopback: no API key.
[models.standin]
kind = "openai-compatible"
base_url = "http://127.0.0.1:$MODEL_PORT/v1"
timeout_seconds = 10

# Client-executed tools: the caller declares order_status in each request.
[agents.tool-smoke]
name = "Tool Smoke"
description = "Looks up orders with the caller's order_status tool (client-tool smokes)."
model = "standin/scripted-tools-v1"
max_tool_steps = 2
TOML
  CONFIG_ARGS=(--config "$WORK/groundwire.toml")
fi
PYTHONUNBUFFERED=1 "$GROUNDWIRE" serve "${CONFIG_ARGS[@]}" --address "$ADDR" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!

"$PY" - "$ADDR" "$SERVER_PID" <<'PYEOF' || { tail -n 40 "$WORK/server.log" >&2; die "server did not become healthy"; }
import os, sys, time
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

addr, pid = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + 120
with grpc.insecure_channel(addr) as channel:
    stub = health_pb2_grpc.HealthStub(channel)
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except OSError:
            sys.exit("server exited")
        try:
            res = stub.Check(health_pb2.HealthCheckRequest(), timeout=2)
            if res.status == health_pb2.HealthCheckResponse.SERVING:
                sys.exit(0)
        except grpc.RpcError:
            pass
        time.sleep(0.3)
sys.exit("timed out")
PYEOF
echo "smoke: server SERVING at $ADDR (pid $SERVER_PID)"
export GROUNDWIRE_ADDR="$ADDR"
# The agent every language's ExecuteStream smoke asks (one configured above).
export GROUNDWIRE_AGENT="$AGENT"
# The agent every language's client-tool smoke asks (its model calls order_status).
export GROUNDWIRE_TOOL_AGENT="$TOOL_AGENT"

# ---- languages -----------------------------------------------------------------
need() { command -v "$1" >/dev/null 2>&1 || { echo "$1 is not installed"; return 1; }; }

smoke_python() {
  local rc=0
  "$PY" clients/python/smoke.py || rc=1
  "$PY" clients/python/smoke_client_tools.py || rc=1
  return "$rc"
}
smoke_typescript() {
  need node && need npm || return 1
  scripts/gen_clients.sh --npm-only || return 1
  cd clients/typescript || return 1
  rm -rf dist
  node_modules/.bin/tsc -p tsconfig.json || return 1
  node --test dist/test/smoke.test.js dist/test/client_tools.test.js
}
smoke_go() {
  need go || return 1
  cd clients/go || return 1
  go test -count=1 -v ./...
}
smoke_java() {
  need mvn && need java || return 1
  cd clients/java || return 1
  mvn -B -ntp -Dstyle.color=never test
}

passed=0
failed=0
for lang in $LANGS; do
  log="$WORK/$lang.log"
  start=$SECONDS
  if declare -F "smoke_$lang" >/dev/null; then
    ("smoke_$lang") >"$log" 2>&1
    rc=$?
  else
    echo "unknown language $lang" >"$log"
    rc=2
  fi
  took=$((SECONDS - start))
  if [[ $rc -eq 0 ]]; then
    passed=$((passed + 1))
    echo "smoke $lang: PASS (${took}s)"
    [[ -n "${SMOKE_VERBOSE:-}" ]] && sed 's/^/    /' "$log"
  else
    failed=$((failed + 1))
    echo "smoke $lang: FAIL (${took}s, exit $rc)"
    if [[ -n "${SMOKE_VERBOSE:-}" ]]; then sed 's/^/    /' "$log"; else tail -n 60 "$log" | sed 's/^/    /'; fi
  fi
done

if ! kill -0 "$SERVER_PID" 2>/dev/null; then
  echo "smoke: the server died during the run" >&2
  tail -n 40 "$WORK/server.log" >&2
  failed=$((failed + 1))
fi
stop_server
stop_model
echo "smoke: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
