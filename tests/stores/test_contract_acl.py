"""Access lists on every store: the caller's readers are applied like the tenant,
inside the store and before ranking, on both legs and on every document-level
read (domain/access.py states the rule; this suite proves each store applies it)."""

from __future__ import annotations

import numpy as np

from groundwire.domain.access import ALL_READERS, PUBLIC_READERS, Readers
from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import MetadataFilter, Scope
from groundwire.stores.base import Store
from tests.stores.contract_support import DIM, K, doc, publish, spec, vec

HR = frozenset({"group:hr"})
BOARD = frozenset({"group:board", "user:carol"})
ALICE = Readers(frozenset({"user:alice", "group:hr"}))
CAROL = Readers(frozenset({"user:carol"}))
NOBODY = PUBLIC_READERS

# Who reads which document, by the rule of domain.access.
EXPECTED = {
    NOBODY: {"handbook"},
    ALICE: {"handbook", "hr-case"},
    CAROL: {"handbook", "minutes"},
    ALL_READERS: {"handbook", "hr-case", "minutes"},
}


async def _corpus(store: Store, name: str) -> None:
    same = [vec(1, 0, 0, 0)]
    await publish(
        store,
        name,
        [
            doc("handbook", ["salary review policy"], same, tenant="acme"),
            doc("hr-case", ["salary review case"], same, tenant="acme", acl=HR),
            doc("minutes", ["salary review minutes"], same, tenant="acme", acl=BOARD),
            # Another tenant's document readable by the same principals: the tenant
            # stays the outer boundary.
            doc("other", ["salary review other"], same, tenant="globex", acl=HR),
        ],
    )


async def test_readers_filter_both_legs_before_ranking(store: Store, index_name: str) -> None:
    await _corpus(store, index_name)
    for readers, expected in EXPECTED.items():
        scope = Scope("acme", readers=readers)
        semantic = await store.search_vector(index_name, vec(1, 0, 0, 0), 10, scope)
        assert {h.document_id for h in semantic} == expected, readers
        lexical = await store.search_lexical(index_name, parse_lexical("salary"), 10, scope)
        assert {h.document_id for h in lexical.hits} == expected, readers


async def test_filtered_readers_still_return_k(store: Store, index_name: str) -> None:
    rng = np.random.default_rng(11)
    docs = []
    for i in range(200):
        acl = frozenset() if i % 20 == 0 else (HR if i % 2 else frozenset({"group:eng"}))
        docs.append(
            doc(
                f"d{i:03d}",
                [f"common text {i}"],
                [rng.normal(size=DIM).astype(np.float32)],
                acl=acl,
            )
        )
    await publish(store, index_name, docs)
    eng = Scope(readers=Readers(frozenset({"group:eng"})))
    hits = await store.search_vector(index_name, vec(1, 1, 1, 1), 30, eng)
    assert len(hits) == 30
    readable = {f"d{i:03d}" for i in range(200) if i % 20 == 0 or i % 2 == 0}
    assert {h.document_id for h in hits} <= readable
    lex = (await store.search_lexical(index_name, parse_lexical("common"), 30, eng)).hits
    assert len(lex) == 30 and {h.document_id for h in lex} <= readable
    # With a metadata filter too: both conditions hold on every hit.
    none = Scope(filter=MetadataFilter({"x": frozenset({"y"})}), readers=ALICE)
    assert await store.search_vector(index_name, vec(1, 1, 1, 1), 5, none) == []


async def test_document_reads_honour_readers(store: Store, index_name: str) -> None:
    await _corpus(store, index_name)
    for readers, expected in EXPECTED.items():
        listed = await store.list_documents(index_name, "acme", 100, None, readers)
        assert {d.document_id for d in listed} == expected, readers
        assert await store.tenant_counts(index_name, "acme", readers) == (
            len(expected),
            len(expected),
        )
        for doc_id in ("handbook", "hr-case", "minutes"):
            got = await store.get_document(index_name, "acme", doc_id, readers)
            chunks = await store.document_chunks(index_name, "acme", doc_id, 10, readers)
            assert (got is not None) == (doc_id in expected), (readers, doc_id)
            assert bool(chunks) == (doc_id in expected), (readers, doc_id)
    hr_case = await store.get_document(index_name, "acme", "hr-case", ALICE)
    assert hr_case is not None and hr_case.acl == HR
    public = await store.get_document(index_name, "acme", "handbook", NOBODY)
    assert public is not None and public.acl == frozenset()
    # Another tenant's document stays invisible whatever the principals.
    assert await store.get_document(index_name, "acme", "other", ALL_READERS) is None
    assert await store.has_documents(index_name, "acme", NOBODY)


