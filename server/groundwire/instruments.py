"""Metric instruments shared by every layer (OpenTelemetry API only: no-ops until
app/telemetry.py installs a provider). Cross-cutting like logging, so engines and
the api layer may both import it; transport-free (the api layer records the gRPC
attributes of RPC_DURATION itself)."""

from __future__ import annotations

from opentelemetry import metrics

_meter = metrics.get_meter("groundwire")

RPC_DURATION = _meter.create_histogram(
    "rpc.server.call.duration",
    unit="s",
    description="Measures the duration of inbound RPCs (OpenTelemetry RPC semantic conventions)",
)
RETRIEVALS = _meter.create_counter(
    "groundwire.retrieval.requests",
    unit="{request}",
    description="Retrieve calls by mode and outcome",
)
EXECUTIONS = _meter.create_counter(
    "groundwire.agent.executions",
    unit="{execution}",
    description="Agent executions by agent, outcome and no-context reason",
)
INGESTIONS = _meter.create_counter(
    "groundwire.ingestion.operations",
    unit="{operation}",
    description="Finished ingestion operations by index, trigger and state",
)
ADMISSION_REJECTIONS = _meter.create_counter(
    "groundwire.admission.rejections",
    unit="{request}",
    description="Calls refused by tenant admission, by RPC family and reason (never by tenant)",
)
EMBEDDING_REQUESTS = _meter.create_counter(
    "groundwire.embedding.requests",
    unit="{request}",
    description="Embedding model calls by provider and task (never by tenant)",
)
EMBEDDING_INPUT_TOKENS = _meter.create_counter(
    "groundwire.embedding.input_tokens",
    unit="{token}",
    description="Embedding input tokens by provider, task and who counted them "
    "(provider, tokenizer or estimate)",
)
EMBEDDING_TRUNCATED_TEXTS = _meter.create_counter(
    "groundwire.embedding.truncated_texts",
    unit="{text}",
    description="Texts the embedding model saw only in part (over its token window), "
    "by provider and task",
)
DOCUMENTS_NOT_INGESTED = _meter.create_counter(
    "groundwire.ingestion.documents_not_ingested",
    unit="{document}",
    description="Documents an ingestion operation failed or skipped, by index and reason",
)
STORE_READS = _meter.create_counter(
    "groundwire.store.reads",
    unit="{read}",
    description="Store reads by store (its configured name), target (primary, standby-N; "
    "never a DSN) and outcome",
)
STORE_HEALTH_CHECKS = _meter.create_counter(
    "groundwire.store.health_checks",
    unit="{check}",
    description="Store health checks by store (its configured name) and outcome (OK, UNAVAILABLE)",
)
STORE_ENGINE_LATENCY = _meter.create_histogram(
    "groundwire.store.engine.duration",
    unit="s",
    description="Calls to a search engine store (OpenSearch) by store, operation and outcome",
)
STORE_ENGINE_ERRORS = _meter.create_counter(
    "groundwire.store.engine.errors",
    unit="{call}",
    description="Failed search engine calls by store, operation and groundwire reason",
)
STORE_BULK_REJECTIONS = _meter.create_counter(
    "groundwire.store.bulk.rejections",
    unit="{item}",
    description="Bulk items the search engine refused with 429 (retried with back-off), by store",
)
STORE_SHARD_FAILURES = _meter.create_counter(
    "groundwire.store.shard.failures",
    unit="{shard}",
    description="Shards that failed inside an otherwise answered search, by store and operation",
)
EMBEDDING_CACHE = _meter.create_counter(
    "groundwire.embedding.cache",
    unit="{chunk}",
    description="Document chunks whose vector ingestion found in the embedding cache "
    "(outcome hit) or had to embed (outcome miss)",
)
