"""Deterministic chunking: stable ids, exact offsets, section awareness."""

from __future__ import annotations

import itertools

import pytest

from groundwire.domain.chunking import (
    ChunkPolicy,
    chunk_text,
    markdown_sections,
    markdown_title,
    split_range,
)

MD = """# Handbook

Intro paragraph about the company.

## Leave

Parental leave is POL-HR-014.

### Sick leave

Call your manager before 9.

```python
# not a heading
```

## Travel

Book through the portal.
"""


def test_offsets_are_exact_and_ids_stable() -> None:
    text = ("word " * 400).strip()
    policy = ChunkPolicy(size=200, overlap=40, markdown_sections=False)
    a = chunk_text(text, policy, markdown=False)
    b = chunk_text(text, policy, markdown=False)
    assert [c.chunk_id for c in a] == [c.chunk_id for c in b]
    for c in a:
        assert text[c.start : c.end] == c.text
        assert len(c.text) <= 200
        assert not c.text.startswith(" ") and not c.text.endswith(" ")
    assert [c.ordinal for c in a] == list(range(len(a)))
    assert sorted(c.chunk_id for c in a) == [c.chunk_id for c in a]


def test_overlap_between_neighbours() -> None:
    text = " ".join(f"w{i}" for i in range(300))
    chunks = chunk_text(
        text, ChunkPolicy(size=120, overlap=30, markdown_sections=False), markdown=False
    )
    for prev, nxt in itertools.pairwise(chunks):
        assert nxt.start < prev.end  # they share characters
        assert prev.end - nxt.start <= 30


def test_ids_change_with_content() -> None:
    policy = ChunkPolicy(size=100, overlap=0, markdown_sections=False)
    a = chunk_text("alpha beta gamma", policy, markdown=False)
    b = chunk_text("alpha beta delta", policy, markdown=False)
    assert a[0].chunk_id != b[0].chunk_id


def test_markdown_sections_and_paths() -> None:
    chunks = chunk_text(MD, ChunkPolicy(size=400, overlap=0), markdown=True)
    sections = [c.section for c in chunks]
    assert sections == [
        "Handbook",
        "Handbook > Leave",
        "Handbook > Leave > Sick leave",
        "Handbook > Travel",
    ]
    for c in chunks:
        assert MD[c.start : c.end] == c.text
    # The code-fence comment is not a heading.
    assert "# not a heading" in chunks[2].text


def test_no_chunk_straddles_sections() -> None:
    sections = markdown_sections(MD)
    chunks = chunk_text(MD, ChunkPolicy(size=400, overlap=0), markdown=True)
    for c in chunks:
        assert any(s.start <= c.start and c.end <= s.end for s in sections)


def test_title() -> None:
    assert markdown_title(MD) == "Handbook"
    assert markdown_title("## Only sub\ntext") == "Only sub"


def test_whitespace_only_yields_nothing() -> None:
    assert split_range("   \n\n  ", 0, 7, ChunkPolicy(size=16, overlap=0)) == []


@pytest.mark.parametrize(("size", "overlap"), [(8, 0), (100, 60), (100, -1)])
def test_policy_bounds(size: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        ChunkPolicy(size=size, overlap=overlap)
