"""The `[checkpoints]` section: how long execution checkpoints are kept, the
lease that makes running one exclusive across replicas, and the bounds of
client-executed tools.

    [checkpoints]
    retention_seconds = 3600          # a checkpoint (and a recorded result) lives this long
    lease_seconds = 30                # a crashed replica's executions resume after this
    tool_result_timeout_seconds = 300 # per client tool call; also the request maximum
    max_tool_result_chars = 16384     # per client tool result
"""

from __future__ import annotations

from pydantic import Field, model_validator

from groundwire.agents.checkpoints import CheckpointSettings
from groundwire.app.config_base import StrictModel


class CheckpointConfig(StrictModel):
    retention_seconds: float = Field(3600.0, gt=0, le=7 * 24 * 3600)
    lease_seconds: float = Field(30.0, ge=0.3, le=3600)
    tool_result_timeout_seconds: float = Field(300.0, gt=0, le=24 * 3600)
    max_tool_result_chars: int = Field(16_384, ge=1, le=1_000_000)

    @model_validator(mode="after")
    def _retention_covers_the_wait(self) -> CheckpointConfig:
        if self.tool_result_timeout_seconds > self.retention_seconds:
            raise ValueError(
                "checkpoints.tool_result_timeout_seconds must not exceed "
                "checkpoints.retention_seconds (a waiting execution would expire first)"
            )
        return self

    def settings(self) -> CheckpointSettings:
        return CheckpointSettings(
            self.retention_seconds,
            self.lease_seconds,
            self.tool_result_timeout_seconds,
            self.max_tool_result_chars,
        )
