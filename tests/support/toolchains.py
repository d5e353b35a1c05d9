"""The one rule for a test that needs a tool outside the Python venv's packages
(Node.js, Go, Maven, grpcurl, buf): in CI (env CI=true, as GitHub Actions and
.ci/run set it) a missing tool FAILS the test, so CI cannot go green without
running it; anywhere else the test is skipped with a reason that names exactly
which tools are missing."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

# Where tools are looked for, in order: the venv's own bin (buf and grpcurl come
# from PyPI), then PATH, then the Go tarball's default home, which is often not
# on PATH.
VENV_BIN = Path(sys.executable).parent
FALLBACK_DIRS = (Path("/usr/local/go/bin"),)


def in_ci() -> bool:
    """True when the CI environment variable says so (`true`, `1` or `yes`)."""
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def find(tool: str) -> Path | None:
    """The executable `tool` in the venv, on PATH or in a fallback directory."""
    for path in (str(VENV_BIN), os.environ.get("PATH", ""), *map(str, FALLBACK_DIRS)):
        found = shutil.which(tool, path=path)
        if found:
            return Path(found)
    return None


def require(*tools: str, purpose: str) -> dict[str, Path]:
    """The path of each tool; if any is missing, fail under CI, else skip.

    `purpose` says what the tools are for, so the message reads e.g.
    "the polyglot client smoke test needs go, mvn: not installed (looked in ...)".
    """
    found = {tool: find(tool) for tool in tools}
    missing = [tool for tool, path in found.items() if path is None]
    if missing:
        where = ", ".join(["the venv", "PATH", *map(str, FALLBACK_DIRS)])
        reason = f"{purpose} needs {', '.join(missing)}: not installed (looked in {where})"
        if in_ci():
            pytest.fail(f"{reason}; CI=true, so a missing toolchain is a failure", pytrace=False)
        pytest.skip(reason)
    return {tool: path for tool, path in found.items() if path is not None}


def env_with(tools: dict[str, Path]) -> dict[str, str]:
    """os.environ with the directories of `tools` appended to PATH (when not on it
    already), for scripts that call the tools by name."""
    env = dict(os.environ)
    path = [d for d in env.get("PATH", "").split(os.pathsep) if d]
    path += [str(p.parent) for p in tools.values() if str(p.parent) not in path]
    env["PATH"] = os.pathsep.join(dict.fromkeys(path))
    return env
