"""Noisy neighbours: one tenant runs the worst requests the API accepts, at its limits,
while another tenant's latency is measured, on both stores.

The server is a `groundwire serve` subprocess (its event loop and CPU are its own), and so
is the attacker (a process of its own, so its client work never delays the victim's
measurements). The attacker shares the victim's index and holds its own documents: thousands of chunks of
one repeated word (for crafted phrases) and a wide vocabulary (for pasted pages). Its
requests: 4,000-character lexical and hybrid queries of ~400 distinct words at the
maximum top_k and leg depth, crafted phrase queries over its repeated-word chunks, and
maximum pushes, from more concurrent callers than its limits admit. The victim runs
short lexical queries one at a time, quiet and under attack.

Stated bound, asserted: the victim's p99 under attack stays within 10x its quiet p99 plus
300 ms (two cores serve the server, PostgreSQL, the attacker and the victim, so some
slowdown is physics; before the term limit, the postings and tenant admission a single
pasted query held PostgreSQL for 22.7 s and four attackers moved the victim's p50 from
2.8 ms to 3.7 s).
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import random
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from groundwire.domain.auth import hash_key
from groundwire_client.v1 import (
    ingestion_pb2,
    ingestion_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
)
from tests.security.harness import postgres_available, report
from tests.support.servers import ServerProcess, free_port

MODULE = "noisy neighbours"
VICTIM_KEY = "gw-victim-" + "v" * 24
ATTACKER_KEY = "gw-attacker-" + "a" * 22
LEXICAL = retriever_pb2.RETRIEVAL_MODE_LEXICAL
HYBRID = retriever_pb2.RETRIEVAL_MODE_HYBRID
ATTACK_SECONDS = 8.0
VICTIM_QUERIES = 100
ATTACKERS = 6


def toml(store: str, dsn_env: str) -> str:
    store_section = (
        f'[store]\nkind = "postgres"\ndsn = {{ env = "{dsn_env}" }}\n'
        if store == "postgres"
        else '[store]\nkind = "memory"\n'
    )
    return f"""
{store_section}
[auth]
mode = "api_keys"
[[auth.keys]]
id = "victim"
hash = "{hash_key(VICTIM_KEY)}"
tenant = "victim"
permissions = ["retrieve", "ingest"]
[[auth.keys]]
id = "attacker"
hash = "{hash_key(ATTACKER_KEY)}"
tenant = "attacker"
permissions = ["retrieve", "ingest"]

[logging]
level = "WARNING"

[limits.retrieve]
max_concurrent_per_tenant = 2
[limits.ingest]
max_concurrent_per_tenant = 1

[embedders.hash]
kind = "hashing"
dimensions = 64

