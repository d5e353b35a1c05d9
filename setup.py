"""The compiled parts of groundwire: the memory store's BM25 top k
(server/groundwire/stores/memory/_bm25.c) and a Retrieve response's results
encoded in one call (server/groundwire/api/_wire.c). Both optional: where no C
compiler is available the build goes on, the store scores with numpy and the
results are written field by field (the same answers; docs/explanation/
design-decisions.md, "A compiled BM25 top k" and "Retrieve results encoded in C")."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "groundwire.stores.memory._bm25",
            ["server/groundwire/stores/memory/_bm25.c"],
            # No fused multiply-add or reassociation: the sums must be the numpy path's.
            extra_compile_args=["-O2", "-ffp-contract=off", "-fno-fast-math"],
            optional=True,
        ),
        Extension(
            "groundwire.api._wire",
            ["server/groundwire/api/_wire.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
    ]
)
