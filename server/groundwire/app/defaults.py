"""The embedded default configuration: a `demo` index over the handbook that ships
with the package, embedded with the local MiniLM model and ingested on startup."""

from __future__ import annotations

from pathlib import Path

from groundwire.app.config import GroundwireConfig, parse_config

HANDBOOK_DIR = Path(__file__).parent / "demo" / "handbook"


def default_config() -> GroundwireConfig:
    return parse_config(
        {
            "store": {"kind": "memory"},
            "embedders": {"minilm": {"kind": "local-onnx"}},
            "indexes": {
                "demo": {
                    "description": "Northwind Labs handbook (ships with groundwire)",
                    "embedder": "minilm",
                    "chunking": {"size": 800, "overlap": 100, "markdown_sections": True},
                    "sources": [
                        {"kind": "directory", "path": str(HANDBOOK_DIR), "glob": "**/*.md"}
                    ],
                    "ingestion": {"strategy": "on_startup"},
                }
            },
        }
    )
