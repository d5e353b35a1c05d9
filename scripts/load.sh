#!/usr/bin/env bash
# Bounded load test on loopback: start one groundwire server over the demo
# handbook (hashing embedder, in-memory store, an agent on the offline
# extractive model), drive it with ghz for a fixed duration per scenario,
# print QPS and latency percentiles per scenario as a Markdown table, and stop
# the server. Client and server share this machine.
#
#   scripts/load.sh                              every scenario, 10 s each, 16 callers
#   LOAD_DURATION=3s LOAD_SCENARIOS="execute" scripts/load.sh
#
# Scenarios (LOAD_SCENARIOS, space separated; default the first three):
#   retrieve-lexical   RetrieverService/Retrieve, LEXICAL, top_k 10
#   retrieve-hybrid    RetrieverService/Retrieve, HYBRID (hashing embedder + BM25, RRF), top_k 10
#   execute            AgentService/Execute: retrieve (lexical) -> acceptance -> context
#                      budget -> offline extractive model -> result with citations
#   health             grpc.health.v1.Health/Check (a baseline: the gRPC stack alone)
# Each scenario cycles through a few questions (ghz round-robins a data array).
#
# Environment: LOAD_DURATION (10s), LOAD_CONCURRENCY (16), LOAD_CONNECTIONS (1),
# LOAD_GHZ_CPUS (1: ghz gets one core, the server the rest), LOAD_LOG_LEVEL
# (INFO: the access log of every call is on, as in production; the log goes to a
# temp file), LOAD_KEEP=1 keeps the work directory (config, ghz JSON, server log).
#
# Needs .venv (make setup) and go (ghz is built by scripts/install_ops_tools.sh
# into .tools/bin at a pinned version). The target is always the server this
# script starts on 127.0.0.1; it never sends traffic anywhere else.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
PY="$ROOT/.venv/bin/python"
GROUNDWIRE="$ROOT/.venv/bin/groundwire"
GHZ="$ROOT/.tools/bin/ghz"
DURATION="${LOAD_DURATION:-10s}"
CONCURRENCY="${LOAD_CONCURRENCY:-16}"
CONNECTIONS="${LOAD_CONNECTIONS:-1}"
GHZ_CPUS="${LOAD_GHZ_CPUS:-1}"
LOG_LEVEL="${LOAD_LOG_LEVEL:-INFO}"
SCENARIOS="${LOAD_SCENARIOS:-retrieve-lexical retrieve-hybrid execute}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/groundwire-load.XXXXXX")"
SERVER_PID=""

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
  if [[ -n "${LOAD_KEEP:-}" ]]; then echo "load: kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() {
  echo "load: $*" >&2
  exit 1
}

[[ -x "$PY" && -x "$GROUNDWIRE" ]] || die ".venv is missing: run make setup"
[[ "$CONCURRENCY" =~ ^[0-9]+$ && "$CONCURRENCY" -ge 1 && "$CONCURRENCY" -le 256 ]] ||
  die "LOAD_CONCURRENCY must be 1..256"
[[ "$DURATION" =~ ^[0-9]+(ms|s|m)$ ]] || die "LOAD_DURATION must look like 10s, 500ms or 1m"
for s in $SCENARIOS; do
  case "$s" in retrieve-lexical | retrieve-hybrid | execute | health) ;; *) die "unknown scenario $s" ;; esac
done
# ghz only: a bare install_ops_tools.sh also builds promtool (minutes, cold).
scripts/install_ops_tools.sh ghz || die "could not build ghz (scripts/install_ops_tools.sh ghz)"
# Other work on this machine skews the figures: say how busy it was.
LOADAVG_BEFORE="$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo '?')"

# ---- server ------------------------------------------------------------------------
HANDBOOK="$("$PY" -c 'from groundwire.app.defaults import HANDBOOK_DIR; print(HANDBOOK_DIR)')"
cat >"$WORK/groundwire.toml" <<TOML
[server]
grace_period_seconds = 2

# Loopback-only load-test server: no API keys.
[auth]
mode = "disabled"

[logging]
level = "$LOG_LEVEL"

[embedders.hash]
kind = "hashing"

[indexes.demo]
embedder = "hash"
sources = [{ kind = "directory", path = "$HANDBOOK", glob = "**/*.md" }]
ingestion = { strategy = "on_startup" }

[models.offline]
kind = "offline"

[agents.load-assistant]
name = "Load Assistant"
model = "offline/extractive-v1"

[agents.load-assistant.rag]
index = "demo"
retrieval_mode = "lexical"
mode = "grounded"
no_context_behavior = "return_not_found"
TOML

PORT="$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
ADDR="127.0.0.1:$PORT"
"$GROUNDWIRE" serve --config "$WORK/groundwire.toml" --address "$ADDR" >"$WORK/server.log" 2>&1 &
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
            if stub.Check(health_pb2.HealthCheckRequest(), timeout=2).status == 1:
                sys.exit(0)
        except grpc.RpcError:
            pass
        time.sleep(0.3)
sys.exit("timed out")
PYEOF
echo "load: server SERVING at $ADDR (pid $SERVER_PID); $DURATION per scenario, concurrency $CONCURRENCY," \
  "$CONNECTIONS connection(s), ghz on $GHZ_CPUS CPU(s), server log level $LOG_LEVEL"