async def test_has_documents_sees_only_readable_ones(store: Store, index_name: str) -> None:
    await publish(store, index_name, [doc("secret", ["x"], [vec(1, 0, 0, 0)], tenant="t", acl=HR)])
    assert not await store.has_documents(index_name, "t", NOBODY)
    assert not await store.has_documents(index_name, "t", CAROL)
    assert await store.has_documents(index_name, "t", ALICE)
    assert await store.tenant_counts(index_name, "t", NOBODY) == (0, 0)


async def test_changing_an_acl_publishes_atomically(store: Store, index_name: str) -> None:
    await publish(store, index_name, [doc("d", ["alpha beta"], [vec(1, 0, 0, 0)], acl=HR)])
    carol = Scope(readers=CAROL)
    assert await store.search_vector(index_name, vec(1, 0, 0, 0), 5, carol) == []
    v = await store.begin_version(index_name)
    await store.stage_documents(
        index_name, v, [doc("d", ["alpha beta"], [vec(1, 0, 0, 0)], acl=BOARD, content_hash="h2")]
    )
    # Staged: the old ACL still decides.
    assert await store.search_vector(index_name, vec(1, 0, 0, 0), 5, carol) == []
    await store.publish_version(index_name, v, spec(index_name))
    hits = await store.search_vector(index_name, vec(1, 0, 0, 0), 5, carol)
    assert [h.document_id for h in hits] == ["d"]
    alice = await store.search_lexical(index_name, parse_lexical("alpha"), 5, Scope(readers=ALICE))
    assert alice.hits == []
    assert (await store.get_document(index_name, "", "d", CAROL)) is not None
    assert K("d") in await store.live_documents(index_name)


def _elided(store: Store) -> int | None:
    """OpenSearch's count of searches that left the access-list clause out (the
    tenant's index held no restricted chunk); None on the other stores."""
    sizes = getattr(store, "_sizes", None)
    return None if sizes is None else int(sizes.readers_elided)


async def test_a_restricted_chunk_published_into_an_all_public_tenant(
    store: Store, index_name: str
) -> None:
    """A tenant whose chunks are all public gains a restricted one: a reader without
    its principals never gets it, on either leg, whatever its earlier searches of the
    all-public tenant taught the store (OpenSearch remembers that the tenant's index
    held no restricted chunk and leaves the access-list clause out for it)."""
    query = vec(1, 0, 0, 0)
    await publish(
        store, index_name, [doc("open", ["quarterly salary report"], [query], tenant="acme")]
    )
    public = Scope("acme", readers=NOBODY)

    async def ids(scope: Scope) -> tuple[list[str], list[str]]:
        semantic = await store.search_vector(index_name, query, 5, scope)
        lexical = await store.search_lexical(index_name, parse_lexical("salary"), 5, scope)
        return sorted(h.document_id for h in semantic), sorted(h.document_id for h in lexical.hits)

    before = _elided(store)
    for _ in range(2):
        assert await ids(public) == (["open"], ["open"])
    if before is not None:
        assert _elided(store) == before + 4  # both legs, twice: no clause on an all-public index
    v = await store.begin_version(index_name)
    secret = doc("secret", ["salary salary salary"], [query], tenant="acme", acl=HR)
    await store.stage_documents(index_name, v, [secret])
    await store.publish_version(index_name, v, spec(index_name))
    after = _elided(store)
    for _ in range(2):
        assert await ids(public) == (["open"], ["open"])
    if after is not None:
        assert _elided(store) == after  # the index holds a restricted chunk now
    assert await ids(Scope("acme", readers=ALICE)) == (["open", "secret"], ["open", "secret"])
