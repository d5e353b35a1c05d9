"""The embedded Qdrant store's versions beyond the shared contract: a path has one
owner, a published version survives a restart, and two versions staged at once
both land (the later publish rebased on the earlier one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from groundwire.domain.errors import GroundwireError
from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import Scope
from groundwire.stores.qdrant import open_qdrant_store
from tests.stores.conftest import qdrant_test_settings
from tests.stores.contract_support import K, doc, publish, spec, vec


async def test_a_path_has_one_owner(tmp_path: Path) -> None:
    store = await open_qdrant_store(qdrant_test_settings(tmp_path))
    with pytest.raises(GroundwireError) as err:
        await open_qdrant_store(qdrant_test_settings(tmp_path))
    assert err.value.reason == "STORE_UNAVAILABLE"
    await store.close()
    again = await open_qdrant_store(qdrant_test_settings(tmp_path))
    await again.close()


async def test_a_published_version_survives_a_restart(tmp_path: Path) -> None:
    store = await open_qdrant_store(qdrant_test_settings(tmp_path))
    await publish(store, "idx", [doc("a", ["alpha text"], [vec(1, 0, 0, 0)], tenant="t")])
    v = await store.begin_version("idx")
    await store.stage_documents("idx", v, [doc("b", ["beta"], [vec(0, 1, 0, 0)], tenant="t")])
    await store.close()  # the staged version is lost with the process, as a crash loses it

    store = await open_qdrant_store(qdrant_test_settings(tmp_path))
    state = await store.ensure_index(spec("idx"))
    assert (state.published_version, state.document_count, state.chunk_count) == (1, 1, 1)
    assert await store.tenant_counts("idx", "t") == (1, 1)
    hits = await store.search_vector("idx", vec(1, 0, 0, 0), 5, Scope("t"))
    assert [h.document_id for h in hits] == ["a"]
    found = await store.search_lexical("idx", parse_lexical("alpha"), 5, Scope("t"))
    assert [h.document_id for h in found.hits] == ["a"]
    # The next version starts after the lost one; its leftovers are swept.
    assert await store.begin_version("idx") == 3
    (index_dir,) = [p for p in (tmp_path / "qdrant").iterdir() if p.is_dir()]
    assert sorted(p.name for p in index_dir.iterdir()) == ["manifest.json", "v1"]
    await store.close()


async def test_a_manifest_without_characters_counts_them_when_read(tmp_path: Path) -> None:
    """A manifest written before the characters of chunk text were recorded (five
    statistics a tenant) still answers `tenant_characters`, counted on the shard."""
    store = await open_qdrant_store(qdrant_test_settings(tmp_path))
    await publish(
        store, "idx", [doc("a", ["alpha text", "beta"], [vec(1, 0, 0, 0)] * 2, tenant="t")]
    )
    assert await store.tenant_characters("idx", "t") == 10 + 4
    await store.close()
    (manifest,) = (tmp_path / "qdrant").glob("*/manifest.json")
    raw = json.loads(manifest.read_text())
    raw["tenants"] = {t: v[:5] for t, v in raw["tenants"].items()}
    manifest.write_text(json.dumps(raw))
    store = await open_qdrant_store(qdrant_test_settings(tmp_path))
    await store.ensure_index(spec("idx"))
    assert await store.tenant_characters("idx", "t") == 14
    assert await store.tenant_characters("idx", "other") == 0
    await store.close()


async def test_a_publish_counts_the_characters_of_the_documents_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the first publish, a tenant's characters move by its touched documents'
    chunks (old shard out, new shard in), never a scroll of the whole tenant; the
    figure equals a whole count."""
    from groundwire.stores.qdrant import versions as qdrant_versions

    scrolled: list[list[str] | None] = []
    whole = qdrant_versions.chunk_characters

    def spy(edge: object, tenant: str, documents: list[str] | None = None) -> int:
        scrolled.append(documents)
        return whole(edge, tenant, documents)  # type: ignore[arg-type]

    monkeypatch.setattr(qdrant_versions, "chunk_characters", spy)
    store = await open_qdrant_store(qdrant_test_settings(tmp_path))
    many = [
        doc(f"d{i}", ["x" * (10 + i), "yy"], [vec(1, 0, 0, 0)] * 2, tenant="t") for i in range(20)
    ]
    await publish(store, "idx", many)
    assert scrolled == [None]
    scrolled.clear()
    v = await store.begin_version("idx")
    await store.stage_documents("idx", v, [doc("d3", ["zzzz"], [vec(0, 1, 0, 0)], tenant="t")])
    await store.stage_deletions("idx", v, [K("d4", "t")])
    await store.publish_version("idx", v, spec("idx"))
    assert sorted(map(sorted, scrolled)) == [["d3", "d4"], ["d3", "d4"]]  # type: ignore[arg-type]
    expected = sum(10 + i + 2 for i in range(20)) - (13 + 2) - (14 + 2) + 4
    assert await store.tenant_characters("idx", "t") == expected
    await store.close()


