"""What one tenant may store in an index, checked before anything is staged.

A file under the byte bound can still expand into thousands of chunks (the red team's
8.9 MB CSV of one 1,000,000-column header became 12,699 chunks and 1.4 GiB of server
memory), and a tenant with the ingest permission could otherwise grow an index without
end, slowing every other tenant's searches on it. So an index bounds, per tenant:

- the chunks one document may expand to (`max_chunks_per_document`): a push is refused
  with DOCUMENT_CHUNKS_EXCEEDED, a configured source's document fails TOO_LARGE;
- the documents, chunks and characters of chunk text one tenant holds
  (`max_documents_per_tenant`, `max_chunks_per_tenant`, `max_characters_per_tenant`):
  a push that would pass any is refused with TENANT_QUOTA_EXCEEDED. Characters are
  what the tenant's chunks store of the normalized text (Unicode code points, a chunk
  overlap counted in each chunk holding it: the sum of every chunk's end - start), so
  the bound is on stored text, whatever the chunking policy; in UTF-8 a character is
  1-4 bytes. The rest of a chunk's size is bounded beside it: its vector (the index's
  dimensions), the document's metadata and title (domain/bounds.py).

Both refusals are RESOURCE_EXHAUSTED and name the setting (never the tenant, the
index's other tenants or any content); 0 means no bound.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from groundwire.domain.errors import ErrorKind, FieldViolation, GroundwireError

TENANT_QUOTA_REASON = "TENANT_QUOTA_EXCEEDED"
DOCUMENT_CHUNKS_REASON = "DOCUMENT_CHUNKS_EXCEEDED"


@dataclass(frozen=True, slots=True)
class StorageQuota:
    """An index's per-tenant bounds (0: unbounded)."""

    max_chunks_per_document: int = 4096
    max_chunks_per_tenant: int = 1_000_000
    max_documents_per_tenant: int = 1_000_000
    max_characters_per_tenant: int = 2_000_000_000


@dataclass(frozen=True, slots=True)
class Holding:
    """Documents, chunks and characters of chunk text: what a tenant holds, or what
    a write adds."""

    documents: int = 0
    chunks: int = 0
    characters: int = 0

    def __add__(self, other: Holding) -> Holding:
        return Holding(
            self.documents + other.documents,
            self.chunks + other.chunks,
            self.characters + other.characters,
        )

    def __sub__(self, other: Holding) -> Holding:
        return Holding(
            self.documents - other.documents,
            self.chunks - other.chunks,
            self.characters - other.characters,
        )


def check_document_chunks(quota: StorageQuota, chunks: int, field_path: str) -> None:
    """DOCUMENT_CHUNKS_EXCEEDED when one document expands past its bound."""
    if quota.max_chunks_per_document and chunks > quota.max_chunks_per_document:
        description = (
            f"the document expands to more than {quota.max_chunks_per_document} chunks"
            " (ingestion.max_chunks_per_document)"
        )
        raise GroundwireError(
            ErrorKind.RESOURCE_EXHAUSTED,
            DOCUMENT_CHUNKS_REASON,
            description,
            (FieldViolation(field_path, description),),
        )


def document_fits(quota: StorageQuota, chunks: int) -> bool:
    """Whether one document's chunks are within `max_chunks_per_document`."""
    return not quota.max_chunks_per_document or chunks <= quota.max_chunks_per_document


def over_quota(quota: StorageQuota, held: Holding) -> str | None:
    """The setting `held` passes (None: within every bound)."""
    if quota.max_documents_per_tenant and held.documents > quota.max_documents_per_tenant:
        return "ingestion.max_documents_per_tenant"
    if quota.max_chunks_per_tenant and held.chunks > quota.max_chunks_per_tenant:
        return "ingestion.max_chunks_per_tenant"
    if quota.max_characters_per_tenant and held.characters > quota.max_characters_per_tenant:
        return "ingestion.max_characters_per_tenant"
    return None


def bounds_tenants(quota: StorageQuota) -> bool:
    """Whether any per-tenant bound is set."""
    return bool(
        quota.max_documents_per_tenant
        or quota.max_chunks_per_tenant
        or quota.max_characters_per_tenant
    )


def characters_of(starts_ends: Iterable[tuple[int, int]]) -> int:
    """The characters of chunk text that chunks spanning (start, end) store."""
    return sum(end - start for start, end in starts_ends)


def tenant_quota_exceeded(setting: str) -> GroundwireError:
    """The refusal of a write that would take its tenant past `setting`."""
    return GroundwireError(
        ErrorKind.RESOURCE_EXHAUSTED,
        TENANT_QUOTA_REASON,
        f"the write would take the tenant past its quota in this index ({setting});"
        " delete documents first or ask the operator for a larger quota",
        metadata={"setting": setting},
    )
