"""Every shell block of the README and the manual (docs/) runs, as written, against a
live `groundwire serve`: a stale command, flag, RPC, field or index name fails CI.

The server serves what the blocks name: a `demo` index over the bundled handbook,
the `demo-assistant` agent, an offline default reranker, gRPC and HTTP ports. Each
block runs whole in bash (`set -eo pipefail`) from a scratch folder that holds
the files the blocks name (`./handbook`, `report.pdf`, `q3.pdf`, `eval/` of the
repository), with its addresses moved to the test server's ports and these
stand-ins on PATH before the real commands:

- the client subcommands (`search`, `ask`, `push`, ...) run against the test
  server (`--address` added when the block names none);
- `groundwire serve --config F` checks F with `groundwire check-config` (the
  server under test is already serving); `groundwire eval ...` and any other
  subcommand that is not a client call of the test server are parsed by the CLI's
  own parser (flags must exist) but not run: an evaluation takes minutes;
- `grpcurl` with a `<placeholder>` in its arguments (an id from an earlier call)
  checks that the method exists (`grpcurl describe`) and that the request JSON,
  placeholders replaced, is JSON; every other grpcurl call runs for real;
- `curl` fails on an HTTP error status (`--fail-with-body`).

Blocks left out, each for its reason (LEFT_OUT): the quick start's `make` lines (CI
runs `make test` itself, and `make run` serves the embedded default on fixed ports),
the identity-provider how-to's token request (it needs a Keycloak realm made by hand;
the token matrix gets real tokens from one it sets up)
and the walkthrough section (tests/e2e/test_walkthrough.py runs it in order,
checking its output too).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from groundwire.app.defaults import HANDBOOK_DIR
from tests.support.servers import ServerProcess, free_port, toml_config
from tests.support.toolchains import require

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
WALKTHROUGH = "## Your own documents in five minutes"
LEFT_OUT = {
    "make run": "CI runs `make test` itself; `make run` serves the embedded default on fixed ports",
    # tests/security/test_token_matrix.py gets real tokens from a Keycloak it sets up.
    "TOKEN=$(curl -s -d grant_type=password": "needs a Keycloak realm made by hand",
}
SHELLS = {"sh", "bash", "shell"}


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    text: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def shell_blocks(path: Path) -> list[Block]:
    text = path.read_text()
    if path.name == "README.md":
        # The walkthrough has its own test (module docstring).
        start = text.index(WALKTHROUGH)
        end = text.find("\n## ", start + len(WALKTHROUGH))
        text = text[:start] + "\n" * text[start:end].count("\n") + text[end:]
    blocks = []
    for m in re.finditer(r"^```(\w+)\n(.*?)^```", text, re.S | re.M):
        if m.group(1) in SHELLS:
            line = text.count("\n", 0, m.start()) + 1
            blocks.append(Block(str(path.relative_to(ROOT)), line, m.group(2)))
    return blocks


ALL_BLOCKS = [b for page in PAGES for b in shell_blocks(page)]
RUN_BLOCKS = [b for b in ALL_BLOCKS if not any(b.text.startswith(k) for k in LEFT_OUT)]


def test_the_blocks_are_found() -> None:
    # The pages keep their commands in fenced shell blocks; the run below covers them.
    pages = {b.page for b in RUN_BLOCKS}
    assert {"README.md", "docs/how-to/grpcurl.md", "docs/how-to/http.md"} <= pages
    assert sum(b.text.count("grpcurl ") for b in RUN_BLOCKS) >= 30
    assert len(ALL_BLOCKS) - len(RUN_BLOCKS) == len(LEFT_OUT)


STAND_INS = r"""
set -eo pipefail
_gw_real="$GW_BIN/groundwire"
groundwire() {
  case "${1:-}" in
    serve)
      shift
      local cfg=""
      while [ $# -gt 0 ]; do
        case "$1" in --config) cfg="$2"; shift 2;; *) shift;; esac
      done
      "$_gw_real" check-config "$cfg" >/dev/null ;;
    search|ask|indexes|operations|push|ingest|reload)
      case " $* " in
        *" --address "*) "$_gw_real" "$@" ;;
        *) "$_gw_real" "$@" --address "127.0.0.1:$GW_PORT" ;;
      esac ;;
    *)
      "$GW_BIN/python" "$GW_PARSE" "$@" ;;
  esac
}
curl() { command curl --fail-with-body "$@"; }
_grpcurl_real="$GW_BIN/grpcurl"
grpcurl() {
  local arg placeholder=0
  for arg in "$@"; do
    case "$arg" in *"<"*">"*) placeholder=1;; esac
  done
  if [ "$placeholder" = 0 ]; then
    "$_grpcurl_real" "$@"
    return
  fi
  local data="" method="${*: -1}"
  while [ $# -gt 0 ]; do
    case "$1" in -d) data="$2"; shift 2;; *) shift;; esac
  done
  "$_grpcurl_real" -plaintext "127.0.0.1:$GW_PORT" describe "${method%/*}" \
    | grep -q "rpc ${method##*/} ("
  printf '%s' "$data" | sed -E 's/<[^>]*>/x/g' | jq -e . >/dev/null
}
"""

PARSE = '''
"""Parse a groundwire command line with the CLI's own parser, run nothing."""
import argparse, sys

