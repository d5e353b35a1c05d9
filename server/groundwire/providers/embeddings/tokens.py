"""The embedding model's tokenizer as the token chunker sees it.

A `tokenizers.Tokenizer` wrapped as a `domain.token_chunking.TokenCounter`:
counts are what the model is given for a document (the document task prefix
and the special tokens included), never truncated or padded, so the chunker can
prove a chunk fits before the embedder would have to cut it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from tokenizers import Tokenizer

from groundwire.domain.token_chunking import TokenCounter


class ModelTokenCounter:
    """Counts with a private copy of an embedder's tokenizer (its truncation and
    padding switched off), so counting never changes how the embedder encodes."""

    def __init__(self, tokenizer: Tokenizer, *, document_prefix: str, max_tokens: int) -> None:
        serialized = tokenizer.to_str()
        self._tokenizer = Tokenizer.from_str(serialized)
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self._prefix = document_prefix
        self._max_tokens = max_tokens
        digest = hashlib.blake2b(digest_size=8)
        # The truncation and padding settings are the embedder's, not the
        # vocabulary's; hash the tokenizer as counting uses it.
        digest.update(self._tokenizer.to_str().encode())
        digest.update(b"\x00")
        digest.update(document_prefix.encode())
        self._fingerprint = digest.hexdigest()

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    @property
    def max_tokens(self) -> int:
        return self._max_tokens

    def token_spans(self, text: str) -> Sequence[tuple[int, int]]:
        # Encoding takes the tokenizer immutably (as the embedder's own concurrent
        # query and document runs do), so worker threads may share it.
        encoding = self._tokenizer.encode(text, add_special_tokens=False)
        return [(int(s), int(e)) for s, e in encoding.offsets]

    def document_tokens(self, text: str) -> int:
        encoding = self._tokenizer.encode(self._prefix + text)
        return len(encoding.ids)


@runtime_checkable
class TokenizingEmbedder(Protocol):
    """An embedding provider that can lend the chunker its tokenizer."""

    def token_counter(self) -> TokenCounter: ...


__all__ = ["ModelTokenCounter", "TokenizingEmbedder"]
