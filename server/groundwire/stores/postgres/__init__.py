"""The PostgreSQL store (see `store` for the map of this package's rooms)."""

from groundwire.stores.postgres.connection import PostgresSettings
from groundwire.stores.postgres.store import PostgresStore, open_postgres_store
from groundwire.stores.postgres.tsvector import LexicalRow, encode_lexical

__all__ = [
    "LexicalRow",
    "PostgresSettings",
    "PostgresStore",
    "encode_lexical",
    "open_postgres_store",
]
