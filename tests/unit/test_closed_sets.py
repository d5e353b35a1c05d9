"""Closed sets are enums in the domain whose members are the strings used in the
configuration, the store and the contract's string fields; the contract
documents every member."""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from groundwire.app.agent_config import AgentRagConfig
from groundwire.app.config import IndexConfig, IngestionConfig
from groundwire.app.store_config import StoreConfig
from groundwire.domain.indexes import DistanceMetric, IngestionStrategy, StoreKind
from groundwire.domain.operations import (
    DocumentFailureInfo,
    DocumentFailureReason,
    Operation,
    OperationErrorCode,
    OperationState,
    OperationTrigger,
)
from groundwire.domain.query import QueryRewriting
from groundwire.domain.reranking import RerankFailureCode
from groundwire.stores import base as store_base
from groundwire_client.v1 import ingestion_pb2

PROTO = Path(__file__).resolve().parents[2] / "proto" / "groundwire" / "v1"


def field_comment(proto: str, field: str) -> str:
    """The comment block directly above the field declaration `field`."""
    lines = (PROTO / proto).read_text().splitlines()
    (at,) = [i for i, line in enumerate(lines) if line.strip().startswith(field)]
    comment: list[str] = []
    for line in reversed(lines[:at]):
        if not line.strip().startswith("//"):
            break
        comment.append(line.strip().removeprefix("//"))
    return " ".join(reversed(comment))


@pytest.mark.parametrize(
    ("proto", "field", "members"),
    [
        ("ingestion.proto", "string metric = 4;", DistanceMetric),
        ("ingestion.proto", "string store = 6;", StoreKind),
        ("ingestion.proto", "string reason = 2;", DocumentFailureReason),
        ("ingestion.proto", "string error_code = 12;", OperationErrorCode),
        ("reranker.proto", "string failure_code = 9;", RerankFailureCode),
    ],
)
def test_the_contract_documents_every_member_of_a_closed_string_field(
    proto: str, field: str, members: type[StrEnum]
) -> None:
    words = set(re.findall(r"\w+", field_comment(proto, field)))
    assert {m.value for m in members} <= words


def test_ingestion_strategies_match_the_contract_enum() -> None:
    wire = {
        value.name.removeprefix("INGESTION_STRATEGY_")
        for value in ingestion_pb2.IngestionStrategy.DESCRIPTOR.values
        if value.number != 0
    }
    assert wire == {s.name for s in IngestionStrategy}


def test_the_store_metric_is_the_domain_metric() -> None:
    # The stores still declare their own enum; its values must stay these.
    assert [m.value for m in store_base.DistanceMetric] == [m.value for m in DistanceMetric]


def test_configuration_reads_the_same_strings_as_enum_members() -> None:
    index = IndexConfig.model_validate({"metric": "euclidean"})
    ingestion = IngestionConfig.model_validate({"strategy": "scheduled", "schedule": "0 3 * * *"})
    store = StoreConfig.model_validate({"kind": "postgres"})
    rag = AgentRagConfig.model_validate({"index": "docs", "query_rewriting": "history"})
    assert index.metric is DistanceMetric.EUCLIDEAN and index.metric.value == "euclidean"
    assert ingestion.strategy is IngestionStrategy.SCHEDULED
    assert store.kind is StoreKind.POSTGRES
    assert rag.query_rewriting is QueryRewriting.HISTORY
    assert IndexConfig().metric is DistanceMetric.COSINE
    assert IngestionConfig().strategy is IngestionStrategy.MANUAL
    assert StoreConfig().kind is StoreKind.MEMORY


@pytest.mark.parametrize(
    ("model", "values"),
    [
        (IndexConfig, {"metric": "inner"}),
        (IngestionConfig, {"strategy": "hourly"}),
        (StoreConfig, {"kind": "sqlite"}),
        (AgentRagConfig, {"index": "docs", "query_rewriting": "llm"}),
    ],
)
def test_configuration_refuses_values_outside_the_set(
    model: type[BaseModel], values: dict[str, str]
) -> None:
    with pytest.raises(ValidationError):
        model.model_validate(values)


def test_an_error_reason_outside_the_set_is_recorded_as_internal() -> None:
    assert (
        OperationErrorCode.for_reason("STORE_UNAVAILABLE") is OperationErrorCode.STORE_UNAVAILABLE
    )
    assert OperationErrorCode.for_reason("SOMETHING_NEW") is OperationErrorCode.INTERNAL


def test_operations_round_trip_with_their_codes_as_strings() -> None:
    op = Operation.new("docs", OperationTrigger.MANUAL, 1.0)
    failed = Operation(
        op.id,
        "docs",
        OperationState.FAILED,
        OperationTrigger.MANUAL,
        1.0,
        error_code=OperationErrorCode.EMBEDDING_PROVIDER_FAILED,
        failures=(DocumentFailureInfo("a", DocumentFailureReason.EMPTY),),
    )
    data = failed.to_json()
    assert data["error_code"] == "EMBEDDING_PROVIDER_FAILED"
    assert data["failures"] == [["a", "EMPTY"]]
    back = Operation.from_json(data)
    assert back == failed and back.failures[0].reason is DocumentFailureReason.EMPTY
    # A running operation has no error code; stored, it is the empty string.
    assert op.to_json()["error_code"] == ""
    assert Operation.from_json(op.to_json()).error_code is None
