"""Indexes in Qdrant's engine, in process or on a Qdrant server (store.py says how)."""

from groundwire.stores.qdrant.engine import QdrantSettings
from groundwire.stores.qdrant.remote import ServerSettings
from groundwire.stores.qdrant.store import (
    QdrantStore,
    open_qdrant_server_store,
    open_qdrant_store,
)

__all__ = [
    "QdrantSettings",
    "QdrantStore",
    "ServerSettings",
    "open_qdrant_server_store",
    "open_qdrant_store",
]
