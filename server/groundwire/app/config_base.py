"""Configuration building blocks shared by every config section: strict models,
secret references (never inline secret values) and the base-URL rule."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, model_validator

from groundwire.domain.access import parse_principals
from groundwire.domain.errors import GroundwireError
from groundwire.providers.http import normalize_base_url


class ConfigError(Exception):
    """The configuration is invalid; the message names every offending key."""


class StrictModel(BaseModel):
    """Every configuration section: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def checked_principals(values: list[str], limit: int) -> frozenset[str]:
    """Access principals (domain.access) of a configuration key: each well formed,
    at most `limit` of them; a ValueError names what is wrong, never the value."""
    try:
        return parse_principals(values, "principals", limit)
    except GroundwireError as err:
        raise ValueError(err.message) from None


def http_base_url(value: str) -> str:
    """A provider base URL, by the rule the adapters apply (one rule, one place)."""
    return normalize_base_url(value)


class SecretRef(StrictModel):
    """A secret by reference: exactly one of an environment variable or a file."""

    env: str | None = None
    file: Path | None = None

    @model_validator(mode="after")
    def _one_of(self) -> SecretRef:
        if (self.env is None) == (self.file is None):
            raise ValueError("a secret reference needs exactly one of 'env' or 'file'")
        return self

    def resolve(self) -> str | None:
        """The secret's value, or None when the variable/file is absent. Values are
        never logged; callers treat None as "not configured"."""
        if self.env is not None:
            value = os.environ.get(self.env)
            # A variable of whitespace only is as unset as an empty one.
            return (value or "").strip() or None
        assert self.file is not None
        try:
            return self.file.read_text().strip() or None
        except OSError:
            return None
