"""A plug-in store that does not declare it applies access lists never stores a
document with one (stores/acl_guard.py); the built-in stores declare it."""

from __future__ import annotations

import pytest

from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.stores.acl_guard import guarded, supports_access_lists
from groundwire.stores.memory import MemoryStore
from tests.stores.contract_support import doc, publish, spec, vec


class LegacyStore(MemoryStore):
    """A plug-in written before access lists: it says nothing about them."""

    supports_access_lists = False


async def test_a_store_without_the_promise_refuses_acl_documents() -> None:
    store = guarded(LegacyStore())
    assert not supports_access_lists(store)
    await store.ensure_index(spec("kb"))
    v = await store.begin_version("kb")
    with pytest.raises(GroundwireError) as caught:
        await store.stage_documents(
            "kb", v, [doc("a", ["x"], [vec(1, 0, 0, 0)], acl=frozenset({"group:hr"}))]
        )
    assert caught.value.kind is ErrorKind.FAILED_PRECONDITION
    assert caught.value.reason == "ACL_UNSUPPORTED"
    # Documents without an ACL are stored as before.
    await store.stage_documents("kb", v, [doc("b", ["y"], [vec(0, 1, 0, 0)])])


async def test_built_in_stores_are_not_wrapped() -> None:
    store = MemoryStore()
    assert guarded(store) is store
    await publish(store, "kb", [doc("a", ["x"], [vec(1, 0, 0, 0)], acl=frozenset({"group:hr"}))])
