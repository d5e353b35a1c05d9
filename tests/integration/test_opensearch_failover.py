"""The OpenSearch store on a three-node cluster losing a node (issue 26, item 4).

- Reads go on: lexical, vector and filtered readers run while the node holding a
  primary of the index (the elected cluster-manager when it holds one) is SIGKILLed.
  A read may fail for a bounded moment, with STORE_UNAVAILABLE only, but every read
  that succeeds returns exactly the expected hits (computed before the kill); reads
  succeed again without the node, and go on while it restarts and the cluster heals.
- Ingestion during a kill: a version is staged in batches and a node holding a
  staging primary (staging indexes have no replicas) is killed between two batches.
  The version either publishes exactly what was staged plus the unchanged
  documents, or fails with STORE_UNAVAILABLE leaving the published state as it
  was, and a retry publishes (the node restarting meanwhile: it is usually still
  down when the retry ends). Checked by content hash, document and chunk lists, and
  the index's counts; again once the node is back and the cluster green.

One three-node cluster serves the module; each test starts from all three nodes
green and ends with them green again. Every wait polls a condition within a bound.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import numpy as np
import numpy.typing as npt
import pytest

from groundwire.domain.errors import GroundwireError
from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import ChunkHit, MetadataFilter, Scope
from groundwire.stores.base import DocumentKey, IndexSpec, StagedDocument
from groundwire.stores.opensearch import OpenSearchSettings, OpenSearchStore, open_opensearch_store
from groundwire.stores.opensearch.layout import Names
from tests.stores.conftest import opensearch_test_settings
from tests.stores.contract_support import doc, publish, spec
from tests.support.opensearch import PREVIOUS, OpenSearchCluster, three_node_cluster
from tests.support.shared_ingestion import coordinator_killed_mid_item, physical_versions

# About 4 minutes on an idle 2-core machine (most of it JVMs booting); the bound
# leaves room for a loaded one.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

T = TypeVar("T")

DIM = 8
SHARDS = 2  # 2 shards x 2 copies on 3 nodes: every node holds a copy, none holds both
WARM_READS = 3  # successful reads per reader before the kill
RECOVERED_READS = 3  # successful reads per reader, after the last failure, to call it back
RECOVERY_S = 60.0  # reads succeed again within this after the kill
GREEN_S = 150.0  # a restarted node rejoins and the cluster is green within this
COLORS = ("red", "green", "blue", "amber", "violet")
ANIMALS = ("fox", "owl", "cat", "eel", "yak", "emu", "ant")
HR = Scope(filter=MetadataFilter({"dept": frozenset({"hr"})}))

# A read's answer: (document id, chunk id) -> (score, text), in rank order.
Answer = dict[tuple[str, str], tuple[float, str]]


# ---------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def cluster() -> Iterator[OpenSearchCluster]:
    """OpenSearch 2.19 (the previous line: the shared node, so the contract suite,
    runs the current one, 3.x)."""
    yield from three_node_cluster(PREVIOUS)


def failover_settings(cluster: OpenSearchCluster) -> OpenSearchSettings:
    """Every node's URL (the client fails over to a live one), a replica of every
    shard, and engine calls bounded well inside the test's timeout (a bulk waiting
    for a lost primary gives up after request_timeout_s)."""
    return opensearch_test_settings(
        cluster.url,
        hosts=tuple(cluster.urls),
        replicas=1,
        shards=SHARDS,
        request_timeout_s=10.0,
        publish_timeout_s=90.0,
    )


@pytest.fixture
async def store(cluster: OpenSearchCluster) -> AsyncIterator[OpenSearchStore]:
    await wait_health(cluster, nodes=3, status="green")
    s = await open_opensearch_store(failover_settings(cluster))
    yield s
    await s.close()


# ------------------------------------------------------------------ the cluster


async def eventually(
    check: Callable[[], Awaitable[T]], within: float, what: str, every: float = 0.25
) -> T:
    """Poll `check` until it returns without raising (an assertion, a store or HTTP
    error); fail with its last error after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        try:
            return await check()
        except (AssertionError, GroundwireError, httpx.HTTPError) as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {within:.0f}s: {exc!r}") from exc
        await asyncio.sleep(every)


async def engine(cluster: OpenSearchCluster, path: str, **params: str) -> Any:
    """GET `path` from the first node that answers (a killed one refuses at once)."""
    last: Exception | None = None
    async with httpx.AsyncClient(timeout=30.0) as client:
        for url in cluster.urls:
            try:
                response = await client.get(f"{url}{path}", params=params)
            except httpx.TransportError as exc:
                last = exc
                continue
            response.raise_for_status()
            return response.json()
    assert last is not None
    raise last


