"""Run every benchmark script in bench/ in turn (make bench). Each prints its own
figures; this only sequences them and reports failures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def main() -> int:
    failed = []
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"\n=== {script.name} ===", flush=True)
        if subprocess.run([sys.executable, str(script)], check=False).returncode != 0:
            failed.append(script.name)
    if failed:
        print("failed:", ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
