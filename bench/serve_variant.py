"""`groundwire serve` with one thing changed, for bench_grpc_retrieve.py's
--variant runs (each isolates one suspect in the Retrieve/Health ratio):

- ``served``: the server as shipped (the same as `groundwire serve`);
- ``cached-handler``: RetrieverService.Retrieve answers its first real answer to
  every call; the interceptor, admission, snapshot dispatch and transport run as
  served, so the ratio shows what everything but the handler costs;
- ``gil-MS``: the GIL switch interval set to MS milliseconds (served: 1 ms);
- ``timed-handler``: served, and the event loop thread's CPU time inside
  RetrieverService.Retrieve is summed; the process prints calls and CPU per call
  to its stdout (the bench's) when it exits (what the handler costs served,
  against bench_retrieve_breakdown.py's in-process figure);
- ``numpy-scorer``: the memory store scoring with numpy, as where no C compiler
  built stores/memory/_bm25.c; ``free-scorer``: that with each query's top k
  computed once and remembered (the pipeline without the scorer's cost);
- ``timed-twice``: each Retrieve runs twice in a row and both runs' CPU is summed
  apart (the second meets the first's code and data in the caches);
- ``python-encoder``: the Retrieve results written field by field in Python, as
  where no C compiler built api/_wire.c;
- ``no-gc``: the garbage collector disabled;
- ``faults``: minor page faults of the event loop thread inside each Retrieve;
- ``lean-handler``: lexical Retrieves answered without the engine or per-hit
  domain objects (an experiment; see _lean_handler); ``lean-handler-free-scorer``
  the same with each query's BM25 scores computed once and remembered.

    python bench/serve_variant.py VARIANT -- serve arguments...
"""

from __future__ import annotations

import sys
from typing import Any

from groundwire.app import cli


def apply(variant: str) -> None:
    if variant == "served":
        return
    if variant == "cached-handler":
        from groundwire.api import retriever

        answer = retriever.RetrieverServicer.Retrieve
        cached: list[Any] = []

        async def first_answer(self: Any, request: Any, context: Any) -> Any:
            if not cached:
                cached.append(await answer(self, request, context))
            return cached[0]

        retriever.RetrieverServicer.Retrieve = first_answer  # type: ignore[method-assign]
        return
    if variant == "timed-handler":
        import atexit
        import time

        from groundwire.api import retriever

        handler = retriever.RetrieverServicer.Retrieve
        spent = [0, 0]

        async def timed(self: Any, request: Any, context: Any) -> Any:
            t0 = time.thread_time_ns()
            try:
                return await handler(self, request, context)
            finally:
                spent[0] += 1
                spent[1] += time.thread_time_ns() - t0

        def report() -> None:
            calls = max(spent[0], 1)
            print(f"timed-handler: {spent[0]} calls, {spent[1] / calls / 1e3:.1f} us CPU a call",
                  flush=True)  # fmt: skip

        retriever.RetrieverServicer.Retrieve = timed  # type: ignore[method-assign]
        atexit.register(report)
        return
    if variant in ("lean-handler", "lean-handler-free-scorer"):
        _lean_handler(free_scorer=variant.endswith("free-scorer"))
        return
    if variant == "timed-twice":
        import atexit
        import time

        from groundwire.api import retriever as retriever_api

        handler2 = retriever_api.RetrieverServicer.Retrieve
        spent2 = [0, 0, 0]

        async def twice(self: Any, request: Any, context: Any) -> Any:
            t0 = time.thread_time_ns()
            await handler2(self, request, context)
            t1 = time.thread_time_ns()
            answer = await handler2(self, request, context)
            spent2[0] += 1
            spent2[1] += t1 - t0
            spent2[2] += time.thread_time_ns() - t1
            return answer

        def report2() -> None:
            n = max(spent2[0], 1)
            print(
                f"timed-twice: first {spent2[1] / n / 1e3:.1f} us, again {spent2[2] / n / 1e3:.1f} us",
                flush=True,
            )

        retriever_api.RetrieverServicer.Retrieve = twice  # type: ignore[method-assign]
        atexit.register(report2)
        return
    if variant == "faults":
        import atexit
        import resource

        from groundwire.api import retriever as retriever_api

        inner = retriever_api.RetrieverServicer.Retrieve
        counted = [0, 0]

        async def counting(self: Any, request: Any, context: Any) -> Any:
            before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
            try:
                return await inner(self, request, context)
            finally:
                counted[0] += 1
                counted[1] += resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before

        def faults() -> None:
            print(
                f"faults: {counted[1] / max(counted[0], 1):.2f} minor faults a Retrieve", flush=True
            )

        retriever_api.RetrieverServicer.Retrieve = counting  # type: ignore[method-assign]
        atexit.register(faults)
        return
    if variant in ("numpy-scorer", "free-scorer"):
        # The memory store scoring with numpy (as where no C compiler built _bm25.c);
        # with free-scorer each query's top k is computed once and then remembered
        # by its text: the shipped pipeline without the scorer's cost.
        from groundwire.stores.memory import search

        search._compiled = None  # type: ignore[attr-defined,assignment]
        if variant == "free-scorer":
            top = search.LexicalSnapshot._top
            remembered: dict[tuple[str, int], Any] = {}

            def free(self: Any, query: Any, entries: Any, weights: Any, k: int) -> Any:
                key = (query.text, k)
                if key not in remembered:
                    remembered[key] = top(self, query, entries, weights, k)
                return remembered[key]

            search.LexicalSnapshot._top = free  # type: ignore[method-assign]
        return
    if variant == "python-encoder":
        from groundwire.api import convert

        convert._wire = None  # type: ignore[assignment,attr-defined]
        return
    if variant == "no-gc":
        import gc

        gc.disable()
        return
    if variant.startswith("gil-"):
        cli._GIL_SWITCH_S = float(variant.removeprefix("gil-")) / 1000
        return
    raise SystemExit(f"unknown variant {variant!r}")


