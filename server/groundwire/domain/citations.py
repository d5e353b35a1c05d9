"""Which sources an answer cites.

The evidence message numbers its sources 1..N and asks the model to cite them
like `[1]` (see `context_format`). Reading the markers back is a statement of
what the answer claims to cite, not a verification that the cited text
supports it.
"""

from __future__ import annotations

import re

__all__ = ["extract_citations"]

# `[3]`, and the list forms models also write: `[1, 2]`, `[1,2, 3]`. ASCII digits
# only, at most 9 of them (longer runs are no source number and never reach int()).
_MARKER = re.compile(r"\[\s*([0-9]{1,9}(?:\s*,\s*[0-9]{1,9})*)\s*\]")


def extract_citations(answer: str, source_count: int) -> list[int]:
    """The distinct source numbers cited in `answer`, in order of first appearance.

    A citation is a bracketed source number, `[n]`, or a bracketed comma-separated
    list of them, `[n, m]`; `[1][2]` cites both. Only numbers in `1..source_count`
    count: `[0]`, out-of-range numbers and anything that is not such a marker
    (`[a]`, `[1-2]`, `[]`) are ignored. With `source_count` below 1 nothing is
    cited.
    """
    if source_count < 1:
        return []
    cited: list[int] = []
    seen: set[int] = set()
    for match in _MARKER.finditer(answer):
        for part in match.group(1).split(","):
            number = int(part)
            if 1 <= number <= source_count and number not in seen:
                seen.add(number)
                cited.append(number)
    return cited
