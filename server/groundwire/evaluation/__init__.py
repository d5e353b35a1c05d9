"""`groundwire eval`: retrieval and agent evaluation of a running groundwire.

The package is a gRPC *client* of the public API: it evaluates what users get,
so it imports nothing from the server's engines. Modules, in the order a run
uses them:

- `dataset`: BEIR collections (corpus, queries, qrels) and their content hash;
- `variants`: the retrieval configurations a run evaluates (TOML);
- `client`: channel, call metadata, stubs and error decoding of the public API;
- `corpus_push`: push-ingests a collection into an index, once per version;
- `query_runs`: runs one variant's queries (retrieve, optionally rerank);
- `baseline`: the client-side rank-bm25 baseline;
- `metrics`: nDCG / MRR / Recall / Precision through ir-measures (pytrec_eval);
- `summaries`: the variant, index and slice blocks of a run document;
- `runner`: a retrieval run end to end (the run document);
- `agent_outcomes`, `agents`: agent-level evaluation (no-context reasons,
  reranking outcomes, usage and cost, grounding, latency);
- `stats`: bootstrap intervals, randomization and Wilcoxon tests;
- `compare`: paired comparison of two variants (metrics, slices, latency);
- `gate`: the release gate's thresholds, checks and verdict;
- `formatting`, `plots`, `run_report`, `compare_report`: Markdown and PNG output;
- `common`: schema names, the evaluation error, percentiles, run metadata, JSON;
- `cli`: the `groundwire eval ...` subcommands.
"""

from __future__ import annotations

__all__: list[str] = []