def _lean_handler(free_scorer: bool = False) -> None:
    """An experiment, not a design (it writes the fields convert._fill_result
    writes, from the store's rows): lexical Retrieves of the memory store answered
    by the least Python that gives the same answer (the servicer's validation, the
    query's analysis, the store's cached term scores and BM25 arrays, then the
    protobuf response written from the store's rows): no engine, no per-hit domain
    objects (hits, scores, ranked results, provenance), a fixed diagnostics. What a
    pipeline carrying results as arrays from the store to the wire could reach in
    Python; other requests are served as shipped. Reads the store's internals.
    With `free_scorer`, a query's scores are computed once and then remembered by
    its text: the numpy scorer's cost removed, what a compiled one would leave."""
    import numpy as np

    from groundwire.api import convert
    from groundwire.api import retriever as retriever_api
    from groundwire.api.auth import effective_readers, effective_tenant
    from groundwire.domain import bm25
    from groundwire.domain.query import parse_lexical
    from groundwire.domain.retrieval import Leg, RetrievalDiagnostics, RetrievalMode
    from groundwire.domain.scores import ScoreMetric
    from groundwire.retrieval.requests import build_retrieval_request
    from groundwire.stores.memory.search import publication_cache, top_rows
    from groundwire_client.v1 import retriever_pb2

    shipped = retriever_api.RetrieverServicer.Retrieve
    bm25_metric, lexical_leg = convert._METRICS[ScoreMetric.BM25], convert._LEGS[Leg.LEXICAL]
    profiles: dict[str, Any] = {}
    scorer_free: dict[str, tuple[list[float], list[int]]] | None = {} if free_scorer else None

    async def lean(self: Any, request: Any, context: Any) -> Any:
        q = request.query
        if q.mode != retriever_pb2.RETRIEVAL_MODE_LEXICAL or q.index_name not in profiles:
            answer = await shipped(self, request, context)
            if q.mode == retriever_pb2.RETRIEVAL_MODE_LEXICAL:
                profiles[q.index_name] = answer.profile
            return answer
        limits = self._retriever.limits
        domain = build_retrieval_request(
            index_name=q.index_name,
            text=q.text,
            mode=convert.mode_from_proto(q.mode),
            top_k=q.top_k if q.HasField("top_k") else None,
            conditions=convert.filter_from_proto(q.filter),
            tenant=effective_tenant(q.tenant, "query.tenant"),
            rrf_k=None,
            semantic_weight=None,
            lexical_weight=None,
            leg_depth=None,
            limits=limits,
            fusion_defaults=self._retriever.fusion_defaults,
            readers=effective_readers(),
        )
        handle = self._retriever._catalog.get(domain.index_name)
        store = handle.store
        query = parse_lexical(
            domain.text, analyzer=handle.spec.analyzer, max_terms=limits.max_lexical_terms
        )
        idx = store._get(handle.name)
        scoped = store._scoped(idx, domain.scope)
        part = idx.parts[domain.scope.tenant]
        cache = publication_cache(scoped, idx.doc_len)
        scored = {}
        for term in dict.fromkeys(query.terms):
            posting = part.posting(term)
            if posting is not None:
                scored[term] = cache.term(term, *posting)
        terms, _ = bm25.select_terms(query.terms, {t: e.df for t, e in scored.items()}, 32)
        found = scorer_free.get(domain.text) if scorer_free is not None else None
        if found is None:
            dense = np.zeros(len(scoped.tenant_rows))
            held = np.zeros(len(scoped.tenant_rows), dtype=bool)
            for term in terms:
                dense[scored[term].positions] += scored[term].contributions
                held[scored[term].positions] = True
            positions = np.flatnonzero(held)
            matched, scores = scoped.tenant_rows[positions], dense[positions]
            top = top_rows(scores, np.flatnonzero(scoped.admits(matched)), domain.top_k)
            found = (scores[top].tolist(), matched[top].tolist())
            if scorer_free is not None:
                scorer_free[domain.text] = found
        rows = idx.rows
        best = sorted(
            zip(*found, strict=True),
            key=lambda p: (-p[0], rows[p[1]].document_id, rows[p[1]].chunk_id),
        )[: domain.top_k]
        response = retriever_pb2.RetrieveResponse()
        add = response.results.add
        for rank, (value, row) in enumerate(best, start=1):
            r = rows[row]
            msg = add()
            msg.document_id = r.document_id
            msg.chunk_id = r.chunk_id
            msg.rank = rank
            score = msg.score
            score.raw_score = value
            score.metric = bm25_metric
            score.higher_is_better = True
            leg = msg.provenance.add()
            leg.leg = lexical_leg
            leg.rank = rank
            leg.score.CopyFrom(score)
            msg.content = r.text
            span = msg.span
            span.start = r.start
            span.end = r.end
            msg.title = r.title
            msg.section = r.section
            if r.metadata:
                msg.metadata.update(r.metadata)
        diagnostics = RetrievalDiagnostics(mode=RetrievalMode.LEXICAL, top_k=domain.top_k)
        convert._fill_diagnostics(response.diagnostics, diagnostics)
        response.profile.CopyFrom(profiles[q.index_name])
        return response

    retriever_api.RetrieverServicer.Retrieve = lean  # type: ignore[method-assign]


if __name__ == "__main__":
    apply(sys.argv[1])
    if sys.argv[2:3] != ["--"]:
        raise SystemExit("usage: serve_variant.py VARIANT -- serve arguments...")
    raise SystemExit(cli.main(["serve", *sys.argv[3:]]))
