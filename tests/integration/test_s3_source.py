"""`kind = "s3"` sources against a real S3 server (SeaweedFS, tests/support/seaweedfs.py),
over real gRPC: the own-documents folder in a bucket answers the walkthrough's
question with a citation naming the object; objects changed, added and deleted
between runs are exactly the ones re-read (counted at the download) and nothing is
re-embedded for unchanged text (counted at the embedder); an object larger than
the bound is refused from the listing, never downloaded; the server stopped in the
middle of a sync fails the run cleanly (the published version serves on) and a
retry completes; wrong or missing credentials fail with a clear error naming the
source and no secret anywhere; access lists by key glob travel with the objects."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from groundwire.ingestion import s3_source
from groundwire_client.v1 import agent_pb2, agent_pb2_grpc
from groundwire_client.v1 import ingestion_pb2 as ing
from tests.support.s3_sources import KEY_ENV, SECRET_ENV, Client, configuration, running
from tests.support.seaweedfs import SeaweedS3, weed_binary

# The weed fixture may wait for its build (bounded by BUILD_TIMEOUT and the
# readiness wait): only the tests themselves are under the timeout.
pytestmark = [pytest.mark.timeout(600, func_only=True), pytest.mark.slow]

# The own-documents walkthrough's three files (README.md, "Your own documents").
OWN_DOCUMENTS = {
    "my-docs/vpn.md": b"# VPN access\n\nConnect to the office VPN with the Northwind client.\n"
    b"If the client shows error E42, reset your token in the self-service portal.\n",
    "my-docs/expenses.txt": b"Expense reports are due within 30 days of the purchase.\n"
    b"Receipts over 25 euros must be attached to the report.\n",
    "my-docs/lunch.md": b"# Cafeteria\n\nThe cafeteria serves lunch from 11:30 to 14:00 on weekdays.\n",
}


@pytest.fixture(scope="module")
def weed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    server = SeaweedS3(weed_binary(), tmp_path_factory.mktemp("seaweedfs"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def bucket(weed: SeaweedS3, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"gw-{uuid.uuid4().hex[:16]}"
    weed.make_bucket(name)
    monkeypatch.setenv(KEY_ENV, weed.access_key)
    monkeypatch.setenv(SECRET_ENV, weed.secret_key)
    return name


@pytest.fixture
def downloads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The keys whose bodies were downloaded, in order."""
    seen: list[str] = []
    original = s3_source._download

    async def counting(s3: Any, item: s3_source.S3Item, target: Path) -> Any:
        seen.append(item.key)
        return await original(s3, item, target)

    monkeypatch.setattr(s3_source, "_download", counting)
    return seen


def source(weed: SeaweedS3, bucket: str, **extra: object) -> dict[str, object]:
    return {
        "kind": "s3",
        "endpoint": weed.endpoint,
        "bucket": bucket,
        "prefix": "my-docs/",
        "addressing": "path",
        "access_key_id": {"env": KEY_ENV},
        "secret_access_key": {"env": SECRET_ENV},
        "allow_cidrs": ["127.0.0.1/32"],
        "read_timeout_seconds": 10,
        **extra,
    }


def failures(op: ing.Operation) -> dict[str, str]:
    return {f.document_id: f.reason for f in (*op.failures, *op.skipped)}


