#!/usr/bin/env bash
# `make fresh-check`: the suite as a new machine runs it. A clone of the committed
# HEAD in a scratch folder runs `make test` (or the command given) with every cache
# empty: a new HOME (pip's cache, ~/.m2, npm's cache), GOPATH, GOMODCACHE and GOCACHE,
# a Maven repository (-Dmaven.repo.local) and an OpenSearch layout of its own
# (GROUNDWIRE_CACHE), so every tool the tests need is fetched from the package
# registries and built as on a fresh machine. Needs only the toolchains (python3, Go,
# Node.js, Maven, Java).
#
#   scripts/fresh_check.sh                 make test in a fresh clone
#   scripts/fresh_check.sh bash .ci/run    the whole CI run
#   FRESH_KEEP=1 scripts/fresh_check.sh    keep the scratch folder (printed)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/groundwire-fresh.XXXXXX")"
# As root the embedded PostgreSQL and OpenSearch run as unprivileged users, who must
# be able to enter the folders below.
chmod 755 "$SCRATCH"
cleanup() {
  if [[ -n "${FRESH_KEEP:-}" ]]; then echo "fresh-check: kept $SCRATCH" >&2; else rm -rf "$SCRATCH"; fi
}
trap cleanup EXIT

git clone --quiet "$ROOT" "$SCRATCH/src"
mkdir -p "$SCRATCH/home" "$SCRATCH/go" "$SCRATCH/go-cache" "$SCRATCH/m2" "$SCRATCH/cache"
export HOME="$SCRATCH/home"
export XDG_CACHE_HOME="$SCRATCH/home/.cache"
export PIP_CACHE_DIR="$SCRATCH/home/.cache/pip"
export npm_config_cache="$SCRATCH/home/.npm"
export GOPATH="$SCRATCH/go"
export GOMODCACHE="$SCRATCH/go/pkg/mod"
export GOCACHE="$SCRATCH/go-cache"
export MAVEN_OPTS="${MAVEN_OPTS:+$MAVEN_OPTS }-Dmaven.repo.local=$SCRATCH/m2"
export GROUNDWIRE_CACHE="$SCRATCH/cache"

cd "$SCRATCH/src"
[[ $# -gt 0 ]] || set -- make test
echo "fresh-check: $* in $SCRATCH/src (empty caches)"
start=$SECONDS
rc=0
"$@" || rc=$?
echo "fresh-check: exit $rc after $((SECONDS - start)) s"
exit $rc