async def wait_health(cluster: OpenSearchCluster, *, nodes: int, status: str) -> float:
    """Wait until the cluster has exactly `nodes` nodes and is at least `status`;
    return how long it took."""
    started = time.monotonic()

    async def healthy() -> None:
        body = await engine(
            cluster,
            "/_cluster/health",
            wait_for_status=status,
            wait_for_nodes=str(nodes),
            timeout="5s",
        )
        assert not body["timed_out"], body
        assert body["number_of_nodes"] == nodes, body

    await eventually(healthy, GREEN_S, f"{nodes} node(s), {status}", every=0.5)
    return time.monotonic() - started


async def pick_victim(cluster: OpenSearchCluster, indexes: str) -> tuple[int, str]:
    """A node holding a started primary of `indexes` (a pattern), the elected
    cluster-manager when it is one of them; returns its number and why."""
    shards = await engine(
        cluster, f"/_cat/shards/{indexes}", format="json", h="index,shard,prirep,state,node"
    )
    holders = sorted({s["node"] for s in shards if s["prirep"] == "p" and s["state"] == "STARTED"})
    assert holders, f"no started primary of {indexes}: {shards}"
    manager = (await engine(cluster, "/_cat/cluster_manager", format="json"))[0]["node"]
    name = manager if manager in holders else holders[0]
    role = "cluster-manager and primary holder" if name == manager else "primary holder"
    return int(name.removeprefix("node-")), role


def kill(cluster: OpenSearchCluster, victim: int) -> float:
    cluster.kill(victim)  # SIGKILL, reaped: milliseconds
    return time.monotonic()


# -------------------------------------------------------------------- documents


def chunk_texts(i: int, tag: str) -> list[str]:
    """1 to 3 chunks; every chunk holds "corpus", one color, one animal, its tag."""
    return [
        f"corpus {COLORS[(i + j) % len(COLORS)]} {ANIMALS[(3 * i + j) % len(ANIMALS)]} {tag}"
        for j in range(1 + i % 3)
    ]


def content_hash(texts: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()[:32]


def make_doc(
    doc_id: str, i: int, tag: str, rng: np.random.Generator, tenant: str = ""
) -> StagedDocument:
    texts = chunk_texts(i, tag)
    vectors = [rng.normal(size=DIM).astype(np.float32) for _ in texts]
    return doc(
        doc_id,
        texts,
        vectors,
        tenant=tenant,
        metadata={"dept": "hr" if i % 4 == 0 else "eng"},
        content_hash=content_hash(texts),
    )


def index_spec(name: str) -> IndexSpec:
    return spec(name, dims=DIM)


# ------------------------------------------------------------------------ reads


def answer(hits: Sequence[ChunkHit]) -> Answer:
    out: Answer = {}
    for h in hits:
        key = (h.document_id, h.chunk_id)
        assert key not in out, f"chunk {key} returned twice"
        out[key] = (h.score.raw, h.content)
    return out


def same_answer(what: str, got: Answer, expected: Answer) -> None:
    """Exactly the expected chunks (nothing missing, nothing extra), with their
    texts and scores (a replica scores like its primary)."""
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    assert not missing and not extra, f"{what}: missing {missing[:5]}, extra {extra[:5]}"
    for key, (score, text) in expected.items():
        assert got[key][1] == text, f"{what}: {key} text {got[key][1]!r} != {text!r}"
        assert got[key][0] == pytest.approx(score, rel=1e-3, abs=1e-4), f"{what}: {key} score"


@dataclass(frozen=True, slots=True)
class Query:
    reader: str
    label: str
    run: Callable[[], Awaitable[Answer]]
    expected: Answer


def cosine_top(
    vectors: npt.NDArray[np.float32],
    keys: list[tuple[str, str]],
    q: npt.NDArray[np.float32],
    k: int,
) -> dict[tuple[str, str], float] | None:
    """The exact top k by cosine, or None when the k-th and the next are too close to
    tell apart (an approximate index may order them either way)."""
    sims = (vectors @ q) / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(q))
    order = np.argsort(-sims, kind="stable")
    if len(order) > k and sims[order[k - 1]] - sims[order[k]] < 1e-3:
        return None
    return {keys[i]: float(sims[i]) for i in order[:k]}


