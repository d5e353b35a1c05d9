"""Cheaper construction of the frozen value types a retrieval makes per result.

A frozen dataclass's generated ``__init__`` writes each field with
``object.__setattr__(self, name, value)`` (a lookup of the attribute by name on
every write): about 1.5 us for a nine-field ChunkHit, 0.9 us with fast_init. A
Retrieve builds four such values per result (Score, ChunkHit, LegRank,
RankedResult), tens per call, on the event loop. `fast_init` gives a frozen
*slots* dataclass an ``__init__`` that writes each slot through its member
descriptor instead: the same values in the same slots, at 0.6x the cost
(bench/bench_retrieve_breakdown.py). The class stays a frozen dataclass in every
other respect (assignment raises, equality, hashing, pickling,
`dataclasses.replace`)."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, TypeVar

_T = TypeVar("_T")


def fast_init(cls: type[_T]) -> type[_T]:
    """Decorate a ``@dataclass(frozen=True, slots=True)`` class whose fields are
    all init fields without a default factory and which has no ``__post_init__``."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} is not a frozen slots dataclass")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has __post_init__")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    namespace: dict[str, Any] = {}
    params_src: list[str] = []
    for i, f in enumerate(fields):
        if not f.init or f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{f.name} needs the generated __init__")
        namespace[f"_set{i}"] = cls.__dict__[f.name].__set__
        if f.default is dataclasses.MISSING:
            params_src.append(f.name)
        else:
            namespace[f"_default{i}"] = f.default
            params_src.append(f"{f.name}=_default{i}")
    body = "".join(f"    _set{i}(self, {f.name})\n" for i, f in enumerate(fields))
    source = f"def __init__(self, {', '.join(params_src)}):\n{body or '    pass'}\n"
    # (as dataclasses itself does: the source is built from the field names only)
    exec(source, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    setattr(cls, "__init__", init)  # noqa: B010 - a class attribute mypy would refuse
    return cls


class IdentityEnum(enum.Enum):
    """An enum whose members hash by identity (a C slot) instead of Enum's
    ``hash(self._name_)`` written in Python: members are singletons compared by
    identity, so the two agree, and the lookups the Retrieve path makes per result
    (a metric's direction, its wire value, a leg's) cost a dict probe only."""

    __hash__ = object.__hash__
