"""Python client of groundwire: generated stubs (`groundwire_client.v1`) plus a
small typed asyncio client (`GroundwireClient`) and a rich-error decoder."""

from groundwire_client.client import GroundwireClient, GroundwireError, RagControls, error_from_rpc

__all__ = ["GroundwireClient", "GroundwireError", "RagControls", "error_from_rpc"]
