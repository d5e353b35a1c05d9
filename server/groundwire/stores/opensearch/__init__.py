"""Indexes on an OpenSearch cluster (store.py says how)."""

from groundwire.stores.opensearch.client import OpenSearchSettings
from groundwire.stores.opensearch.store import OpenSearchStore, open_opensearch_store

__all__ = ["OpenSearchSettings", "OpenSearchStore", "open_opensearch_store"]
