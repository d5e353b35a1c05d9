"""Range conditions in configured metadata filters (an agent's `rag.filter`).

    [agents.analyst.rag]
    index = "reports"
    filter = { dept = "finance", year = { gte = 2020, lt = 2025 },
               published_at = { gte = 2024-01-01T00:00:00Z } }

A table with `gt`/`gte` and/or `lt`/`lte` is a range: numbers, or RFC 3339
timestamps (TOML date-times with an offset, or strings). It is validated with
exactly the rules of a request's range (retrieval.requests.build_range), and a
request's filter can only narrow it: both apply.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Discriminator, Tag, model_validator

from groundwire.app.config_base import StrictModel
from groundwire.domain.errors import GroundwireError
from groundwire.domain.metadata_ranges import RangeCondition
from groundwire.retrieval.requests import BoundInput, RangeInput, build_range

BoundValue = float | str | datetime


def _bound(value: BoundValue | None, inclusive: bool, name: str) -> BoundInput | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(f"{name}: a date-time bound needs an offset, e.g. Z or +02:00")
        return BoundInput(timestamp=value.isoformat(), inclusive=inclusive)
    if isinstance(value, str):
        return BoundInput(timestamp=value, inclusive=inclusive)
    return BoundInput(number=float(value), inclusive=inclusive)


class RangeFilterConfig(StrictModel):
    """One range: at most one lower (gt or gte) and one upper (lt or lte) bound."""

    gt: BoundValue | None = None
    gte: BoundValue | None = None
    lt: BoundValue | None = None
    lte: BoundValue | None = None

    @model_validator(mode="after")
    def _valid(self) -> RangeFilterConfig:
        self.condition()
        return self

    def condition(self) -> RangeCondition:
        """The validated range; ValueError naming the bound when it is malformed."""
        if self.gt is not None and self.gte is not None:
            raise ValueError("set at most one of 'gt' and 'gte'")
        if self.lt is not None and self.lte is not None:
            raise ValueError("set at most one of 'lt' and 'lte'")
        lower = _bound(self.gt, False, "gt") or _bound(self.gte, True, "gte")
        upper = _bound(self.lt, False, "lt") or _bound(self.lte, True, "lte")
        try:
            return build_range(RangeInput(lower, upper), "range")
        except GroundwireError as exc:
            path = exc.violations[0].field if exc.violations else ""
            names = {
                "range.lower": "gt" if self.gt is not None else "gte",
                "range.upper": "lt" if self.lt is not None else "lte",
            }
            where = next((n for p, n in names.items() if path.startswith(p)), "")
            raise ValueError(f"{where}: {exc.message}" if where else exc.message) from None


def _filter_kind(value: object) -> str:
    if isinstance(value, dict | RangeFilterConfig):
        return "range"
    return "values" if isinstance(value, list) else "value"


# A configured filter's value: one exact value, a list of accepted values, or a
# range table; told apart by shape, so an error names only the form meant.
FilterValue = Annotated[
    Annotated[str, Tag("value")]
    | Annotated[list[str], Tag("values")]
    | Annotated[RangeFilterConfig, Tag("range")],
    Discriminator(_filter_kind),
]
