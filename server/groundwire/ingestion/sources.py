"""Source discovery: which documents a configured index's sources contain, with stable ids.

File documents are identified by their path relative to the source root ("/"
separators), which is stable across machines and never exposes the absolute path.
URL documents by the id configured with the URL, or by the URL without its query
and fragment (which may hold secrets); they are fetched by `load_url_item`.

Change detection: every document is stored with a content hash, and an unchanged
hash skips re-embedding. A URL document's stored hash also carries its source
state, the HTTP validators (ETag, Last-Modified) of the fetch that produced it, so
the next run asks conditionally and a 304 skips even the download; it lives in the
store with the document, so it survives a restart on PostgreSQL.
"""

from __future__ import annotations

import base64
import codecs
import functools
import hashlib
import json
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from groundwire.domain.operations import DocumentFailureReason
from groundwire.indexes.sources import (
    DirectorySource,
    FilesSource,
    InlineSource,
    S3Source,
    SourceConfig,
    UrlSource,
)
from groundwire.ingestion.loaders import (
    FORMATS,
    FORMATS_BY_EXTENSION,
    MEDIA_TYPES,
    DocumentFormat,
    LoadedDocument,
    LoadFailure,
)
from groundwire.ingestion.parsing import parsers
from groundwire.ingestion.url_fetch import (
    FetchError,
    FetchFailure,
    FetchSettings,
    NotModified,
    Resolver,
    Validators,
    fetch_url,
    system_resolver,
)
from groundwire.ingestion.url_policy import AllowList

log = logging.getLogger("groundwire.ingestion")


@dataclass(frozen=True, slots=True)
class FileItem:
    document_id: str
    path: Path
    # The extensions its source reads, each to its built-in format (None: the
    # extension's own loader, a plug-in's); extensionless files are read when
    # their content is UTF-8 text, any other is skipped as UNSUPPORTED_FORMAT.
    formats: Mapping[str, DocumentFormat | None] = field(default_factory=dict)
    # Who may read the document (domain.access; empty: the whole tenant).
    acl: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class InlineItem:
    document_id: str
    text: str
    title: str
    format: DocumentFormat
    metadata: dict[str, str]
    acl: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class UrlItem:
    document_id: str
    url: str
    source: UrlSource
    acl: frozenset[str] = frozenset()


SourceItem = FileItem | InlineItem | UrlItem

CONFIG_SOURCE_PREFIX = "config:"


def source_id_for(document_id: str) -> str:
    """Source identity of a configured document (push-style documents use "push:")."""
    return CONFIG_SOURCE_PREFIX + document_id


def source_formats(
    own: tuple[tuple[str, str], ...] | None, extensions: Sequence[str]
) -> dict[str, DocumentFormat | None]:
    """Extension -> format of a file source: its own `extensions`, else the
    index's (an extension no built-in format reads is a plug-in loader's)."""
    if own is None:
        return {e.lower(): FORMATS_BY_EXTENSION.get(e.lower()) for e in extensions}
    return {ext: FORMATS[name] if name else FORMATS_BY_EXTENSION.get(ext) for ext, name in own}


def _walk(src: DirectorySource, formats: Mapping[str, DocumentFormat | None]) -> Iterator[FileItem]:
    """Every file under the root that the glob matches, whatever its type: one no
    loader reads is then skipped with a reason, never silently. Hidden files and
    directories (a leading dot) are not documents and are not listed."""
    root = src.path
    if not root.is_dir():
        return
    pattern = src.glob
    matches = root.rglob(pattern.removeprefix("**/")) if src.recursive else root.glob(pattern)
    for path in sorted(matches):
        if not path.is_file():
            continue
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        yield FileItem(rel.as_posix(), path, formats, path_acl(src, rel.as_posix()))


def path_acl(src: DirectorySource | S3Source, relative: str) -> frozenset[str]:
    """A directory (or bucket) source's access list for one file (object): the
    first `acl_rules` entry whose glob matches its path relative to the root (key
    relative to the prefix), else the source's `acl`."""
    for pattern, acl in src.acl_rules:
        if glob_matches(pattern, relative):
            return acl
    return src.acl