async def test_the_own_documents_walkthrough_works_from_a_bucket(
    weed: SeaweedS3, bucket: str
) -> None:
    """The tutorial's configuration with the folder swapped for the bucket: the
    same grounded answer, cited as s3://bucket/key."""
    weed.put(bucket, OWN_DOCUMENTS)
    cfg = configuration(source(weed, bucket))
    cfg["embedders"] = {"minilm": {"kind": "local-onnx"}}
    cfg["indexes"]["docs"]["embedder"] = "minilm"  # type: ignore[index]
    cfg["models"] = {"offline": {"kind": "offline"}}
    cfg["agents"] = {
        "docs-assistant": {
            "name": "Docs Assistant",
            "model": "offline/extractive-v1",
            "instructions": "Answer from the documents and cite them.",
            "rag": {
                "index": "docs",
                "mode": "grounded",
                "no_context_behavior": "return_not_found",
                "acceptance": {"minimum_relevance": 0.65},
            },
        }
    }
    async with running(cfg) as client:
        op = await client.run()
        assert op.state == ing.OPERATION_STATE_SUCCEEDED, op
        assert (op.counts.ingested, op.counts.failed, op.counts.skipped) == (3, 0, 0)
        agents = agent_pb2_grpc.AgentServiceStub(client.channel)
        result = (
            await agents.Execute(
                agent_pb2.ExecuteRequest(
                    input=agent_pb2.ExecutionInput(
                        agent_id="docs-assistant",
                        message="What do I do about error E42 on the VPN?",
                    )
                )
            )
        ).result
        assert "reset your token" in result.answer
        assert [c.document_id for c in result.citations] == [f"s3://{bucket}/my-docs/vpn.md"]


async def test_changed_added_and_deleted_objects_are_exactly_what_is_reread(
    weed: SeaweedS3, bucket: str, downloads: list[str]
) -> None:
    big = b"x" * 5000
    weed.put(
        bucket,
        {
            **OWN_DOCUMENTS,
            "my-docs/big.txt": big,  # over max_file_bytes: refused from the listing
            "my-docs/photo.bin": b"\x00\x01",  # no loader: skipped from the listing
            "my-docs/.hidden.md": b"# hidden\n",  # not a document, as in directories
            "my-docs/drafts/": b"",  # a folder marker
            "elsewhere/outside.md": b"# Outside the prefix\n",
        },
    )
    async with running(configuration(source(weed, bucket), max_file_bytes=4096)) as client:
        first = await client.run()
        assert first.state == ing.OPERATION_STATE_SUCCEEDED, first
        assert first.counts.ingested == 3
        assert failures(first) == {
            f"s3://{bucket}/my-docs/big.txt": "TOO_LARGE",
            f"s3://{bucket}/my-docs/photo.bin": "UNSUPPORTED_FORMAT",
        }
        assert sorted(downloads) == sorted(OWN_DOCUMENTS)
        assert client.counter.document_texts > 0

        # Nothing changed: nothing downloaded, nothing embedded.
        downloads.clear()
        client.counter.document_texts = 0
        second = await client.run()
        assert second.state == ing.OPERATION_STATE_SUCCEEDED, second
        assert (second.counts.ingested, second.counts.unchanged) == (0, 3)
        assert downloads == []
        assert client.counter.document_texts == 0

        # One changed, one added, one deleted, one rewritten with the same text.
        weed.put(
            bucket,
            {
                "my-docs/vpn.md": b"# VPN access\n\nThe VPN now uses the Contoso client.\n",
                "my-docs/new.md": b"# Parking\n\nVisitors park on level two.\n",
                "my-docs/expenses.txt": OWN_DOCUMENTS["my-docs/expenses.txt"],
            },
        )
        weed.client().delete_object(Bucket=bucket, Key="my-docs/lunch.md")
        downloads.clear()
        third = await client.run()
        assert third.state == ing.OPERATION_STATE_SUCCEEDED, third
        counts = third.counts
        assert (counts.ingested, counts.unchanged, counts.deleted) == (2, 1, 1)
        assert sorted(downloads) == ["my-docs/expenses.txt", "my-docs/new.md", "my-docs/vpn.md"]
        # Only the two new texts (one chunk each) went to the embedder.
        assert client.counter.document_texts == 2
        assert await client.found("Contoso") == {f"s3://{bucket}/my-docs/vpn.md"}
        assert await client.found("cafeteria lunch") == set()
        assert await client.found("Visitors park") == {f"s3://{bucket}/my-docs/new.md"}