[indexes.shared]
embedder = "hash"
"""


def words(rng: random.Random, n: int) -> list[str]:
    syllables = ["ka", "lo", "mi", "ne", "ro", "ta", "vi", "su", "pe", "da", "go", "ri"]
    out: dict[str, None] = {}
    while len(out) < n:
        out["".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))] = None
    return list(out)


def metadata(key: str) -> tuple[tuple[str, str | bytes], ...]:
    return (("authorization", f"Bearer {key}"),)


async def push(
    stub: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub,
    key: str,
    texts: list[str],
    prefix: str,
) -> None:
    for start in range(0, len(texts), 256):
        docs = [
            ingestion_pb2.PushedDocument(document_id=f"{prefix}-{start + i}", text=t)
            for i, t in enumerate(texts[start : start + 256])
        ]
        await stub.UpsertDocuments(
            ingestion_pb2.UpsertDocumentsRequest(index_name="shared", documents=docs),
            metadata=metadata(key),
            timeout=120,
        )


async def victim_latencies(
    stub: retriever_pb2_grpc.RetrieverServiceAsyncStub, queries: list[str]
) -> list[float]:
    out = []
    for q in queries:
        t0 = time.perf_counter()
        await stub.Retrieve(
            retriever_pb2.RetrieveRequest(
                query=retriever_pb2.RagQuery(index_name="shared", text=q, mode=LEXICAL, top_k=10)
            ),
            metadata=metadata(VICTIM_KEY),
            timeout=30,
        )
        out.append(time.perf_counter() - t0)
    return out


def p50_p99(samples: list[float]) -> tuple[float, float]:
    """Median and 99th percentile (nearest rank: of 100 samples, the second worst)."""
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


@pytest.fixture(params=["memory", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, ServerProcess]]:
    store = str(request.param)
    env = {}
    if store == "postgres":
        if not postgres_available():
            pytest.fail("the PostgreSQL store is not installed")
        env["GW_NOISY_DSN"] = request.getfixturevalue("fresh_database")
    config = tmp_path / "groundwire.toml"
    config.write_text(toml(store, "GW_NOISY_DSN"))
    proc = ServerProcess(config, free_port(), tmp_path / "server.log", env=env).start()
    try:
        yield store, proc
    finally:
        proc.stop()


ATTACKS = ("lexical", "hybrid", "phrase", "push")


def attack(
    target: str,
    seed: int,
    seconds: float,
    results: multiprocessing.Queue[object],
    kinds: tuple[str, ...] = ATTACKS,
) -> None:
    """The attacker's process: ATTACKERS concurrent callers for `seconds`, each
    cycling through the `kinds` of attack."""
    results.put(asyncio.run(_attack(target, seed, seconds, kinds)))


async def _attack(target: str, seed: int, seconds: float, kinds: tuple[str, ...]) -> dict[str, int]:
    rng = random.Random(seed)
    vocab = words(random.Random(11), 3000)
    outcomes: dict[str, int] = {}
    pasted = " ".join(rng.sample(vocab, 700))[:4000]
    queries = {
        "lexical": retriever_pb2.RagQuery(
            index_name="shared", text=pasted, mode=LEXICAL, top_k=100
        ),
        "hybrid": retriever_pb2.RagQuery(
            index_name="shared",
            text=pasted,
            mode=HYBRID,
            top_k=100,
            fusion=retriever_pb2.FusionOptions(leg_depth=1000),
        ),
        # Every attacker chunk of repeated words nearly matches.
        "phrase": retriever_pb2.RagQuery(
            index_name="shared", text='"' + "zo " * 40 + 'zo"', mode=LEXICAL, top_k=100
        ),
    }
    stop = time.monotonic() + seconds
    async with grpc.aio.insecure_channel(target) as channel:
        ingest: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub = (
            ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        )
        retrieve: retriever_pb2_grpc.RetrieverServiceAsyncStub = (
            retriever_pb2_grpc.RetrieverServiceStub(channel)
        )

        async def caller(n: int) -> None:
            # Pushes take one turn in seven; the queries share the rest.
            query_kinds = [k for k in kinds if k != "push"]
            i = n
            while time.monotonic() < stop:
                i += 1
                try:
                    if "push" in kinds and (not query_kinds or i % 7 == 0):
                        texts = [" ".join(rng.sample(vocab, 120)) for _ in range(256)]
                        await push(ingest, ATTACKER_KEY, texts, f"p{n}-{i}")
                    else:
                        kind = query_kinds[i % len(query_kinds)]
                        await retrieve.Retrieve(
                            retriever_pb2.RetrieveRequest(query=queries[kind]),
                            metadata=metadata(ATTACKER_KEY),
                            timeout=30,
                        )
                    outcomes["ok"] = outcomes.get("ok", 0) + 1
                except grpc.aio.AioRpcError as err:
                    name = err.code().name
                    outcomes[name] = outcomes.get(name, 0) + 1
                    if err.code() is grpc.StatusCode.RESOURCE_EXHAUSTED:
                        await asyncio.sleep(0.005)

        await asyncio.gather(*(caller(n) for n in range(ATTACKERS)))
    return outcomes


@dataclass(frozen=True)
class Measured:
    """The victim's latencies quiet and under attack, and the attacker's outcomes."""

    quiet: list[float]
    loud: list[float]
    outcomes: dict[str, int]

    def line(self, label: str) -> str:
        q50, q99 = p50_p99(self.quiet)
        a50, a99 = p50_p99(self.loud)
        return (
            f"{label}: victim lexical p50/p99 quiet {1000 * q50:.1f}/{1000 * q99:.1f} ms, "
            f"under attack {1000 * a50:.1f}/{1000 * a99:.1f} ms; "
            f"attacker calls {dict(sorted(self.outcomes.items()))}"
        )


async def measure(
    target: str, kinds: tuple[str, ...] = ATTACKS, seconds: float = ATTACK_SECONDS
) -> Measured:
    """Load both tenants' documents through `target`, time the victim quiet, then again
    while an attacker process runs `kinds` for `seconds`."""
    rng = random.Random(11)
    vocab = words(rng, 3000)
    victim_texts = [" ".join(rng.choices(vocab[:1500], k=80)) for _ in range(300)]
    # The attacker's chunks: one repeated word (crafted phrases scan them) and pages
    # drawn from the whole vocabulary (pasted queries match them).
    repeated = [("zo " * 150 + rng.choice(vocab)).strip() for _ in range(2000)]
    wide = [" ".join(rng.sample(vocab, 120)) for _ in range(1000)]
    async with grpc.aio.insecure_channel(target) as channel:
        ingest: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub = (
            ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        )
        retrieve: retriever_pb2_grpc.RetrieverServiceAsyncStub = (
            retriever_pb2_grpc.RetrieverServiceStub(channel)
        )
        await push(ingest, VICTIM_KEY, victim_texts, "v")
        await push(ingest, ATTACKER_KEY, repeated + wide, "a")
        queries = [" ".join(rng.sample(vocab[:1500], 3)) for _ in range(VICTIM_QUERIES)]
        await victim_latencies(retrieve, queries[:10])  # warm-up
        quiet = await victim_latencies(retrieve, queries)

        ctx = multiprocessing.get_context("spawn")
        results: multiprocessing.Queue[object] = ctx.Queue()
        attacker = ctx.Process(target=attack, args=(target, 5, seconds, results, kinds))
        attacker.start()
        try:
            await asyncio.sleep(1.5)  # the attacker's interpreter starts, then attacks
            loud = await victim_latencies(retrieve, queries)
            outcomes = await asyncio.to_thread(results.get, True, seconds + 60)
        finally:
            attacker.join(30)
            if attacker.is_alive():
                attacker.kill()
    assert isinstance(outcomes, dict)
    return Measured(quiet, loud, outcomes)


async def test_one_tenant_at_its_limits_does_not_stall_another(
    server: tuple[str, ServerProcess],
) -> None:
    store, proc = server
    m = await measure(proc.target)
    report(MODULE, m.line(store))
    # The attack ran, at its limits, and nothing failed but admission.
    assert m.outcomes.get("ok", 0) > 0
    assert set(m.outcomes) <= {"ok", "RESOURCE_EXHAUSTED"}, m.outcomes
    assert m.outcomes.get("RESOURCE_EXHAUSTED", 0) > 0, m.outcomes
    (_, q99), (_, a99) = p50_p99(m.quiet), p50_p99(m.loud)
    assert a99 <= 10 * q99 + 0.300, (store, q99, a99)
