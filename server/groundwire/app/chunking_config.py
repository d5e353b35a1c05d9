"""Chunking configuration of an index: a default policy and policies per file
extension, in characters or in the index embedder's tokens.

TOML shape (inside `[indexes.NAME]`):

    [indexes.docs.chunking]
    unit = "tokens"            # "characters" (default) or "tokens" (the embedder's tokenizer)
    size = 256                 # per chunk, task prefix and special tokens included
    overlap = 32               # shared by neighbouring chunks, at most size / 2
    markdown_sections = true   # Markdown documents are split per section first

    [indexes.docs.chunking.extensions.".txt"]   # fixed windows for plain text
    size = 128                 # every key optional; unset ones come from the default
    overlap = 0

Documents read from files take the policy of their file extension; documents
without a file name (inline sources, pushed documents, URL pages) take the policy of
their format's first extension (".txt", ".md", ".html", ".pdf", ".docx", ...), a
pushed text-like media type its own (text/csv ".csv", application/json ".json")."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import Field, field_validator, model_validator

from groundwire.app.config_base import StrictModel
from groundwire.domain.chunking import ChunkPolicy, ChunkUnit, normalize_extension

_EXTENSION = re.compile(r"^\.?[A-Za-z0-9_+-]{1,16}$")

Unit = Literal["characters", "tokens"]


def _check_overlap(size: int, overlap: int) -> None:
    if overlap > size // 2:
        raise ValueError("overlap must be at most half of size")


class ExtensionChunkingConfig(StrictModel):
    """One extension's policy; unset keys inherit the index's default policy."""

    unit: Unit | None = None
    size: int | None = Field(None, ge=16, le=100_000)
    overlap: int | None = Field(None, ge=0)
    markdown_sections: bool | None = None


class ChunkingConfig(StrictModel):
    unit: Unit = "characters"
    size: int = Field(800, ge=16, le=100_000)
    overlap: int = Field(100, ge=0)
    markdown_sections: bool = True
    extensions: dict[str, ExtensionChunkingConfig] = Field(default_factory=dict, max_length=64)

    @field_validator("extensions")
    @classmethod
    def _extension_keys(
        cls, value: dict[str, ExtensionChunkingConfig]
    ) -> dict[str, ExtensionChunkingConfig]:
        seen: dict[str, str] = {}
        for key in value:
            if not _EXTENSION.match(key):
                raise ValueError(
                    f"{key!r}: an extension is 1-16 characters of [A-Za-z0-9_+-] after a dot"
                )
            ext = normalize_extension(key)
            if ext in seen:
                raise ValueError(f"{key!r}: the same extension as {seen[ext]!r}")
            seen[ext] = key
        return value

    @model_validator(mode="after")
    def _overlap(self) -> ChunkingConfig:
        _check_overlap(self.size, self.overlap)
        for key, ext in self.extensions.items():
            # A switch of unit makes the inherited size meaningless (800 characters
            # are not 800 tokens): the extension must say its own size.
            if ext.unit is not None and ext.unit != self.unit:
                for name in ("size", "overlap"):
                    if getattr(ext, name) is None:
                        raise ValueError(f"extensions.{key}.{name}: required when the unit differs")
            size = ext.size if ext.size is not None else self.size
            overlap = ext.overlap if ext.overlap is not None else self.overlap
            if overlap > size // 2:
                raise ValueError(
                    f"extensions.{key}.overlap: {overlap} (set or inherited) is more than half"
                    f" of size {size}"
                )
        return self

    def default_policy(self) -> ChunkPolicy:
        """The policy of every extension without its own."""
        return ChunkPolicy(self.size, self.overlap, self.markdown_sections, ChunkUnit(self.unit))

    def extension_policies(self) -> Mapping[str, ChunkPolicy]:
        """Normalized extension -> its resolved policy."""
        out: dict[str, ChunkPolicy] = {}
        for key, ext in self.extensions.items():
            size = ext.size if ext.size is not None else self.size
            out[normalize_extension(key)] = ChunkPolicy(
                size,
                ext.overlap if ext.overlap is not None else self.overlap,
                ext.markdown_sections
                if ext.markdown_sections is not None
                else self.markdown_sections,
                ChunkUnit(ext.unit or self.unit),
            )
        return out

    def uses_tokens(self) -> bool:
        """Whether any policy counts the embedder's tokens."""
        return self.unit == "tokens" or any(e.unit == "tokens" for e in self.extensions.values())

    def largest_token_size(self) -> tuple[str, int] | None:
        """The key path (below `chunking`) and value of the largest token size."""
        best: tuple[str, int] | None = ("size", self.size) if self.unit == "tokens" else None
        for key, ext in self.extensions.items():
            size = ext.size if ext.size is not None else self.size
            if (ext.unit or self.unit) == "tokens" and (best is None or size > best[1]):
                best = (f"extensions.{key}.size", size)
        return best


def check_token_chunking(index: str, chunking: ChunkingConfig, embedder: object | None) -> None:
    """Token chunking counts with the index embedder's tokenizer, so the index
    needs an embedder with one, and no chunk may exceed what the model encodes
    without truncation. `embedder` is the index's entry from [embedders]."""
    if not chunking.uses_tokens():
        return
    prefix = f"indexes.{index}.chunking"
    if embedder is None:
        raise ValueError(f"{prefix}.unit: token chunking needs the index to name an embedder")
    kind = getattr(embedder, "kind", "")
    if kind in ("openai-compatible", "hashing"):
        raise ValueError(
            f"{prefix}.unit: token chunking needs an embedder with a local tokenizer;"
            f" embedder kind {kind!r} has none (use characters)"
        )
    max_tokens = getattr(embedder, "max_seq_length", None)
    largest = chunking.largest_token_size()
    if isinstance(max_tokens, int) and largest is not None and largest[1] > max_tokens:
        raise ValueError(
            f"{prefix}.{largest[0]}: {largest[1]} tokens exceed the embedder's"
            f" max_seq_length {max_tokens}; chunks would be truncated"
        )
