"""The embedded default configuration: a `demo` index over the handbook that ships
with the package, embedded with the local MiniLM model and ingested on startup."""

from __future__ import annotations

from pathlib import Path

from groundwire.app.config import GroundwireConfig, parse_config

HANDBOOK_DIR = Path(__file__).parent / "demo" / "handbook"
PEOPLE_OPS_DIR = Path(__file__).parent / "demo" / "people-ops"
# Relevance 0.65 (cosine 0.3) for all-MiniLM-L6-v2: handbook questions score 0.7-0.9
# against their pages, unrelated ones about 0.58 (see tests/e2e/test_demo_default.py).
DEMO_MINIMUM_RELEVANCE = 0.65


def default_config(data_dir: Path | None = None) -> GroundwireConfig:
    """The embedded default. `data_dir` (default: var/pgdata under the working
    directory) is where the embedded PostgreSQL keeps its data."""
    return parse_config(
        {
            "store": {"kind": "postgres", "data_dir": str(data_dir or Path("var/pgdata"))},
            # The demo listens on loopback only; real deployments configure API keys.
            "auth": {"mode": "disabled"},
            # Connect and the OpenAI-compatible facade beside the gRPC port.
            "http": {"address": "127.0.0.1:8080"},
            "embedders": {"minilm": {"kind": "local-onnx"}},
            "indexes": {
                "demo": {
                    "description": "Northwind Labs handbook (ships with groundwire)",
                    "embedder": "minilm",
                    "chunking": {"size": 800, "overlap": 100, "markdown_sections": True},
                    "sources": [
                        {"kind": "directory", "path": str(HANDBOOK_DIR), "glob": "**/*.md"},
                        # Readable by group:people-ops only (docs/how-to/access-lists.md):
                        # the demo's anonymous caller never sees it; a caller naming
                        # the principal (x-groundwire-principals) does.
                        {
                            "kind": "directory",
                            "path": str(PEOPLE_OPS_DIR),
                            "glob": "**/*.md",
                            "acl": ["group:people-ops"],
                        },
                    ],
                    "ingestion": {"strategy": "on_startup"},
                }
            },
            "rerankers": {
                "minilm-maxsim": {"kind": "local-embedding", "embedder": "minilm"},
            },
            "reranking": {"default_reranker": "minilm-maxsim"},
            "models": {"offline": {"kind": "offline"}},
            "agents": {
                "demo-assistant": {
                    "name": "Demo Assistant",
                    "description": "Answers handbook questions, citing the handbook.",
                    "instructions": (
                        "You answer questions about the Northwind Labs employee handbook "
                        "for its employees. Be concise and cite your sources."
                    ),
                    "instructions_visible": True,
                    "model": "offline/extractive-v1",
                    "rag": {
                        "index": "demo",
                        "retrieval_mode": "semantic",
                        "mode": "grounded",
                        "no_context_behavior": "return_not_found",
                        "acceptance": {
                            "minimum_relevance": DEMO_MINIMUM_RELEVANCE,
                            "candidate_count": 20,
                            "maximum_accepted_results": 5,
                        },
                        # The local reranker runs on the CPU next to the server: give it room.
                        "reranking": {
                            "enabled": True,
                            "maximum_candidates": 5,
                            "timeout_seconds": 15,
                        },
                        "context_budget": {
                            "maximum_chunks_per_source": 2,
                            "prefer_source_diversity": True,
                        },
                    },
                }
            },
        }
    )
