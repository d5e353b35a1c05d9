"""Live reconfiguration over real gRPC (seed 003's UpdateOptions snapshot rule):
AdminService.ReloadConfiguration on an in-process server and SIGHUP on a real
`groundwire serve` process.

The observable of "no mixed configuration" is tests/support/reload_probe.py: every
configuration variant changes several keys together, so one response shows which
variant served it, and a response mixing two variants is detectable."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2

from groundwire.app.config import load_config, parse_config
from groundwire.app.lifecycle import RunningApp, start_app
from groundwire.app.reload_cli import reload as reload_command
from groundwire_client.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    agent_pb2,
    agent_pb2_grpc,
    ingestion_pb2,
    ingestion_pb2_grpc,
    retriever_pb2_grpc,
)
from tests.support.embedders import ControlledEmbedder
from tests.support.errors import rich_error
from tests.support.reload_probe import (
    KEYS,
    VARIANTS,
    auth,
    config,
    execute_request,
    execute_variant,
    retrieve_request,
    retrieve_variant,
    write,
)
from tests.support.servers import ServerProcess, free_port, health_stub, serving
from tests.support.tls import make_pki

pytestmark = pytest.mark.timeout(90)

DSN_ENV = "GROUNDWIRE_RELOAD_TEST_DSN"


@dataclass
class Served:
    app: RunningApp
    path: Path
    channel: grpc.aio.Channel
    target: str
    store: dict[str, object] = field(default_factory=dict)

    def cfg(self, variant: int, **kw: Any) -> dict[str, object]:
        """Configuration variant `variant` on this server's store."""
        return config(variant, **{"store": self.store, **kw})

    @property
    def admin(self) -> Any:
        return admin_pb2_grpc.AdminServiceStub(self.channel)

    @property
    def retriever(self) -> Any:
        return retriever_pb2_grpc.RetrieverServiceStub(self.channel)

    @property
    def agents(self) -> Any:
        return agent_pb2_grpc.AgentServiceStub(self.channel)

    async def reload(self, key: str = "admin", **kw: Any) -> admin_pb2.ReloadConfigurationResponse:
        r: admin_pb2.ReloadConfigurationResponse = await self.admin.ReloadConfiguration(
            admin_pb2.ReloadConfigurationRequest(**kw), metadata=auth(key), timeout=30
        )
        return r

    async def variant(self) -> int | None:
        r = await self.retriever.Retrieve(retrieve_request(), metadata=auth("client"), timeout=10)
        return retrieve_variant(r)


@pytest.fixture(params=["memory"])
async def served(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Served]:
    """An in-process server reloading its file; parametrize it indirectly with
    "postgres" to run on a real PostgreSQL."""
    store: dict[str, object] = {}
    if request.param == "postgres":
        os.environ[DSN_ENV] = request.getfixturevalue("fresh_database")
        store = {"kind": "postgres", "dsn": {"env": DSN_ENV}}
    path = tmp_path / "groundwire.toml"
    write(path, config(1, store=store))
    app = await start_app(load_config(path), "127.0.0.1:0", config_path=path)
    try:
        await app.wait_ready()
        target = f"127.0.0.1:{app.port}"
        async with grpc.aio.insecure_channel(target) as channel:
            yield Served(app, path, channel, target, store)
    finally:
        await app.stop(0)
        os.environ.pop(DSN_ENV, None)


BOTH_STORES = pytest.mark.parametrize("served", ["memory", "postgres"], indirect=True)


async def test_reload_applies_a_new_snapshot_and_reports_what_changed(served: Served) -> None:
    assert await served.variant() == 1
    write(served.path, served.cfg(2))
    r = await served.reload()
    assert r.applied and r.generation == 2
    assert list(r.changed_sections) == ["agents", "retrieval"]
    assert list(r.reingest_indexes) == []
    # The very next call runs on the new snapshot.
    assert await served.variant() == 2
    ex = await served.agents.Execute(execute_request(), metadata=auth("client"), timeout=10)
    assert execute_variant(ex) == 2
    # An unchanged file still swaps in a generation, reporting no changed section.
    again = await served.reload()
    assert again.applied and again.generation == 3 and list(again.changed_sections) == []


