"""The README's "Your own documents in five minutes", run as written, so the
walkthrough cannot drift from the product.

The section's fenced blocks are extracted from README.md and run in order in a
fresh folder:

- the install block (`make setup`, `export PATH=...`, `mkdir ... && cd ...`) is
  checked line by line and emulated: the suite already runs in the virtual
  environment `make setup` creates, so its `bin` goes first on PATH, and the
  fresh folder is a temporary directory;
- the `groundwire serve --config groundwire.toml` block starts the real server
  with `ServerProcess` (a subprocess of the same command, on a free loopback
  port, in the same folder);
- every other `sh` block runs in bash (`set -euo pipefail`), with the default
  address `127.0.0.1:50051` replaced by the test server's;
- every line of a `text` block must appear (leading whitespace ignored) in the
  output of the `sh` blocks run since the previous `text` block.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.servers import ServerProcess, free_port
from tests.support.toolchains import require

pytestmark = pytest.mark.timeout(120)

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "## Your own documents in five minutes"
DEFAULT_ADDRESS = "127.0.0.1:50051"
INSTALL = [
    "make setup",
    'export PATH="$PWD/.venv/bin:$PATH"',
    "mkdir -p ../my-groundwire && cd ../my-groundwire",
]
SERVE = "groundwire serve --config groundwire.toml"


@dataclass(frozen=True)
class Block:
    lang: str
    text: str


def section_blocks(readme: str) -> list[Block]:
    """The fenced blocks of the walkthrough section, in order."""
    start = readme.index(SECTION)
    end = readme.find("\n## ", start + len(SECTION))
    body = readme[start : end if end >= 0 else len(readme)]
    return [
        Block(m.group(1), m.group(2))
        for m in re.finditer(r"^```(\w*)\n(.*?)^```$", body, re.MULTILINE | re.DOTALL)
    ]


def output_lines(*texts: str) -> set[str]:
    """Every line of the outputs, stripped (progress bars redraw with \\r)."""
    return {line.strip() for text in texts for line in re.split(r"[\r\n]+", text) if line.strip()}


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    """The reader's fresh folder: the walkthrough only uses relative paths in it."""
    work = tmp_path / "my-groundwire"
    work.mkdir()
    yield work


def test_section_is_where_the_reader_looks() -> None:
    readme = README.read_text()
    headings = [line for line in readme.splitlines() if line.startswith("## ")]
    assert headings[headings.index("## Quick start") + 1] == SECTION
    blocks = section_blocks(readme)
    assert [b.lang for b in blocks if b.lang not in {"sh", "text"}] == []
    assert [line.split("#")[0].strip() for line in blocks[0].text.splitlines()] == INSTALL
    assert "setup:" in (README.parent / "Makefile").read_text()


def test_walkthrough_runs_as_written(folder: Path) -> None:
    require("grpcurl", purpose="the README walkthrough")
    blocks = section_blocks(README.read_text())
    install, rest = blocks[0], blocks[1:]
    assert [line.split("#")[0].strip() for line in install.text.splitlines()] == INSTALL

    port = free_port()
    address = f"127.0.0.1:{port}"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(folder),  # nothing the walkthrough writes lands outside the folder
    }
    env.pop("GROUNDWIRE_KEY", None)
    server: ServerProcess | None = None
    outputs: list[str] = []
    served_at = first_answer = 0.0
    checked = 0
    try:
        for block in rest:
            if block.lang == "text":
                seen = output_lines(*outputs)
                missing = [
                    line.strip()
                    for line in block.text.splitlines()
                    if line.strip() and line.strip() not in seen
                ]
                assert not missing, f"expected in the output: {missing}\n\n" + "\n".join(outputs)
                outputs = []
                checked += 1
                continue
            if block.text.strip() == SERVE:
                assert server is None
                served_at = time.monotonic()
                server = ServerProcess(folder / "groundwire.toml", port, folder / "server.log")
                server.start(timeout=60)
                continue
            assert server is not None or "127.0.0.1:50051" not in block.text, (
                "a command needs the server before the serve block"
            )
            script = "set -euo pipefail\n" + block.text.replace(DEFAULT_ADDRESS, address)
            res = subprocess.run(
                ["bash", "-c", script],
                cwd=folder,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert res.returncode == 0, (
                f"block failed ({res.returncode}):\n{block.text}\n"
                f"stdout:\n{res.stdout}\nstderr:\n{res.stderr}"
            )
            outputs += [res.stdout, res.stderr]
            if "groundwire ingest docs" in block.text:
                # The progress bar the reader is promised, on stderr, to the last file.
                assert re.search(r"docs: 100%\|.*\| 3/3 ", res.stderr), res.stderr
            if not first_answer and "AgentService/Execute" in block.text:
                first_answer = time.monotonic()
        assert server is not None, "the walkthrough never starts the server"
        assert server.alive()
        print(f"\nserve -> first grounded answer: {first_answer - served_at:.1f} s")
    finally:
        if server is not None:
            server.stop(timeout=15)
    # Every command block is followed by the output a reader is told to expect,
    # except the file-writing ones (documents, configuration) and serve.
    assert checked >= 6
    key = (folder / "my-app.key").read_text().rsplit(": ", 1)[1].strip()
    assert key.startswith("gw_")
    assert key not in "\n".join(server.log_lines())  # the key never reaches the log


def test_walkthrough_key_sees_the_folder_documents_only_after_reingest(folder: Path) -> None:
    """What step 6 tells the reader happens between the reload and the re-ingest:
    the new key's tenant holds nothing yet, and the answer says so."""
    require("grpcurl", purpose="the README walkthrough")
    blocks = section_blocks(README.read_text())
    port = free_port()
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(folder),
    }
    server: ServerProcess | None = None

    def run(text: str) -> str:
        res = subprocess.run(
            [
                "bash",
                "-c",
                "set -euo pipefail\n" + text.replace(DEFAULT_ADDRESS, f"127.0.0.1:{port}"),
            ],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert res.returncode == 0, res.stderr
        return res.stdout + res.stderr

    sh = [b.text for b in blocks[1:] if b.lang == "sh"]
    documents, config = sh[0], sh[1]
    ingest = next(t for t in sh if t.strip().startswith("groundwire ingest docs"))
    keys = next(t for t in sh if "groundwire keys create" in t)
    try:
        run(documents)
        run(config)
        server = ServerProcess(folder / "groundwire.toml", port, folder / "server.log")
        server.start(timeout=60)
        run(ingest)
        run(keys)
        ask = (
            "grpcurl -plaintext -H \"authorization: Bearer $(sed 's/.*: //' my-app.key)\" "
            '-d \'{"input":{"agent_id":"docs-assistant","message":"What do I do about error E42 on the VPN?"}}\' '
            f"127.0.0.1:{port} groundwire.v1.AgentService/Execute"
        )
        out = run(ask)
        assert '"tenant_scope_empty": true' in out
        assert (
            "I could not find this in the available documents, so I cannot answer it from them."
            in out
        )
        assert '"citations"' not in out
        anonymous = subprocess.run(
            [
                "bash",
                "-c",
                ask.replace("-H \"authorization: Bearer $(sed 's/.*: //' my-app.key)\" ", ""),
            ],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert anonymous.returncode != 0 and "Unauthenticated" in anonymous.stderr
    finally:
        if server is not None:
            server.stop(timeout=15)
