"""Who may read a document: access lists and the caller's readers, as pure rules.

A principal names who is allowed: `user:ID` or `group:ID` (case-sensitive; ids of
a bounded length from a charset that covers identity providers' subjects, emails
and group paths, and excludes separators, whitespace and control characters).

A document's access list (ACL) is a set of principals. A document without one is
readable by every caller of its tenant (the tenant stays the outer boundary); a
document with one is readable by a caller holding at least one of its principals.
A caller's `Readers` is the set of principals it holds, or `unrestricted` for the
explicit administrative permission that reads every document of its tenant.
Least privilege: a caller with no principals reads only documents without an ACL.

Stores apply `Readers` like the tenant, before ranking (seed 004: "derive tenant
and ACL filters from authenticated application state ... before similarity
ranking"). They all use one representation: a document's `acl_terms` (its
principals, or the `PUBLIC` marker for a document without an ACL) must intersect
the caller's `reader_terms` (its principals plus `PUBLIC`). `PUBLIC` is not a
valid principal, so no caller can name it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from groundwire.domain.errors import invalid

# A principal's total length, and how many one document or one caller may hold:
# an ACL is stored with every chunk and a caller's set becomes a filter term list,
# so both stay small enough to be cheap on every store.
MAX_PRINCIPAL_CHARS = 256
MAX_ACL_PRINCIPALS = 64
MAX_CALLER_PRINCIPALS = 64
# The store-level marker of "no ACL" (not a principal: it has no kind prefix).
PUBLIC = "*"

_KINDS = ("user", "group")
_ID = re.compile(r"[A-Za-z0-9._@+/:=~-]+")


def check_principal(value: str, field_path: str) -> str:
    """`value` when it is a well-formed principal, else INVALID_ARGUMENT
    (INVALID_PRINCIPAL; the message never echoes the value)."""
    if len(value) > MAX_PRINCIPAL_CHARS:
        raise invalid(
            "INVALID_PRINCIPAL", field_path, f"a principal exceeds {MAX_PRINCIPAL_CHARS} characters"
        )
    kind, sep, ident = value.partition(":")
    if not sep or kind not in _KINDS or not _ID.fullmatch(ident):
        raise invalid(
            "INVALID_PRINCIPAL",
            field_path,
            "a principal is 'user:ID' or 'group:ID', the ID made of letters, digits"
            " and . _ @ + / : = ~ -",
        )
    return value


def parse_principals(values: Iterable[str], field_path: str, limit: int) -> frozenset[str]:
    """A set of principals, each checked, at most `limit` of them (duplicates are
    counted once)."""
    out: set[str] = set()
    for value in values:
        out.add(check_principal(value, field_path))
        if len(out) > limit:
            raise invalid("TOO_MANY_PRINCIPALS", field_path, f"more than {limit} principals")
    return frozenset(out)


def parse_acl(values: Iterable[str], field_path: str) -> frozenset[str]:
    """A document's access list (empty: readable by every caller of its tenant)."""
    return parse_principals(values, field_path, MAX_ACL_PRINCIPALS)


def acl_terms(acl: frozenset[str]) -> tuple[str, ...]:
    """How a store records a document's ACL: its principals, sorted, or (PUBLIC,)."""
    return tuple(sorted(acl)) if acl else (PUBLIC,)


@dataclass(frozen=True, slots=True)
class Readers:
    """What one caller may read within its tenant: documents without an ACL, and
    those whose ACL names one of `principals`; everything when `unrestricted`."""

    principals: frozenset[str] = frozenset()
    unrestricted: bool = False

    def can_read(self, acl: frozenset[str]) -> bool:
        """The rule every store's filter implements."""
        return self.unrestricted or not acl or not acl.isdisjoint(self.principals)

    def terms(self) -> tuple[str, ...]:
        """The terms a document's `acl_terms` must share one of (sorted)."""
        return tuple(sorted(self.principals | {PUBLIC}))

    def fingerprint(self) -> str:
        """A stable text naming this reader set (for comparing two callers, e.g. a
        resumed execution's; never logged)."""
        if self.unrestricted:
            return "*all"
        return "\n".join(sorted(self.principals))


# A caller with no principals: documents without an ACL only (least privilege).
PUBLIC_READERS = Readers()
# `read_all_documents`: every document of the caller's tenant.
ALL_READERS = Readers(unrestricted=True)