async def test_validate_only_changes_nothing(served: Served) -> None:
    write(served.path, served.cfg(2))
    r = await served.reload(validate_only=True)
    assert not r.applied and r.generation == 1
    assert list(r.changed_sections) == ["agents", "retrieval"]
    assert await served.variant() == 1


@BOTH_STORES
async def test_reload_under_load_fails_nothing_and_never_mixes(served: Served) -> None:
    stop = threading.Event()

    @dataclass
    class Tally:
        calls: int = 0
        failures: list[str] = field(default_factory=list)
        mixed: int = 0
        variants: set[int] = field(default_factory=set)

    tallies = [Tally() for _ in range(4)]

    def client(i: int, tally: Tally) -> None:
        with grpc.insecure_channel(served.target) as ch:
            retriever = retriever_pb2_grpc.RetrieverServiceStub(ch)
            agents = agent_pb2_grpc.AgentServiceStub(ch)
            while not stop.is_set():
                try:
                    if i % 2 == 0:
                        v = retrieve_variant(
                            retriever.Retrieve(
                                retrieve_request(), metadata=auth("client"), timeout=10
                            )
                        )
                    else:
                        v = execute_variant(
                            agents.Execute(execute_request(), metadata=auth("client"), timeout=10)
                        )
                except grpc.RpcError as err:
                    tally.failures.append(str(err.code()))
                    continue
                tally.calls += 1
                if v is None:
                    tally.mixed += 1
                else:
                    tally.variants.add(v)

    threads = [threading.Thread(target=client, args=(i, t)) for i, t in enumerate(tallies)]
    for t in threads:
        t.start()
    # Every health status change the server announces meanwhile (Watch streams them).
    watch = health_stub(served.channel).Watch(health_pb2.HealthCheckRequest(service=""))
    statuses: list[int] = []

    async def watching() -> None:
        async for update in watch:
            statuses.append(update.status)

    watcher = asyncio.create_task(watching())
    try:
        for gen in range(2, 8):
            await asyncio.sleep(0.25)
            write(served.path, served.cfg(gen))
            r = await served.reload()
            assert r.applied and r.generation == gen
            assert await served.variant() == gen % VARIANTS
        await asyncio.sleep(0.25)
    finally:
        stop.set()
        for t in threads:
            await asyncio.to_thread(t.join, 30)
        watch.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    assert statuses and set(statuses) == {health_pb2.HealthCheckResponse.SERVING}
    calls = sum(t.calls for t in tallies)
    assert [f for t in tallies for f in t.failures] == []
    assert sum(t.mixed for t in tallies) == 0
    assert calls >= 20
    # The load really spanned reloads: clients saw several variants.
    assert len(set().union(*(t.variants for t in tallies))) >= 2


async def test_a_key_revoked_by_reload_is_refused_on_the_next_call(served: Served) -> None:
    await served.retriever.Retrieve(retrieve_request(), metadata=auth("temp"), timeout=10)
    write(served.path, served.cfg(1, keys=("admin", "client", "reader")))
    r = await served.reload()
    assert r.applied and list(r.changed_sections) == ["auth"]
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await served.retriever.Retrieve(retrieve_request(), metadata=auth("temp"), timeout=10)
    assert exc.value.code() == grpc.StatusCode.UNAUTHENTICATED
    # A permission removed by reload is refused too.
    write(served.path, served.cfg(1, keys=("admin", "reader")))
    await served.reload()
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await served.agents.Execute(execute_request(), metadata=auth("client"), timeout=10)
    assert exc.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_reload_needs_the_manage_permission(served: Served) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await served.reload(key="reader")
    assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await served.admin.ReloadConfiguration(admin_pb2.ReloadConfigurationRequest(), timeout=10)
    assert exc.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def answers(served: Served) -> tuple[object, ...]:
    """What the server answers, without timings."""
    r = await served.retriever.Retrieve(retrieve_request(), metadata=auth("client"), timeout=10)
    e = await served.agents.Execute(execute_request(), metadata=auth("client"), timeout=10)
    a = await served.agents.GetAgent(
        agent_pb2.GetAgentRequest(agent_id="probe"), metadata=auth("client")
    )
    return (
        [(x.document_id, x.chunk_id) for x in r.results],
        (r.diagnostics.applied_top_k, r.diagnostics.applied_rrf_k),
        (e.result.answer, [x.chunk_id for x in e.result.rag.accepted]),
        a.SerializeToString(deterministic=True),
    )


