"""The retrieval profile: what decided a result, as a stable, content-free
fingerprint and description (issue 30; seed 004: "version the chunk policy,
embedding model, fusion weights and reranker descriptor together").

A profile is a set of parts, at most one of each kind, in kind order. Each part
is a descriptor of `key=value` settings: names, versions and numbers, never
query or document text, credentials or file paths. The fingerprint hashes the
parts' kinds and descriptors (SHA-256), so it is the same on every replica and
after a restart, and changes exactly when a part does: a reload that changes the
fusion defaults or the reranker yields a new profile without re-ingestion, and
publishing a new index version yields one too.

Which parts a result carries:

- Retrieve, GetIndex: INDEX, CHUNKING, EMBEDDER (when the index embeds),
  ANALYZER, FUSION;
- Rerank: RERANKER;
- an agent: its index's parts when it retrieves, RERANKER and FINAL_SELECTION
  when it reranks, and AGENT_POLICY.
"""

from __future__ import annotations

import enum
import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "FINGERPRINT_PREFIX",
    "MAX_DESCRIPTOR_CHARS",
    "PartDifference",
    "ProfilePart",
    "ProfilePartKind",
    "RetrievalProfile",
    "bounded",
    "descriptor",
    "differences",
    "part",
]

# The fingerprint scheme: a change of how fingerprints are computed changes it.
FINGERPRINT_PREFIX = "rp1-"
MAX_DESCRIPTOR_CHARS = 1024
_HEX = 16
# Longer recorded descriptors (an embedder's task mode, many per-extension
# chunking policies) are represented by their digest.
_MAX_VALUE_CHARS = 256


class ProfilePartKind(enum.Enum):
    """The parts of a profile, in the order they are listed and hashed."""

    INDEX = "INDEX"
    CHUNKING = "CHUNKING"
    EMBEDDER = "EMBEDDER"
    ANALYZER = "ANALYZER"
    FUSION = "FUSION"
    RERANKER = "RERANKER"
    FINAL_SELECTION = "FINAL_SELECTION"
    AGENT_POLICY = "AGENT_POLICY"


_ORDER = {kind: i for i, kind in enumerate(ProfilePartKind)}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:_HEX]


def _value(value: object) -> str:
    """One setting as text: floats in their shortest round-trip form (so 1.0 and
    1 read alike), booleans lower case, None as "none"; whitespace in a text
    value is collapsed so a descriptor always splits into its settings."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value):
            return str(int(value))
        return repr(value)
    if isinstance(value, enum.Enum):
        return _value(value.value)
    return "_".join(str(value).split()) or '""'


def bounded(text: str, limit: int = _MAX_VALUE_CHARS) -> str:
    """A recorded descriptor as one setting's value: itself when short, else
    "sha256:" and 16 hex digits of it (still changes exactly when it does)."""
    if len(text) <= limit:
        return text
    return "sha256:" + _digest(text)


def descriptor(settings: Mapping[str, object]) -> str:
    """A part's descriptor: `key=value` settings in the given order, separated by
    single spaces."""
    return " ".join(f"{key}={_value(v)}" for key, v in settings.items())


@dataclass(frozen=True, slots=True)
class ProfilePart:
    """One part of a profile: its kind and content-free descriptor."""

    kind: ProfilePartKind
    descriptor: str

    def __post_init__(self) -> None:
        if len(self.descriptor) > MAX_DESCRIPTOR_CHARS:
            raise ValueError(f"a profile descriptor is at most {MAX_DESCRIPTOR_CHARS} characters")

    @property
    def fingerprint(self) -> str:
        """16 hex digits of this part alone."""
        return _digest(f"{self.kind.value}\n{self.descriptor}")


def part(kind: ProfilePartKind, settings: Mapping[str, object]) -> ProfilePart:
    """A part from its settings (see `descriptor`)."""
    return ProfilePart(kind, descriptor(settings))


@dataclass(frozen=True, slots=True)
class RetrievalProfile:
    """A set of parts, at most one per kind, kept in kind order."""

    parts: tuple[ProfilePart, ...] = ()

    def __post_init__(self) -> None:
        kinds = [p.kind for p in self.parts]
        if len(set(kinds)) != len(kinds):
            raise ValueError("a profile has at most one part of each kind")
        ordered = tuple(sorted(self.parts, key=lambda p: _ORDER[p.kind]))
        object.__setattr__(self, "parts", ordered)

    @property
    def fingerprint(self) -> str:
        """ "rp1-" and 16 hex digits over every part's kind and descriptor."""
        text = "\n".join(f"{p.kind.value}={p.descriptor}" for p in self.parts)
        return FINGERPRINT_PREFIX + _digest(text)

    def get(self, kind: ProfilePartKind) -> ProfilePart | None:
        """The part of `kind`, if the profile has one."""
        return next((p for p in self.parts if p.kind is kind), None)

    def with_parts(self, parts: Iterable[ProfilePart]) -> RetrievalProfile:
        """This profile with `parts` added, replacing any of the same kinds."""
        new = list(parts)
        kinds = {p.kind for p in new}
        return RetrievalProfile(tuple(p for p in self.parts if p.kind not in kinds) + tuple(new))

    def description(self) -> str:
        """The parts as one line: `kind: descriptor; ...` (lower-case kinds)."""
        return "; ".join(f"{p.kind.value.lower()}: {p.descriptor}" for p in self.parts)


# The profile of nothing (a default): one object, as profiles are immutable (building
# one sorts and checks its parts, ~1.2 us; a Retrieve's diagnostics start with it).
EMPTY_PROFILE = RetrievalProfile()


@dataclass(frozen=True, slots=True)
class PartDifference:
    """One part that differs between two profiles (None: the profile has no such part)."""

    kind: ProfilePartKind
    baseline: str | None
    candidate: str | None


def differences(baseline: RetrievalProfile, candidate: RetrievalProfile) -> list[PartDifference]:
    """The parts whose descriptors differ, or that only one profile has, in kind order."""
    out = []
    for kind in ProfilePartKind:
        a, b = baseline.get(kind), candidate.get(kind)
        da = a.descriptor if a is not None else None
        db = b.descriptor if b is not None else None
        if da != db:
            out.append(PartDifference(kind, da, db))
    return out
