"""Bounds every store applies alike, so a request costs the same order of work on
each and both stores return the same results.

PHRASE_MAX_CANDIDATES: a query with exact phrases verifies at most this many
candidate chunks: the postings of its rarest phrase word with the highest term
frequency (then the shortest chunks, then the oldest). A phrase whose rarest word
is in more chunks than that is matched among those candidates only: the cost of a
phrase query (a crafted repeated word, say) no longer grows with the index.
"""

from __future__ import annotations

PHRASE_MAX_CANDIDATES = 1_000