# ---- scenarios -----------------------------------------------------------------------
scenario_call() {
  case "$1" in
    retrieve-lexical | retrieve-hybrid) echo groundwire.v1.RetrieverService/Retrieve ;;
    execute) echo groundwire.v1.AgentService/Execute ;;
    health) echo grpc.health.v1.Health/Check ;;
  esac
}
# ghz reads the contract from the .proto files rather than from server
# reflection: it resolves the method's own symbol (package.Service.Method),
# which Python's reflection service does not answer ("Symbol not found").
scenario_proto() {
  case "$1" in
    retrieve-lexical | retrieve-hybrid) echo --proto proto/groundwire/v1/retriever.proto --import-paths proto ;;
    execute) echo --proto proto/groundwire/v1/agent.proto --import-paths proto ;;
    health) echo --proto third_party/grpc-proto/grpc/health/v1/health.proto --import-paths third_party/grpc-proto ;;
  esac
}
# A JSON array: ghz sends its elements round-robin, one per request.
scenario_data() {
  local q
  case "$1" in
    retrieve-lexical | retrieve-hybrid)
      local mode=RETRIEVAL_MODE_LEXICAL
      [[ "$1" == retrieve-hybrid ]] && mode=RETRIEVAL_MODE_HYBRID
      printf '['
      local first=1
      for q in "POL-HR-014" "parental leave weeks" "VPN-E42 error" "expense report deadline" "reset my password"; do
        [[ $first -eq 1 ]] || printf ','
        first=0
        printf '{"query":{"index_name":"demo","text":"%s","mode":"%s","top_k":10}}' "$q" "$mode"
      done
      printf ']'
      ;;
    execute)
      printf '['
      local first=1
      for q in "How many weeks of parental leave do I get?" "What does VPN error VPN-E42 mean?" \
        "When are expense reports due?"; do
        [[ $first -eq 1 ]] || printf ','
        first=0
        printf '{"input":{"agent_id":"load-assistant","message":"%s"}}' "$q"
      done
      printf ']'
      ;;
    health) printf '{"service":""}' ;;
  esac
}

failed=0
for s in $SCENARIOS; do
  echo "load: $s ($(scenario_call "$s")) for $DURATION ..." >&2
  # shellcheck disable=SC2046 # scenario_proto prints flags to split
  if ! "$GHZ" --insecure $(scenario_proto "$s") --call "$(scenario_call "$s")" --data "$(scenario_data "$s")" \
    --duration "$DURATION" --concurrency "$CONCURRENCY" --connections "$CONNECTIONS" \
    --cpus "$GHZ_CPUS" --timeout 20s --format json --name "$s" \
    --output "$WORK/$s.json" "$ADDR" 2>"$WORK/$s.err"; then
    cat "$WORK/$s.err" >&2
    echo "load: ghz failed for $s" >&2
    failed=1
  fi
  kill -0 "$SERVER_PID" 2>/dev/null || { tail -n 40 "$WORK/server.log" >&2; die "the server died during $s"; }
done
stop_server

LOADAVG_AFTER="$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo '?')"

# ---- report ----------------------------------------------------------------------------
# shellcheck disable=SC2086 # one argument per scenario
"$PY" - "$WORK" "$DURATION" "$CONCURRENCY" "$LOADAVG_BEFORE" "$LOADAVG_AFTER" $SCENARIOS <<'PYEOF' || failed=1
import json, os, platform, sys

work, duration, concurrency, load_before, load_after, *scenarios = sys.argv[1:]
calls = {
    "retrieve-lexical": "Retrieve (lexical, top_k 10)",
    "retrieve-hybrid": "Retrieve (hybrid, top_k 10)",
    "execute": "Execute (offline model)",
    "health": "Health/Check",
}
ms = lambda ns: f"{ns / 1e6:.1f}"
rows, bad = [], False
for s in scenarios:
    path = os.path.join(work, f"{s}.json")
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        rows.append(f"| {calls[s]} | - | - | - | - | - | ghz failed |")
        bad = True
        continue
    r = json.load(open(path))
    pct = {int(p["percentage"]): p["latency"] for p in r.get("latencyDistribution") or []}
    codes = r.get("statusCodeDistribution") or {}
    ok = codes.get("OK", 0)
    # When the duration ends, ghz closes its connection under the calls still in
    # flight (at most one per caller) and counts them as Unavailable "use of
    # closed network connection": cut off by the client, not failed by the server.
    ends = ("closed network connection", "connection is closing", "transport is closing", "context canceled")
    cut = sum(
        n for msg, n in (r.get("errorDistribution") or {}).items() if any(e in msg for e in ends)
    )
    cut = min(cut, int(concurrency))
    errors = sum(codes.values()) - ok - cut
    bad |= errors > 0 or not pct
    # QPS counts completed OK calls only: ok / wall time of the run.
    qps = ok / (r["total"] / 1e9)
    rows.append(
        f"| {calls[s]} | {ok:,} | {qps:,.0f} | {ms(pct.get(50, 0))} | "
        f"{ms(pct.get(95, 0))} | {ms(pct.get(99, 0))} | {errors} |"
    )
    if errors:
        for msg, n in (r.get("errorDistribution") or {}).items():
            print(f"load: {s}: {n} x {msg}", file=sys.stderr)
print()
print(
    f"ghz, {duration} per scenario, {concurrency} concurrent callers over one HTTP/2 connection, "
    f"loopback; client and server on one {os.cpu_count()}-core machine ({platform.machine()})."
)
print(
    f"1-minute load average before the run {load_before}, after it {load_after} "
    "(the run itself adds about 2; a much higher figure means other work shared the CPUs)."
)
print()
print("| scenario | OK calls | QPS | p50 ms | p95 ms | p99 ms | errors |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
print("\n".join(rows))
sys.exit(1 if bad else 0)
PYEOF

if [[ $failed -ne 0 ]]; then
  echo "load: FAILED (see above)" >&2
  exit 1
fi
echo "load: done"
