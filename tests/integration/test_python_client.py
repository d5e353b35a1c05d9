"""The Python convenience client against a live server."""

from __future__ import annotations

import grpc
import pytest

from groundwire_client import GroundwireClient, GroundwireError
from tests.support.servers import RunningApp


async def test_client_retrieve_and_health(app: RunningApp) -> None:
    async with GroundwireClient(f"127.0.0.1:{app.port}") as gw:
        assert await gw.health() == "SERVING"
        resp = await gw.retrieve("demo", "VPN-E42", mode="lexical", top_k=2)
        assert resp.results[0].document_id == "support/vpn-troubleshooting.md"
        hybrid = await gw.retrieve("demo", "vpn error", mode="hybrid", rrf_k=30, lexical_weight=2.0)
        assert hybrid.diagnostics.applied_rrf_k == 30
        filtered = await gw.retrieve("demo", "vpn", mode="lexical", filter={"team": ["a", "b"]})
        assert list(filtered.results) == []


async def test_client_errors_carry_reason_and_fields(app: RunningApp) -> None:
    async with GroundwireClient(f"127.0.0.1:{app.port}") as gw:
        with pytest.raises(GroundwireError) as err:
            await gw.retrieve("demo", "q", top_k=0)
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert err.value.reason == "FIELD_OUT_OF_RANGE"
        assert "query.top_k" in err.value.fields
        assert err.value.request_id
