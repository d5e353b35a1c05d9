"""`groundwire ingest` with an `ingest` key, over real gRPC: it starts and watches
ingestion of its own tenant's index, and is refused another tenant's with an
error that names the missing permission."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from groundwire.app.config import parse_config
from groundwire.app.ingest_cli import ingest
from groundwire.domain.auth import hash_key
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(60)

ACME_KEY = "gw_ingest-acme-000000000000000000000000000000"


def config() -> dict[str, object]:
    def index(tenant: str) -> dict[str, object]:
        return {
            "tenant": tenant,
            "sources": [{"kind": "inline", "id": "doc-1", "text": "Quarterly roadmap."}],
        }

    return {
        "auth": {
            "keys": [
                {
                    "id": "acme-ingest",
                    "hash": hash_key(ACME_KEY),
                    "tenant": "acme",
                    "permissions": ["ingest"],
                }
            ]
        },
        "indexes": {"acme-docs": index("acme"), "shared-docs": index("")},
    }


@pytest.fixture(scope="module")
async def app() -> AsyncIterator[RunningApp]:
    async with serving(parse_config(config())) as running:
        yield running


async def test_ingest_key_runs_its_own_tenants_ingestion(
    app: RunningApp, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await ingest(f"127.0.0.1:{app.port}", "acme-docs", api_key=ACME_KEY)
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.startswith("SUCCEEDED: version 1, 1 ingested")


async def test_ingest_key_is_told_it_lacks_manage_for_another_tenants_index(
    app: RunningApp, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await ingest(f"127.0.0.1:{app.port}", "shared-docs", api_key=ACME_KEY)
    err = capsys.readouterr().err
    assert code == 2
    # Another tenant's index needs `operator` (`manage` covers only the key's own).
    assert "PERMISSION_DENIED" in err and "'operator' permission" in err
    assert "configured tenant" in err
