"""tests/support/toolchains.py: a missing toolchain fails under CI=true and
skips elsewhere, naming exactly what is missing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support import toolchains

ABSENT = "gw-no-such-toolchain"
PRESENT = Path(sys.executable).name  # the interpreter running this test


@pytest.fixture(autouse=True)
def _no_fallback_dirs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(toolchains, "FALLBACK_DIRS", ())


@pytest.mark.parametrize("value", ["true", "TRUE", "1", "yes"])
def test_a_missing_toolchain_fails_under_ci(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception) as failed:
        toolchains.require(PRESENT, ABSENT, purpose="the smoke test")
    assert f"the smoke test needs {ABSENT}: not installed" in str(failed.value)
    assert "CI=true" in str(failed.value)


@pytest.mark.parametrize("value", [None, "", "false", "0"])
def test_a_missing_toolchain_skips_outside_ci_naming_exactly_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.skip.Exception) as skipped:
        toolchains.require(ABSENT, PRESENT, f"{ABSENT}-2", purpose="the smoke test")
    reason = str(skipped.value)
    assert reason.startswith(f"the smoke test needs {ABSENT}, {ABSENT}-2: not installed")
    assert PRESENT not in reason.split(":")[0]


def test_present_toolchains_are_returned_with_their_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    found = toolchains.require(PRESENT, purpose="the smoke test")
    assert found[PRESENT].name == PRESENT and found[PRESENT].is_file()


def test_a_fallback_directory_is_searched_and_put_on_path_for_scripts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tool = tmp_path / ABSENT
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setattr(toolchains, "FALLBACK_DIRS", (tmp_path,))
    monkeypatch.setenv("CI", "true")
    found = toolchains.require(ABSENT, purpose="the smoke test")
    assert found == {ABSENT: tool}
    assert str(tmp_path) in toolchains.env_with(found)["PATH"].split(":")
