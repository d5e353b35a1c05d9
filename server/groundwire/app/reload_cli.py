"""`groundwire reload`: ask a running server to reload its configuration file
through AdminService.ReloadConfiguration (the same as sending it SIGHUP, but it
works remotely and says what happened). A plain gRPC client, like `ingest`, with
the connection options of every client command (TLS, mutual TLS, the API key)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

import grpc

from groundwire.app.client_options import Connection, open_channel
from groundwire_client import error_from_rpc
from groundwire_client._common import check_api_key
from groundwire_client.v1 import admin_pb2, admin_pb2_grpc


async def reload(
    address: str,
    *,
    api_key: str | None = None,
    validate_only: bool = False,
    credentials: grpc.ChannelCredentials | None = None,
    options: Sequence[tuple[str, str]] = (),
    call_timeout: float = 120.0,
) -> int:
    """0 when the file was applied (or is valid with `validate_only`), 2 when the
    server refused it (the reason and every offending key are printed) or could
    not be reached. `credentials`: TLS to the server (None: plaintext)."""
    async with open_channel(address, credentials, options) as channel:
        stub = admin_pb2_grpc.AdminServiceStub(channel)
        try:
            r = await stub.ReloadConfiguration(
                admin_pb2.ReloadConfigurationRequest(validate_only=validate_only),
                metadata=check_api_key(api_key or None),
                timeout=call_timeout,
            )
        except grpc.aio.AioRpcError as err:
            rich = error_from_rpc(err)
            print(f"error: {rich}", file=sys.stderr)
            for key, description in rich.fields.items():
                print(f"  {key}: {description}", file=sys.stderr)
            return 2
    verb = "applied" if r.applied else "valid (nothing applied)"
    print(f"configuration {verb}: generation {r.generation}")
    print(f"  changed sections: {', '.join(r.changed_sections) or 'none'}")
    if r.reingest_indexes:
        print(f"  re-ingestion needed: {', '.join(r.reingest_indexes)}")
    return 0


def run(conn: Connection, validate_only: bool) -> int:
    return asyncio.run(
        reload(
            conn.address,
            api_key=conn.api_key,
            validate_only=validate_only,
            credentials=conn.credentials,
            options=conn.options,
            call_timeout=conn.timeout,
        )
    )
