"""Direct retrieval: one query, one index, ranked candidates
with full score semantics. No agent acceptance, grounding or reranking here;
top_k is a candidate limit only.

- SEMANTIC embeds the query (query task mode) and runs vector search only; the
  embedding's usage (and whether the query was truncated) is in the diagnostics.
- LEXICAL runs indexed full-text search only and never touches the embedder.
- HYBRID runs both legs concurrently and fuses them (domain.fusion: weighted RRF by
  default, or the opt-in min-max combination); if either leg fails, the call fails.
- With pseudo-relevance feedback (RM3, domain.feedback) the lexical leg runs twice:
  its first run's best chunks expand the query, the expanded query ranks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from groundwire.domain.access import PUBLIC_READERS, Readers
from groundwire.domain.bm25 import DEFAULT_MAX_TERMS
from groundwire.domain.errors import (
    ErrorKind,
    GroundwireError,
    failed_precondition,
    unavailable,
)
from groundwire.domain.feedback import expand
from groundwire.domain.fusion import fuse, single_leg
from groundwire.domain.profile import (
    ProfilePart,
    ProfilePartKind,
    RetrievalProfile,
    bounded,
    part,
)
from groundwire.domain.query import parse_lexical, semantic_text
from groundwire.domain.redaction import PREVIEWS_OFF, ContentPreviews
from groundwire.domain.retrieval import (
    ChunkHit,
    FusionSettings,
    Leg,
    LexicalQuery,
    RankedResult,
    RetrievalDiagnostics,
    RetrievalMode,
    RetrievalOutcome,
    RetrievalRequest,
)
from groundwire.indexes.catalog import IndexCatalog, IndexHandle
from groundwire.instruments import RETRIEVALS
from groundwire.providers.embeddings.base import EmbeddingTask, validate_vectors
from groundwire.providers.embeddings.usage import metered
from groundwire.stores.base import IndexState, VersionWatch

_log = logging.getLogger("groundwire.retrieval")

# Index versions whose recorded descriptors are kept (a few per index).
_MAX_RECORDED = 256


@dataclass(frozen=True, slots=True)
class RetrievalLimits:
    """Server-side bounds and defaults for queries."""

    default_top_k: int = 10
    max_top_k: int = 100
    max_query_chars: int = 4096
    leg_depth: int = 50
    max_leg_depth: int = 1000
    # Distinct lexical terms scored per query, the rarest first (bm25.select_terms).
    max_lexical_terms: int = DEFAULT_MAX_TERMS
    # How long a request whose minimum index version is not visible yet waits for it
    # before INDEX_VERSION_NOT_YET_VISIBLE.
    min_version_wait_s: float = 1.0


class Retriever:
    """Runs retrieval requests against the catalog's indexes."""

    def __init__(
        self,
        catalog: IndexCatalog,
        limits: RetrievalLimits,
        fusion_defaults: FusionSettings | None = None,
        previews: ContentPreviews = PREVIEWS_OFF,
    ) -> None:
        self._catalog = catalog
        self.limits = limits
        self.fusion_defaults = fusion_defaults or FusionSettings()
        self._previews = previews
        # (index, version) -> the chunking and embedding recorded with that
        # published version: read once per version, never per query.
        self._recorded: dict[tuple[str, int], tuple[str, str | None]] = {}
        # (index, version) -> the profile of a published version whose descriptors
        # are recorded, with what it was built from: one object per version, so the
        # api layer hashes and converts it once (api/convert.py), not per query.
        self._profiles: dict[
            tuple[str, int], tuple[object, object, object, object, RetrievalProfile]
        ] = {}

    def fusion_part(self) -> ProfilePart:
        """The server's fusion method and defaults (a per-query override is in the
        diagnostics, not in the profile)."""
        f = self.fusion_defaults
        return part(
            ProfilePartKind.FUSION,
            {
                "method": f.method.value.lower().replace("_", "-"),
                "k": f.k,
                "semantic_weight": f.semantic_weight,
                "lexical_weight": f.lexical_weight,
                "leg_depth": self.limits.leg_depth,
            },
        )

    async def profile(
        self, index_name: str, version: int | None = None, state: IndexState | None = None
    ) -> RetrievalProfile:
        """The retrieval profile of `index_name` at `version` (default: the version
        published now): `index_profile` and the fusion defaults. `state`, when the
        caller already read it, saves a read."""
        handle = self._catalog.get(index_name)
        # Only a published version's recorded descriptors are fixed (while nothing is
        # published the profile follows the configuration, which may change).
        key = (handle.name, version or 0)
        fixed = bool(version) and key in self._recorded
        if fixed:
            cached = self._profiles.get(key)
            if (
                cached is not None
                and cached[0] is handle
                and cached[1] is handle.spec
                and cached[2] is self.fusion_defaults
                and cached[3] is self.limits
            ):
                return cached[4]
        index = await index_profile(handle, version, state, self._recorded)
        profile = index.with_parts([self.fusion_part()])
        if fixed:
            if len(self._profiles) >= _MAX_RECORDED:
                self._profiles.clear()
            self._profiles[key] = (
                handle,
                handle.spec,
                self.fusion_defaults,
                self.limits,
                profile,
            )
        return profile

    async def retrieve(self, request: RetrievalRequest) -> RetrievalOutcome:
        try:
            outcome = await self._retrieve(request)
        except GroundwireError as err:
            RETRIEVALS.add(1, {"mode": request.mode.value, "outcome": err.reason})
            raise
        RETRIEVALS.add(1, {"mode": request.mode.value, "outcome": "OK"})
        if self._previews.enabled and _log.isEnabledFor(logging.DEBUG):
            fields = self._previews.fields(request.text, (r.hit.content for r in outcome.results))
            _log.debug(
                "retrieval preview", extra={"result_count": len(outcome.results), **(fields or {})}
            )
        return outcome

    async def _retrieve(self, request: RetrievalRequest) -> RetrievalOutcome:
        started = time.perf_counter()
        handle = self._catalog.get(request.index_name)
        if not handle.ready:
            raise unavailable("INDEX_NOT_READY", "the index is still being ingested")
        # The query is analyzed with the index's analyzer, the one its terms were
        # indexed with (a change of analyzer rebuilds the index).
        lexical_query = parse_lexical(
            request.lexical_text or request.text,
            analyzer=handle.spec.analyzer,
            max_terms=self.limits.max_lexical_terms,
        )
        diag = RetrievalDiagnostics(
            mode=request.mode, top_k=request.top_k, phrase_count=len(lexical_query.phrases)
        )
        if request.mode is not RetrievalMode.LEXICAL and handle.embedder is None:
            raise failed_precondition(
                "EMBEDDING_NOT_CONFIGURED",
                "the index has no embedding model; use lexical mode",
            )
        diag.index_version, state = await visible_version(
            handle, request.min_version, self.limits.min_version_wait_s
        )
        if request.mode is not RetrievalMode.LEXICAL:
            if state is None:
                state = await handle.store.index_state(handle.name)
            _check_query_space(handle, state)
        results: Sequence[RankedResult]
        hits: Sequence[ChunkHit]
        if request.mode is RetrievalMode.SEMANTIC:
            hits = await self._semantic(handle, request, request.top_k, diag)
            results = single_leg(Leg.SEMANTIC, hits, request.top_k)
        elif request.mode is RetrievalMode.LEXICAL:
            hits = await self._lexical(handle, lexical_query, request, request.top_k, diag)
            results = single_leg(Leg.LEXICAL, hits, request.top_k)
        else:
            depth = max(request.leg_depth, request.top_k)
            diag.leg_depth = depth
            diag.fusion = request.fusion
            semantic, lexical = await _both(
                self._semantic(handle, request, depth, diag),
                self._lexical(handle, lexical_query, request, depth, diag),
            )
            results = tuple(
                fuse(
                    [(Leg.SEMANTIC, semantic), (Leg.LEXICAL, lexical)],
                    request.fusion,
                    request.top_k,
                )
            )
        if not results:
            diag.tenant_scope_empty = await self.tenant_scope_empty(
                request.index_name, request.scope.tenant, request.scope.readers
            )
        diag.profile = await self.profile(request.index_name, diag.index_version, state)
        diag.total_seconds = time.perf_counter() - started
        return RetrievalOutcome(results, diag)

    async def tenant_scope_empty(
        self, index_name: str, tenant: str, readers: Readers = PUBLIC_READERS
    ) -> bool:
        """Whether `tenant` holds no published document in the index that `readers`
        may read (so no query of that scope can find anything). Reveals nothing of
        other tenants, nor of documents the readers may not read."""
        handle = self._catalog.get(index_name)
        state = await handle.store.index_state(handle.name)
        if state.published_version == 0:
            return True
        return not await handle.store.has_documents(handle.name, tenant, readers)

    async def _semantic(
        self, handle: IndexHandle, request: RetrievalRequest, k: int, diag: RetrievalDiagnostics
    ) -> list[ChunkHit]:
        assert handle.embedder is not None
        t0 = time.perf_counter()
        text = semantic_text(request.text)
        with metered() as meter:
            vectors = await handle.embedder.embed([text], EmbeddingTask.QUERY)
        diag.embedding_usage = meter.total
        vector = validate_vectors(vectors, 1, handle.embedder.info)[0]
        t1 = time.perf_counter()
        diag.embedding_seconds = t1 - t0
        hits = await handle.store.search_vector(handle.name, vector, k, request.scope)
        diag.semantic_seconds = time.perf_counter() - t1
        diag.semantic_hits = len(hits)
        return hits

    async def _lexical(
        self,
        handle: IndexHandle,
        query: LexicalQuery,
        request: RetrievalRequest,
        k: int,
        diag: RetrievalDiagnostics,
    ) -> Sequence[ChunkHit]:
        t0 = time.perf_counter()
        settings = request.feedback
        if settings is not None:
            # RM3: the first run's best chunks expand the query that then ranks.
            first = await handle.store.search_lexical(
                handle.name, query, settings.documents, request.scope
            )
            expanded = expand(query, first.hits, settings)
            diag.feedback_documents = len(first.hits)
            diag.feedback_terms = len(set(expanded.terms) - set(query.terms))
            query = expanded
        found = await handle.store.search_lexical(handle.name, query, k, request.scope)
        diag.lexical_seconds = time.perf_counter() - t0
        diag.lexical_hits = len(found.hits)
        diag.lexical_terms_scored = found.terms_scored
        diag.lexical_terms_pruned = found.terms_pruned
        return found.hits


