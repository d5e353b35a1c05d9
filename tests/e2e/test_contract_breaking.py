"""`make breaking` can fail: buf breaking against the released contract
(proto/releases/, moved only by `make release-contract`) rejects changes that
break wire or JSON compatibility, and accepts the tree as it is and additions.

Each case copies proto/ and buf.yaml into a temporary directory, applies one
edit and runs the same command as the Makefile target. The released note must
match the project version and the image it describes, so a release that forgets
`make release-contract` fails here.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from tests.support.toolchains import require

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "proto" / "releases" / "groundwire.v1.binpb"
NOTE = ROOT / "proto" / "releases" / "groundwire.v1.toml"
RETRIEVER = "proto/groundwire/v1/retriever.proto"

pytestmark = pytest.mark.timeout(60)

# case -> (edits as (old text, new text) in retriever.proto, buf rules that must report it)
BREAKING: dict[str, tuple[tuple[tuple[str, str], ...], set[str]]] = {
    "removed field": ((("  string tenant = 6;\n", ""),), {"FIELD_NO_DELETE"}),
    "renumbered enum value": (
        (("RETRIEVAL_MODE_HYBRID = 3;", "RETRIEVAL_MODE_HYBRID = 4;"),),
        {"ENUM_VALUE_NO_DELETE"},
    ),
    # Same numbers on the wire, but JSON carries enum names: a JSON client's
    # RETRIEVAL_MODE_SEMANTIC would now mean lexical retrieval.
    "swapped enum numbers": (
        (
            ("RETRIEVAL_MODE_SEMANTIC = 1;", "RETRIEVAL_MODE_SEMANTIC = 2;"),
            ("RETRIEVAL_MODE_LEXICAL = 2;", "RETRIEVAL_MODE_LEXICAL = 1;"),
        ),
        {"ENUM_VALUE_SAME_NAME"},
    ),
    # Wire-compatible (same number and type), JSON-breaking (the key changes).
    "renamed field": (
        (("string index_name = 1;", "string index = 1;"),),
        {"FIELD_SAME_NAME", "FIELD_SAME_JSON_NAME"},
    ),
    # Wire-compatible varint, JSON-breaking: proto3 JSON writes int64 as a string.
    "widened integer": (
        (("optional int32 top_k = 4;", "optional int64 top_k = 4;"),),
        {"FIELD_SAME_TYPE"},
    ),
}


@pytest.fixture(scope="module")
def buf() -> Path:
    return require("buf", purpose="the contract breaking check")["buf"]


def copy_contract(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "proto", tmp_path / "proto", ignore=shutil.ignore_patterns("releases"))
    shutil.copy(ROOT / "buf.yaml", tmp_path / "buf.yaml")
    return tmp_path


def edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    # The case must really change the contract; if the proto moved on, fix the case.
    assert text.count(old) == 1, f"{old!r} is not in {rel} exactly once"
    path.write_text(text.replace(old, new))


def breaking(buf: Path, root: Path) -> tuple[int, set[str], str]:
    """`make breaking` in `root`: exit code, reported rule ids, raw output."""
    proc = subprocess.run(
        [str(buf), "breaking", "proto", "--against", str(BASELINE), "--error-format", "json"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    rules = {json.loads(line)["type"] for line in proc.stdout.splitlines() if line.startswith("{")}
    return proc.returncode, rules, proc.stdout + proc.stderr


def test_the_contract_as_it_is_passes(buf: Path, tmp_path: Path) -> None:
    code, rules, out = breaking(buf, copy_contract(tmp_path))
    assert (code, rules) == (0, set()), out


def test_an_addition_passes(buf: Path, tmp_path: Path) -> None:
    root = copy_contract(tmp_path)
    edit(root, RETRIEVER, "  string tenant = 6;\n", "  string tenant = 6;\n  string added = 99;\n")
    edit(
        root,
        RETRIEVER,
        "RETRIEVAL_MODE_HYBRID = 3;",
        "RETRIEVAL_MODE_HYBRID = 3;\n  RETRIEVAL_MODE_NEW = 9;",
    )
    code, rules, out = breaking(buf, root)
    assert (code, rules) == (0, set()), out


@pytest.mark.parametrize("case", sorted(BREAKING))
def test_a_breaking_change_fails(buf: Path, tmp_path: Path, case: str) -> None:
    edits, expected = BREAKING[case]
    root = copy_contract(tmp_path)
    for old, new in edits:
        edit(root, RETRIEVER, old, new)
    code, rules, out = breaking(buf, root)
    assert code != 0, f"{case} was accepted:\n{out}"
    assert expected <= rules, out


def test_the_release_note_matches_the_image_and_the_project_version() -> None:
    note = tomllib.loads(NOTE.read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert note["version"] == project["version"], (
        f"pyproject.toml is at {project['version']} but the released contract is "
        f"{note['version']}: run `make release-contract` as part of the release"
    )
    assert note["sha256"] == hashlib.sha256(BASELINE.read_bytes()).hexdigest(), (
        "the baseline image was changed without `make release-contract`"
    )


def test_the_image_holds_the_groundwire_contract() -> None:
    image = descriptor_pb2.FileDescriptorSet.FromString(BASELINE.read_bytes())
    ours = {f.name for f in image.file if f.package == "groundwire.v1"}
    assert "groundwire/v1/retriever.proto" in ours
    assert ours <= {str(p.relative_to(ROOT / "proto")) for p in (ROOT / "proto").rglob("*.proto")}
