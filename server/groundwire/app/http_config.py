"""The `[http]` section: the HTTP port beside the gRPC port (Connect protocol,
the OpenAI-compatible facade, and whatever later mounts on the same app).

    [http]
    address = "127.0.0.1:8080"          # unset (the default in a file): no HTTP port
    cors_allowed_origins = []           # e.g. ["https://console.example.com"]; [] = CORS off
    cors_max_age_seconds = 600
    mcp = true                          # MCP (streamable HTTP) at /mcp
    console = true                      # the web console at /console
    dashboard_api = true                # the dashboard management REST API at /api/rag
    max_upload_bytes = 67108864         # a file upload's bound (/api/rag/indexes/NAME/files)

The embedded default (`make run`) serves it on 127.0.0.1:8080. TLS, the API
keys, tenancy, limits and message size bound are the gRPC port's (`[server]`,
`[auth]`, `[limits]`): the HTTP port has none of its own, except the bound of the
dashboard API's raw file upload (`max_upload_bytes`; each index's
`ingestion.max_file_bytes` bounds it further), which carries one file's bytes
rather than a message.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from groundwire.app.config_base import StrictModel

_WILDCARD = "*"


class HttpConfig(StrictModel):
    """See the module docstring."""

    address: str | None = None
    # Exact origins ("scheme://host[:port]") allowed to call from a browser, or
    # ["*"]. Credentials travel in the Authorization header, never in cookies,
    # so "*" exposes nothing a key does not already grant.
    cors_allowed_origins: list[str] = Field(default_factory=list, max_length=64)
    cors_max_age_seconds: int = Field(600, ge=0, le=86_400)
    # The MCP tools over streamable HTTP at /mcp (same keys and permissions).
    mcp: bool = True
    # The web console (static files, no key needed; its API calls carry the key
    # typed into it) at /console.
    console: bool = True
    # The dashboard management REST API (seed 000) at /api/rag: thin routes over
    # the IngestionManagerService RPCs (same keys and permissions).
    dashboard_api: bool = True
    # The largest file the dashboard API's raw upload route
    # (POST /api/rag/indexes/NAME/files) takes, whatever an index's
    # ingestion.max_file_bytes allows (the smaller of the two applies). Not
    # server.max_message_bytes: the body is one file's bytes, not a message.
    max_upload_bytes: int = Field(64 * 1024 * 1024, ge=1024 * 1024, le=1024 * 1024 * 1024)

    @field_validator("address")
    @classmethod
    def _address(cls, v: str | None) -> str | None:
        if v is None:
            return v
        host, sep, port = v.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError("must be HOST:PORT (for example 127.0.0.1:8080)")
        return v

    @field_validator("cors_allowed_origins")
    @classmethod
    def _origins(cls, v: list[str]) -> list[str]:
        for origin in v:
            if origin == _WILDCARD:
                continue
            scheme, sep, rest = origin.partition("://")
            if scheme not in ("http", "https") or not sep or not rest or "/" in rest:
                raise ValueError(
                    'origins are "*" or scheme://host[:port] (no path), e.g. "https://app.example.com"'
                )
        if _WILDCARD in v and len(v) > 1:
            raise ValueError('"*" allows every origin; list it alone')
        return v

    def host_port(self) -> tuple[str, int] | None:
        """The (host, port) to bind, None when the HTTP port is off."""
        return None if self.address is None else split_address(self.address)


def split_address(address: str) -> tuple[str, int]:
    """HOST:PORT (or [IPV6]:PORT) as the (host, port) to bind."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)
