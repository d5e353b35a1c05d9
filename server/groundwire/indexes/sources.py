"""What a configured index contains: its sources, as plain descriptors. Finding the
documents they name is ingestion's job (`groundwire.ingestion.sources`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class DirectorySource:
    """Files under a directory matching a glob."""

    path: Path
    glob: str = "**/*"
    recursive: bool = True
    # The extensions this source reads, each with the built-in format name that
    # reads it ("" for the extension's own loader, built-in or plug-in); None for
    # the index's `ingestion.extensions`.
    extensions: tuple[tuple[str, str], ...] | None = None
    # Who may read its documents (domain.access; empty: the whole tenant), and
    # per-path access lists as (glob, acl), the first match winning.
    acl: frozenset[str] = frozenset()
    acl_rules: tuple[tuple[str, frozenset[str]], ...] = ()


@dataclass(frozen=True, slots=True)
class FilesSource:
    """An explicit list of files (document id = file name)."""

    paths: tuple[Path, ...]
    extensions: tuple[tuple[str, str], ...] | None = None  # as DirectorySource's
    acl: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class InlineSource:
    """Text given in the configuration itself."""

    id: str
    text: str
    title: str = ""
    markdown: bool = False
    metadata: tuple[tuple[str, str], ...] = ()
    acl: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class UrlEntry:
    """One URL and the document id it is stored under."""

    url: str
    document_id: str


@dataclass(frozen=True, slots=True)
class UrlSource:
    """Documents fetched with HTTP GET under the URL policy
    (`groundwire.ingestion.url_policy`): public addresses only unless allowed here."""

    urls: tuple[UrlEntry, ...]
    allow_hosts: frozenset[str] = frozenset()
    allow_cidrs: tuple[str, ...] = ()
    max_redirects: int = 5
    connect_timeout_seconds: float = 5.0
    read_timeout_seconds: float = 15.0
    total_timeout_seconds: float = 60.0
    max_bytes: int | None = None  # None: the index's max_file_bytes
    metadata: tuple[tuple[str, str], ...] = field(default=())
    acl: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class SecretReference:
    """Where a secret is read from at use: an environment variable or a file."""

    env: str | None = None
    file: Path | None = None


@dataclass(frozen=True, slots=True)
class S3Credentials:
    """An s3 source's credentials, by reference only: an access key pair (and
    session token), or an AWS shared credentials file and its profile."""

    access_key_id: SecretReference | None = None
    secret_access_key: SecretReference | None = None
    session_token: SecretReference | None = None
    credentials_file: Path | None = None
    profile: str = "default"


@dataclass(frozen=True, slots=True)
class S3Source:
    """Objects of an S3-compatible bucket under a prefix, synced incrementally by
    the objects' identity (ingestion/s3_source.py). Documents are named
    `s3://bucket/key`; globs and access-list rules match the key relative to the
    prefix."""

    endpoint: str  # the base URL actually used (AWS's regional one when unset)
    region: str
    bucket: str
    prefix: str
    credentials: S3Credentials
    include: tuple[str, ...] = ("**/*",)
    exclude: tuple[str, ...] = ()
    path_style: bool = False
    ca_file: Path | None = None
    connect_timeout_seconds: float = 5.0
    read_timeout_seconds: float = 30.0
    allow_hosts: frozenset[str] = frozenset()
    allow_cidrs: tuple[str, ...] = ()
    max_bytes: int | None = None  # None: the index's max_file_bytes
    extensions: tuple[tuple[str, str], ...] | None = None  # as DirectorySource's
    acl: frozenset[str] = frozenset()
    acl_rules: tuple[tuple[str, frozenset[str]], ...] = ()

    @property
    def location(self) -> str:
        """s3://bucket/prefix: the source's name in logs and errors."""
        return f"s3://{self.bucket}/{self.prefix}"


SourceConfig = DirectorySource | FilesSource | InlineSource | UrlSource | S3Source


def source_kind(source: SourceConfig) -> str:
    """The configuration `kind` of a source (shown by GetIndex, never its paths)."""
    if isinstance(source, DirectorySource):
        return "directory"
    if isinstance(source, FilesSource):
        return "files"
    if isinstance(source, InlineSource):
        return "inline"
    if isinstance(source, S3Source):
        return "s3"
    return "url"
