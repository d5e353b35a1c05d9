"""What a configured index contains: its sources, as plain descriptors. Finding the
documents they name is ingestion's job (`groundwire.ingestion.sources`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class DirectorySource:
    """Files under a directory matching a glob."""

    path: Path
    glob: str = "**/*"
    recursive: bool = True


@dataclass(frozen=True, slots=True)
class FilesSource:
    """An explicit list of files (document id = file name)."""

    paths: tuple[Path, ...]


@dataclass(frozen=True, slots=True)
class InlineSource:
    """Text given in the configuration itself."""

    id: str
    text: str
    title: str = ""
    markdown: bool = False
    metadata: tuple[tuple[str, str], ...] = ()


SourceConfig = DirectorySource | FilesSource | InlineSource
