"""The configuration variants of the reload tests and bench: every variant `v`
changes several keys together (retrieval default_top_k and rrf_k; the probe
agent's retrieval mode and maximum accepted results), so one response shows
which variant served it and a response mixing two variants is detectable."""

from __future__ import annotations

from pathlib import Path

from groundwire.domain.auth import generate_key, hash_key
from groundwire_client.v1 import agent_pb2, retriever_pb2
from tests.support.toml_writer import dumps

KEYS = {name: generate_key() for name in ("admin", "client", "temp", "reader")}
PERMISSIONS = {
    "admin": ["manage", "retrieve", "execute"],
    "client": ["retrieve", "execute"],
    "temp": ["retrieve"],
    "reader": ["retrieve"],
}


def documents(count: int) -> list[dict[str, object]]:
    """`count` inline documents, every one matching QUERY."""
    return [
        {
            "kind": "inline",
            "id": f"leave-{i}",
            "text": f"Leave policy section {i}. The leave policy grants {i + 10} days of leave.",
        }
        for i in range(count)
    ]


QUERY = "leave policy days"
VARIANTS = 4


def config(
    variant: int,
    *,
    keys: tuple[str, ...] = ("admin", "client", "temp", "reader"),
    chunk_size: int = 800,
    docs: int = 8,
    store: dict[str, object] | None = None,
    **overrides: object,
) -> dict[str, object]:
    """Configuration variant `variant` (0..3), each changing several keys together."""
    v = variant % VARIANTS
    cfg: dict[str, object] = {
        "auth": {
            "keys": [
                {"id": k, "hash": hash_key(KEYS[k]), "permissions": PERMISSIONS[k]} for k in keys
            ]
        },
        "embedders": {"hash": {"kind": "hashing"}},
        "indexes": {
            "docs": {
                "embedder": "hash",
                "sources": documents(docs),
                "chunking": {"size": chunk_size, "overlap": 0},
                "ingestion": {"strategy": "on_startup"},
            }
        },
        "retrieval": {"default_top_k": 2 + v, "rrf_k": 30 + v},
        "models": {"offline": {"kind": "offline"}},
        "agents": {
            "probe": {
                "name": f"Probe {v}",
                "model": "offline/extractive-v1",
                "instructions": f"Variant {v} instructions.",
                "rag": {
                    "index": "docs",
                    "retrieval_mode": "lexical" if v % 2 == 0 else "hybrid",
                    "acceptance": {"candidate_count": 8, "maximum_accepted_results": 1 + v},
                },
            }
        },
    }
    if store:
        cfg["store"] = store
    cfg.update(overrides)
    return cfg


def write(path: Path, cfg: dict[str, object]) -> None:
    # Atomic like an operator's editor or a config-management tool.
    tmp = path.with_suffix(".tmp")
    tmp.write_text(dumps(cfg))
    tmp.replace(path)


def auth(key: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {KEYS[key]}"),)


def retrieve_request() -> retriever_pb2.RetrieveRequest:
    return retriever_pb2.RetrieveRequest(
        query=retriever_pb2.RagQuery(
            index_name="docs", text=QUERY, mode=retriever_pb2.RETRIEVAL_MODE_HYBRID
        )
    )


def execute_request() -> agent_pb2.ExecuteRequest:
    return agent_pb2.ExecuteRequest(input=agent_pb2.ExecutionInput(agent_id="probe", message=QUERY))


def retrieve_variant(r: retriever_pb2.RetrieveResponse) -> int | None:
    """The variant a Retrieve response shows; None if it mixes two."""
    by_top_k = len(r.results) - 2
    by_rrf = r.diagnostics.applied_rrf_k - 30
    ok = by_top_k == by_rrf == r.diagnostics.applied_top_k - 2
    return by_top_k if ok else None


def execute_variant(r: agent_pb2.ExecuteResponse) -> int | None:
    """The variant an Execute response shows; None if it mixes two."""
    rag = r.result.rag
    v = rag.accepted_count - 1
    hybrid = rag.retrieval_mode == retriever_pb2.RETRIEVAL_MODE_HYBRID
    return v if hybrid == (v % 2 == 1) else None