def glob_matches(pattern: str, relative: str) -> bool:
    """Whether a POSIX relative path matches a glob: `*` and `?` within one path
    part, `**` across parts (`hr/**` is everything under hr/, `**/*.md` every
    Markdown file at any depth, `[...]` a character class)."""
    return _glob_regex(pattern).fullmatch(relative) is not None


@functools.lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end].replace("\\", "\\\\")
            out.append("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


def discover(sources: Sequence[SourceConfig], extensions: Sequence[str]) -> list[SourceItem]:
    """Every document of the index's sources, in a deterministic order."""
    items: list[SourceItem] = []
    for src in sources:
        if isinstance(src, DirectorySource):
            items.extend(_walk(src, source_formats(src.extensions, extensions)))
        elif isinstance(src, FilesSource):
            formats = source_formats(src.extensions, extensions)
            acl = src.acl
            items.extend(FileItem(p.name, p, formats, acl) for p in src.paths)
        elif isinstance(src, InlineSource):
            fmt = DocumentFormat.MARKDOWN if src.markdown else DocumentFormat.TEXT
            items.append(InlineItem(src.id, src.text, src.title, fmt, dict(src.metadata), src.acl))
        elif isinstance(src, UrlSource):
            acl = src.acl
            items.extend(UrlItem(e.document_id, e.url, src, acl) for e in src.urls)
    return items


# --- URL documents -----------------------------------------------------------------

_STATE_TAG = "http1"


class Unchanged:
    """A conditional fetch answered 304: the stored document is current."""


UNCHANGED = Unchanged()


def stored_digest(stored_hash: str) -> str:
    """The content digest part of a stored hash (the whole of it for files)."""
    return stored_hash.split("|", 1)[0]


def stored_hash(digest: str, source_state: str) -> str:
    """What is stored as a document's content hash: the digest, then its source state."""
    return f"{digest}|{source_state}" if source_state else digest


def _fingerprint(tenant: str, metadata: Mapping[str, str], acl: frozenset[str]) -> str:
    # What a 304 cannot tell us changed: a new tenant, metadata or ACL must
    # re-ingest (no ACL fingerprints as before access lists existed).
    fields: list[object] = [tenant, sorted(metadata.items())]
    if acl:
        fields.append(sorted(acl))
    payload = json.dumps(fields, ensure_ascii=False).encode()
    return hashlib.sha256(payload).hexdigest()[:16]


def _b64(value: str) -> str:
    return base64.urlsafe_b64encode(value.encode("ascii")).decode("ascii")


def _unb64(value: str) -> str:
    return base64.urlsafe_b64decode(value.encode("ascii")).decode("ascii")


def source_state(
    validators: Validators,
    tenant: str,
    metadata: Mapping[str, str],
    acl: frozenset[str] = frozenset(),
) -> str:
    """The source state stored with a fetched document ("" without validators)."""
    if not validators:
        return ""
    fp = _fingerprint(tenant, metadata, acl)
    return f"{_STATE_TAG}|{fp}|{_b64(validators.etag)}|{_b64(validators.last_modified)}"


def stored_validators(
    stored: str,
    tenant: str,
    metadata: Mapping[str, str],
    acl: frozenset[str] = frozenset(),
) -> Validators | None:
    """The validators to ask with, when the stored state is ours and still applies."""
    parts = stored.split("|")
    fp = _fingerprint(tenant, metadata, acl)
    if len(parts) != 5 or parts[1] != _STATE_TAG or parts[2] != fp:
        return None
    try:
        validators = Validators(_unb64(parts[3]), _unb64(parts[4]))
    except (ValueError, UnicodeError):
        return None
    return validators or None


def url_document_id(url: str) -> str:
    """scheme://host[:port]/path: the URL without user info, query or fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme.lower()}://{host}{port}{parts.path or '/'}"


def media_types_for(extensions: Sequence[str]) -> dict[str, DocumentFormat]:
    """Media types a URL source accepts: those of the loaders the index enables."""
    enabled = {FORMATS_BY_EXTENSION[e] for e in extensions if e in FORMATS_BY_EXTENSION}
    return {m: f for m, f in MEDIA_TYPES.items() if f in enabled}


_TEXTUAL = (DocumentFormat.TEXT, DocumentFormat.MARKDOWN, DocumentFormat.HTML)
_UTF8 = frozenset({"", "utf-8", "utf8", "us-ascii", "ascii"})

_FAILURES = {
    FetchFailure.REFUSED: DocumentFailureReason.URL_REFUSED,
    FetchFailure.TOO_MANY_REDIRECTS: DocumentFailureReason.TOO_MANY_REDIRECTS,
    FetchFailure.TOO_LARGE: DocumentFailureReason.TOO_LARGE,
    FetchFailure.UNSUPPORTED_MEDIA_TYPE: DocumentFailureReason.UNSUPPORTED_FORMAT,
    FetchFailure.UNSUPPORTED_ENCODING: DocumentFailureReason.UNSUPPORTED_FORMAT,
    FetchFailure.TIMEOUT: DocumentFailureReason.FETCH_TIMEOUT,
}


def _transcode(body: bytes, charset: str) -> bytes | DocumentFailureReason:
    """Text in a declared charset other than UTF-8, as UTF-8 (the loaders' input)."""
    try:
        codec = codecs.lookup(charset)
    except LookupError:
        return DocumentFailureReason.UNSUPPORTED_FORMAT
    try:
        return body.decode(codec.name).encode("utf-8")
    except UnicodeDecodeError:
        return DocumentFailureReason.NOT_UTF8


async def load_url_item(
    item: UrlItem,
    *,
    tenant: str,
    metadata: Mapping[str, str],
    max_file_bytes: int,
    extensions: Sequence[str],
    previous: str | None,
    resolver: Resolver = system_resolver,
    acl: frozenset[str] = frozenset(),
) -> LoadedDocument | LoadFailure | Unchanged:
    """Fetch and load one URL document. `previous` is the stored hash of the
    published document (None to fetch unconditionally, e.g. on a rebuild)."""
    src = item.source
    meta = {**metadata, **dict(src.metadata)}
    formats = media_types_for(extensions)
    max_bytes = src.max_bytes or max_file_bytes
    settings = FetchSettings(
        allow=AllowList.of(src.allow_hosts, src.allow_cidrs),
        media_types=frozenset(formats),
        max_bytes=max_bytes,
        max_redirects=src.max_redirects,
        connect_timeout=src.connect_timeout_seconds,
        read_timeout=src.read_timeout_seconds,
        total_timeout=src.total_timeout_seconds,
    )
    conditional = None if previous is None else stored_validators(previous, tenant, meta, acl)
    try:
        fetched = await fetch_url(item.url, settings, conditional=conditional, resolver=resolver)
    except FetchError as exc:
        log.warning(
            "url source fetch failed",
            extra={
                "url_origin": exc.origin,
                "failure": exc.failure.value,
                "refusal": exc.refusal,
                "http_status": exc.status,
            },
        )
        reason = _FAILURES.get(exc.failure, DocumentFailureReason.FETCH_FAILED)
        return LoadFailure(item.document_id, reason)
    # Anything else is a fault of the HTTP stack on this one URL: the document
    # fails, the run goes on (cancellation is not an Exception and propagates).
    except Exception as exc:
        log.error("url source fetch faulted", extra={"error_type": type(exc).__name__})
        return LoadFailure(item.document_id, DocumentFailureReason.FETCH_FAILED)
    if isinstance(fetched, NotModified):
        return UNCHANGED
    fmt = formats[fetched.media_type]
    body = fetched.body
    if fmt in _TEXTUAL and fetched.charset not in _UTF8:
        transcoded = _transcode(fetched.body, fetched.charset)
        if isinstance(transcoded, DocumentFailureReason):
            return LoadFailure(item.document_id, transcoded)
        body = transcoded
    name = PurePosixPath(url_document_id(item.url).split("://", 1)[1]).name
    loaded = await parsers().load_bytes(
        item.document_id,
        CONFIG_SOURCE_PREFIX + item.document_id,
        body,
        fmt,
        # A transcoded body may be longer than the fetched one, which was bounded.
        max_bytes=max(max_bytes, len(body)),
        metadata=meta,
        fallback_title=name.replace("-", " ").replace("_", " ") or item.document_id,
    )
    if isinstance(loaded, LoadFailure):
        return loaded
    return replace(loaded, source_state=source_state(fetched.validators, tenant, meta, acl))
