"""The `kind = "s3"` source: objects of an S3-compatible bucket (AWS S3, Google
Cloud Storage's interoperability API, Cloudflare R2, MinIO, Ceph, SeaweedFS).

Credentials are references only (environment variables, secret files, or an AWS
shared credentials file), resolved at every sync. The endpoint passes the URL
sources' address rules (SSRF) at load when it is a literal address, and again at
every connection (ingestion/s3_client.py). Messages name the rule, never a value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from groundwire.app.config_base import SecretRef, StrictModel
from groundwire.app.url_source_config import (
    cidr_block,
    url_allow_list,
    url_literal_refusal,
    url_source_url,
)

# S3's own bucket name rules (3-63 characters; dots allowed for path-style use).
_BUCKET = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
_REGION = r"^[a-z0-9-]{1,32}$"


def _prefix(value: str) -> str:
    """A prefix is a folder of the bucket: "" or ending in "/" (one is added)."""
    if value.startswith("/"):
        raise ValueError("a prefix does not start with '/'")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError("a prefix has no control characters")
    return value if not value or value.endswith("/") else value + "/"


class S3SourceBase(StrictModel):
    """The fields of an s3 source other than its file formats and access lists
    (config.S3Source adds those, shared with directory sources)."""

    kind: Literal["s3"]
    # The S3 API's base URL, e.g. "https://storage.googleapis.com" or
    # "http://127.0.0.1:8333"; "" (the default): AWS, https://s3.REGION.amazonaws.com.
    endpoint: str = ""
    region: str = Field("us-east-1", pattern=_REGION)
    bucket: str = Field(pattern=_BUCKET)
    # The folder of the bucket whose objects are documents ("" or ending in "/").
    # An empty prefix (the whole bucket) must be allowed with `allow_whole_bucket`.
    prefix: Annotated[str, AfterValidator(_prefix)] = Field("", max_length=1024)
    allow_whole_bucket: bool = False
    # Globs over the key relative to the prefix (`**` any depth): an object is a
    # document when it matches an `include` glob and no `exclude` glob.
    include: list[Annotated[str, Field(min_length=1, max_length=1024)]] = Field(
        default_factory=lambda: ["**/*"], min_length=1, max_length=64
    )
    exclude: list[Annotated[str, Field(min_length=1, max_length=1024)]] = Field(
        default_factory=list, max_length=64
    )
    # Credentials by reference: `access_key_id` and `secret_access_key` (each
    # {env = "NAME"} or {file = "path"}, optionally `session_token`), or an AWS
    # shared credentials file and its profile. Never the secret itself.
    access_key_id: SecretRef | None = None
    secret_access_key: SecretRef | None = None
    session_token: SecretRef | None = None
    credentials_file: Path | None = None
    profile: str = Field("default", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    # "path": ENDPOINT/BUCKET/KEY (MinIO, SeaweedFS, Ceph); "virtual":
    # BUCKET.ENDPOINT-HOST/KEY (AWS, GCS, R2).
    addressing: Literal["path", "virtual"] = "virtual"
    # A PEM file of the CA(s) that sign the endpoint's certificate (default: the
    # system's trust store).
    ca_file: Path | None = None
    connect_timeout_seconds: float = Field(5.0, gt=0, le=120)
    read_timeout_seconds: float = Field(30.0, gt=0, le=600)
    # Host names and address blocks the endpoint may resolve to although they are
    # private or loopback (as for url sources; on premises: the storage network).
    allow_hosts: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9.-]{1,253}$")]] = Field(
        default_factory=list
    )
    allow_cidrs: list[Annotated[str, AfterValidator(cidr_block)]] = Field(default_factory=list)
    # Objects larger than this are skipped from the listing, never downloaded
    # (default: the index's ingestion.max_file_bytes).
    max_bytes: int | None = Field(None, ge=1, le=1024 * 1024 * 1024)

    @model_validator(mode="after")
    def _checked(self) -> S3SourceBase:
        if not self.prefix and not self.allow_whole_bucket:
            raise ValueError(
                "prefix: an empty prefix reads the whole bucket; set allow_whole_bucket"
                " = true to allow it"
            )
        if self.endpoint:
            url_source_url(self.endpoint)
            problem = url_literal_refusal(
                self.endpoint, url_allow_list(self.allow_hosts, self.allow_cidrs)
            )
            if problem is not None:
                raise ValueError(f"endpoint: {problem}")
        keys = (self.access_key_id is None, self.secret_access_key is None)
        if keys[0] != keys[1]:
            raise ValueError("access_key_id and secret_access_key go together")
        if (self.credentials_file is None) == (self.access_key_id is None):
            raise ValueError(
                "credentials: give exactly one of access_key_id + secret_access_key"
                " (references) or credentials_file"
            )
        if self.session_token is not None and self.access_key_id is None:
            raise ValueError("session_token goes with access_key_id")
        tls = not self.endpoint or self.endpoint.lower().startswith("https")
        if "." in self.bucket and self.addressing == "virtual" and tls:
            raise ValueError(
                "bucket: a name with dots does not match a TLS certificate in virtual-hosted"
                " addressing; use addressing = 'path'"
            )
        return self

    def endpoint_url(self) -> str:
        """The endpoint to talk to (AWS's regional one when none is set)."""
        return self.endpoint.rstrip("/") or f"https://s3.{self.region}.amazonaws.com"

    def location(self) -> str:
        """s3://bucket/prefix: how logs and errors name the source (no endpoint
        path, no credentials)."""
        return f"s3://{self.bucket}/{self.prefix}"
