"""Source discovery: which documents a configured index's sources contain, with stable ids.

File documents are identified by their path relative to the source root ("/"
separators), which is stable across machines and never exposes the absolute path.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from groundwire.indexes.sources import DirectorySource, FilesSource, InlineSource, SourceConfig
from groundwire.ingestion.loaders import DocumentFormat


@dataclass(frozen=True, slots=True)
class FileItem:
    document_id: str
    path: Path


@dataclass(frozen=True, slots=True)
class InlineItem:
    document_id: str
    text: str
    title: str
    format: DocumentFormat
    metadata: dict[str, str]


SourceItem = FileItem | InlineItem

CONFIG_SOURCE_PREFIX = "config:"


def source_id_for(document_id: str) -> str:
    """Source identity of a configured document (push-style documents use "push:")."""
    return CONFIG_SOURCE_PREFIX + document_id


def _walk(src: DirectorySource, extensions: Sequence[str]) -> Iterator[FileItem]:
    root = src.path
    if not root.is_dir():
        return
    pattern = src.glob
    matches = root.rglob(pattern.removeprefix("**/")) if src.recursive else root.glob(pattern)
    for path in sorted(matches):
        if not path.is_file() or path.suffix.lower() not in extensions:
            continue
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        yield FileItem(rel.as_posix(), path)


def discover(sources: Sequence[SourceConfig], extensions: Sequence[str]) -> list[SourceItem]:
    """Every document of the index's sources, in a deterministic order."""
    items: list[SourceItem] = []
    exts = [e.lower() for e in extensions]
    for src in sources:
        if isinstance(src, DirectorySource):
            items.extend(_walk(src, exts))
        elif isinstance(src, FilesSource):
            items.extend(FileItem(p.name, p) for p in src.paths)
        elif isinstance(src, InlineSource):
            fmt = DocumentFormat.MARKDOWN if src.markdown else DocumentFormat.TEXT
            items.append(InlineItem(src.id, src.text, src.title, fmt, dict(src.metadata)))
    return items
