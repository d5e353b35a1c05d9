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
  against bench_retrieve_breakdown.py's in-process figure).

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
    if variant.startswith("gil-"):
        cli._GIL_SWITCH_S = float(variant.removeprefix("gil-")) / 1000
        return
    raise SystemExit(f"unknown variant {variant!r}")


if __name__ == "__main__":
    apply(sys.argv[1])
    if sys.argv[2:3] != ["--"]:
        raise SystemExit("usage: serve_variant.py VARIANT -- serve arguments...")
    raise SystemExit(cli.main(["serve", *sys.argv[3:]]))