async def index_profile(
    handle: IndexHandle,
    version: int | None = None,
    state: IndexState | None = None,
    recorded: dict[tuple[str, int], tuple[str, str | None]] | None = None,
) -> RetrievalProfile:
    """The index's parts of a profile at `version` (default: the version
    published now): the version with the chunking and embedding it was built
    with (as configured while nothing is published), and the analyzer.
    `recorded` caches what each version recorded, so a version is read once."""
    if version is None:
        state = state or await handle.store.index_state(handle.name)
        version = state.published_version
    chunking, embedding = await _recorded_descriptors(handle, version, state, recorded)
    parts = [
        part(ProfilePartKind.INDEX, {"name": handle.name, "version": version}),
        part(ProfilePartKind.CHUNKING, {"policy": bounded(chunking)}),
        part(ProfilePartKind.ANALYZER, {"analyzer": handle.spec.analyzer.descriptor()}),
    ]
    if embedding is not None:
        parts.append(part(ProfilePartKind.EMBEDDER, {"model": bounded(embedding)}))
    return RetrievalProfile(tuple(parts))


async def _recorded_descriptors(
    handle: IndexHandle,
    version: int,
    state: IndexState | None,
    recorded: dict[tuple[str, int], tuple[str, str | None]] | None,
) -> tuple[str, str | None]:
    configured = (
        handle.chunker().descriptor(),
        handle.embedder.info.descriptor() if handle.embedder is not None else None,
    )
    if version == 0:
        return configured
    key = (handle.name, version)
    hit = recorded.get(key) if recorded is not None else None
    if hit is not None:
        return hit
    if state is None or state.published_version != version:
        state = await handle.store.index_state(handle.name)
    if state.published_version != version:
        # Another version was published meanwhile: what this one recorded is no
        # longer readable, so the configuration stands in (uncached).
        return configured
    found = (state.chunking or configured[0], state.embedding or configured[1])
    if recorded is not None:
        if len(recorded) >= _MAX_RECORDED:
            recorded.clear()
        recorded[key] = found
    return found


