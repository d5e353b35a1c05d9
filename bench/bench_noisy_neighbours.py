"""Noisy neighbours, attack by attack: a victim tenant's lexical p50/p99 quiet and while
an attacker tenant (its own process, six callers) runs one kind of worst-case request,
on each store. The scenario is the security test's (tests/security/test_noisy_neighbours.py).

    .venv/bin/python bench/bench_noisy_neighbours.py [--stores memory,postgres]
        [--attacks lexical,hybrid,phrase,push,all] [--seconds 8]
        [--server-pythonpath OLD_CHECKOUT/server --no-limits]

`--server-pythonpath` runs the server from another checkout (a before/after pair in one
session); `--no-limits` leaves out the `[limits]` sections, which older servers refuse.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from groundwire.stores.postgres.embedded import start_embedded_sync
from tests.security.test_noisy_neighbours import ATTACKS, measure, toml
from tests.support.databases import create_database
from tests.support.servers import ServerProcess, free_port


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="memory,postgres")
    parser.add_argument("--attacks", default="lexical,hybrid,phrase,push,all")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--server-pythonpath", default=None)
    parser.add_argument("--no-limits", action="store_true")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gw-bench-noisy-"))
    pg = None
    runs = 0
    try:
        for store in args.stores.split(","):
            admin = None
            if store == "postgres":
                pg = pg or start_embedded_sync(root / "pgdata", durable=False)
                admin = pg.dsn
            for kind in args.attacks.split(","):
                kinds = ATTACKS if kind == "all" else (kind,)
                runs += 1
                work = root / f"{store}-{kind}-{runs}"
                work.mkdir()
                text = toml(store, "GW_BENCH_DSN")
                if args.no_limits:
                    text = (
                        text.split("[limits.retrieve]")[0]
                        + "[embedders.hash]"
                        + (text.split("[embedders.hash]")[1])
                    )
                config = work / "groundwire.toml"
                config.write_text(text)
                env = {"GW_BENCH_DSN": create_database(admin)} if admin else {}
                if args.server_pythonpath:
                    env["PYTHONPATH"] = (
                        args.server_pythonpath + os.pathsep + os.environ.get("PYTHONPATH", "")
                    )
                proc = ServerProcess(config, free_port(), work / "server.log", env=env).start()
                try:
                    m = await measure(proc.target, kinds, args.seconds)
                finally:
                    proc.stop()
                print(m.line(f"{store:8} {kind:7}"), flush=True)
    finally:
        if pg is not None:
            pg.release()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
