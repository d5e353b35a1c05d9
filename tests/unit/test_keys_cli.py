"""`groundwire keys create` says whose documents the key sees and refuses bad input."""

from __future__ import annotations

import tomllib

import pytest

from groundwire.app.cli import main

pytestmark = pytest.mark.timeout(10)


def create(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["keys", "create", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_tenant_key_is_told_it_does_not_see_untenanted_sources(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = create(
        capsys, "--id", "acme-app", "--tenant", "acme", "--permissions", "retrieve,execute,ingest"
    )
    assert code == 0
    comments = "\n".join(line for line in out.splitlines() if line.startswith("#"))
    assert 'bound to tenant "acme"' in comments
    assert "NOTHING of the documents read from the sources of indexes configured" in comments
    assert 'tenant = "acme"' in comments and "tenant_scope_empty" in comments
    assert "start, watch and cancel" in comments  # what `ingest` allows
    entry = tomllib.loads(out)["auth"]["keys"][0]  # the comments keep it loadable
    assert entry["tenant"] == "acme" and entry["permissions"] == ["retrieve", "execute", "ingest"]
    assert err.rsplit(" ", 1)[-1].strip().startswith("gw_")


def test_a_default_tenant_key_sees_untenanted_sources(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = create(capsys, "--id", "app")
    assert code == 0
    assert "default (empty) tenant" in out and "indexes configured without `tenant`" in out
    assert tomllib.loads(out)["auth"]["keys"][0]["tenant"] == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--id", "k", "--permissions", "retrieve,bogus"], "unknown permission 'bogus'"),
        (["--id", "k", "--permissions", " , "], "at least one permission"),
        (["--id", "-bad id"], "--id:"),
        (["--id", "k", "--tenant", "t" * 129], "--tenant:"),
    ],
)
def test_bad_arguments_are_refused_with_the_argument_named(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = create(capsys, *args)
    assert code == 2 and out == "" and message in err and "gw_" not in err


def test_a_tenant_with_quotes_stays_valid_toml(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = create(capsys, "--id", "k", "--tenant", 'a"b\\c')
    assert code == 0 and tomllib.loads(out)["auth"]["keys"][0]["tenant"] == 'a"b\\c'
