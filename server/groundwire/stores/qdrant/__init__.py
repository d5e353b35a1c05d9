"""Indexes in Qdrant's engine, in process (store.py says how)."""

from groundwire.stores.qdrant.engine import QdrantSettings
from groundwire.stores.qdrant.store import QdrantStore, open_qdrant_store

__all__ = ["QdrantSettings", "QdrantStore", "open_qdrant_store"]
