"""`groundwire eval`: retrieval and agent evaluation of a running groundwire.

The package is a gRPC *client* of the public API (seed 004: evaluate what users
get), so it imports nothing from the server's engines. Modules:

- `dataset`: BEIR collections (corpus, queries, qrels) and their content hash;
- `metrics`: nDCG / MRR / Recall / Precision through ir-measures (pytrec_eval);
- `runner`: push-ingests a collection and runs query variants through the API;
- `compare`: paired comparison, bootstrap intervals, significance tests, slices
  and seed 001's release gate, written as JSON, Markdown and PNG plots;
- `agents`: agent-level evaluation (no-context reasons, reranking outcomes,
  usage and cost, latency);
- `cli`: the `groundwire eval ...` subcommands.
"""

from __future__ import annotations

__all__: list[str] = []
