"""`kind = "s3"` sources without a server: the configuration's rules (credentials
by reference only, an empty prefix refused unless allowed, the endpoint's literal
address under the URL policy), listing filters, the listing state that skips an
unchanged object without a download, refusals from the listing alone, credential
references, and the guard that keeps every request on the endpoint's host."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from pathlib import Path
from typing import Any

import pytest

from groundwire.app.config import ConfigError, S3Source, parse_config
from groundwire.app.factories import _s3_source
from groundwire.domain.operations import DocumentFailureReason
from groundwire.indexes.sources import S3Credentials, SecretReference, source_kind
from groundwire.ingestion import s3_client, s3_source
from groundwire.ingestion.loaders import FORMATS_BY_EXTENSION
from groundwire.ingestion.url_policy import AllowList


def config(**src: object) -> dict[str, Any]:
    base: dict[str, object] = {
        "kind": "s3",
        "bucket": "team-docs",
        "prefix": "handbook/",
        "access_key_id": {"env": "S3_KEY"},
        "secret_access_key": {"env": "S3_SECRET"},
    }
    base.update(src)
    return {"auth": {"mode": "disabled"}, "indexes": {"docs": {"sources": [base]}}}


def parsed(**src: object) -> S3Source:
    out = parse_config(config(**src)).indexes["docs"].sources[0]
    assert isinstance(out, S3Source)
    return out


def refused(**src: object) -> str:
    with pytest.raises(ConfigError) as err:
        parse_config(config(**src))
    return str(err.value)


def test_an_empty_prefix_is_refused_unless_the_whole_bucket_is_allowed() -> None:
    assert "allow_whole_bucket" in refused(prefix="")
    assert parsed(prefix="", allow_whole_bucket=True).prefix == ""
    assert parsed(prefix="handbook").prefix == "handbook/"
    assert "'/'" in refused(prefix="/handbook/")


def test_credentials_are_references_never_values() -> None:
    assert "secret_access_key" in refused(secret_access_key="AKIA-inline-secret")
    assert "credentials" in refused(access_key_id=None, secret_access_key=None)
    assert "go together" in refused(secret_access_key=None)
    assert "exactly one" in refused(credentials_file="creds.ini")
    src = parsed(access_key_id=None, secret_access_key=None, credentials_file="/etc/creds")
    assert src.credentials_file == Path("/etc/creds")


def test_the_endpoint_passes_the_url_policy() -> None:
    assert "allow_cidrs" in refused(endpoint="http://127.0.0.1:8333")
    assert "allow_cidrs" in refused(endpoint="http://169.254.169.254")
    assert "credentials" in refused(endpoint="http://user:pw@s3.example.com")
    ok = parsed(endpoint="http://127.0.0.1:8333", allow_cidrs=["127.0.0.1/32"])
    assert ok.endpoint_url() == "http://127.0.0.1:8333"
    assert parsed(region="eu-west-3").endpoint_url() == "https://s3.eu-west-3.amazonaws.com"
    assert "path" in refused(bucket="my.dotted.bucket")


def _item(key: str, size: int = 10, **kw: object) -> s3_source.S3Item:
    src = _s3_source(parsed(**kw))
    return s3_source.S3Item(
        s3_source.object_id(src.bucket, key),
        src,
        key,
        size,
        "abc",
        "2026-01-01T00:00:00+00:00",
        {".md": FORMATS_BY_EXTENSION[".md"], ".txt": FORMATS_BY_EXTENSION[".txt"], ".gz": None},
    )


def test_include_exclude_hidden_and_folder_markers() -> None:
    src = _s3_source(parsed(include=["**/*.md", "notes/*"], exclude=["drafts/**"]))
    assert s3_source._wanted(src, "a.md")
    assert s3_source._wanted(src, "deep/er/a.md")
    assert s3_source._wanted(src, "notes/plain")
    assert not s3_source._wanted(src, "drafts/a.md")
    assert not s3_source._wanted(src, "a.txt")
    assert not s3_source._wanted(src, ".hidden/a.md")
    assert not s3_source._wanted(src, "folder/")


def test_the_listing_state_decides_unchanged_without_a_download() -> None:
    item = _item("handbook/a.md")
    state = s3_source.object_state(item, "", {})
    assert s3_source.listed_unchanged(item, f"digest|{state}", "", {})
    assert not s3_source.listed_unchanged(item, None, "", {})
    assert not s3_source.listed_unchanged(item, "digest", "", {})
    for changed in (
        _item("handbook/a.md", size=11),
        s3_source.S3Item(item.document_id, item.source, item.key, 10, "abd", item.last_modified),
    ):
        assert not s3_source.listed_unchanged(changed, f"digest|{state}", "", {})
    # A new tenant, metadata or access list is a change too.
    assert not s3_source.listed_unchanged(item, f"digest|{state}", "t2", {})
    assert not s3_source.listed_unchanged(item, f"digest|{state}", "", {"k": "v"})


def test_refusals_from_the_listing_alone() -> None:
    assert s3_source._precheck(_item("handbook/a.md", size=101), 100) is (
        DocumentFailureReason.TOO_LARGE
    )
    assert s3_source._precheck(_item("handbook/a.bin"), 100) is (
        DocumentFailureReason.UNSUPPORTED_FORMAT
    )
    assert s3_source._precheck(_item("handbook/a.pdf.gz"), 100) is (
        DocumentFailureReason.UNSUPPORTED_FORMAT
    )
    assert s3_source._precheck(_item("handbook/a.md.gz"), 100) is None
    assert s3_source._precheck(_item("handbook/README"), 100) is None


def test_credentials_resolve_from_references_at_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("K", "AKID")
    monkeypatch.setenv("S", " secret ")
    env = S3Credentials(SecretReference(env="K"), SecretReference(env="S"))
    assert s3_client.resolve_credentials(env) == ("AKID", "secret", None)
    monkeypatch.setenv("S", "")
    assert s3_client.resolve_credentials(env) is None
    ini = tmp_path / "credentials"
    ini.write_text(
        "[default]\naws_access_key_id = A1\naws_secret_access_key = S1\n"
        "[team]\naws_access_key_id = A2\naws_secret_access_key = S2\naws_session_token = T2\n"
    )
    assert s3_client.resolve_credentials(S3Credentials(credentials_file=ini)) == ("A1", "S1", None)
    team = S3Credentials(credentials_file=ini, profile="team")
    assert s3_client.resolve_credentials(team) == ("A2", "S2", "T2")
    missing = S3Credentials(credentials_file=ini, profile="nobody")
    assert s3_client.resolve_credentials(missing) is None


def test_the_guard_keeps_requests_on_the_endpoint_host() -> None:
    src = _s3_source(parsed(endpoint="https://storage.example.com"))
    guard = s3_client._Guard(s3_client._allowed_hosts(src), AllowList())
    guard.check_host("storage.example.com")
    guard.check_host("team-docs.storage.example.com")
    for other in ("evil.example.com", "169.254.169.254", "team-docs.evil.com"):
        with pytest.raises(s3_client.HostRefused):
            guard.check_host(other)
    with pytest.raises(s3_client.HostRefused):
        guard.check_address("storage.example.com", ipaddress.ip_address("10.0.0.1"))
    guard.check_address("storage.example.com", ipaddress.ip_address("93.184.216.34"))


async def test_read_ahead_keeps_the_order_overlaps_objects_and_cancels_on_error() -> None:
    objects: list[s3_source.AnyItem] = [_item(f"handbook/{i}.md") for i in range(20)]
    running: set[str] = set()
    most = 0
    started: list[str] = []
    cancelled: list[str] = []

    async def load(item: s3_source.AnyItem) -> str:
        nonlocal most
        assert isinstance(item, s3_source.S3Item)
        started.append(item.key)
        running.add(item.key)
        most = max(most, len(running))
        try:
            number = int(item.key.split("/")[1].split(".")[0])
            # The first is the slowest of the window; those after the failure hang.
            await asyncio.sleep(0.05 if number == 0 else 0.01 if number <= 10 else 30)
            if item.key == "handbook/10.md":
                raise RuntimeError("server gone")
            return item.key
        except asyncio.CancelledError:
            cancelled.append(item.key)
            raise
        finally:
            running.discard(item.key)

    seen: list[str] = []
    with pytest.raises(RuntimeError):
        async with contextlib.aclosing(s3_source.read_ahead(objects, load, ahead=4)) as loads:
            async for item, value in loads:
                assert value == item.document_id.split("/", 3)[3]
                seen.append(value)
    assert seen == [f"handbook/{i}.md" for i in range(10)]
    assert 1 < most <= 4
    # Nothing past the window was started; what was in flight was cancelled.
    assert len(started) <= 14 and cancelled and not running


def test_get_index_shows_the_kind_and_never_the_bucket() -> None:
    src = _s3_source(parsed())
    assert source_kind(src) == "s3"
    assert src.location == "s3://team-docs/handbook/"
