"""Loaders, chunking, the ingestion pipeline and the index catalog."""
