"""Heavy options, one request at a time: what each of the costliest requests the API
accepts costs on a store, and, after the bounds, what the server answers instead
(refused before any store work, with its reason). The corpus is the noisy-neighbour
scenario's (tests/security/test_noisy_neighbours.py): 300 victim chunks, 2,000
attacker chunks of one repeated word and 1,000 wide pages.

    .venv/bin/python bench/bench_heavy_options.py [--stores memory,postgres] [--repeat 3]
        [--repeated 2000] [--server-pythonpath OLD_CHECKOUT/server]

Each line: the option, the best and worst of `--repeat` runs in ms, and the outcome
(ok, or the gRPC code and reason). Run it on the old code (`--server-pythonpath`) for
the "before" figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from groundwire.stores.postgres.embedded import start_embedded_sync
from groundwire_client.v1 import (
    common_pb2,
    ingestion_pb2,
    ingestion_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
)
from tests.security.test_noisy_neighbours import (
    ATTACKER_KEY,
    HYBRID,
    LEXICAL,
    VICTIM_KEY,
    metadata,
    push,
    toml,
    words,
)
from tests.support.databases import create_database
from tests.support.servers import ServerProcess, free_port


def _reason(err: grpc.aio.AioRpcError) -> str:
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            from google.rpc import error_details_pb2, status_pb2

            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                    info = error_details_pb2.ErrorInfo()
                    detail.Unpack(info)
                    return str(info.reason)
    return ""


def filter_of(keys: int, values: int) -> common_pb2.MetadataFilter:
    return common_pb2.MetadataFilter(
        conditions=[
            common_pb2.MetadataCondition(
                key=f"k{i}",
                any_of=common_pb2.StringList(values=[f"v{i}-{j}" for j in range(values)]),
            )
            for i in range(keys)
        ]
    )


def cases(vocab: list[str]) -> dict[str, Callable[[Any], Awaitable[object]]]:
    rng = random.Random(3)
    big_filter = filter_of(32, 100)
    common = " ".join(vocab[:32])
    pasted = " ".join(rng.sample(vocab, 400))

    def q(**kw: Any) -> retriever_pb2.RetrieveRequest:
        return retriever_pb2.RetrieveRequest(
            query=retriever_pb2.RagQuery(index_name="shared", **kw)
        )

    queries = {
        "phrase over a repeated word (top_k 100)": q(
            text='"' + "zo " * 40 + 'zo"', mode=LEXICAL, top_k=100
        ),
        "filter 32 keys x 100 values": q(text=common, mode=LEXICAL, top_k=10, filter=big_filter),
        "top_k 100, leg depth 1,000, RM3 100/100": q(
            text=common,
            mode=LEXICAL,
            top_k=100,
            fusion=retriever_pb2.FusionOptions(leg_depth=1000),
            lexical_feedback=retriever_pb2.LexicalFeedback(documents=100, terms=100),
        ),
        "hybrid, leg depth 1,000": q(
            text=pasted, mode=HYBRID, top_k=100, fusion=retriever_pb2.FusionOptions(leg_depth=1000)
        ),
        "hybrid, top_k 10, leg depth 1,000": q(
            text=common, mode=HYBRID, top_k=10, fusion=retriever_pb2.FusionOptions(leg_depth=1000)
        ),
        "32 common words": q(text=common, mode=LEXICAL, top_k=10),
        # The largest accepted forms (the bounds).
        "at bound: filter of 256 values (32 x 8)": q(
            text=common, mode=LEXICAL, top_k=10, filter=filter_of(32, 8)
        ),
        "at bound: top_k 100, RM3 10/100": q(
            text=common,
            mode=LEXICAL,
            top_k=100,
            lexical_feedback=retriever_pb2.LexicalFeedback(documents=10, terms=100),
        ),
        "at bound: hybrid, top_k 10, leg depth 250": q(
            text=common, mode=HYBRID, top_k=10, fusion=retriever_pb2.FusionOptions(leg_depth=250)
        ),
    }
    out: dict[str, Callable[[Any], Awaitable[object]]] = {}
    for name, request in queries.items():

        async def run(ch: Any, request: Any = request) -> object:
            stub = retriever_pb2_grpc.RetrieverServiceStub(ch)
            return await stub.Retrieve(request, metadata=metadata(ATTACKER_KEY), timeout=60)

        out[name] = run

    async def push_at_bound(ch: Any) -> object:
        # Near the chunk bound: 256 documents of about three chunks each.
        stub = ingestion_pb2_grpc.IngestionManagerServiceStub(ch)
        texts = [" ".join(rng.sample(vocab, 250)) for _ in range(256)]
        docs = [
            ingestion_pb2.PushedDocument(document_id=f"ok-{i}-{rng.random()}", text=t)
            for i, t in enumerate(texts)
        ]
        return await stub.UpsertDocuments(
            ingestion_pb2.UpsertDocumentsRequest(index_name="shared", documents=docs),
            metadata=metadata(ATTACKER_KEY),
            timeout=120,
        )

    async def push256(ch: Any) -> object:
        stub = ingestion_pb2_grpc.IngestionManagerServiceStub(ch)
        texts = [" ".join(rng.sample(vocab, 400)) for _ in range(256)]
        docs = [
            ingestion_pb2.PushedDocument(document_id=f"big-{i}-{rng.random()}", text=t)
            for i, t in enumerate(texts)
        ]
        return await stub.UpsertDocuments(
            ingestion_pb2.UpsertDocumentsRequest(index_name="shared", documents=docs),
            metadata=metadata(ATTACKER_KEY),
            timeout=120,
        )

    async def walk(ch: Any) -> object:
        stub = ingestion_pb2_grpc.IngestionManagerServiceStub(ch)
        token, pages = "", 0
        while True:
            page = await stub.ListDocuments(
                ingestion_pb2.ListDocumentsRequest(
                    index_name="shared", page_size=100, page_token=token
                ),
                metadata=metadata(ATTACKER_KEY),
                timeout=60,
            )
            pages += 1
            token = page.next_page_token
            if not token:
                return pages

    out["push 256 documents of 400 words"] = push256
    out["at bound: push 256 documents of 250 words"] = push_at_bound
    out["ListDocuments walk (100 per page)"] = walk
    return out


async def bench(target: str, repeat: int, repeated_chunks: int) -> None:
    rng = random.Random(11)
    vocab = words(rng, 3000)
    victim = [" ".join(rng.choices(vocab[:1500], k=80)) for _ in range(300)]
    repeated = [("zo " * 150 + rng.choice(vocab)).strip() for _ in range(repeated_chunks)]
    wide = [" ".join(rng.sample(vocab, 120)) for _ in range(1000)]
    async with grpc.aio.insecure_channel(target) as ch:
        ingest = ingestion_pb2_grpc.IngestionManagerServiceStub(ch)
        await push(ingest, VICTIM_KEY, victim, "v")
        await push(ingest, ATTACKER_KEY, repeated + wide, "a")
        for name, run in cases(vocab).items():
            times, outcome = [], "ok"
            for _ in range(repeat):
                t0 = time.perf_counter()
                try:
                    result = await run(ch)
                    written = getattr(result, "chunks_written", None)
                    outcome = "ok" if written is None else f"ok ({written} chunks)"
                except grpc.aio.AioRpcError as err:
                    outcome = f"{err.code().name} {_reason(err)}".strip()
                times.append(1000 * (time.perf_counter() - t0))
            print(f"  {name:42} {min(times):9.1f} .. {max(times):9.1f} ms  {outcome}", flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="memory,postgres")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--repeated", type=int, default=2000, help="chunks of the repeated word (phrase cost)"
    )
    parser.add_argument("--server-pythonpath", default=None)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gw-bench-heavy-"))
    pg = None
    try:
        for store in args.stores.split(","):
            env: dict[str, str] = {}
            if store == "postgres":
                pg = pg or start_embedded_sync(root / "pgdata", durable=False)
                env["GW_BENCH_DSN"] = create_database(pg.dsn)
            if args.server_pythonpath:
                env["PYTHONPATH"] = (
                    args.server_pythonpath + os.pathsep + os.environ.get("PYTHONPATH", "")
                )
            work = root / store
            work.mkdir()
            config = work / "groundwire.toml"
            config.write_text(toml(store, "GW_BENCH_DSN"))
            proc = ServerProcess(config, free_port(), work / "server.log", env=env).start()
            print(f"{store}:", flush=True)
            try:
                await bench(proc.target, args.repeat, args.repeated)
            finally:
                proc.stop()
    finally:
        if pg is not None:
            pg.release()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
