"""The `[auth]` section: API keys (with their access principals) and identity
providers' token issuers, and which of them the server accepts."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from groundwire.app.config_base import StrictModel, checked_principals
from groundwire.app.token_config import IssuerConfig, check_issuers
from groundwire.domain.access import MAX_CALLER_PRINCIPALS
from groundwire.domain.auth import MAX_TENANT_CHARS


class ApiKeyConfig(StrictModel):
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    hash: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    tenant: str = Field("", max_length=MAX_TENANT_CHARS)
    permissions: list[
        Literal[
            "retrieve",
            "rerank",
            "execute",
            "ingest",
            "manage",
            "prepare",
            "operator",
            "act_for",
            "read_all_documents",
        ]
    ] = Field(min_length=1)
    # The key's access principals (`user:ID`, `group:ID`): which documents with an
    # access list it reads in its tenant (documents without one it always reads).
    principals: list[str] = Field(default_factory=list, max_length=MAX_CALLER_PRINCIPALS)

    @field_validator("principals")
    @classmethod
    def _principals(cls, value: list[str]) -> list[str]:
        return sorted(checked_principals(value, MAX_CALLER_PRINCIPALS))


class AuthConfig(StrictModel):
    """API keys (stored as SHA-256 hashes; `groundwire keys create` makes one)
    and/or identity providers' tokens (`[[auth.issuers]]`, app/token_config.py):
    `mode` says which credentials are accepted. `mode = "disabled"` must be
    written explicitly (the embedded default does it for its loopback-only demo)."""

    mode: Literal["api_keys", "tokens", "api_keys_and_tokens", "disabled"] = "api_keys"
    keys: list[ApiKeyConfig] = Field(default_factory=list)
    issuers: list[IssuerConfig] = Field(default_factory=list, max_length=16)
    public_health: bool = True
    # Who hears an index's health name (groundwire.index.NAME): "visible", only a call
    # whose key may see the index (the public health service reads the call's
    # `authorization` if sent), everyone else NOT_FOUND exactly as for a missing
    # index, so names cannot be probed; "public", anyone (for probes that cannot send
    # a key, on a port only operators reach).
    index_health: Literal["visible", "public"] = "visible"
    public_reflection: bool = True

    @model_validator(mode="after")
    def _keys(self) -> AuthConfig:
        if self.mode in ("api_keys", "api_keys_and_tokens") and not self.keys:
            raise ValueError(
                'auth needs at least one key in [[auth.keys]], or mode = "disabled" explicitly'
            )
        if self.mode in ("tokens", "api_keys_and_tokens") and not self.issuers:
            raise ValueError(f'auth mode "{self.mode}" needs at least one [[auth.issuers]]')
        if self.mode == "tokens" and self.keys:
            raise ValueError(
                'auth mode "tokens" accepts no API keys: drop [[auth.keys]] or use'
                ' mode = "api_keys_and_tokens"'
            )
        if self.mode in ("api_keys", "disabled") and self.issuers:
            raise ValueError(
                f'auth mode "{self.mode}" accepts no tokens: drop [[auth.issuers]] or use'
                ' mode = "tokens" or "api_keys_and_tokens"'
            )
        ids = [k.id for k in self.keys]
        if len(ids) != len(set(ids)):
            raise ValueError("auth.keys ids must be unique")
        check_issuers(self.issuers)
        return self