@BOTH_STORES
async def test_an_invalid_reload_leaves_the_server_exactly_as_it_was(served: Served) -> None:
    before = await answers(served)
    bad = served.cfg(2)
    bad["retrieval"] = {"default_top_k": 0, "rrf_k": 31}
    agents = bad["agents"]
    assert isinstance(agents, dict)
    agents["probe"]["rag"]["acceptance"]["maximum_accepted_results"] = -1
    write(served.path, bad)
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await served.reload()
    err = rich_error(exc.value)
    assert err.code == grpc.StatusCode.FAILED_PRECONDITION
    assert err.reason == "CONFIG_INVALID"
    assert "retrieval.default_top_k" in err.fields
    assert "agents.probe.rag.acceptance.maximum_accepted_results" in err.fields
    assert str(served.path.parent) not in err.message and "tmp" not in err.message.lower()
    # Not TOML at all, then a missing file: the same refusal, never a path.
    served.path.write_text("[retrieval\ndefault_top_k = 3\n")
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await served.reload()
    assert rich_error(exc.value).reason == "CONFIG_INVALID"
    served.path.unlink()
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await served.reload()
    err = rich_error(exc.value)
    assert err.reason == "CONFIG_INVALID" and str(served.path) not in err.message
    # Exactly as before: generation, answers, and the running configuration equals
    # the original file (validating it again reports no changed section).
    after = await answers(served)
    assert after == before
    write(served.path, served.cfg(1))
    check = await served.reload(validate_only=True)
    assert check.generation == 1 and list(check.changed_sections) == []


async def test_a_restart_only_change_is_refused_naming_the_key(served: Served) -> None:
    write(
        served.path,
        served.cfg(
            2, server={"max_message_bytes": 1024 * 1024}, store={"kind": "postgres", "hnsw_m": 8}
        ),
    )
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await served.reload()
    err = rich_error(exc.value)
    assert err.code == grpc.StatusCode.FAILED_PRECONDITION
    assert err.reason == "CONFIG_RESTART_REQUIRED"
    assert err.fields == ["server.max_message_bytes", "store"]
    assert "server.max_message_bytes" in err.message
    # Nothing of the file was applied, not even its live parts.
    assert await served.variant() == 1
    write(served.path, served.cfg(1))
    check = await served.reload(validate_only=True)
    assert check.generation == 1 and list(check.changed_sections) == []


@BOTH_STORES
async def test_a_chunking_change_schedules_reingestion_like_a_start_up_change(
    served: Served,
) -> None:
    ingestion = ingestion_pb2_grpc.IngestionManagerServiceStub(served.channel)
    write(served.path, served.cfg(1, chunk_size=120))
    r = await served.reload()
    assert list(r.reingest_indexes) == ["docs"] and list(r.changed_sections) == ["indexes"]
    deadline = time.monotonic() + 20
    while True:
        status = (
            await ingestion.GetIndexStatus(
                ingestion_pb2.GetIndexStatusRequest(index_name="docs"), metadata=auth("admin")
            )
        ).status
        if not status.rebuild_pending and not status.HasField("running_operation"):
            break
        assert time.monotonic() < deadline, "re-ingestion did not finish"
        await asyncio.sleep(0.05)
    ops = await ingestion.ListOperations(
        ingestion_pb2.ListOperationsRequest(index_name="docs"), metadata=auth("admin")
    )
    assert [o.trigger for o in ops.operations[:2]] == [
        ingestion_pb2.OPERATION_TRIGGER_RELOAD,
        ingestion_pb2.OPERATION_TRIGGER_STARTUP,
    ]
    assert ops.operations[0].state == ingestion_pb2.OPERATION_STATE_SUCCEEDED
    assert await served.variant() == 1  # served throughout, now from the rebuilt version


