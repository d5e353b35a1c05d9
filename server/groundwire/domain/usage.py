"""Embedding usage as a value: what one or many embedding calls cost, content-free.

Counted per ingestion operation, per query, per agent execution and per tenant.
`input_tokens` are the tokens the model consumed: the provider's own count when
it reports one, the model's tokenizer for local models, an estimate otherwise;
`estimated_input_tokens` says how many of them were estimated."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class EmbeddingUsage:
    """Counters of embedding work; all zero means no embedding call was made."""

    # Calls to the model: HTTP requests to a remote provider, inference runs of a
    # local one.
    requests: int = 0
    # Input tokens the model consumed (after any truncation).
    input_tokens: int = 0
    # Of input_tokens, those estimated because neither the provider nor a
    # tokenizer counted them.
    estimated_input_tokens: int = 0
    # Texts embedded.
    texts: int = 0
    # Texts the model saw only in part because they exceeded its token window.
    truncated_texts: int = 0

    def __add__(self, other: EmbeddingUsage) -> EmbeddingUsage:
        return EmbeddingUsage(
            *(getattr(self, f.name) + getattr(other, f.name) for f in fields(EmbeddingUsage))
        )

    @property
    def empty(self) -> bool:
        """No embedding call was made."""
        return self == EmbeddingUsage()

    def as_dict(self) -> dict[str, int]:
        """Field name -> count (for records and stores)."""
        return {f.name: int(getattr(self, f.name)) for f in fields(EmbeddingUsage)}


NO_USAGE = EmbeddingUsage()
