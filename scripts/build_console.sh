#!/usr/bin/env bash
# Builds the web console (console/, TypeScript + Vite over the generated stubs in
# clients/typescript/src/gen) into server/groundwire/api/http/console_assets, the
# package data that `groundwire serve` serves at /console. Needs Node.js and npm;
# the npm packages are the exact versions of console/package-lock.json.
#
#   scripts/build_console.sh           build (commit the result)
#   scripts/build_console.sh --check   build, then fail when the committed assets
#                                      differ from the fresh build (CI)
set -euo pipefail
cd "$(dirname "$0")/.."
ASSETS=server/groundwire/api/http/console_assets
command -v npm >/dev/null || { echo "build_console.sh needs Node.js and npm" >&2; exit 1; }
(cd console && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build)
if [ "${1:-}" = "--check" ]; then
  git diff --exit-code --stat -- "$ASSETS" \
    || { echo "the console assets are stale: run scripts/build_console.sh and commit" >&2; exit 1; }
  untracked="$(git status --porcelain -- "$ASSETS")"
  if [ -n "$untracked" ]; then
    echo "$untracked"
    echo "untracked console assets: run scripts/build_console.sh and commit" >&2
    exit 1
  fi
fi