async def test_two_versions_staged_at_once_both_land(tmp_path: Path) -> None:
    store = await open_qdrant_store(qdrant_test_settings(tmp_path))
    await publish(store, "idx", [doc("base", ["base text"], [vec(1, 0, 0, 0)])])
    first = await store.begin_version("idx")
    second = await store.begin_version("idx")
    await store.stage_documents("idx", first, [doc("one", ["one"], [vec(0, 1, 0, 0)])])
    await store.stage_documents("idx", second, [doc("two", ["two"], [vec(0, 0, 1, 0)])])
    await store.stage_deletions("idx", second, [K("base")])
    await store.publish_version("idx", second, spec("idx"))
    await store.publish_version("idx", first, spec("idx"))
    live = await store.live_documents("idx")
    assert sorted(k.document_id for k in live) == ["one", "two"]
    state = await store.index_state("idx")
    # The older version's publish is a new published state: a number past the
    # newer one's (stores/base.py publication_number).
    assert state.published_version > second and state.document_count == 2
    hits = await store.search_vector("idx", vec(0, 0, 1, 0), 5, Scope())
    assert hits[0].document_id == "two"
    await store.close()


async def test_a_filtered_graph_search_keeps_its_recall(tmp_path: Path) -> None:
    # The tenant's graph is searched (built at once, no exact scan of the filtered
    # points) with a filter passing a tenth of them: the engine's two-hop search
    # keeps the top k the exact filtered ranking gives.
    import numpy as np

    from groundwire.domain.retrieval import MetadataFilter

    store = await open_qdrant_store(
        qdrant_test_settings(tmp_path, indexing_threshold_kb=1, full_scan_threshold_kb=1)
    )
    rng = np.random.default_rng(9)
    dims = 16
    centers = rng.normal(size=(20, dims))
    rows = centers[rng.integers(20, size=3_000)] + 0.5 * rng.normal(size=(3_000, dims))
    rows = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    docs = [
        doc(f"d{i:05d}", [f"t{i}"], [rows[i]], metadata={"dept": f"p{i % 10}"})
        for i in range(3_000)
    ]
    sp = spec("idx", dims=dims)
    await store.ensure_index(sp)
    v = await store.begin_version("idx")
    for start in range(0, len(docs), 500):
        await store.stage_documents("idx", v, docs[start : start + 500])
    await store.publish_version("idx", v, sp)
    tenth = Scope("", MetadataFilter({"dept": frozenset({"p3"})}))
    found = 0
    for query in rng.normal(size=(20, dims)).astype(np.float32):
        hits = await store.search_vector("idx", query, 10, tenth)
        sims = np.where(np.arange(3_000) % 10 == 3, rows @ query, -np.inf)
        want = {f"d{i:05d}" for i in np.argsort(-sims)[:10]}
        found += len({h.document_id for h in hits} & want)
        assert len(hits) == 10
    assert found / 200 >= 0.9
    await store.close()