async def read_queries(
    store: OpenSearchStore, name: str, docs: list[StagedDocument], rng: np.random.Generator
) -> list[Query]:
    """Lexical, vector, filtered lexical and filtered vector queries, each with its
    expected answer: asked once now (all nodes up) and checked against what the
    corpus says (every matching chunk for lexical, the exact top k for vector)."""
    rows = [
        (d.document.document_id, c.chunk_id, c.text, d.document.metadata["dept"], e)
        for d in docs
        for c, e in zip(d.chunks, d.embeddings if d.embeddings is not None else [], strict=True)
    ]
    queries: list[Query] = []
    for scope_name, scope in (("all", Scope()), ("hr", HR)):
        kept = [r for r in rows if scope_name == "all" or r[3] == "hr"]
        for text in ("fox", "amber owl", "violet"):
            words = set(text.split())
            matching = {(r[0], r[1]) for r in kept if words & set(r[2].split())}
            lexical = parse_lexical(text)

            async def lex(q: Any = lexical, s: Scope = scope) -> Answer:
                return answer((await store.search_lexical(name, q, 1_000, s)).hits)

            baseline = await lex()
            assert set(baseline) == matching, f"lexical {text!r} in {scope_name}"
            reader = "lexical" if scope_name == "all" else "filtered-lexical"
            queries.append(Query(reader, f"{reader} {text!r}", lex, baseline))
        vectors = np.stack([r[4] for r in kept])
        keys = [(r[0], r[1]) for r in kept]
        found = 0
        while found < 3:
            q = rng.normal(size=DIM).astype(np.float32)
            top = cosine_top(vectors, keys, q, 10)
            if top is None:
                continue
            found += 1

            async def knn(q: npt.NDArray[np.float32] = q, s: Scope = scope) -> Answer:
                return answer(await store.search_vector(name, q, 10, s))

            baseline = await knn()
            assert {k: v[0] for k, v in baseline.items()} == pytest.approx(top, abs=1e-4)
            reader = "vector" if scope_name == "all" else "filtered-vector"
            queries.append(Query(reader, f"{reader} #{found}", knn, baseline))
    return queries


@dataclass(slots=True)
class Reads:
    """Every read: (reader, started, ended, ok), and each failure's message."""

    log: list[tuple[str, float, float, bool]] = field(default_factory=list)
    failures: list[tuple[str, float, str]] = field(default_factory=list)

    def successes_since(self, reader: str, since: float) -> int:
        return sum(1 for r, started, _, ok in self.log if r == reader and ok and started > since)

    def last_failure(self) -> float:
        return max((ended for _, _, ended, ok in self.log if not ok), default=0.0)


async def read_loop(queries: list[Query], stop: asyncio.Event, reads: Reads) -> None:
    """Ask `queries` in turn until `stop`; a failure must be STORE_UNAVAILABLE and a
    success exactly the expected answer."""
    i = 0
    while not stop.is_set():
        query = queries[i % len(queries)]
        i += 1
        started = time.monotonic()
        try:
            got = await query.run()
        except GroundwireError as exc:
            ended = time.monotonic()
            assert exc.reason == "STORE_UNAVAILABLE", f"{query.label}: {exc.reason} {exc}"
            reads.log.append((query.reader, started, ended, False))
            reads.failures.append((query.label, ended, str(exc)))
            await asyncio.sleep(0.1)  # pacing: a failure can be instant
            continue
        same_answer(query.label, got, query.expected)
        reads.log.append((query.reader, started, time.monotonic(), True))
        # Think time, not a wait: readers that never pause would saturate a small
        # machine while a node boots.
        await asyncio.sleep(0.05)


async def until_reads(
    reads: Reads,
    readers: set[str],
    count: int,
    since: Callable[[], float],
    within: float,
    what: str,
) -> float:
    """Wait until every reader has `count` successful reads started after `since()`."""
    started = time.monotonic()

    async def enough() -> None:
        short = {r: reads.successes_since(r, since()) for r in readers}
        assert all(n >= count for n in short.values()), short

    await eventually(enough, within, what, every=0.1)
    return time.monotonic() - started


# ---------------------------------------------------------------------- tests