class Parsed(Exception):
    pass

def parse(self, args=None, namespace=None):
    original(self, args, namespace)  # exits 2 on an unknown command or flag
    raise Parsed

original = argparse.ArgumentParser.parse_args
argparse.ArgumentParser.parse_args = parse
from groundwire.app.cli import main
try:
    main(sys.argv[1:])
except Parsed:
    sys.exit(0)
sys.exit("the command ran instead of being parsed")
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, int]]:
    tmp = tmp_path_factory.mktemp("docs")
    http_port = free_port()
    cfg = toml_config(
        tmp,
        f"""
[server]
grace_period_seconds = 1

[auth]
mode = "disabled"

[logging]
level = "WARNING"

[http]
address = "127.0.0.1:{http_port}"

[embedders.hash]
kind = "hashing"

[indexes.demo]
embedder = "hash"
sources = [{{ kind = "directory", path = "{HANDBOOK_DIR}", glob = "**/*.md" }}]
ingestion = {{ strategy = "on_startup" }}

[rerankers.overlap]
kind = "offline"

[reranking]
default_reranker = "overlap"

[models.offline]
kind = "offline"

[agents.demo-assistant]
name = "Demo Assistant"
model = "offline/extractive-v1"

[agents.demo-assistant.rag]
index = "demo"
retrieval_mode = "hybrid"
mode = "grounded"
no_context_behavior = "return_not_found"
""",
    )
    proc = ServerProcess(cfg, free_port(), tmp / "server.log")
    proc.start(timeout=120)
    yield proc, http_port
    proc.stop(timeout=15)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files the blocks name (module docstring)."""
    from fpdf import FPDF

    work = tmp_path_factory.mktemp("docs-scratch")
    shutil.copytree(HANDBOOK_DIR, work / "handbook")
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.multi_cell(0, 8, "Quarterly report. Revenue grew in the third quarter.")
    for name in ("report.pdf", "q3.pdf"):
        (work / name).write_bytes(bytes(pdf.output()))
    (work / "eval").symlink_to(ROOT / "eval")
    (work / "parse_cli.py").write_text(textwrap.dedent(PARSE))
    return work


def localized(text: str, grpc_port: int, http_port: int) -> str:
    text = text.replace("127.0.0.1:50051", f"127.0.0.1:{grpc_port}")
    return text.replace("127.0.0.1:8080", f"127.0.0.1:{http_port}")


@pytest.mark.parametrize("block", RUN_BLOCKS, ids=[b.id for b in RUN_BLOCKS])
def test_block_runs_as_written(
    block: Block, server: tuple[ServerProcess, int], scratch: Path
) -> None:
    require("grpcurl", purpose="the manual's grpcurl blocks")
    require("jq", purpose="the manual's jq pipelines")
    proc, http_port = server
    script = STAND_INS + "\n" + localized(block.text, proc.port, http_port)
    env = {
        **os.environ,
        "GW_BIN": str(BIN),
        "GW_PORT": str(proc.port),
        "GW_PARSE": str(scratch / "parse_cli.py"),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(scratch),
    }
    for var in ("KEY", "GW_ADMIN_KEY", "GROUNDWIRE_KEY", "GROUNDWIRE_API_KEY"):
        env.pop(var, None)
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{block.id} failed:\n{done.stderr[-3000:]}\n{done.stdout[-1500:]}"
