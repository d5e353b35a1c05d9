"""Reading a pooled tenant's slot back from its alias (stores/opensearch/pool.py): the
engine returns an alias's filter normalised (a term as {"value": v, "boost": 1.0}), and
an alias without the slot's two terms names no slot (an index of the tenant's own)."""

from __future__ import annotations

from groundwire.stores.opensearch.layout import Names, Slot, chunk_id_of, document_id_of
from groundwire.stores.opensearch.pool import slot_of
from tests.stores.contract_support import spec


def test_a_slot_reads_back_from_the_filter_as_written_and_as_the_engine_returns_it() -> None:
    slot = Slot("0123456789abcdef0123", 7)
    assert slot_of({"filter": slot.alias_filter()}) == slot
    normalised = {
        "filter": {
            "bool": {
                "filter": [
                    {"term": {"tg": {"value": "0123456789abcdef0123", "boost": 1.0}}},
                    {"term": {"tv": {"value": 7, "boost": 1.0}}},
                ],
                "adjust_pure_negative": True,
                "boost": 1.0,
            }
        }
    }
    assert slot_of(normalised) == slot


def test_an_alias_without_both_terms_names_no_slot() -> None:
    assert slot_of({}) is None
    assert slot_of({"filter": {"bool": {"filter": [{"term": {"tg": "x"}}]}}}) is None
    assert slot_of({"filter": {"term": {"kind": "chunk"}}}) is None


def test_pooled_ids_differ_by_version_and_tenant_and_never_equal_an_own_index_id() -> None:
    a1, a2, b1 = Slot("a" * 20, 1), Slot("a" * 20, 2), Slot("b" * 20, 1)
    ids = {
        chunk_id_of("t", "d", "c"),
        chunk_id_of("t", "d", "c", a1),
        chunk_id_of("t", "d", "c", a2),
        chunk_id_of("t", "d", "c", b1),
        document_id_of("t", "d"),
        document_id_of("t", "d", a1),
        document_id_of("t", "d", a2),
    }
    assert len(ids) == 7


def test_pool_names_are_neither_tenant_aliases_nor_versioned_indexes() -> None:
    names = Names("gw-")
    pool = names.pool("docs", spec("docs"))
    assert Names.is_pool(pool)
    assert not Names.is_pool(names.physical("docs", "t", 3))
    assert not Names.is_pool(names.alias("docs", "t"))
    assert pool != names.pool("docs", spec("docs", dims=8))
