"""The `[ingestion]` section: the process's parser workers (ingestion/parsing.py).

    [ingestion]
    parser_workers = 1                  # default: half the cores, at least one
    parser_cpu_seconds = 20             # CPU budget of one file's parse
    parser_memory_mib = 1024            # address space of one parser worker
    parser_timeout_seconds = 60         # wall-clock bound of one file's parse
    parser_small_workers = 1            # workers reserved for small files (0: none)
    parser_small_file_bytes = 262144    # the largest file the small-file lane takes
    parser_small_seconds = 0.5          # a small-lane job's slice; past it, the main pool
    parser_tenant_cpu_seconds = 60      # parser CPU one tenant may spend per window (0: no budget)
    parser_tenant_window_seconds = 60   # the window that budget refills over

A file whose parse passes a bound fails with TOO_COMPLEX (CPU, time) or TOO_LARGE
(memory); the worker is killed and replaced. A tenant that has spent its parser CPU
budget is refused (RESOURCE_EXHAUSTED, PARSE_BUDGET_EXHAUSTED) until it refills.
Changing these keys needs a restart.
"""

from __future__ import annotations

from pydantic import Field

from groundwire.app.config_base import StrictModel
from groundwire.ingestion.parse_budget import ParseBudget
from groundwire.ingestion.parsing import ParserLimits, default_workers


class ParsingConfig(StrictModel):
    """Bounds of the parser worker processes every loaded file goes through."""

    parser_workers: int | None = Field(None, ge=1, le=64)
    parser_cpu_seconds: float = Field(20.0, ge=1, le=3600)
    # Below ~256 MiB the parsing libraries cannot even be imported.
    parser_memory_mib: int = Field(1024, ge=256, le=65_536)
    parser_timeout_seconds: float = Field(60.0, ge=1, le=3600)
    # Workers reserved for small files, beside parser_workers (0: no small-file lane), so
    # a tenant's small file never waits for another tenant's large or hostile file.
    parser_small_workers: int = Field(1, ge=0, le=16)
    # The largest file (bytes) the small-file lane takes; larger files go to the main pool.
    parser_small_file_bytes: int = Field(256 * 1024, ge=1024, le=16 * 1024 * 1024)
    # Wall-clock slice of one small-lane job: a file that needs longer is moved to the
    # main pool (its tenant's turn there), so a small file waits at most one slice per
    # other tenant in its lane.
    parser_small_seconds: float = Field(0.5, ge=0.1, le=60)
    # Parser CPU-seconds one tenant's pushes may spend per window (a token bucket
    # refilled evenly over parser_tenant_window_seconds); a tenant past it is refused
    # with RESOURCE_EXHAUSTED (PARSE_BUDGET_EXHAUSTED), and no parse runs past what is
    # left of it. 0: no budget. Configured sources' ingestion is the operator's and
    # has none. The default, one core's worth on average, bites only a tenant that
    # keeps more than one parser busy for minutes.
    parser_tenant_cpu_seconds: float = Field(60.0, ge=0, le=86_400)
    parser_tenant_window_seconds: float = Field(60.0, ge=1, le=86_400)

    def limits(self) -> ParserLimits:
        return ParserLimits(
            workers=self.parser_workers or default_workers(),
            cpu_seconds=self.parser_cpu_seconds,
            memory_mib=self.parser_memory_mib,
            timeout_seconds=self.parser_timeout_seconds,
            small_workers=self.parser_small_workers,
            small_file_bytes=self.parser_small_file_bytes,
            small_seconds=self.parser_small_seconds,
            tenant_budget=ParseBudget(
                self.parser_tenant_cpu_seconds, self.parser_tenant_window_seconds
            ),
        )
