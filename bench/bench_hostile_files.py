"""The cost of each hostile file of tests/security/hostile_files.py to the server's
loader, in-process (`groundwire.ingestion.loaders.load_bytes`, as a push reads it).

Each case runs in a child process of its own (`python bench_hostile_files.py --child
NAME MEDIA_TYPE FILE`) with a CPU-time limit (RLIMIT_CPU, default 60 s), an address-space limit
(RLIMIT_AS, default 4 GiB, so a bomb cannot take the machine) and a wall-clock timeout
(3 x the CPU cap + 30 s: the machine is shared);
the parent reads the child's CPU seconds and peak RSS from os.wait4's rusage and
prints one row per case: CPU s, wall s, peak RSS, the child's RSS after imports, and
the outcome (the loader's result: OK with its text length, or the failure reason; an
exception's type; CPU_LIMIT, MEMORY_LIMIT (MemoryError), TIMEOUT or a signal).

    .venv/bin/python bench/bench_hostile_files.py [--cpu-seconds 60] [--memory-mib 4096]
        [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def child(name: str, media_type: str, path: str) -> None:
    """Load one case's bytes with the server's loader; print the outcome as JSON."""
    from groundwire.ingestion.loaders import LoadFailure, load_bytes, push_format

    data = Path(path).read_bytes()
    fmt = push_format(media_type)
    assert fmt is not None, media_type
    base_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"base_kib": base_kib}), flush=True)
    try:
        result = load_bytes(
            f"hostile-{name}", "push", data, fmt[0], max_bytes=10 * 1024 * 1024, extension=fmt[1]
        )
    except MemoryError:
        print(json.dumps({"outcome": "MEMORY_LIMIT (MemoryError)"}), flush=True)
        return
    except BaseException as exc:
        print(json.dumps({"outcome": f"RAISED {type(exc).__name__}"}), flush=True)
        return
    if isinstance(result, LoadFailure):
        outcome = str(result.reason.value)
    else:
        outcome = f"OK ({len(result.text):,} chars)"
    print(json.dumps({"outcome": outcome}), flush=True)


def run_case(
    name: str, media_type: str, data: bytes, cpu_seconds: int, memory_mib: int
) -> dict[str, object]:
    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        f.write(data)
        f.flush()

        def limits() -> None:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
            limit = memory_mib * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, __file__, "--child", name, media_type, f.name],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            preexec_fn=limits,
            cwd=REPO,
        )
        deadline = started + cpu_seconds * 3 + 30
        status = None
        usage = None
        while status is None:
            pid, status_, usage_ = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                status, usage = status_, usage_
                break
            if time.monotonic() > deadline:
                proc.kill()
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        wall = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        assert proc.stdout is not None
        lines = [json.loads(line) for line in proc.stdout.read().decode().splitlines() if line]
    found: dict[str, object] = {}
    for line in lines:
        found.update(line)
    outcome = found.get("outcome")
    if outcome is None:
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            outcome = {int(signal.SIGXCPU): "CPU_LIMIT", int(signal.SIGKILL): "TIMEOUT/KILLED"}.get(
                sig, f"signal {signal.Signals(sig).name}"
            )
        else:
            outcome = f"exit {os.WEXITSTATUS(status)}"
    assert usage is not None
    return {
        "name": name,
        "bytes": len(data),
        "cpu": usage.ru_utime + usage.ru_stime,
        "wall": wall,
        "peak_mib": usage.ru_maxrss / 1024,
        "base_mib": int(str(found.get("base_kib", 0))) / 1024,
        "outcome": outcome,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--child", nargs=3, metavar=("NAME", "MEDIA_TYPE", "FILE"), help=argparse.SUPPRESS
    )
    parser.add_argument("--cpu-seconds", type=int, default=60)
    parser.add_argument("--memory-mib", type=int, default=4096)
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    from tests.security.hostile_files import NAMES, case

    names = args.only or list(NAMES)
    print(
        f"hostile files through load_bytes, one child each: CPU cap {args.cpu_seconds} s, "
        f"address space cap {args.memory_mib} MiB",
        flush=True,
    )
    header = (
        f"{'case':28s} {'bytes':>9s} {'CPU s':>7s} {'wall s':>7s} "
        f"{'peak MiB':>9s} {'base MiB':>9s}  outcome"
    )
    print(header)
    print("-" * len(header))
    for name in names:
        hostile = case(name)
        row = run_case(name, hostile.media_type, hostile.data, args.cpu_seconds, args.memory_mib)
        print(
            f"{name:28s} {row['bytes']:>9,} {row['cpu']:>7.2f} {row['wall']:>7.2f} "
            f"{row['peak_mib']:>9.0f} {row['base_mib']:>9.0f}  {row['outcome']}",
            flush=True,
        )


if __name__ == "__main__":
    main()
