"""Retrieval profiles in evaluation runs (issue 30, item 2): what each variant
was measured under, and whether two variants were measured under the same.

A run records, per variant, the profile its responses reported (Retrieve, and
Rerank when the variant reranks; AgentResult for agents): the fingerprint, the
parts, and how many queries saw it. A variant that saw several profiles (a
reload or a re-ingestion during the run) records them all.

`eval compare` and the gate report every part that differs. Parts both
variants report must be equal for the gate to run: a change there (another
index version, other fusion defaults, another reranker model) means the two
measured different things. A part only one variant reports is a stage the
variant deliberately adds (reranking on in the candidate, say): it is reported
but does not block; nor does a part each variant reports for its own
component (two agents' policies, two differently named rerankers): that is the
variant itself. `--allow-profile-change` (or `allow_profile_change` in the
gate file) gates anyway, and the report says so. Runs recorded before profiles
were carry none: their comparison says so and is not blocked."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from groundwire.domain.profile import (
    ProfilePart,
    ProfilePartKind,
    RetrievalProfile,
    differences,
)
from groundwire_client.v1 import common_pb2

__all__ = [
    "combined",
    "profile_check",
    "profile_comparison",
    "profile_from_proto",
    "variant_profile",
]

_PREFIX = "PROFILE_PART_KIND_"


def profile_from_proto(msg: common_pb2.RetrievalProfile) -> RetrievalProfile | None:
    """The domain profile of a response (None when the server reported none)."""
    parts = []
    for p in msg.parts:
        name = common_pb2.ProfilePartKind.Name(p.kind).removeprefix(_PREFIX)
        if name in ProfilePartKind.__members__:
            parts.append(ProfilePart(ProfilePartKind[name], p.settings))
    return RetrievalProfile(tuple(parts)) if parts else None


def combined(
    first: RetrievalProfile | None, then: RetrievalProfile | None
) -> RetrievalProfile | None:
    """One query's profile from its stages' (the rerank's parts over retrieval's)."""
    if first is None or then is None:
        return first or then
    return first.with_parts(then.parts)


def _record(profile: RetrievalProfile) -> dict[str, Any]:
    return {
        "fingerprint": profile.fingerprint,
        "parts": {
            p.kind.value.lower(): {"descriptor": p.descriptor, "fingerprint": p.fingerprint}
            for p in profile.parts
        },
    }


def _from_record(record: Mapping[str, Any] | None) -> RetrievalProfile | None:
    if not record or not record.get("parts"):
        return None
    return RetrievalProfile(
        tuple(
            ProfilePart(ProfilePartKind[kind.upper()], str(p["descriptor"]))
            for kind, p in record["parts"].items()
        )
    )


def variant_profile(profiles: Sequence[RetrievalProfile | None]) -> dict[str, Any] | None:
    """The profile a variant's queries reported (None when no response carried
    one). Queries that skipped a stage (no candidates to rerank) report fewer
    parts: the union is the variant's profile as long as no part was seen with
    two descriptors. Otherwise (a reload or re-ingestion mid-run) the most
    frequent profile, with `others` listing every other one and its queries."""
    seen = [p for p in profiles if p is not None]
    if not seen:
        return None
    by_kind: dict[ProfilePartKind, set[str]] = {}
    for p in seen:
        for x in p.parts:
            by_kind.setdefault(x.kind, set()).add(x.descriptor)
    if all(len(d) == 1 for d in by_kind.values()):
        union = RetrievalProfile(tuple(ProfilePart(k, next(iter(d))) for k, d in by_kind.items()))
        return {**_record(union), "queries": len(seen)}
    ranked = Counter(seen).most_common()
    main, count = ranked[0]
    return {
        **_record(main),
        "queries": count,
        "others": [{**_record(p), "queries": n} for p, n in ranked[1:]],
    }


def profile_comparison(
    baseline: Mapping[str, Any] | None, candidate: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The parts that differ between two variants' profiles, by kind: `changed`
    (both report the same component, differently: blocking), `variant` (each
    names its own component: two agents' policies, two named rerankers) or
    `added`/`removed` (only one reports the part)."""
    a, b = _from_record(baseline), _from_record(candidate)
    out: dict[str, Any] = {
        "recorded": a is not None and b is not None,
        "baseline": a.fingerprint if a is not None else None,
        "candidate": b.fingerprint if b is not None else None,
        "same": a is not None and b is not None and a.fingerprint == b.fingerprint,
        "parts": [],
        "mixed": bool((baseline or {}).get("others") or (candidate or {}).get("others")),
    }
    if a is None or b is None:
        return out
    for d in differences(a, b):
        if d.baseline is None or d.candidate is None:
            change = "added" if d.baseline is None else "removed"
        elif _owner(d.kind, a) != _owner(d.kind, b):
            change = "variant"
        else:
            change = "changed"
        out["parts"].append(
            {
                "part": d.kind.value.lower(),
                "change": change,
                "baseline": d.baseline,
                "candidate": d.candidate,
            }
        )
    return out


def _setting(descriptor: str | None, key: str) -> str | None:
    for item in (descriptor or "").split(" "):
        name, _, value = item.partition("=")
        if name == key:
            return value
    return None


def _owner(kind: ProfilePartKind, profile: RetrievalProfile) -> str | None:
    """Whose part it is: None for the parts every variant of a run shares (the
    index, fusion); the agent for an agent's policy and final selection; the
    configured reranker (or, unnamed, the agent) for the reranker."""
    policy = profile.get(ProfilePartKind.AGENT_POLICY)
    agent = _setting(policy.descriptor if policy else None, "agent")
    if kind in (ProfilePartKind.AGENT_POLICY, ProfilePartKind.FINAL_SELECTION):
        return agent
    if kind is ProfilePartKind.RERANKER:
        part = profile.get(kind)
        name = _setting(part.descriptor if part else None, "name")
        return f"reranker {name}" if name and name != "-" else agent
    return None


def blocking_parts(comparison: Mapping[str, Any]) -> list[str]:
    """The parts both variants report differently."""
    return [p["part"] for p in comparison.get("parts", []) if p["change"] == "changed"]


def profile_check(comparison: Mapping[str, Any], allow_change: bool) -> dict[str, Any]:
    """The gate's comparability check on the profiles (see the module docstring)."""
    changed = blocking_parts(comparison)
    extra = [f"{p['part']} {p['change']}" for p in comparison["parts"] if p["change"] != "changed"]
    if not comparison["recorded"]:
        passed, detail = True, "not recorded by both runs (recorded before profiles were)"
    elif comparison["mixed"]:
        passed = allow_change
        detail = "a variant saw several profiles during its run (a reload or re-ingestion)"
    elif changed:
        passed = allow_change
        pair = f"{comparison['baseline']} vs {comparison['candidate']}"
        detail = f"{pair}: {', '.join(changed)} differ"
    else:
        passed = True
        detail = (
            f"{comparison['baseline']}"
            if comparison["same"]
            else f"shared parts equal; {', '.join(extra)}"
        )
    if allow_change and (changed or comparison["mixed"]):
        detail += " (allowed: --allow-profile-change)"
    return {
        "name": "same retrieval profile",
        "kind": "comparability",
        "passed": passed,
        "detail": detail,
    }
