"""What the shared-ingestion tests (tests/integration/test_shared_ingestion*.py)
have in common: a corpus on disk, direct reads of the control-plane database, a
replica seen through its gRPC stubs, what one process ingests from a corpus (the
reference every shared run must equal), and a `groundwire serve` configuration
whose index lives on the default PostgreSQL store or on an OpenSearch one."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import grpc
import httpx
import psycopg

from groundwire.app.config import parse_config
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import ingestion_pb2_grpc
from tests.support.openai_embeddings_standin import Behaviour, OpenAIEmbeddingsStandIn
from tests.support.servers import ServerProcess, free_port, serving, toml_config

TERMINAL = (
    ing.OPERATION_STATE_SUCCEEDED,
    ing.OPERATION_STATE_FAILED,
    ing.OPERATION_STATE_CANCELLED,
)


def write_corpus(root: Path, count: int, tag: str = "v1") -> None:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (root / f"doc{i:03d}.md").write_text(
            f"# Doc {i}\n\nToken {tag}DOC{i:03d} and shared words of the corpus.\n"
        )


def db_rows(dsn: str, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(query, params).fetchall()


class Replica:
    def __init__(self, port: int) -> None:
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        self.ing = ingestion_pb2_grpc.IngestionManagerServiceStub(self.channel)

    async def start(self) -> ing.Operation:
        req = ing.StartIngestionRequest(index_name="docs")
        return (await self.ing.StartIngestion(req)).operation

    async def watch(self, op_id: str) -> list[ing.Operation]:
        req = ing.WatchIngestionRequest(operation_id=op_id)
        return [m.operation async for m in self.ing.WatchIngestion(req, timeout=30)]

    async def get(self, op_id: str) -> ing.Operation:
        """The operation as the history (ListOperations) of this replica has it."""
        req = ing.ListOperationsRequest(index_name="docs", page_size=10)
        ops = (await self.ing.ListOperations(req)).operations
        return next(o for o in ops if o.id == op_id)

    async def documents(self) -> dict[str, tuple[str, int]]:
        return await documents_of(self.ing)


async def documents_of(
    stub: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub,
) -> dict[str, tuple[str, int]]:
    """Index "docs"'s published documents: id -> (content hash, chunk count)."""
    out: dict[str, tuple[str, int]] = {}
    token = ""
    while True:
        req = ing.ListDocumentsRequest(index_name="docs", page_size=100, page_token=token)
        resp = await stub.ListDocuments(req)
        out.update({d.document_id: (d.content_hash, d.chunk_count) for d in resp.documents})
        token = resp.next_page_token
        if not token:
            return out


async def kill_mid_item(dsn: str, server: ServerProcess, op_id: str, within_s: float) -> float:
    """SIGKILL `server` (the operation's coordinator) once items are done, one of
    them by it (on a loaded machine the other replica may have done the first
    ones), while it holds a lease: in the middle of an item. Returns when."""
    deadline = time.monotonic() + within_s
    mine = f"%:{server.pid}:%"
    while True:
        rows = db_rows(
            dsn,
            "SELECT count(*) FILTER (WHERE state = 'done'), "
            "count(*) FILTER (WHERE state = 'done' AND done_by LIKE %s), "
            "count(*) FILTER (WHERE state = 'leased' AND lease_owner LIKE %s) "
            "FROM gw_work_items WHERE operation_id = %s",
            [mine, mine, op_id],
        )
        if rows and rows[0][0] >= 2 and rows[0][1] >= 1 and rows[0][2] >= 1:
            break
        assert time.monotonic() < deadline, "no lease held by the coordinator"
        await asyncio.sleep(0.02)
    server.kill()
    return time.monotonic()


async def ended(
    replica: Replica, dsn: str, op_id: str, since: float, within_s: float
) -> ing.Operation:
    """The operation once it ended, as `replica` records it, within `within_s` of
    `since` (time.monotonic())."""
    while (final := await replica.get(op_id)).state not in TERMINAL:
        assert time.monotonic() - since < within_s, (
            "the survivor never finished",
            db_rows(dsn, "SELECT * FROM gw_ingestion_plans"),
            db_rows(
                dsn,
                "SELECT seq, state, lease_owner, attempts, done_by FROM gw_work_items ORDER BY seq",
            ),
        )
        await asyncio.sleep(0.1)
    return final


def check_reclaimed_once(dsn: str, op_id: str, items: int, pids: set[str]) -> None:
    """Every item of the operation done once, by the replicas `pids`, a lost lease
    reclaimed, and the plan published."""
    rows = db_rows(
        dsn,
        "SELECT state, attempts, done_by FROM gw_work_items WHERE operation_id = %s",
        [op_id],
    )
    assert len(rows) == items and {s for s, _, _ in rows} == {"done"}
    assert any(n >= 2 for _, n, _ in rows)  # a lost lease was reclaimed
    assert {str(o).split(":")[1] for _, _, o in rows} == pids
    assert db_rows(
        dsn, "SELECT state FROM gw_ingestion_plans WHERE operation_id = %s", [op_id]
    ) == [("published",)]


async def reference_documents(cfg: dict[str, object]) -> dict[str, tuple[str, int]]:
    """What a single-process run (memory store) of `cfg`'s index "docs" ingests:
    document id -> (content hash, chunk count)."""
    cfg = {**cfg, "store": {"kind": "memory"}}
    cfg.pop("stores", None)
    indexes = dict(cfg["indexes"])  # type: ignore[call-overload]
    indexes["docs"] = {k: v for k, v in indexes["docs"].items() if k != "store"}
    cfg["indexes"] = indexes
    async with serving(parse_config(cfg)) as app:
        r = Replica(app.port)
        try:
            op = await r.start()
            assert (await r.watch(op.id))[-1].state == ing.OPERATION_STATE_SUCCEEDED
            return await r.documents()
        finally:
            await r.channel.close()


