"""Live reconfiguration as the request path reports it: the outcome of a reload
and its refusals (transport-free; mapped once in api/errors.py).

A refusal names configuration keys (dotted paths such as
`agents.support.rag.acceptance`), never values, file paths or secrets."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from groundwire.domain.errors import ErrorKind, FieldViolation, GroundwireError

# The bound on violations a refusal carries (a file can be wrong everywhere).
MAX_VIOLATIONS = 50


@dataclass(frozen=True, slots=True)
class ReloadReport:
    """What a successful reload (or validation) did."""

    generation: int
    changed_sections: tuple[str, ...]
    reingest_indexes: tuple[str, ...]
    applied: bool


def config_invalid(violations: Iterable[FieldViolation]) -> GroundwireError:
    """The new file is unreadable or invalid: nothing changed."""
    listed = tuple(violations)[:MAX_VIOLATIONS]
    keys = ", ".join(v.field for v in listed)
    return GroundwireError(
        ErrorKind.FAILED_PRECONDITION,
        "CONFIG_INVALID",
        f"the configuration is invalid ({keys}); nothing changed",
        listed,
    )


def restart_required(keys: Iterable[str]) -> GroundwireError:
    """The new file changes keys only a restart applies: nothing changed."""
    listed = tuple(sorted(keys))[:MAX_VIOLATIONS]
    return GroundwireError(
        ErrorKind.FAILED_PRECONDITION,
        "CONFIG_RESTART_REQUIRED",
        f"changing {', '.join(listed)} needs a restart; nothing changed",
        tuple(FieldViolation(k, "changing this key needs a restart") for k in listed),
    )


def reload_unavailable() -> GroundwireError:
    """The server runs the built-in configuration: there is no file to reload."""
    return GroundwireError(
        ErrorKind.FAILED_PRECONDITION,
        "RELOAD_UNAVAILABLE",
        "the server was not started from a configuration file; nothing to reload",
    )