def version_not_visible(visible: int, wanted: int) -> GroundwireError:
    """The caller asked for a version this replica cannot serve yet (retryable)."""
    return GroundwireError(
        ErrorKind.UNAVAILABLE,
        "INDEX_VERSION_NOT_YET_VISIBLE",
        "the requested index version is not visible on this server yet; retry",
        metadata={"index_version": str(visible), "min_index_version": str(wanted)},
        retry_after_seconds=0.2,
    )


async def visible_version(
    handle: IndexHandle, min_version: int, wait_s: float
) -> tuple[int, IndexState | None]:
    """The published version a read of the index sees at least (what a response
    reports): at least `min_version`, waiting up to `wait_s` for it, else
    INDEX_VERSION_NOT_YET_VISIBLE. With it the index state when reading the
    version took it (None when the store's change feed answered without a read)."""
    store = handle.store
    state: IndexState | None = None
    if _watches_versions(store):
        version = await store.await_version(handle.name, min_version, wait_s)
    else:
        state = await store.index_state(handle.name)
        version = state.published_version
    if version < min_version:
        raise version_not_visible(version, min_version)
    return version, state


# Store class -> whether it is a VersionWatch: a runtime-checkable Protocol's
# isinstance inspects the class's attributes on every call (tens of microseconds).
_VERSION_WATCH: dict[type, bool] = {}


def _watches_versions(store: object) -> TypeGuard[VersionWatch]:
    kind = type(store)
    known = _VERSION_WATCH.get(kind)
    if known is None:
        known = _VERSION_WATCH[kind] = isinstance(store, VersionWatch)
    return known


def _check_query_space(handle: IndexHandle, state: IndexState) -> None:
    """Refuse the semantic leg when the published vectors were made under another
    embedding configuration than today's query vectors: comparing them would mix
    spaces. A change of the document prefix alone keeps serving the old version
    (its queries are embedded as before) until the rebuild publishes."""
    assert handle.embedder is not None
    if state.published_version == 0 or handle.embedder.info.serves_queries_for(state.embedding):
        return
    raise failed_precondition(
        "INDEX_REBUILD_REQUIRED",
        "the index was built with another embedding configuration; semantic search "
        "resumes when its rebuild is published (lexical search is unaffected)",
    )


async def _both(
    a: Coroutine[Any, Any, Sequence[ChunkHit]], b: Coroutine[Any, Any, Sequence[ChunkHit]]
) -> tuple[Sequence[ChunkHit], Sequence[ChunkHit]]:
    """Run both legs; if one fails, cancel the other and raise the failure."""
    tasks = [asyncio.ensure_future(a), asyncio.ensure_future(b)]
    try:
        done = await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return done[0], done[1]
