"""What an index is declared as: how it compares vectors, where it lives and when
it is ingested. Closed sets, spelled as in the configuration, the store and the
contract's string fields (a `StrEnum` member is its string)."""

from __future__ import annotations

from enum import StrEnum


class DistanceMetric(StrEnum):
    """How an index compares vectors (IndexDescription.metric)."""

    COSINE = "cosine"
    EUCLIDEAN = "euclidean"
    DOT = "dot"


class StoreKind(StrEnum):
    """Where indexes live (IndexDescription.store)."""

    MEMORY = "memory"
    POSTGRES = "postgres"
    OPENSEARCH = "opensearch"
    QDRANT = "qdrant"


class IngestionStrategy(StrEnum):
    """When an index is ingested without being asked (IngestionStrategy in the
    contract, where the members are INGESTION_STRATEGY_<NAME>)."""

    # Only StartIngestion (or `groundwire ingest`) ingests it.
    MANUAL = "manual"
    # Ingested at start-up; the index is not served until that run ends.
    ON_STARTUP = "on_startup"
    # Ingested at start-up while the index is already served (its last version).
    BACKGROUND_ON_STARTUP = "background_on_startup"
    # Ingested on a five-field cron schedule.
    SCHEDULED = "scheduled"
    # Ingested at start-up in the background, then whenever files of its
    # directory or files sources change (debounced).
    WATCH = "watch"
