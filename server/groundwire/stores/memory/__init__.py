"""The in-memory store: exact vector search over a numpy matrix and a BM25 lexical
index, for development, tests and small corpora. Nothing survives a restart.

Documents are keyed by (tenant, document_id). Rows are append-only; a row's
visibility is one entry of a boolean `live` array that is replaced wholesale (copy,
modify, swap) when a version is published, so a concurrent reader always holds
either the old or the new array. Dead rows are compacted away once they outnumber
live ones.

Each tenant's rows, term postings and metadata postings are kept apart (`index.TenantPart`),
so a lexical search reads only its own tenant's entries: what it costs, and the
lexical duration its diagnostics report, cannot reveal another tenant's vocabulary.
Searches take their snapshot on the event loop and run heavy work (BM25 over many
postings, exact-phrase checks, large matrix products) in a worker pool sized to the
machine, so one tenant's heavy query does not stall other requests.
"""

from groundwire.stores.memory.operations import MemoryOperationLog
from groundwire.stores.memory.store import MemoryStore

__all__ = ["MemoryOperationLog", "MemoryStore"]
