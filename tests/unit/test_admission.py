"""Tenant admission as a pure rule (domain/admission.py), its configuration
(app/admission_config.py) and the api layer's method families and tenants.
Time is a fake clock: no test sleeps."""

from __future__ import annotations

import pytest

from groundwire.api.admission import admission_tenant, family_of, refused
from groundwire.api.errors import to_rpc_status
from groundwire.app.admission_config import DEFAULT_CONCURRENCY, LimitsConfig, family_limits
from groundwire.app.config import ConfigError, parse_config
from groundwire.domain import admission as admission_module
from groundwire.domain.admission import (
    CONCURRENCY_RETRY_SECONDS,
    Admission,
    FamilyAdmission,
    FamilyLimits,
    Refusal,
    Rejection,
    RpcFamily,
)
from groundwire.domain.auth import Permission, Principal
from groundwire.domain.errors import ErrorKind
from groundwire_client.v1 import admin_pb2, agent_pb2, ingestion_pb2, reranker_pb2, retriever_pb2


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def family(limits: FamilyLimits, clock: FakeClock) -> FamilyAdmission:
    return FamilyAdmission(RpcFamily.RETRIEVE, limits, clock, refusal=Refusal.CONCURRENCY)


# -- concurrency -------------------------------------------------------------------


def test_concurrency_cap_refuses_the_call_past_it_with_a_retry_hint() -> None:
    gate = family(FamilyLimits(max_concurrent=2), FakeClock())
    assert gate.try_acquire("a") is None
    assert gate.try_acquire("a") is None
    assert gate.try_acquire("a") == Rejection(
        RpcFamily.RETRIEVE, Refusal.CONCURRENCY, CONCURRENCY_RETRY_SECONDS
    )
    assert gate.active("a") == 2


def test_concurrency_is_counted_per_tenant() -> None:
    gate = family(FamilyLimits(max_concurrent=1), FakeClock())
    assert gate.try_acquire("a") is None
    assert gate.try_acquire("a") is not None
    assert gate.try_acquire("b") is None
    assert (gate.active("a"), gate.active("b")) == (1, 1)


def test_release_frees_the_slot() -> None:
    gate = family(FamilyLimits(max_concurrent=1), FakeClock())
    assert gate.try_acquire("a") is None
    gate.release("a")
    assert gate.active("a") == 0
    assert gate.try_acquire("a") is None


def test_a_refused_call_takes_no_slot() -> None:
    gate = family(FamilyLimits(max_concurrent=1), FakeClock())
    assert gate.try_acquire("a") is None
    for _ in range(5):
        assert gate.try_acquire("a") is not None
    gate.release("a")
    assert gate.active("a") == 0


def test_release_without_admission_is_an_error() -> None:
    gate = family(FamilyLimits(max_concurrent=1), FakeClock())
    with pytest.raises(RuntimeError):
        gate.release("a")
    assert gate.try_acquire("a") is None
    gate.release("a")
    with pytest.raises(RuntimeError):
        gate.release("a")


def test_zero_limits_admit_everything() -> None:
    gate = family(FamilyLimits(), FakeClock())
    for _ in range(10_000):
        assert gate.try_acquire("a") is None
    assert gate.active("a") == 10_000


# -- rate ------------------------------------------------------------------------


def test_bucket_admits_a_burst_then_refuses_with_the_time_to_the_next_token() -> None:
    clock = FakeClock()
    gate = family(FamilyLimits(requests_per_second=2, burst=3), clock)
    for _ in range(3):
        assert gate.try_acquire("a") is None
        gate.release("a")
    rejection = gate.try_acquire("a")
    assert rejection is not None
    assert rejection.refusal is Refusal.RATE
    assert rejection.retry_after_seconds == pytest.approx(0.5)
    clock.advance(0.25)
    rejection = gate.try_acquire("a")
    assert rejection is not None and rejection.retry_after_seconds == pytest.approx(0.25)
    clock.advance(0.25)
    assert gate.try_acquire("a") is None


