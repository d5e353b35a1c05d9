"""Opt-in content previews (`[logging.previews]`, seed 000) over real gRPC: when
switched on, Retrieve, Rerank and Execute each leave one DEBUG record with a
redacted, bounded preview of the query and the texts; secrets planted in the
document and the query never appear in any log record. Off by default: the
canary (tests/security/test_canary.py) proves no preview exists then, and the
last test here proves the same config with previews off logs none."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from groundwire.app.config import parse_config
from groundwire.app.config_base import ConfigError
from groundwire_client.v1 import agent_pb2 as ag
from groundwire_client.v1 import (
    agent_pb2_grpc,
    reranker_pb2_grpc,
    retriever_pb2_grpc,
)
from groundwire_client.v1 import reranker_pb2 as rr
from groundwire_client.v1 import retriever_pb2 as rt
from tests.support.servers import serving

pytestmark = pytest.mark.timeout(60)

MAX_CHARS = 48
EMAIL = "payroll.admin@example.com"
CARD = "4111 1111 1111 1111"
API_KEY = "sk-proj-Zx81Yw72Xv63Wu54Tt45Ss36"
AWS = "AKIAIOSFODNN7EXAMPLE"
PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
SECRETS = [EMAIL, CARD, API_KEY, AWS, "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "Zx81Yw72"]
DOCUMENT = (
    f"Card {CARD}, mail {EMAIL}. Key {API_KEY}, aws {AWS}. Travel expenses. "
    f"{PEM} " + "Travel policy detail. " * 40
)
QUERY = f"travel expenses for {EMAIL}"
PREVIEW_MESSAGES = {"retrieval preview", "reranking preview", "agent context preview"}


def config(enabled: bool) -> dict[str, Any]:
    lexical = {"index": "docs", "retrieval_mode": "lexical"}
    return {
        "auth": {"mode": "disabled"},
        "logging": {
            "level": "DEBUG",
            "previews": {"enabled": enabled, "max_chars": MAX_CHARS, "max_items": 2},
        },
        "indexes": {
            "docs": {
                "sources": [
                    {"kind": "inline", "id": "travel", "title": "Travel", "text": DOCUMENT},
                    {"kind": "inline", "id": "other", "title": "Other", "text": "Travel FAQ."},
                    {"kind": "inline", "id": "third", "title": "Third", "text": "Travel tips."},
                ],
                "ingestion": {"strategy": "on_startup"},
            }
        },
        "rerankers": {"overlap": {"kind": "offline"}},
        "reranking": {"default_reranker": "overlap"},
        "models": {"offline": {"kind": "offline"}},
        "agents": {
            "helper": {
                "name": "Helper",
                "model": "offline/extractive-v1",
                "rag": {**lexical, "reranking": {"enabled": True, "reranker": "overlap"}},
            }
        },
    }


async def exercise(port: int) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        retrieve = await retriever_pb2_grpc.RetrieverServiceStub(channel).Retrieve(
            rt.RetrieveRequest(
                query=rt.RagQuery(index_name="docs", text=QUERY, mode=rt.RETRIEVAL_MODE_LEXICAL)
            ),
            timeout=10,
        )
        assert retrieve.results, "control: the document was retrieved"
        await reranker_pb2_grpc.RerankerServiceStub(channel).Rerank(
            rr.RerankRequest(
                query=QUERY,
                candidates=[
                    rr.RerankCandidate(document_id="d1", chunk_id="c0", content=DOCUMENT),
                    rr.RerankCandidate(document_id="d2", chunk_id="c0", content="Travel FAQ."),
                    rr.RerankCandidate(document_id="d3", chunk_id="c0", content="Travel tips."),
                ],
            ),
            timeout=10,
        )
        await agent_pb2_grpc.AgentServiceStub(channel).Execute(
            ag.ExecuteRequest(input=ag.ExecutionInput(agent_id="helper", message=QUERY)),
            timeout=10,
        )


@pytest.fixture
async def records(
    request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> AsyncIterator[list[logging.LogRecord]]:
    caplog.set_level(logging.DEBUG)
    # Also the package's own logger: a session fixture of this worker (tests/conftest.py
    # `app`) may have set it to WARNING, which would drop the DEBUG previews.
    caplog.set_level(logging.DEBUG, logger="groundwire")
    async with serving(parse_config(config(request.param))) as app:
        await exercise(app.port)
    yield list(caplog.records)


def fields(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k in ("query_preview", "text_previews")}


@pytest.mark.parametrize("records", [True], indirect=True)
async def test_enabled_previews_are_redacted_and_bounded(
    records: list[logging.LogRecord],
) -> None:
    previews = [r for r in records if r.getMessage() in PREVIEW_MESSAGES]
    assert {r.getMessage() for r in previews} == PREVIEW_MESSAGES
    for record in previews:
        assert record.levelno == logging.DEBUG
        f = fields(record)
        assert len(f["query_preview"]) <= MAX_CHARS
        assert "[REDACTED:email]" in f["query_preview"]
        texts = f["text_previews"]
        assert 1 <= len(texts) <= 2  # max_items
        assert all(len(t) <= MAX_CHARS for t in texts)
    # The planted document's preview shows its redaction markers, cut at the bound.
    shown = " ".join(t for r in previews for t in fields(r)["text_previews"])
    assert "Card [REDACTED:card], mail [REDACTED:email]." in shown
    assert "…" in shown
    # No secret anywhere in any record (previews or not).
    everything = " ".join(f"{r.getMessage()} {vars(r)}" for r in records)
    for secret in SECRETS:
        assert secret not in everything


@pytest.mark.parametrize("records", [False], indirect=True)
async def test_previews_off_log_none(records: list[logging.LogRecord]) -> None:
    assert not [r for r in records if r.getMessage() in PREVIEW_MESSAGES]
    assert not [r for r in records if fields(r)]
    assert any(r.getMessage() == "rpc" for r in records), "control: logs were captured"


def test_enabled_previews_need_debug_logging() -> None:
    data = config(True)
    data["logging"]["level"] = "INFO"
    with pytest.raises(ConfigError, match=r"logging.*previews\.enabled"):
        parse_config(data)
    data["logging"] = {"previews": {"max_chars": 5000}}
    with pytest.raises(ConfigError, match=r"logging\.previews\.max_chars"):
        parse_config(data)
    data["logging"] = {"previews": {"enable": True}}
    with pytest.raises(ConfigError, match=r"logging\.previews\.enable"):
        parse_config(data)