def test_sighup_reloads_a_real_process(tmp_path: Path) -> None:
    path = tmp_path / "groundwire.toml"
    write(path, config(1))
    proc = ServerProcess(path, free_port(), tmp_path / "server.log").start(timeout=60)
    try:
        with grpc.insecure_channel(proc.target) as ch:
            retriever = retriever_pb2_grpc.RetrieverServiceStub(ch)

            def variant(key: str = "client") -> int | None:
                return retrieve_variant(
                    retriever.Retrieve(retrieve_request(), metadata=auth(key), timeout=10)
                )

            assert variant("temp") == 1
            write(path, config(2, keys=("admin", "client")))
            sent = time.monotonic()
            os.kill(proc.pid, signal.SIGHUP)
            while variant() != 2:
                assert time.monotonic() - sent < 10, "SIGHUP reload not observed"
                time.sleep(0.01)
            with pytest.raises(grpc.RpcError) as exc:
                variant("temp")
            assert exc.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert health_stub(ch).Check(health_pb2.HealthCheckRequest()).status == (
                health_pb2.HealthCheckResponse.SERVING
            )
            # A refused SIGHUP reload keeps serving the current generation.
            path.write_text("not toml [")
            os.kill(proc.pid, signal.SIGHUP)
            deadline = time.monotonic() + 10
            while not any("configuration reload refused" in line for line in proc.log_lines()):
                assert time.monotonic() < deadline
                time.sleep(0.02)
            assert variant() == 2
        lines = [json.loads(x) for x in proc.log_lines() if x.startswith("{")]
        reloaded = [
            x
            for x in lines
            if x.get("msg") == "configuration reload" and x.get("outcome") == "APPLIED"
        ]
        assert reloaded and reloaded[0]["generation"] == 2
        assert reloaded[0]["changed_sections"] == ["agents", "auth", "retrieval"]
        refused = [x for x in lines if x.get("msg") == "configuration reload refused"]
        assert refused[0]["reason"] == "CONFIG_INVALID"
        assert str(tmp_path) not in json.dumps(refused + reloaded)
    finally:
        assert proc.stop() == 0


@BOTH_STORES
async def test_indexes_added_and_removed_by_reload_follow_in_health_and_lookup(
    served: Served,
) -> None:
    health = health_stub(served.channel)
    base = served.cfg(1)
    indexes = base["indexes"]
    assert isinstance(indexes, dict)
    extra = {"embedder": "hash", "sources": [{"kind": "inline", "id": "x", "text": "leave"}]}
    write(served.path, {**base, "indexes": {**indexes, "extra": extra}})
    r = await served.reload()
    assert list(r.reingest_indexes) == ["extra"]  # its first ingestion (MANUAL: not started)
    # An index's health answers to a key that sees the index ([auth] index_health).
    h = await health.Check(
        health_pb2.HealthCheckRequest(service="groundwire.index.extra"), metadata=auth("client")
    )
    assert h.status == health_pb2.HealthCheckResponse.SERVING
    q = retrieve_request()
    q.query.index_name = "extra"
    empty = await served.retriever.Retrieve(q, metadata=auth("client"), timeout=10)
    assert list(empty.results) == []
    write(served.path, base)
    await served.reload()
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await served.retriever.Retrieve(q, metadata=auth("client"), timeout=10)
    assert rich_error(exc.value).reason == "INDEX_NOT_FOUND"
    # An index's health answers to a key that sees the index ([auth] index_health).
    h = await health.Check(
        health_pb2.HealthCheckRequest(service="groundwire.index.extra"), metadata=auth("client")
    )
    assert h.status == health_pb2.HealthCheckResponse.NOT_SERVING
    h = await health.Check(health_pb2.HealthCheckRequest(service=""))
    assert h.status == health_pb2.HealthCheckResponse.SERVING