async def test_reads_go_on_while_a_node_is_killed(
    cluster: OpenSearchCluster, store: OpenSearchStore
) -> None:
    name = "reads"
    rng = np.random.default_rng(26)
    docs = [make_doc(f"d{i:03d}", i, "one", rng) for i in range(200)]
    await publish(store, name, docs, index_spec(name))
    hashes = {d.document.key: d.document.content_hash for d in docs}
    queries = await read_queries(store, name, docs, rng)
    readers = {q.reader for q in queries}
    names = Names(failover_settings(cluster).index_prefix)
    victim, role = await pick_victim(cluster, f"{names.alias(name, '')}-v*")

    reads = Reads()
    stop = asyncio.Event()
    timings: dict[str, float] = {}

    async def scenario() -> None:
        try:
            await until_reads(reads, readers, WARM_READS, lambda: 0.0, 30.0, "reads warm up")
            killed = kill(cluster, victim)
            # Reads succeed again with the node gone: every reader several times
            # after the last failure, within RECOVERY_S of the kill.
            await until_reads(
                reads,
                readers,
                RECOVERED_READS,
                lambda: max(killed, reads.last_failure()),
                RECOVERY_S,
                "reads back after the kill",
            )
            timings["recovered_s"] = time.monotonic() - killed
            timings["last_failure_s"] = max(0.0, reads.last_failure() - killed)
            timings["failed_reads_down"] = len(reads.failures)
            await wait_health(cluster, nodes=2, status="yellow")
            assert {k: v.content_hash for k, v in (await store.live_documents(name)).items()} == (
                hashes
            )
            # The node comes back; reads go on meanwhile.
            cluster.start(victim, wait=False)
            timings["joined_s"] = await wait_health(cluster, nodes=3, status="yellow")
            timings["green_s"] = timings["joined_s"] + await wait_health(
                cluster, nodes=3, status="green"
            )
            healed = time.monotonic()
            await until_reads(
                reads, readers, RECOVERED_READS, lambda: healed, RECOVERY_S, "reads once green"
            )
        finally:
            stop.set()

    async with asyncio.TaskGroup() as group:
        for reader in sorted(readers):
            group.create_task(read_loop([q for q in queries if q.reader == reader], stop, reads))
        group.create_task(scenario())

    for q in queries:
        same_answer(q.label, await q.run(), q.expected)
    live = await store.live_documents(name)
    assert {k: v.content_hash for k, v in live.items()} == hashes
    ok = sum(1 for *_, good in reads.log if good)
    print(
        f"\n[failover reads] killed node-{victim} ({role}); {ok} reads ok, "
        f"{len(reads.failures)} failed ({timings['failed_reads_down']:.0f} while down); "
        f"last failure {timings['last_failure_s']:.1f}s after the kill; reads back "
        f"(every reader x{RECOVERED_READS}) {timings['recovered_s']:.1f}s after the kill; "
        f"after the restart, joined in {timings['joined_s']:.1f}s, green in "
        f"{timings['green_s']:.1f}s"
    )
    for label, _, message in reads.failures[:10]:
        print(f"  failed: {label}: {message}")


# -------------------------------------------------------------------- ingestion


async def published(
    store: OpenSearchStore, name: str, expected: dict[DocumentKey, StagedDocument]
) -> None:
    """The published state is exactly `expected`: content hashes by key, each
    tenant's document list (no duplicate, chunk counts), every chunk once with its
    text, and the index's counts."""
    live = await store.live_documents(name)
    assert {k: v.content_hash for k, v in live.items()} == {
        k: d.document.content_hash for k, d in expected.items()
    }
    tenants = {k.tenant for k in expected}
    for tenant in tenants:
        mine = {k.document_id: d for k, d in expected.items() if k.tenant == tenant}
        listed = await store.list_documents(name, tenant, 10_000, None)
        assert [d.document_id for d in listed] == sorted(mine), f"tenant {tenant!r} listing"
        for info in listed:
            want = mine[info.document_id]
            assert (info.content_hash, info.chunk_count) == (
                want.document.content_hash,
                len(want.chunks),
            ), info.document_id
        hits = (
            await store.search_lexical(name, parse_lexical("corpus"), 10_000, Scope(tenant))
        ).hits
        chunks = answer(hits)  # fails on a chunk returned twice
        assert {k: v[1] for k, v in chunks.items()} == {
            (i, c.chunk_id): c.text for i, d in mine.items() for c in d.chunks
        }, f"tenant {tenant!r} chunks"
    state = await store.index_state(name)
    assert (state.document_count, state.chunk_count) == (
        len(expected),
        sum(len(d.chunks) for d in expected.values()),
    )


async def stage_all(
    store: OpenSearchStore,
    name: str,
    version: int,
    batches: list[list[StagedDocument]],
    deletions: list[DocumentKey],
) -> None:
    await store.stage_deletions(name, version, deletions)
    for batch in batches:
        await store.stage_documents(name, version, batch)


