"""Plug-in stores and access lists: a store that does not declare it applies
`Scope.readers` never holds a document with an ACL.

A plug-in store written before access lists existed would ignore the readers of
a scope and return restricted chunks to anyone of the tenant. So unless it sets
`supports_access_lists = True` (a promise that its searches and document reads
apply `Scope.readers` / the `readers` argument as domain.access says), it is
wrapped: staging a document with an ACL is refused (FAILED_PRECONDITION,
ACL_UNSUPPORTED, naming no document), and documents without one are what every
caller of their tenant may read anyway."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.stores.base import StagedDocument, Store


def supports_access_lists(store: object) -> bool:
    return getattr(store, "supports_access_lists", False) is True


class AclGuard:
    """`store` with staging refused for documents that carry an ACL."""

    supports_access_lists = False

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def stage_documents(
        self, name: str, version: int, documents: Sequence[StagedDocument]
    ) -> None:
        if any(item.document.acl for item in documents):
            raise GroundwireError(
                ErrorKind.FAILED_PRECONDITION,
                "ACL_UNSUPPORTED",
                "the index's store does not apply access lists; documents with an acl"
                " cannot be stored there",
            )
        await self._store.stage_documents(name, version, documents)


def guarded(store: Store) -> Store:
    """The plug-in store itself when it applies access lists, else its guard."""
    if supports_access_lists(store):
        return store
    guard: Store = AclGuard(store)
    return guard
