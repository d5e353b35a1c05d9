"""The Python client builds as a wheel and installs with pip, offline: the wheel
is built from a copy of clients/python (no network, no build isolation), then
installed with `pip install --no-index` into a fresh virtual environment whose
only other packages are the client's dependencies, linked from this
environment. The installed client then talks to a real gRPC server."""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

CLIENT_DIR = Path(__file__).resolve().parents[2] / "clients" / "python"
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PIP_NO_INDEX": "1", "PYTHONPATH": ""}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=env, **kw)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{cmd}\n{done.stdout}\n{done.stderr}"
    return done  # type: ignore[no-any-return]


def requirement_names(dist: str) -> set[str]:
    """`dist` and every distribution it needs (extras aside), recursively."""
    out: set[str] = set()
    todo = [dist]
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in out:
            continue
        out.add(key)
        for req in md.requires(name) or []:
            if "extra ==" not in req:
                todo.append(re.split(r"[\s;<>=!~\[(]", req, maxsplit=1)[0])
    return out


def link_distributions(names: set[str], into: Path) -> None:
    """Symlink each installed distribution's top-level files and its metadata."""
    into.mkdir()
    for name in names:
        dist = md.distribution(name)
        for f in dist.files or ():
            top = f.parts[0]
            if top.endswith(".pth") or top == ".." or top.startswith("__editable__"):
                continue
            target = into / top
            if not target.exists():
                target.symlink_to(Path(str(dist.locate_file(top))))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    source = work / "src"
    shutil.copytree(
        CLIENT_DIR,
        source,
        ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"),
    )
    run([*PIP, "wheel", "--no-deps", "--no-build-isolation", "-w", str(work / "dist"), str(source)])
    (built,) = (work / "dist").glob("groundwire_client-*.whl")
    return built


def test_the_wheel_holds_the_client_and_the_stubs(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in (
        "client.py",
        "sync.py",
        "_common.py",
        "py.typed",
        "v1/agent_pb2.py",
        "v1/agent_pb2.pyi",
    ):
        assert f"groundwire_client/{module}" in names, module
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "Requires-Dist: grpcio" in text and "Requires-Dist: protobuf" in text


def test_pip_installs_the_wheel_offline_and_the_client_works(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    site = Path(
        run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        ).stdout.strip()
    )
    deps = tmp_path / "deps"
    link_distributions(
        requirement_names("grpcio-status") | requirement_names("grpcio-health-checking"), deps
    )
    (site / "groundwire_deps.pth").write_text(f"{deps}\n")
    run([*PIP, "--python", str(python), "install", "--no-index", str(wheel)])
    probe = (
        "import groundwire_client, sys;"
        "from groundwire_client import GroundwireSyncClient, GroundwireClient, Document;"
        "from groundwire_client.v1 import agent_pb2;"
        "print(groundwire_client.__file__);"
        "c = GroundwireSyncClient('127.0.0.1:9', timeout=0.5);"
        "\ntry:\n    c.health()\nexcept groundwire_client.GroundwireError as e:\n    print(e.code.name)"
    )
    out = run([str(python), "-c", probe], cwd=tmp_path).stdout.split()
    assert out[0].startswith(str(site)), out  # the installed copy, not this checkout
    assert out[1] == "UNAVAILABLE"  # a real call through grpcio, decoded