def test_bucket_refills_at_the_rate_and_never_beyond_the_burst() -> None:
    clock = FakeClock()
    gate = family(FamilyLimits(requests_per_second=10, burst=5), clock)
    for _ in range(5):
        assert gate.try_acquire("a") is None
        gate.release("a")
    clock.advance(3600)  # an hour idle still refills only `burst` tokens
    admitted = 0
    while gate.try_acquire("a") is None:
        gate.release("a")
        admitted += 1
    assert admitted == 5


def test_burst_defaults_to_one_second_of_the_rate() -> None:
    assert FamilyLimits(requests_per_second=2.5).bucket_size == 3
    assert FamilyLimits(requests_per_second=0.2).bucket_size == 1
    assert FamilyLimits(requests_per_second=4, burst=9).bucket_size == 9


def test_slow_rates_give_long_retry_delays() -> None:
    gate = family(FamilyLimits(requests_per_second=0.5), FakeClock())
    assert gate.try_acquire("a") is None
    rejection = gate.try_acquire("a")
    assert rejection is not None and rejection.retry_after_seconds == pytest.approx(2.0)


def test_rate_is_per_tenant() -> None:
    gate = family(FamilyLimits(requests_per_second=1, burst=1), FakeClock())
    assert gate.try_acquire("a") is None
    assert gate.try_acquire("a") is not None
    assert gate.try_acquire("b") is None


def test_a_call_refused_for_concurrency_spends_no_token() -> None:
    clock = FakeClock()
    gate = family(FamilyLimits(max_concurrent=1, requests_per_second=1, burst=2), clock)
    assert gate.try_acquire("a") is None
    for _ in range(5):
        rejection = gate.try_acquire("a")
        assert rejection is not None and rejection.refusal is Refusal.CONCURRENCY
    gate.release("a")
    assert gate.try_acquire("a") is None  # the second token is still there


def test_a_clock_stepping_backwards_does_not_drain_or_refill() -> None:
    clock = FakeClock()
    gate = family(FamilyLimits(requests_per_second=1, burst=1), clock)
    assert gate.try_acquire("a") is None
    gate.release("a")
    clock.advance(-50)
    assert gate.try_acquire("a") is not None
    clock.advance(50.5)
    assert gate.try_acquire("a") is not None  # only 0.5 s since the token was spent
    clock.advance(0.5)
    assert gate.try_acquire("a") is None


def test_negative_limits_are_refused() -> None:
    with pytest.raises(ValueError):
        FamilyLimits(max_concurrent=-1)
    with pytest.raises(ValueError):
        FamilyLimits(requests_per_second=-1)


# -- state stays bounded -------------------------------------------------------------


def test_idle_tenants_are_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admission_module, "_SWEEP_EVERY", 10)
    clock = FakeClock()
    gate = family(FamilyLimits(max_concurrent=4, requests_per_second=100, burst=1), clock)
    assert gate.try_acquire("busy") is None  # held across the sweep
    for i in range(8):
        assert gate.try_acquire(f"t{i}") is None
        gate.release(f"t{i}")
    assert gate.tracked_tenants() == 9
    clock.advance(1.0)  # every bucket is full again
    assert gate.try_acquire("new") is None  # the 10th admission sweeps
    assert gate.tracked_tenants() == 2  # "busy" (in flight) and "new"
    assert gate.active("busy") == 1
    gate.release("busy")


def test_a_tenant_with_a_partly_empty_bucket_is_not_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(admission_module, "_SWEEP_EVERY", 3)
    clock = FakeClock()
    gate = family(FamilyLimits(requests_per_second=1, burst=1), clock)
    assert gate.try_acquire("a") is None
    gate.release("a")
    assert gate.try_acquire("b") is None
    gate.release("b")
    assert gate.try_acquire("a") is not None  # 3rd admission sweeps: "a" must remain spent


# -- families --------------------------------------------------------------------


