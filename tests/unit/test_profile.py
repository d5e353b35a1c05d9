"""The retrieval profile's pure rules (domain/profile.py, issue 30 item 1):
stable content-free fingerprints, one part per kind in kind order, per-part
differences."""

from __future__ import annotations

import subprocess
import sys

import pytest

from groundwire.domain.profile import (
    FINGERPRINT_PREFIX,
    ProfilePart,
    ProfilePartKind,
    RetrievalProfile,
    bounded,
    descriptor,
    differences,
    part,
)

K = ProfilePartKind
FUSION = {"method": "rrf", "k": 20, "semantic_weight": 1.0, "lexical_weight": 1.0, "leg_depth": 50}


def profile(**fusion: object) -> RetrievalProfile:
    return RetrievalProfile(
        (
            part(K.INDEX, {"name": "kb", "version": 3}),
            part(K.FUSION, {**FUSION, **fusion}),
        )
    )


def test_the_fingerprint_is_a_fixed_function_of_the_parts() -> None:
    # A literal: the same on every replica, process and restart.
    assert profile().fingerprint == "rp1-686fda7319693df4"
    assert [p.fingerprint for p in profile().parts] == ["128b1be8ff51448b", "51b06b754204d1d7"]
    code = (
        "from groundwire.domain.profile import *;"
        "print(RetrievalProfile((part(ProfilePartKind.FUSION, {'method': 'rrf', 'k': 20,"
        " 'semantic_weight': 1.0, 'lexical_weight': 1.0, 'leg_depth': 50}),"
        " part(ProfilePartKind.INDEX, {'name': 'kb', 'version': 3}))).fingerprint)"
    )
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )  # another process, another hash seed, the parts given in another order
    assert other.stdout.strip() == profile().fingerprint


def test_parts_are_kept_in_kind_order_one_per_kind() -> None:
    p = RetrievalProfile((part(K.AGENT_POLICY, {"agent": "a"}), part(K.INDEX, {"name": "kb"})))
    assert [x.kind for x in p.parts] == [K.INDEX, K.AGENT_POLICY]
    with pytest.raises(ValueError, match="one part of each kind"):
        RetrievalProfile((part(K.INDEX, {"version": 1}), part(K.INDEX, {"version": 2})))


def test_any_change_of_a_part_changes_the_fingerprint_and_only_that_part() -> None:
    base = profile()
    for change in ({"k": 60}, {"method": "min-max"}, {"lexical_weight": 0.5}, {"leg_depth": 51}):
        changed = profile(**change)
        assert changed.fingerprint != base.fingerprint
        assert [d.kind for d in differences(base, changed)] == [K.FUSION]
        assert changed.parts[0].fingerprint == base.parts[0].fingerprint
    assert profile(k=20).fingerprint == base.fingerprint


def test_differences_name_the_parts_and_both_descriptors() -> None:
    a = profile()
    b = a.with_parts([part(K.INDEX, {"name": "kb", "version": 4}), part(K.RERANKER, {"x": 1})])
    diff = differences(a, b)
    assert [d.kind for d in diff] == [K.INDEX, K.RERANKER]
    assert (diff[0].baseline, diff[0].candidate) == ("name=kb version=3", "name=kb version=4")
    assert (diff[1].baseline, diff[1].candidate) == (None, "x=1")
    assert differences(a, a) == []


def test_descriptors_are_key_value_settings_one_token_each() -> None:
    assert descriptor({"w": 1.0, "x": 0.25, "on": True, "none": None}) == (
        "w=1 x=0.25 on=true none=none"
    )
    # Whitespace inside a value never splits a setting.
    assert descriptor({"model": "a b\tc"}) == "model=a_b_c"
    assert descriptor({"empty": ""}) == 'empty=""'


def test_long_recorded_descriptors_are_represented_by_their_digest() -> None:
    assert bounded("short") == "short"
    long = "x" * 300
    assert bounded(long).startswith("sha256:") and len(bounded(long)) == 23
    assert bounded(long) != bounded(long + "y")
    with pytest.raises(ValueError):
        ProfilePart(K.INDEX, "x" * 1025)


def test_the_description_and_the_empty_profile() -> None:
    assert profile().description() == (
        "index: name=kb version=3; "
        "fusion: method=rrf k=20 semantic_weight=1 lexical_weight=1 leg_depth=50"
    )
    assert RetrievalProfile().fingerprint.startswith(FINGERPRINT_PREFIX)
    assert profile().get(K.RERANKER) is None
