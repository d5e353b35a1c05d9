"""Token chunking end to end over real gRPC, on the memory and PostgreSQL stores:
an index chunked in the local model's tokens (a per-extension policy for .txt)
ingests, describes its policy and retrieves exact spans; changing the chunking
policy schedules a rebuild that re-chunks everything."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from groundwire.app.config import parse_config
from groundwire.providers.embeddings.onnx_local import LocalOnnxEmbedder
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import ingestion_pb2_grpc, retriever_pb2, retriever_pb2_grpc
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(90)

DATA = Path("/work/shared/data/scifact/corpus.jsonl")
MAX_SEQ = 96


def write_corpus(root: Path) -> dict[str, str]:
    """Six real abstracts as .txt and two as Markdown; returns name -> text."""
    if not DATA.is_file():
        pytest.skip("the scifact collection is not available")
    root.mkdir(parents=True, exist_ok=True)
    rows = []
    with DATA.open(encoding="utf-8") as f:
        for line in f:
            rows.append(json.loads(line))
            if len(rows) == 8:
                break
    out = {}
    for i, row in enumerate(rows):
        if i < 6:
            name, text = f"paper{i:02d}.txt", f"{row['title']}\n\n{row['text']}\n"
        else:
            name = f"paper{i:02d}.md"
            text = f"# {row['title']}\n\n## Abstract\n\n{row['text']}\n"
        (root / name).write_text(text, encoding="utf-8")
        out[name] = text
    return out


def token_config(docs: Path, store: dict[str, object], txt_size: int = 48) -> dict[str, Any]:
    return {
        "auth": {"mode": "disabled"},
        "store": store,
        "retrieval": {"max_top_k": 500},
        "embedders": {"minilm": {"kind": "local-onnx", "max_seq_length": MAX_SEQ, "threads": 1}},
        "indexes": {
            "papers": {
                "embedder": "minilm",
                "sources": [{"kind": "directory", "path": str(docs), "glob": "*"}],
                "chunking": {
                    "unit": "tokens",
                    "size": MAX_SEQ,
                    "overlap": 16,
                    "extensions": {".txt": {"size": txt_size, "overlap": 0}},
                },
            }
        },
    }


class Client:
    def __init__(self, app: RunningApp) -> None:
        self.app = app
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
        self.ing = ingestion_pb2_grpc.IngestionManagerServiceStub(self.channel)
        self.ret = retriever_pb2_grpc.RetrieverServiceStub(self.channel)

    async def ingest(self) -> ing.Operation:
        op = (
            await self.ing.StartIngestion(ing.StartIngestionRequest(index_name="papers"))
        ).operation
        last = op
        async for msg in self.ing.WatchIngestion(
            ing.WatchIngestionRequest(operation_id=op.id), timeout=60
        ):
            last = msg.operation
        return last

    async def status(self) -> ing.IndexStatus:
        return (
            await self.ing.GetIndexStatus(ing.GetIndexStatusRequest(index_name="papers"))
        ).status

    async def retrieve(
        self,
        text: str,
        mode: retriever_pb2.RetrievalMode.ValueType = retriever_pb2.RETRIEVAL_MODE_SEMANTIC,
        top_k: int = 50,
    ) -> list[retriever_pb2.RetrievalResult]:
        resp = await self.ret.Retrieve(
            retriever_pb2.RetrieveRequest(
                query=retriever_pb2.RagQuery(index_name="papers", text=text, mode=mode, top_k=top_k)
            )
        )
        return list(resp.results)


@pytest.fixture(params=["memory", "postgres"])
def store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    if request.param == "postgres":
        monkeypatch.setenv("GW_TEST_DSN", request.getfixturevalue("fresh_database"))
        return {"kind": "postgres", "dsn": {"env": "GW_TEST_DSN"}, "pool_max_size": 4}
    return {"kind": "memory"}


@pytest.fixture
async def client(
    tmp_path: Path, store: dict[str, object]
) -> AsyncIterator[tuple[Client, dict[str, str]]]:
    texts = write_corpus(tmp_path / "docs")
    async with serving(parse_config(token_config(tmp_path / "docs", store))) as app:
        c = Client(app)
        yield c, texts
        await c.channel.close()


async def test_token_chunked_index_ingests_describes_and_retrieves(
    client: tuple[Client, dict[str, str]],
) -> None:
    c, texts = client
    desc = (await c.ing.GetIndex(ing.GetIndexRequest(index_name="papers"))).index
    assert (desc.chunking.unit, desc.chunking.size, desc.chunking.overlap) == (
        ing.CHUNK_UNIT_TOKENS,
        MAX_SEQ,
        16,
    )
    assert [(e.extension, e.unit, e.size, e.overlap) for e in desc.chunking.extensions] == [
        (".txt", ing.CHUNK_UNIT_TOKENS, 48, 0)
    ]
    done = await c.ingest()
    assert done.state == ing.OPERATION_STATE_SUCCEEDED and done.counts.ingested == 8
    assert done.counts.chunks_written > 8 * 2
    handle = c.app.components.catalog.get("papers")
    counter = handle.tokenizer
    assert counter is not None
    # Every stored chunk fits its extension's token size, and its span is exact.
    seen: dict[str, int] = {}
    everything = await c.retrieve("study results patients cells", top_k=200)
    assert len(everything) == done.counts.chunks_written
    for r in everything:
        text = texts[r.document_id]
        assert text[r.span.start : r.span.end] == r.content
        limit = 48 if r.document_id.endswith(".txt") else MAX_SEQ
        assert counter.document_tokens(r.content) <= limit
        seen[r.document_id] = seen.get(r.document_id, 0) + 1
    assert set(seen) == set(texts)
    # Semantic retrieval through the same model finds a paper by its own sentence.
    name = "paper03.txt"
    sentence = texts[name].split("\n\n")[1].split(". ")[0]
    top = await c.retrieve(sentence, top_k=3)
    assert top[0].document_id == name
    hybrid = await c.retrieve(sentence, retriever_pb2.RETRIEVAL_MODE_HYBRID, top_k=3)
    assert hybrid[0].document_id == name
    # Pushed documents have no file name: plain text takes the .txt policy,
    # Markdown the .md one (here the default).
    body = texts["paper00.txt"].split("\n\n", 1)[1]
    await c.ing.UpsertDocuments(
        ing.UpsertDocumentsRequest(
            index_name="papers",
            documents=[
                ing.PushedDocument(document_id="pushed-text", text=body),
                ing.PushedDocument(
                    document_id="pushed-md",
                    text=f"# Pushed\n\n{body}",
                    format=ing.DOCUMENT_FORMAT_MARKDOWN,
                ),
            ],
        )
    )
    pushed: dict[str, list[int]] = {"pushed-text": [], "pushed-md": []}
    for r in await c.retrieve("study results patients cells", top_k=500):
        if r.document_id in pushed:
            pushed[r.document_id].append(counter.document_tokens(r.content))
    assert pushed["pushed-text"] and max(pushed["pushed-text"]) <= 48
    assert max(pushed["pushed-md"]) > 48 and max(pushed["pushed-md"]) <= MAX_SEQ
    # Nothing was truncated by the embedder.
    assert isinstance(handle.embedder, LocalOnnxEmbedder)
    assert handle.embedder.truncated_texts == 0


async def test_changing_the_policy_schedules_a_rebuild(
    tmp_path: Path, fresh_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    write_corpus(docs)
    monkeypatch.setenv("GW_TEST_DSN", fresh_database)
    store: dict[str, object] = {"kind": "postgres", "dsn": {"env": "GW_TEST_DSN"}}
    async with serving(parse_config(token_config(docs, store))) as app:
        c = Client(app)
        first = await c.ingest()
        assert first.state == ing.OPERATION_STATE_SUCCEEDED and not first.rebuild
        again = await c.ingest()
        assert again.counts.unchanged == 8 and not (await c.status()).rebuild_pending
        await c.channel.close()
    # Only the .txt policy changes: the recorded descriptor differs, so the index
    # must be rebuilt, and the rebuild re-chunks every document (never a mix).
    async with serving(parse_config(token_config(docs, store, txt_size=64))) as app:
        c = Client(app)
        assert (await c.status()).rebuild_pending
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await c.ing.UpsertDocuments(
                ing.UpsertDocumentsRequest(
                    index_name="papers", documents=[ing.PushedDocument(document_id="p", text="x")]
                )
            )
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        rebuilt = await c.ingest()
        assert rebuilt.rebuild and rebuilt.counts.ingested == 8 and rebuilt.counts.unchanged == 0
        assert not (await c.status()).rebuild_pending
        counter = app.components.catalog.get("papers").tokenizer
        assert counter is not None
        sizes = [
            counter.document_tokens(r.content)
            for r in await c.retrieve("study results patients cells", top_k=200)
            if r.document_id.endswith(".txt")
        ]
        assert max(sizes) > 48 and max(sizes) <= 64
        await c.channel.close()
