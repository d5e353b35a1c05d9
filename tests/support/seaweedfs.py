"""A real S3 server for the tests: SeaweedFS (`weed server -s3`), built from the Go
module proxy at a pinned version by scripts/install_ops_tools.sh (cached in
.tools/bin like the other ops tools; a cold build takes minutes, so
tests/conftest.py starts it in the background when a test that needs it is
selected, and `weed_binary` waits on that build's lock).

Each server runs on 127.0.0.1 only, on free ports, in a temporary directory of
its own, with one S3 identity whose keys the test chooses, and the master's
telemetry off (no request leaves the machine). It is ready when an
authenticated ListBuckets succeeds; a server that exits or never gets there
fails the test with its exit status and the end of its log."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from tests.support import background_builds

ROOT = Path(__file__).resolve().parents[2]
ACCESS_KEY = "GWTESTACCESSKEY0001"
SECRET_KEY = "gw-test-secret-key-0123456789abcdef"
# A cold build compiles about 1,700 packages in ~530 CPU-seconds: 26 minutes of
# wall time on the shared 2-core machine at load 7-22 (scripts/install_ops_tools.sh),
# so the wait is long; a warm rebuild (Go's build cache kept) takes under a minute.
BUILD_TIMEOUT = 2700
PROBE_BUCKET = "gw-readiness-probe"


def weed_binary() -> Path:
    """SeaweedFS's `weed` at its pinned version (built once, cached in .tools/bin)."""
    return background_builds.ops_tool(
        "weed", purpose="building SeaweedFS for the s3 source tests", timeout=BUILD_TIMEOUT
    )


def _free_port_pair() -> int:
    """A free port P whose gRPC companion P + 10000 is free too (SeaweedFS's
    default for its components' gRPC ports)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port + 10000 > 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair")


@dataclass
class SeaweedS3:
    """One SeaweedFS server with its S3 gateway (see the module docstring)."""

    binary: Path
    workdir: Path
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY
    ports: dict[str, int] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "weed.log"

    def client(self, access_key: str | None = None, secret_key: str | None = None) -> Any:
        """A botocore S3 client for arranging objects (path-style addressing)."""
        session = botocore.session.get_session()
        return session.create_client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=access_key or self.access_key,
            aws_secret_access_key=secret_key or self.secret_key,
            config=Config(
                s3={"addressing_style": "path"},
                retries={"total_max_attempts": 1},
                connect_timeout=5,
                read_timeout=30,
            ),
        )

    def start(self, timeout: float = 180.0) -> None:
        """Start (or restart, on the same ports and data) and wait until ready."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        data = self.workdir / "data"
        data.mkdir(exist_ok=True)
        config = self.workdir / "s3.json"
        config.write_text(
            json.dumps(
                {
                    "identities": [
                        {
                            "name": "groundwire-tests",
                            "credentials": [
                                {"accessKey": self.access_key, "secretKey": self.secret_key}
                            ],
                            "actions": ["Admin", "Read", "List", "Write", "Tagging"],
                        }
                    ]
                }
            )
        )
        if not self.ports:
            self.ports = {n: _free_port_pair() for n in ("master", "volume", "filer", "s3")}
        args = [
            str(self.binary),
            "server",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-dir={data}",
            "-master.telemetry=false",
            "-master.volumeSizeLimitMB=32",
            f"-master.port={self.ports['master']}",
            f"-volume.port={self.ports['volume']}",
            "-volume.max=200",
            "-filer",
            f"-filer.port={self.ports['filer']}",
            "-s3",
            f"-s3.port={self.ports['s3']}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.config={config}",
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                args,
                cwd=self.workdir,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        client = self.client()
        last = ""
        while True:
            assert self.proc is not None
            code = self.proc.poll()
            if code is not None:
                raise AssertionError(f"weed exited with status {code}:\n{self.tail()}")
            try:
                # Ready to store: the S3 gateway, the filer and a volume server.
                with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
                    client.create_bucket(Bucket=PROBE_BUCKET)
                client.put_object(Bucket=PROBE_BUCKET, Key="probe", Body=b"ready")
                return
            except (BotoCoreError, ClientError) as exc:
                last = type(exc).__name__
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(
                    f"weed's S3 gateway not ready after {timeout:.0f} s ({last}):\n{self.tail()}"
                )
            time.sleep(0.5)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Kill the server (its whole process group: a crash, not a graceful stop,
        which waits 10 s for the volume server) and wait for it to exit."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def put(self, bucket: str, files: dict[str, bytes]) -> None:
        client = self.client()
        for key, body in files.items():
            client.put_object(Bucket=bucket, Key=key, Body=body)

    def make_bucket(self, bucket: str) -> None:
        self.client().create_bucket(Bucket=bucket)
