"""The manual's configuration by example is a configuration: every key in it is
spelled as the loader reads it and every example value passes validation, so a
reader who copies a part of it gets a file `groundwire check-config` accepts. The
TOML blocks of the README and of every manual page are TOML."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from groundwire.app.config import parse_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "reference" / "configuration-example.md"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def toml_blocks(*pages: Path) -> list[str]:
    return [b for page in pages for b in re.findall(r"```toml\n(.*?)```", page.read_text(), re.S)]


def test_the_configuration_reference_is_a_valid_configuration(tmp_path: Path) -> None:
    blocks = toml_blocks(EXAMPLE)
    reference = [b for b in blocks if b.startswith("[server]")]
    assert len(reference) == 1, "the configuration example's block starts with [server]"
    config = parse_config(tomllib.loads(reference[0]), tmp_path)
    # The reference shows every section: a few that must survive parsing as written.
    assert config.agents["policy-assistant"].rag is not None
    rag = config.agents["policy-assistant"].rag
    assert rag.acceptance.maximum_accepted_results == 5
    assert rag.context_budget.maximum_chunks_per_source == 2


def test_every_toml_block_in_the_readme_and_the_manual_is_toml() -> None:
    blocks = toml_blocks(*PAGES)
    assert blocks, "the configuration example at least"
    for block in blocks:
        tomllib.loads(block)