async def test_a_server_stopped_mid_sync_fails_the_run_and_a_retry_completes(
    weed: SeaweedS3, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    weed.put(bucket, OWN_DOCUMENTS)
    async with running(configuration(source(weed, bucket))) as client:
        first = await client.run()
        assert first.state == ing.OPERATION_STATE_SUCCEEDED, first
        weed.put(bucket, {"my-docs/vpn.md": b"# VPN access\n\nThe VPN now uses Contoso.\n"})

        original = s3_source._download

        async def stop_first(s3: Any, item: s3_source.S3Item, target: Path) -> Any:
            # The listing is done; the server goes away before the first read.
            await asyncio.to_thread(weed.stop)
            return await original(s3, item, target)

        monkeypatch.setattr(s3_source, "_download", stop_first)
        try:
            failed = await client.run()
        finally:
            monkeypatch.setattr(s3_source, "_download", original)
            await asyncio.to_thread(weed.start)
        assert failed.state == ing.OPERATION_STATE_FAILED, failed
        assert failed.error_code == "SOURCE_UNAVAILABLE"
        # The published version serves on, unchanged.
        assert await client.found("Northwind") == {f"s3://{bucket}/my-docs/vpn.md"}
        assert await client.found("Contoso") == set()

        retry = await client.run()
        assert retry.state == ing.OPERATION_STATE_SUCCEEDED, retry
        assert (retry.counts.ingested, retry.counts.unchanged) == (1, 2)
        assert await client.found("Contoso") == {f"s3://{bucket}/my-docs/vpn.md"}


@pytest.mark.parametrize("secret", ["wrong-secret-value-0123456789", ""])
async def test_wrong_or_missing_credentials_fail_naming_the_source_and_no_secret(
    weed: SeaweedS3,
    bucket: str,
    secret: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    weed.put(bucket, OWN_DOCUMENTS)
    monkeypatch.setenv(SECRET_ENV, secret)
    caplog.set_level(logging.DEBUG)
    async with running(configuration(source(weed, bucket))) as client:
        op = await client.run()
    assert op.state == ing.OPERATION_STATE_FAILED, op
    assert op.error_code == "SOURCE_ACCESS_DENIED"
    named = [r for r in caplog.records if getattr(r, "source", "") == f"s3://{bucket}/my-docs/"]
    assert named, "the error log names the source"
    text = caplog.text + "".join(str(r.__dict__) for r in caplog.records) + str(op)
    for value in (weed.access_key, weed.secret_key, "wrong-secret-value-0123456789"):
        assert value not in text


async def test_access_lists_by_key_glob_travel_with_the_objects(
    weed: SeaweedS3, bucket: str
) -> None:
    weed.put(
        bucket,
        {
            "my-docs/handbook.md": b"# Handbook\n\nThe leave policy for everyone.\n",
            "my-docs/hr/case.md": b"# Case\n\nA confidential leave policy case.\n",
        },
    )
    src = source(weed, bucket, acl_rules=[{"glob": "hr/**", "acl": ["group:hr"]}])
    async with running(configuration(src)) as client:
        op = await client.run()
        assert op.state == ing.OPERATION_STATE_SUCCEEDED, op
        everyone = {f"s3://{bucket}/my-docs/handbook.md"}
        assert await client.found("leave policy") == everyone
        hr = (("x-groundwire-principals", "group:hr"),)
        assert await client.found("leave policy", hr) == {
            *everyone,
            f"s3://{bucket}/my-docs/hr/case.md",
        }


async def test_the_watch_strategy_polls_the_listing_and_ingests_what_changed(
    weed: SeaweedS3, bucket: str
) -> None:
    weed.put(bucket, OWN_DOCUMENTS)
    cfg = configuration(source(weed, bucket), strategy="watch", watch_poll_seconds=1)

    async def until_found(client: Client, text: str, expected: set[str]) -> None:
        deadline = asyncio.get_running_loop().time() + 240
        while await client.found(text) != expected:
            assert asyncio.get_running_loop().time() < deadline, f"{text!r} never indexed"
            await asyncio.sleep(0.2)

    async with running(cfg) as client:
        await until_found(client, "Northwind", {f"s3://{bucket}/my-docs/vpn.md"})
        weed.put(bucket, {"my-docs/new.md": b"# Parking\n\nVisitors park on level two.\n"})
        await until_found(client, "Visitors park", {f"s3://{bucket}/my-docs/new.md"})
        weed.client().delete_object(Bucket=bucket, Key="my-docs/lunch.md")
        await until_found(client, "cafeteria", set())
