"""The README's configuration reference is a configuration: every key in it is
spelled as the loader reads it and every example value passes validation, so a
reader who copies a part of it gets a file `groundwire check-config` accepts."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from groundwire.app.config import parse_config

README = Path(__file__).resolve().parents[2] / "README.md"


def toml_blocks() -> list[str]:
    return re.findall(r"```toml\n(.*?)```", README.read_text(), re.S)


def test_the_configuration_reference_is_a_valid_configuration(tmp_path: Path) -> None:
    blocks = toml_blocks()
    reference = [b for b in blocks if b.startswith("[server]")]
    assert len(reference) == 1, "the Configuration reference block starts with [server]"
    config = parse_config(tomllib.loads(reference[0]), tmp_path)
    # The reference shows every section: a few that must survive parsing as written.
    assert config.agents["policy-assistant"].rag is not None
    rag = config.agents["policy-assistant"].rag
    assert rag.acceptance.maximum_accepted_results == 5
    assert rag.context_budget.maximum_chunks_per_source == 2


def test_every_toml_block_in_the_readme_is_toml() -> None:
    for block in toml_blocks():
        tomllib.loads(block)
