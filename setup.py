"""The one compiled part of groundwire: the memory store's BM25 top k
(server/groundwire/stores/memory/_bm25.c). Optional: where no C compiler is
available the build goes on and the store scores with numpy (the same results;
docs/explanation/design-decisions.md, "A compiled BM25 top k")."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "groundwire.stores.memory._bm25",
            ["server/groundwire/stores/memory/_bm25.c"],
            # No fused multiply-add or reassociation: the sums must be the numpy path's.
            extra_compile_args=["-O2", "-ffp-contract=off", "-fno-fast-math"],
            optional=True,
        )
    ]
)