async def test_limits_changed_by_reload_apply_to_the_next_call(served: Served) -> None:
    for _ in range(3):
        await served.variant()
    write(
        served.path, served.cfg(1, limits={"retrieve": {"requests_per_second": 0.001, "burst": 1}})
    )
    r = await served.reload()
    assert list(r.changed_sections) == ["limits"]
    await served.variant()  # the fresh bucket's one token
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await served.variant()
    assert rich_error(exc.value).reason == "TENANT_RATE_LIMITED"
    write(served.path, served.cfg(1))
    await served.reload()
    assert await served.variant() == 1


async def test_a_server_without_a_configuration_file_has_nothing_to_reload() -> None:
    async with serving(parse_config({"auth": {"mode": "disabled"}})) as app:
        target = f"127.0.0.1:{app.port}"
        with pytest.raises(grpc.aio.AioRpcError) as exc:
            async with grpc.aio.insecure_channel(target) as channel:
                await admin_pb2_grpc.AdminServiceStub(channel).ReloadConfiguration(
                    admin_pb2.ReloadConfigurationRequest(), timeout=10
                )
    err = rich_error(exc.value)
    assert err.code == grpc.StatusCode.FAILED_PRECONDITION
    assert err.reason == "RELOAD_UNAVAILABLE"


async def test_a_reload_during_start_up_ingestion_keeps_the_index_becoming_ready(
    tmp_path: Path,
) -> None:
    path = tmp_path / "groundwire.toml"
    write(path, config(1))
    app = await start_app(load_config(path), "127.0.0.1:0", config_path=path)
    gate = ControlledEmbedder(gated=True)
    # start_app returns before the start-up task first runs, so the swap is in time.
    app.components.catalog.get("docs").embedder = gate
    try:
        await asyncio.wait_for(gate.entered.wait(), 10)
        base = config(2)
        indexes = base["indexes"]
        assert isinstance(indexes, dict)
        indexes["docs"]["description"] = "now described"
        write(path, base)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            served = Served(app, path, channel, f"127.0.0.1:{app.port}")
            r = await served.reload()
            assert r.applied and list(r.reingest_indexes) == []
            with pytest.raises(grpc.aio.AioRpcError) as exc:
                await served.variant()
            assert rich_error(exc.value).reason == "INDEX_NOT_READY"
            gate.release.set()
            await asyncio.wait_for(app.wait_ready(), 20)
            assert await served.variant() == 2
            h = await health_stub(channel).Check(
                health_pb2.HealthCheckRequest(service="groundwire.index.docs"),
                metadata=auth("client"),
            )
            assert h.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        gate.release.set()
        await app.stop(0)


@BOTH_STORES
async def test_a_build_failure_after_validation_changes_nothing(served: Served) -> None:
    ingestion = ingestion_pb2_grpc.IngestionManagerServiceStub(served.channel)
    broken = served.cfg(
        2, chunk_size=120, tools={"broken": {"import_path": "tests.support.nothing_here:nope"}}
    )
    write(served.path, broken)
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await served.reload()
    err = rich_error(exc.value)
    assert err.reason == "CONFIG_INVALID" and err.fields == ["tools.broken.import_path"]
    assert await served.variant() == 1
    status = (
        await ingestion.GetIndexStatus(
            ingestion_pb2.GetIndexStatusRequest(index_name="docs"), metadata=auth("admin")
        )
    ).status
    assert not status.rebuild_pending and not status.HasField("running_operation")
    ops = await ingestion.ListOperations(
        ingestion_pb2.ListOperationsRequest(index_name="docs"), metadata=auth("admin")
    )
    assert len(ops.operations) == 1  # only the start-up run
    # The same change without the broken tool applies, as a first change.
    write(served.path, served.cfg(2, chunk_size=120))
    r = await served.reload()
    assert r.generation == 2 and list(r.reingest_indexes) == ["docs"]


