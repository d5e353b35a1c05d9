"""domain/values.py: the faster __init__ of frozen slots dataclasses builds the
same values as the generated one, and the class stays a frozen dataclass."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import pickle

import pytest

from groundwire.domain import retrieval, scores
from groundwire.domain.values import IdentityEnum, fast_init
from groundwire.stores.memory import search


@dataclasses.dataclass(frozen=True, slots=True)
class Plain:
    a: int
    b: str = "b"
    c: tuple[int, ...] = ()


@fast_init
@dataclasses.dataclass(frozen=True, slots=True)
class Fast:
    a: int
    b: str = "b"
    c: tuple[int, ...] = ()


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((1,), {}), ((1, "x"), {}), ((1,), {"c": (2, 3)}), ((), {"a": 4, "b": "y", "c": (5,)})],
)
def test_the_fast_init_stores_what_the_generated_one_stores(
    args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    fast, plain = Fast(*args, **kwargs), Plain(*args, **kwargs)  # type: ignore[arg-type]
    assert dataclasses.astuple(fast) == dataclasses.astuple(plain)
    assert repr(fast).removeprefix("Fast") == repr(plain).removeprefix("Plain")


def test_a_fast_init_class_stays_a_frozen_dataclass() -> None:
    value = Fast(1, "x", (2,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.a = 2  # type: ignore[misc]
    assert value == Fast(1, "x", (2,)) and value != Fast(2, "x", (2,))
    assert hash(value) == hash(Fast(1, "x", (2,)))
    assert pickle.loads(pickle.dumps(value)) == value
    assert dataclasses.replace(value, b="z") == Fast(1, "z", (2,))
    with pytest.raises(TypeError):
        Fast()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Fast(1, unknown=2)  # type: ignore[call-arg]


def test_classes_the_fast_init_cannot_serve_are_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(slots=True)
    class NotFrozen:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True, slots=True)
    class PostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    for cls in (NoSlots, NotFrozen, Factory, PostInit):
        with pytest.raises(TypeError):
            fast_init(cls)


@pytest.mark.parametrize(
    "cls",
    [
        scores.Score,
        retrieval.ChunkHit,
        retrieval.LegRank,
        retrieval.RankedResult,
        retrieval.LexicalQuery,
        retrieval.LexicalResult,
        retrieval.FusionSettings,
        retrieval.RetrievalRequest,
        retrieval.RetrievalOutcome,
        search.Scoped,
        search.LexicalSnapshot,
    ],
)
def test_the_decorated_domain_types_take_their_fields_in_order(cls: type) -> None:
    params = list(inspect.signature(cls).parameters.values())
    fields = dataclasses.fields(cls)
    assert [p.name for p in params] == [f.name for f in fields]
    for p, f in zip(params, fields, strict=True):
        expected = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        assert p.default is expected, f.name


class Colour(IdentityEnum):
    RED = "red"
    BLUE = "blue"


class Named(enum.Enum):
    RED = "red"


def test_identity_enum_members_hash_by_identity_and_stay_singletons() -> None:
    table = {Colour.RED: 1, Colour.BLUE: 2}
    assert table[Colour("red")] == 1 and table[Colour["BLUE"]] == 2
    assert pickle.loads(pickle.dumps(Colour.RED)) is Colour.RED
    others: list[object] = [Named.RED, "red"]
    assert all(other != Colour.RED for other in others)
    assert list(Colour) == [Colour.RED, Colour.BLUE]
    assert {scores.ScoreMetric.BM25, scores.ScoreMetric.BM25} == {scores.ScoreMetric.BM25}
