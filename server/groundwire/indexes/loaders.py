"""The protocol plug-in loaders implement (entry point group groundwire.loaders;
see `groundwire.app.plugins`). The built-in loaders are `groundwire.ingestion.loaders`,
which also applies plug-in loaders with the same bounds and normalization."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Loader(Protocol):
    """A plug-in loader (entry point group groundwire.loaders): one document's
    bytes, already bounded by the index's max_file_bytes, to its text."""

    @property
    def markdown(self) -> bool:
        """True when `load` returns Markdown (then chunked by section)."""
        ...

    def load(self, data: bytes) -> tuple[str, str]:
        """(text, title) of one document ("" when it has no title). Raise ValueError
        for a document it cannot read (recorded as PARSE_FAILED); never return more
        text than the document holds, and never do I/O."""
        ...