def search_store_toml(search: str | None) -> str:
    """`[stores.search]`, an OpenSearch store, from "URL[,URL...] PREFIX" (nothing
    for None)."""
    if search is None:
        return ""
    urls, prefix = search.split()
    hosts = ", ".join(f'"{u}"' for u in urls.split(","))
    return f"""
[stores.search]
kind = "opensearch"
hosts = [{hosts}]
replicas = 0
index_prefix = "{prefix}"
superseded_grace_ms = 0
"""


def process_config(
    tmp: Path, name: str, docs: Path, embed_url: str, search: str | None = None
) -> Path:
    """A `groundwire serve` configuration sharing ingestion of index "docs" through
    the PostgreSQL in $GW_SHARED_DSN, short leases; with `search` (OpenSearch URLs
    and an index prefix, "URL[,URL...] PREFIX") the index lives on that store."""
    placed = search_store_toml(search)
    return toml_config(
        tmp,
        f"""
[logging]
level = "WARNING"

[auth]
mode = "disabled"

[store]
kind = "postgres"
dsn = {{ env = "GW_SHARED_DSN" }}
pool_max_size = 4
work_item_documents = 4
work_lease_ms = 1500
work_renew_ms = 300
work_poll_ms = 200
{placed}
[embedders.remote]
kind = "openai-compatible"
base_url = "{embed_url}"
model = "standin-embed"
dimensions = 8

[indexes.docs]
embedder = "remote"
sources = [{{ kind = "directory", path = "{docs}" }}]
{'store = "search"' if search is not None else ""}
""",
        name=f"{name}.toml",
    )


def physical_versions(url: str, prefix: str) -> list[int]:
    """The version of every physical index under `prefix` (read from the node)."""
    r = httpx.get(
        f"{url}/_cat/indices/{prefix}*",
        params={"format": "json", "h": "index", "expand_wildcards": "all"},
        timeout=30,
    )
    r.raise_for_status()
    versions = [int(row["index"].rsplit("-v", 1)[1]) for row in r.json() if "-v" in row["index"]]
    # And the versions records in the pools carry (stores/opensearch/pool.py).
    pools = [row["index"] for row in r.json() if ".pool-" in row["index"]]
    if pools:
        httpx.post(f"{url}/{','.join(pools)}/_refresh", timeout=30).raise_for_status()
        found = httpx.post(
            f"{url}/{','.join(pools)}/_search",
            json={"size": 0, "aggs": {"tv": {"terms": {"field": "tv", "size": 1000}}}},
            timeout=30,
        )
        found.raise_for_status()
        versions += [int(b["key"]) for b in found.json()["aggregations"]["tv"]["buckets"]]
    return sorted(versions)


async def coordinator_killed_mid_item(
    tmp_path: Path, dsn: str, urls: list[str] | None = None, prefix: str = ""
) -> ing.Operation:
    """Two real `serve` processes share an operation (into the default PostgreSQL
    store, or with `urls` an index on that OpenSearch cluster under `prefix`); the
    coordinator is SIGKILLed mid-item (its staging of that item cut) and the
    survivor reclaims its items, adopts the operation and publishes every document
    once: counts, usage, content hashes and chunk counts as one process ingests.
    Returns the operation as it ended."""
    docs = tmp_path / "docs"
    write_corpus(docs, 48)
    with OpenAIEmbeddingsStandIn(dimensions=8, delay=0.25) as standin:
        search = None if urls is None else f"{','.join(urls)} {prefix}"
        standin.behaviour = Behaviour.SLOW
        servers = [
            ServerProcess(
                process_config(tmp_path, f"r{i}", docs, standin.base_url, search),
                free_port(),
                tmp_path / f"r{i}.log",
                env={"GW_SHARED_DSN": dsn},
            )
            for i in range(2)
        ]
        try:
            for s in servers:
                s.start(wait=False)
            for s in servers:
                s.wait_serving(90)
            killed, survivor = servers
            a, b = Replica(killed.port), Replica(survivor.port)
            try:
                op = await a.start()
                killed_at = await kill_mid_item(dsn, killed, op.id, 90)
                final = await ended(b, dsn, op.id, killed_at, 60)
                assert final.state == ing.OPERATION_STATE_SUCCEEDED, final
                assert (final.counts.ingested, final.counts.failed) == (48, 0)
                # Usage of the claims that completed items, each item once.
                assert final.counts.embedding_usage.texts == final.counts.chunks_written
                check_reclaimed_once(dsn, op.id, 12, {str(killed.pid), str(survivor.pid)})
                req = ing.GetIndexStatusRequest(index_name="docs")
                status = (await b.ing.GetIndexStatus(req)).status
                assert status.published_version == final.version
                assert (status.document_count, status.chunk_count) == (
                    48,
                    final.counts.chunks_written,
                )
                got = await b.documents()
            finally:
                await a.channel.close()
                await b.channel.close()
        finally:
            for s in servers:
                if s.process is not None:
                    s.stop()
        standin.behaviour = Behaviour.NORMAL
    # The same documents, content hashes and chunk counts as one process ingests.
    reference = await reference_documents(
        {
            "auth": {"mode": "disabled"},
            "embedders": {"hash": {"kind": "hashing"}},
            "indexes": {
                "docs": {"embedder": "hash", "sources": [{"kind": "directory", "path": str(docs)}]}
            },
        }
    )
    assert got == reference and len(got) == 48
    return final
