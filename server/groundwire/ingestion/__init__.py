"""Loaders, source discovery, the ingestion pipeline and the ingestion manager."""