def test_families_are_independent() -> None:
    clock = FakeClock()
    gate = Admission(
        {
            RpcFamily.RETRIEVE: FamilyLimits(max_concurrent=1),
            RpcFamily.EXECUTE: FamilyLimits(max_concurrent=1),
        },
        clock,
    )
    assert gate.try_acquire(RpcFamily.RETRIEVE, "a") is None
    assert gate.try_acquire(RpcFamily.EXECUTE, "a") is None
    retrieve = gate.try_acquire(RpcFamily.RETRIEVE, "a")
    execute = gate.try_acquire(RpcFamily.EXECUTE, "a")
    assert retrieve is not None and retrieve.refusal is Refusal.CONCURRENCY
    assert execute is not None and execute.refusal is Refusal.EXECUTIONS
    for _ in range(100):  # families without limits admit everything
        assert gate.try_acquire(RpcFamily.MANAGE, "a") is None
    gate.release(RpcFamily.RETRIEVE, "a")
    assert gate.family(RpcFamily.RETRIEVE).active("a") == 0
    assert gate.family(RpcFamily.EXECUTE).active("a") == 1


# -- the api layer's side ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("/groundwire.v1.RetrieverService/Retrieve", RpcFamily.RETRIEVE),
        ("/groundwire.v1.RerankerService/Rerank", RpcFamily.RERANK),
        ("/groundwire.v1.IngestionManagerService/UpsertDocuments", RpcFamily.INGEST),
        ("/groundwire.v1.IngestionManagerService/DeleteDocuments", RpcFamily.INGEST),
        ("/groundwire.v1.IngestionManagerService/StartIngestion", RpcFamily.INGEST),
        ("/groundwire.v1.AgentService/Execute", RpcFamily.EXECUTE),
        ("/groundwire.v1.AgentService/ExecuteStream", RpcFamily.EXECUTE),
        ("/groundwire.v1.AgentService/ListAgents", RpcFamily.MANAGE),
        ("/groundwire.v1.IngestionManagerService/WatchIngestion", RpcFamily.MANAGE),
        ("/groundwire.v1.IngestionManagerService/GetIndexStatus", RpcFamily.MANAGE),
        ("/grpc.health.v1.Health/Check", None),
        ("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", None),
        ("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", None),
    ],
)
def test_every_method_has_its_family(method: str, expected: RpcFamily | None) -> None:
    assert family_of(method) is expected