async def test_health_watch_streams_through_the_interceptor(served: Served) -> None:
    # grpc.health.v1 Watch writes with context.write() instead of yielding; the
    # interceptor once wrapped it as a generator and every Watch failed INTERNAL.
    watch = health_stub(served.channel).Watch(health_pb2.HealthCheckRequest(service=""))
    first = await asyncio.wait_for(watch.read(), 10)
    assert isinstance(first, health_pb2.HealthCheckResponse)
    assert first.status == health_pb2.HealthCheckResponse.SERVING
    watch.cancel()


async def test_the_reload_command(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    write(served.path, served.cfg(2))
    assert await reload_command(served.target, api_key=KEYS["admin"]) == 0
    out = capsys.readouterr().out
    assert "applied: generation 2" in out and "agents, retrieval" in out
    write(served.path, served.cfg(2, server={"reflection": False}))
    assert await reload_command(served.target, api_key=KEYS["admin"], validate_only=True) == 2
    err = capsys.readouterr().err
    assert "CONFIG_RESTART_REQUIRED" in err and "server.reflection" in err


async def test_tls_certificates_rotate_on_reload_and_bad_ones_are_refused(
    tmp_path: Path,
) -> None:
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
    first, second = make_pki(tmp_path / "first"), make_pki(tmp_path / "second")
    live = tmp_path / "live"
    live.mkdir()
    cert, key = live / "server.pem", live / "server.key"
    shutil.copy(first.server_cert, cert)
    shutil.copy(first.server_key, key)
    tls = {"cert_file": str(cert), "key_file": str(key)}
    path = tmp_path / "groundwire.toml"
    write(path, config(1, server={"tls": tls}))
    app = await start_app(load_config(path), "127.0.0.1:0", config_path=path)

    async def check(pki: Any) -> None:
        creds = grpc.ssl_channel_credentials(root_certificates=pki.ca_cert.read_bytes())
        async with grpc.aio.secure_channel(f"localhost:{app.port}", creds) as ch:
            await health_stub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5)

    async def reload(ch: grpc.aio.Channel) -> admin_pb2.ReloadConfigurationResponse:
        r: admin_pb2.ReloadConfigurationResponse = await admin_pb2_grpc.AdminServiceStub(
            ch
        ).ReloadConfiguration(
            admin_pb2.ReloadConfigurationRequest(), metadata=auth("admin"), timeout=30
        )
        return r

    try:
        await app.wait_ready()
        await check(first)
        # Renewed files at the same paths (as cert-manager writes them), then reload.
        shutil.copy(second.server_cert, cert)
        shutil.copy(second.server_key, key)
        creds = grpc.ssl_channel_credentials(root_certificates=first.ca_cert.read_bytes())
        async with grpc.aio.secure_channel(f"localhost:{app.port}", creds) as ch:
            r = await reload(ch)
            assert r.applied and list(r.changed_sections) == []
        await check(second)
        with pytest.raises(grpc.aio.AioRpcError):
            await check(first)
        # A key that does not match the certificate: refused, the old pair serves on.
        shutil.copy(first.server_key, key)
        creds = grpc.ssl_channel_credentials(root_certificates=second.ca_cert.read_bytes())
        async with grpc.aio.secure_channel(f"localhost:{app.port}", creds) as ch:
            with pytest.raises(grpc.aio.AioRpcError) as exc:
                await reload(ch)
            err = rich_error(exc.value)
            assert err.reason == "CONFIG_INVALID" and err.fields == ["server.tls.cert_file"]
            assert str(live) not in err.message
            await check(second)
            # Turning TLS off needs a restart.
            write(path, config(1))
            with pytest.raises(grpc.aio.AioRpcError) as exc:
                await reload(ch)
            err = rich_error(exc.value)
            assert err.reason == "CONFIG_RESTART_REQUIRED" and err.fields == ["server.tls"]
    finally:
        await app.stop(0)