async def test_ingestion_through_a_node_kill_completes_or_fails_cleanly(
    cluster: OpenSearchCluster, store: OpenSearchStore
) -> None:
    name = "ingest"
    sp = index_spec(name)
    rng = np.random.default_rng(4)
    v1 = [make_doc(f"a{i:03d}", i, "one", rng) for i in range(100)]
    v1 += [make_doc(f"b{i:03d}", i, "one", rng, tenant="acme") for i in range(60)]
    await publish(store, name, v1, sp)
    before = {d.document.key: d for d in v1}
    await published(store, name, before)

    # The next version: 40 documents of each tenant changed, 60 added, 10 deleted,
    # staged in six batches touching both tenants before the kill.
    a_changed = [make_doc(f"a{i:03d}", i + 1, "two", rng) for i in range(40)]
    a_added = [make_doc(f"a{i:03d}", i, "two", rng) for i in range(100, 140)]
    b_changed = [make_doc(f"b{i:03d}", i + 1, "two", rng, tenant="acme") for i in range(20)]
    b_added = [make_doc(f"b{i:03d}", i, "two", rng, tenant="acme") for i in range(60, 80)]
    batches = [
        a_changed[:20],
        b_changed,
        a_added[:20],
        a_changed[20:],
        b_added,
        a_added[20:],
    ]
    deletions = [DocumentKey("", f"a{i:03d}") for i in range(90, 100)]
    after = dict(before)
    for key in deletions:
        del after[key]
    after.update((d.document.key, d) for batch in batches for d in batch)

    names = Names(failover_settings(cluster).index_prefix)
    version = await store.begin_version(name)
    killed: list[tuple[int, str, float]] = []

    async def kill_before(i: int) -> None:
        if i == 3:
            victim, role = await pick_victim(cluster, f"{names.aliases(name)}-v{version}")
            killed.append((victim, role, kill(cluster, victim)))

    started = time.monotonic()
    outcome = "published"
    restarted = 0.0
    try:
        await store.stage_deletions(name, version, deletions)
        for i, batch in enumerate(batches):
            await kill_before(i)
            await store.stage_documents(name, version, batch)
        await store.publish_version(name, version, sp)
    except GroundwireError as exc:
        outcome = f"failed ({exc.reason}: {exc})"
        assert exc.reason == "STORE_UNAVAILABLE", exc
        failed_after = time.monotonic() - started
        # Cleanly: the published state is the one before, read with the node gone.
        await eventually(lambda: published(store, name, before), RECOVERY_S, "state before")
        await store.discard_version(name, version)
        # The node boots (tens of seconds) while a retry, without it, publishes.
        victim = killed[0][0]
        cluster.start(victim, wait=False)
        restarted = time.monotonic()
        retry_started = time.monotonic()

        async def retry() -> None:
            v = await store.begin_version(name)
            try:
                await stage_all(store, name, v, batches, deletions)
                await store.publish_version(name, v, sp)
            except GroundwireError:
                await store.discard_version(name, v)
                raise

        await eventually(retry, RECOVERY_S, "a retry without the node", every=1.0)
        nodes = (await engine(cluster, "/_cluster/health"))["number_of_nodes"]
        outcome += (
            f" after {failed_after:.1f}s; retry published in "
            f"{time.monotonic() - retry_started:.1f}s ({nodes} nodes at its end)"
        )
    assert killed, "the node was not killed"
    victim, role, _ = killed[0]
    await eventually(lambda: published(store, name, after), RECOVERY_S, "state after")

    if not restarted:
        cluster.start(victim, wait=False)
        restarted = time.monotonic()
    await wait_health(cluster, nodes=3, status="yellow")
    joined = time.monotonic() - restarted
    await wait_health(cluster, nodes=3, status="green")
    green = time.monotonic() - restarted
    await published(store, name, after)
    print(
        f"\n[failover ingestion] killed node-{victim} ({role}) between batches 3 and 4: "
        f"{outcome}; after the restart, joined in {joined:.1f}s, green in {green:.1f}s, "
        "state complete"
    )


async def test_a_replica_killed_mid_item_loses_nothing(
    cluster: OpenSearchCluster, tmp_path: Path, fresh_database: str
) -> None:
    await wait_health(cluster, nodes=3, status="green")
    prefix = f"gwfk{uuid.uuid4().hex[:8]}-"
    try:
        final = await coordinator_killed_mid_item(tmp_path, fresh_database, cluster.urls, prefix)
        # Only the published version's indexes are left on the cluster.
        assert set(physical_versions(cluster.url, prefix)) == {final.version}
    finally:
        async with httpx.AsyncClient(timeout=60.0) as client:
            await client.delete(f"{cluster.url}/{prefix}*", params={"expand_wildcards": "all"})
