"""The start-up log of a real `groundwire serve` on PostgreSQL (a fresh database,
so every store migration runs): every line is JSON, no message is a template
with its values missing ("applied store migration %d" was), and the values are
explicit fields."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from groundwire.stores.postgres.migrations import MIGRATIONS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

BIN = Path(sys.executable).parent
PLACEHOLDER = re.compile(r"%[-#0 +]*\d*(\.\d+)?[sdifrx]|%\([a-z_]+\)")


def test_every_startup_line_is_json_with_its_values_as_fields(
    tmp_path: Path, fresh_database: str
) -> None:
    cfg = tmp_path / "groundwire.toml"
    cfg.write_text(
        """
[server]
grace_period_seconds = 1

[auth]
mode = "disabled"

[store]
kind = "postgres"
dsn = { env = "GW_STARTUP_LOG_DSN" }

[logging]
format = "json"
level = "INFO"

[indexes.notes]
sources = [{ kind = "inline", id = "note-1", text = "POL-HR-014 governs parental leave." }]
ingestion = { strategy = "on_startup" }
"""
    )
    proc = subprocess.Popen(
        [str(BIN / "groundwire"), "serve", "--config", str(cfg), "--address", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "GW_STARTUP_LOG_DSN": fresh_database},
    )
    assert proc.stderr is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 90
        while not any('"ingestion ended"' in line for line in lines):
            assert proc.poll() is None, "".join(lines)
            assert time.monotonic() < deadline, "".join(lines)
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    reader.join(10)

    records = []
    for line in lines:
        record = json.loads(line)  # every line, not just ours, is one JSON object
        assert isinstance(record, dict), line
        records.append(record)
        assert not PLACEHOLDER.search(record["msg"]), f"unformatted message: {line}"
        if str(record["logger"]).startswith("groundwire"):
            assert "args_withheld" not in record, f"values passed as %-args: {line}"
    by_msg: dict[str, list[dict[str, object]]] = {}
    for record in records:
        by_msg.setdefault(str(record["msg"]), []).append(record)

    migrations = [r["migration_version"] for r in by_msg["applied store migration"]]
    assert migrations == [m.version for m in MIGRATIONS], migrations
    (serving,) = by_msg["serving"]
    assert isinstance(serving["port"], int) and serving["port"] > 0
    assert serving["indexes"] == 1
    (ended,) = by_msg["ingestion ended"]
    assert ended["index"] == "notes" and ended["state"] == "SUCCEEDED"
    assert [r["msg"] for r in records[-2:]] == ["shutting down", "stopped"]
