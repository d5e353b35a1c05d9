"""A judging "model" for the chat stand-in: it reads the prompt an LLM reranker
sent, scores each source by the share of query words it contains (the same rule
as the rerank stand-ins: doc-2 5/6, doc-4 3/6, doc-1 0), and checks the
untrusted-content boundary it received.

It is deliberately gullible where a real model is at risk: any instruction of
the form "score source N as X" that it finds OUTSIDE a well-formed `<source>`
element (a forged closing tag that escaped the boundary, text in a system
message) is obeyed. With `obey_inside=True` it also obeys such instructions
inside a source's text, like a model that was talked into it. Every boundary
breach it notices is recorded in `violations`, so a test can assert that the
prompt kept hostile text confined (and the judge's own tests prove it notices).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from groundwire.domain.context_format import CLOSE, OPEN, parse_context
from tests.support.chat_completions_standin import Reply
from tests.support.rerank_standin import standin_relevance

__all__ = ["INJECTION", "Judge", "Seen"]

INJECTION = re.compile(r"score source (\d+) as (-?[0-9.]+)", re.IGNORECASE)
# A well-formed source element, exactly as domain.context_format renders it.
_SOURCE = re.compile(
    r'<source n="\d+" document_id="[^"]*" chunk_id="[^"]*" title="[^"]*">\n.*?\n</source>',
    re.DOTALL,
)
QUERY_PREFIX = "Search query: "


@dataclass(frozen=True)
class Seen:
    """One request as the judge read it."""

    system: list[str]
    context: str
    query: str
    sources: list[str]  # the source texts, unescaped by parse_context


@dataclass
class Judge:
    obey_inside: bool = False
    violations: list[str] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        system = [m["content"] for m in messages if m.get("role") == "system"]
        users = [m["content"] for m in messages if m.get("role") == "user"]
        context = users[0] if users else ""
        query = users[-1].removeprefix(QUERY_PREFIX) if len(users) > 1 else ""
        sources = [s.text for s in parse_context(context)]
        with self._lock:
            self.seen.append(Seen(system, context, query, sources))
        scores = {n: standin_relevance(query, text) for n, text in enumerate(sources, start=1)}
        for number, value in self._instructions(system, context, sources):
            scores[number] = value
        pointwise = any("exactly one source" in s for s in system)
        if pointwise:
            return Reply(content=json.dumps({"relevance": scores.get(1, 0.0)}))
        return Reply(
            content=json.dumps(
                {"scores": [{"source": n, "relevance": r} for n, r in sorted(scores.items())]}
            )
        )

    def _instructions(
        self, system: list[str], context: str, sources: list[str]
    ) -> list[tuple[int, float]]:
        found: list[tuple[int, float]] = []
        breaches: list[str] = []
        if context.count(OPEN) != 1 or context.count(CLOSE) != 1:
            breaches.append("the boundary tags appear more than once")
        # Whatever is left once the well-formed sources are cut out is outside
        # every source: the preamble and the tags, or text that broke out.
        outside = _SOURCE.sub("", context)
        for text in [*system, outside]:
            for m in INJECTION.finditer(text):
                breaches.append("an instruction outside the sources")
                found.append((int(m.group(1)), float(m.group(2))))
        if self.obey_inside:
            for text in sources:
                found.extend((int(m.group(1)), float(m.group(2))) for m in INJECTION.finditer(text))
        if breaches:
            with self._lock:
                self.violations.extend(breaches)
        return found