def test_every_public_method_is_in_a_family() -> None:
    for module in (admin_pb2, agent_pb2, ingestion_pb2, reranker_pb2, retriever_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                assert family_of(f"/{service.full_name}/{method.name}") is not None


def test_the_tenant_is_the_keys_when_there_is_a_key() -> None:
    key = Principal("k", "acme", frozenset({Permission.RETRIEVE}))
    request = retriever_pb2.RetrieveRequest(query=retriever_pb2.RagQuery(tenant="globex"))
    assert admission_tenant(key, request) == "acme"


@pytest.mark.parametrize(
    "request_message",
    [
        retriever_pb2.RetrieveRequest(query=retriever_pb2.RagQuery(tenant="t1")),
        agent_pb2.ExecuteRequest(input=agent_pb2.ExecutionInput(tenant="t1")),
        agent_pb2.ExecuteStreamRequest(input=agent_pb2.ExecutionInput(tenant="t1")),
        ingestion_pb2.UpsertDocumentsRequest(tenant="t1"),
        ingestion_pb2.DeleteDocumentsRequest(tenant="t1"),
    ],
)
def test_without_keys_the_declared_tenant_is_used(request_message: object) -> None:
    assert admission_tenant(None, request_message) == "t1"


def test_over_long_declared_tenants_share_one_bounded_key() -> None:
    # Admission runs before validation refuses them: megabyte-long tenants must not
    # each become (and be kept as) a key of the admission state.
    keys = {
        admission_tenant(
            None, retriever_pb2.RetrieveRequest(query=retriever_pb2.RagQuery(tenant=c * 10**6))
        )
        for c in "ab"
    }
    assert len(keys) == 1 and len(keys.pop()) < 16
    edge = "t" * 128
    assert admission_tenant(None, ingestion_pb2.UpsertDocumentsRequest(tenant=edge)) == edge


def test_without_keys_or_a_tenant_field_every_caller_is_one_tenant() -> None:
    assert admission_tenant(None, reranker_pb2.RerankRequest(query="q")) == ""
    assert admission_tenant(None, object()) == ""


def test_a_refusal_is_resource_exhausted_with_retry_info() -> None:
    err = refused(Rejection(RpcFamily.RERANK, Refusal.RATE, 0.25))
    assert (err.kind, err.reason, err.retry_after_seconds) == (
        ErrorKind.RESOURCE_EXHAUSTED,
        "TENANT_RATE_LIMITED",
        0.25,
    )
    assert "rerank" in err.message
    status = to_rpc_status(err)
    assert status.code.name == "RESOURCE_EXHAUSTED"


# -- configuration ------------------------------------------------------------------


def parse(data: dict[str, object]) -> object:
    return parse_config({"auth": {"mode": "disabled"}, **data})


def test_default_limits_are_generous_and_rates_unlimited() -> None:
    cfg = parse_config({"auth": {"mode": "disabled"}})
    limits = family_limits(cfg.limits, cfg.agent_limits.max_concurrent_executions)
    assert limits[RpcFamily.EXECUTE] == FamilyLimits(max_concurrent=64)
    for fam, cap in DEFAULT_CONCURRENCY.items():
        assert limits[fam] == FamilyLimits(max_concurrent=cap)
    # Every family is capped by default, long-lived WatchIngestion streams (manage) too.
    assert all(limits[fam].max_concurrent > 0 for fam in RpcFamily)


def test_configured_limits_fill_the_rest_from_the_defaults() -> None:
    cfg = parse_config(
        {
            "auth": {"mode": "disabled"},
            "limits": {
                "retrieve": {"requests_per_second": 50, "burst": 100},
                "ingest": {"max_concurrent_per_tenant": 0},
                "execute": {"max_concurrent_per_tenant": 3},
            },
        }
    )
    limits = family_limits(cfg.limits, cfg.agent_limits.max_concurrent_executions)
    assert limits[RpcFamily.RETRIEVE] == FamilyLimits(64, 50.0, 100)
    assert limits[RpcFamily.INGEST] == FamilyLimits()
    assert limits[RpcFamily.EXECUTE] == FamilyLimits(max_concurrent=3)


def test_the_older_execution_key_still_sets_the_execute_cap() -> None:
    cfg = parse_config(
        {"auth": {"mode": "disabled"}, "agent_limits": {"max_concurrent_executions": 2}}
    )
    limits = family_limits(cfg.limits, cfg.agent_limits.max_concurrent_executions)
    assert limits[RpcFamily.EXECUTE].max_concurrent == 2


@pytest.mark.parametrize(
    ("data", "key"),
    [
        (
            {"limits": {"retrieve": {"requests_per_second": -1}}},
            "limits.retrieve.requests_per_second",
        ),
        (
            {"limits": {"rerank": {"max_concurrent_per_tenant": -2}}},
            "limits.rerank.max_concurrent_per_tenant",
        ),
        ({"limits": {"ingest": {"burst": 0, "requests_per_second": 1}}}, "limits.ingest.burst"),
        ({"limits": {"ingest": {"burst": 10}}}, "limits.ingest"),
        ({"limits": {"retreive": {}}}, "limits.retreive"),
        ({"limits": {"manage": {"rate": 1}}}, "limits.manage.rate"),
        (
            {
                "limits": {"execute": {"max_concurrent_per_tenant": 2}},
                "agent_limits": {"max_concurrent_executions": 3},
            },
            "limits.execute.max_concurrent_per_tenant",
        ),
    ],
)
def test_limit_errors_name_their_key(data: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse(data)
    assert key in str(err.value)


def test_limits_section_has_one_entry_per_family() -> None:
    assert set(LimitsConfig.model_fields) == {f.value for f in RpcFamily}
