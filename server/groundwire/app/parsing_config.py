"""The `[ingestion]` section: the process's parser workers (ingestion/parsing.py).

    [ingestion]
    parser_workers = 1            # default: half the cores, at least one
    parser_cpu_seconds = 20       # CPU budget of one file's parse
    parser_memory_mib = 1024      # address space of one parser worker
    parser_timeout_seconds = 60   # wall-clock bound of one file's parse

A file whose parse passes a bound fails with TOO_COMPLEX (CPU, time) or TOO_LARGE
(memory); the worker is killed and replaced. Changing these keys needs a restart.
"""

from __future__ import annotations

from pydantic import Field

from groundwire.app.config_base import StrictModel
from groundwire.ingestion.parsing import ParserLimits, default_workers


class ParsingConfig(StrictModel):
    """Bounds of the parser worker processes every loaded file goes through."""

    parser_workers: int | None = Field(None, ge=1, le=64)
    parser_cpu_seconds: float = Field(20.0, ge=1, le=3600)
    # Below ~256 MiB the parsing libraries cannot even be imported.
    parser_memory_mib: int = Field(1024, ge=256, le=65_536)
    parser_timeout_seconds: float = Field(60.0, ge=1, le=3600)

    def limits(self) -> ParserLimits:
        return ParserLimits(
            workers=self.parser_workers or default_workers(),
            cpu_seconds=self.parser_cpu_seconds,
            memory_mib=self.parser_memory_mib,
            timeout_seconds=self.parser_timeout_seconds,
        )