async def test_a_call_in_flight_during_a_reload_finishes_on_its_own_snapshot(
    served: Served,
) -> None:
    # Hold one call inside its query embedding, reload, then let it finish.
    gate = ControlledEmbedder(gated=True)
    served.app.components.catalog.get("docs").embedder = gate
    in_flight = asyncio.ensure_future(
        served.retriever.Retrieve(retrieve_request(), metadata=auth("client"), timeout=30)
    )
    await asyncio.wait_for(gate.entered.wait(), 10)
    write(served.path, served.cfg(2))
    r = await served.reload()
    assert r.applied and r.generation == 2
    # New calls run on generation 2 (whose index handle is not gated).
    assert await served.variant() == 2
    assert not in_flight.done()
    gate.release.set()
    assert retrieve_variant(await asyncio.wait_for(in_flight, 10)) == 1


@pytest.mark.parametrize("served", ["postgres"], indirect=True)
async def test_an_embedder_change_rebuilds_the_index_with_the_new_model(served: Served) -> None:
    ingestion = ingestion_pb2_grpc.IngestionManagerServiceStub(served.channel)
    write(served.path, served.cfg(1, embedders={"hash": {"kind": "hashing", "dimensions": 128}}))
    r = await served.reload()
    assert list(r.changed_sections) == ["embedders"] and list(r.reingest_indexes) == ["docs"]
    deadline = time.monotonic() + 20
    while True:
        status = (
            await ingestion.GetIndexStatus(
                ingestion_pb2.GetIndexStatusRequest(index_name="docs"), metadata=auth("admin")
            )
        ).status
        if not status.rebuild_pending and not status.HasField("running_operation"):
            break
        assert time.monotonic() < deadline, "re-ingestion did not finish"
        await asyncio.sleep(0.05)
    assert status.last_operation.state == ingestion_pb2.OPERATION_STATE_SUCCEEDED
    assert status.last_operation.rebuild
    # Hybrid retrieval embeds the query with the new model against the new vectors.
    assert await served.variant() == 1


async def test_the_memory_store_refuses_new_dimensions_next_to_stored_vectors(
    served: Served,
) -> None:
    write(served.path, served.cfg(2, embedders={"hash": {"kind": "hashing", "dimensions": 128}}))
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await served.reload()
    err = rich_error(exc.value)
    assert err.reason == "CONFIG_RESTART_REQUIRED" and err.fields == ["indexes.docs.embedder"]
    # Nothing applied, and the store serves the old vectors as before.
    assert await served.variant() == 1
    write(served.path, served.cfg(2))
    r = await served.reload()
    assert r.generation == 2 and list(r.reingest_indexes) == []
    assert await served.variant() == 2


async def test_a_caller_giving_up_does_not_stop_a_reload_half_way(served: Served) -> None:
    reloader = served.app.reloader
    assert reloader is not None
    write(served.path, served.cfg(2))
    caller = asyncio.create_task(reloader.reload())
    await asyncio.sleep(0)  # inside the reload: reading the file off the loop
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    deadline = time.monotonic() + 10
    while reloader.generation != 2:
        assert time.monotonic() < deadline, "the reload stopped with its caller"
        await asyncio.sleep(0.01)
    assert await served.variant() == 2
    # The swap completed entirely: the running configuration is the file's.
    check = await served.reload(validate_only=True)
    assert check.generation == 2 and list(check.changed_sections) == []
