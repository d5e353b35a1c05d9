"""Named indexes bound to their store, embedder and policies: what the ingestion
and retrieval engines both work on (above stores/providers, below the engines)."""
