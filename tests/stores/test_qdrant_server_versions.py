"""The Qdrant store's url mode beyond the shared contract, on qdrant-client's local
mode: two groundwire replicas on one server (two stores over one client) follow
each other's publishes through the alias, take version numbers from the server's
record, and a superseded collection is deleted after its grace, not before."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import Scope
from groundwire.stores.qdrant import QdrantStore, ServerSettings
from groundwire.stores.qdrant.remote import connect
from groundwire.stores.qdrant.server_versions import _RECORD, ServerVersions
from tests.stores.conftest import qdrant_test_settings
from tests.stores.contract_support import doc, publish, spec, vec

SERVER = ServerSettings(url=":memory:", refresh_s=0.0, superseded_grace_s=0.2)


async def collections(store: QdrantStore) -> list[str]:
    assert store._client is not None
    listed = await store._client.get_collections()
    return sorted(c.name for c in listed.collections)


async def test_replicas_follow_each_others_publishes(tmp_path: Path) -> None:
    client = connect(SERVER)
    settings = qdrant_test_settings(tmp_path)
    a = QdrantStore(settings, None, ServerVersions(settings, client, SERVER), client)
    b = QdrantStore(settings, None, ServerVersions(settings, client, SERVER), None)
    await publish(a, "idx", [doc("x", ["alpha text"], [vec(1, 0, 0, 0)], tenant="t")])
    await b.ensure_index(spec("idx"))
    hits = await b.search_vector("idx", vec(1, 0, 0, 0), 5, Scope("t"))
    assert [h.document_id for h in hits] == ["x"]

    # B publishes version 2 (its number read from the server's record), A follows it.
    await publish(b, "idx", [doc("y", ["alpha beta"], [vec(0, 1, 0, 0)], tenant="t")])
    state = await b.index_state("idx")
    assert (state.published_version, state.document_count) == (2, 2)
    found = await a.search_lexical("idx", parse_lexical("alpha"), 5, Scope("t"))
    assert sorted(h.document_id for h in found.hits) == ["x", "y"]
    assert await a.tenant_counts("idx", "t") == (2, 2)
    # A's next version comes after B's (its collection is made at once: the claim).
    assert await a.begin_version("idx") == 3

    # B's superseded version 1 is deleted after its grace, not at the publish.
    versions = [c for c in await collections(a) if "_v" in c]
    assert [v.rsplit("_v", 1)[1] for v in versions] == ["2", "3"], versions
    await b.close()
    await a.close()


async def test_a_superseded_collection_outlives_its_publish_by_the_grace(tmp_path: Path) -> None:
    client = connect(SERVER)
    settings = qdrant_test_settings(tmp_path)
    store = QdrantStore(settings, None, ServerVersions(settings, client, SERVER), client)
    await publish(store, "idx", [doc("x", ["alpha"], [vec(1, 0, 0, 0)], tenant="t")])
    await publish(store, "idx", [doc("y", ["beta"], [vec(0, 1, 0, 0)], tenant="t")])
    names = [c for c in await collections(store) if "_v" in c]
    assert len(names) == 2  # the superseded one, in its grace
    deadline = asyncio.get_running_loop().time() + 60
    while len(names) > 1 and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)
        names = [c for c in await collections(store) if "_v" in c]
    assert len(names) == 1
    await store.close()


async def test_a_publish_moves_the_alias_in_one_call(tmp_path: Path) -> None:
    """The alias moves by one `update_collection_aliases` request holding both the
    delete and the create (no moment without the alias), and the version's
    statistics are in its collection before it does."""
    client = connect(SERVER)
    settings = qdrant_test_settings(tmp_path)
    store = QdrantStore(settings, None, ServerVersions(settings, client, SERVER), client)
    await publish(store, "idx", [doc("x", ["alpha"], [vec(1, 0, 0, 0)], tenant="t")])
    calls: list[list[object]] = []
    move = client.update_collection_aliases

    async def spy(ops: Any, **kwargs: Any) -> bool:
        target = next(o.create_alias.collection_name for o in ops if hasattr(o, "create_alias"))
        record = await client.retrieve(target, [_RECORD], with_payload=True)
        assert record and (record[0].payload or {})["record"]["tenants"]["t"][:2] == [2, 2]
        calls.append(list(ops))
        return await move(ops, **kwargs)

    client.update_collection_aliases = spy  # type: ignore[method-assign,assignment]
    await publish(store, "idx", [doc("y", ["beta"], [vec(0, 1, 0, 0)], tenant="t")])
    assert len(calls) == 1
    assert [type(op).__name__ for op in calls[0]] == [
        "DeleteAliasOperation",
        "CreateAliasOperation",
    ]
    assert await store.tenant_counts("idx", "t") == (2, 2)
    await store.close()


async def test_replicas_beginning_at_once_take_distinct_versions(tmp_path: Path) -> None:
    """Two replicas begin versions of one index in the same instant: each claims its
    number by creating the version's collection, so the one that read the same number
    second takes the next (before, the second's first write replaced the first's
    collection), and both publishes land."""
    client = connect(SERVER)
    settings = qdrant_test_settings(tmp_path)
    replicas = [ServerVersions(settings, client, SERVER) for _ in range(2)]
    a = QdrantStore(settings, None, replicas[0], client)
    b = QdrantStore(settings, None, replicas[1], None)
    await publish(a, "idx", [doc("x", ["alpha text"], [vec(1, 0, 0, 0)], tenant="t")])
    await b.ensure_index(spec("idx"))
    # Each replica's read of the record yields before its write, as a server's round
    # trips do: both read the same next number.
    for versions in replicas:

        async def read_then_yield(collection: str, _read: Any = versions._record) -> Any:
            found = await _read(collection)
            await asyncio.sleep(0.01)
            return found

        versions._record = read_then_yield  # type: ignore[method-assign]
    va, vb = await asyncio.gather(a.begin_version("idx"), b.begin_version("idx"))
    assert va != vb
    await a.stage_documents("idx", va, [doc("ya", ["from a"], [vec(0, 1, 0, 0)], tenant="t")])
    await b.stage_documents("idx", vb, [doc("yb", ["from b"], [vec(0, 0, 1, 0)], tenant="t")])
    await a.publish_version("idx", va, spec("idx"))
    await b.publish_version("idx", vb, spec("idx"))
    live = await b.live_documents("idx")
    assert sorted(k.document_id for k in live) == ["x", "ya", "yb"]
    await b.close()
    await a.close()
