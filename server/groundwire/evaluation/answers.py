"""Answer-level citation measures, computed from one answer and its evidence.

Citation format. The agent's evidence message numbers its sources 1..N
(`domain/context_format`) and the framework rules ask the model to cite them
like `[1]` (`domain/grounding.CITATION_RULE`); `domain/citations.extract_citations`
reads them back: `[n]`, or a bracketed list `[n, m]`, with n in 1..N. A
sentence *cites a source* when it holds at least one such marker with a number
in range; `[0]`, `[7]` with five sources, `[a]` or `[1-2]` are not citations.

Sentence splitting. The answer is split into lines, then each line at `.`, `!`
or `?` followed by whitespace, except after a few abbreviations (`e.g.`, `i.e.`,
`et al.`, `Fig.`, `vs.`, `cf.`, `approx.`, a single capital initial), and after a citation marker
followed by whitespace and a capital letter (`Bravo record [1] The reading ...`:
the offline model cites a title line that has no full stop). Citation markers that follow
a sentence's terminal punctuation (`... is 4.5. [2]`, the form the offline model
and many LLMs write) belong to that sentence, not the next one. Markdown bullet
and heading prefixes are dropped; a piece with no letter or digit outside its
markers (a lone `[1]`, `---`) is no sentence.

Citation precision and recall are over distinct documents: the documents of
`AgentResult.citations` against the judged relevant documents (qrels > 0) of the
query. Recall has two denominators: every judged relevant document (what a
user's question needs), and the judged relevant documents the model actually had
in its context (what citing could have reached; None when there were none).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from groundwire.domain.citations import extract_citations

__all__ = ["CitationFacts", "citation_facts", "split_sentences"]

_MARKER_RUN = re.compile(r"^(?:\s*\[[^\[\]\n]{0,64}\])+")
# A sentence ends at `.`, `!` or `?` before whitespace, or at a citation marker
# followed by whitespace and a capital letter (`Heading [1] The next ...`).
_BREAK = re.compile(r"(?<=[.!?])\s+(?=\S)|(?<=\])\s+(?=[A-Z])")
_ENDS_WITH_MARKER = re.compile(r"\[\s*[0-9]{1,9}(?:\s*,\s*[0-9]{1,9})*\s*\]$")
_PREFIX = re.compile(r"^\s*(?:#{1,6}\s+|(?:[-*+>]\s+|\d{1,3}[.)]\s+)+)")
_ALNUM = re.compile(r"[^\W_]")
_BRACKETED = re.compile(r"\[[^\[\]\n]{0,64}\]")
_ABBREVIATIONS = re.compile(r"\b(?:e\.g|i\.e|et al|fig|figs|vs|cf|approx)\.$", re.I)
_INITIAL = re.compile(r"(?:^|\s)[A-Z]\.$")


def _pieces(line: str) -> list[str]:
    """A line cut at sentence ends (abbreviations do not end a sentence)."""
    out: list[str] = []
    start = 0
    for m in _BREAK.finditer(line):
        head = line[start : m.start()]
        if _ABBREVIATIONS.search(head) or _INITIAL.search(head):
            continue
        if head.endswith("]") and not _ENDS_WITH_MARKER.search(head):
            continue
        out.append(head)
        start = m.end()
    out.append(line[start:])
    return out


def split_sentences(answer: str) -> list[str]:
    """The sentences of an answer, each with the citation markers that follow it
    (see the module docstring)."""
    sentences: list[str] = []
    for raw in answer.splitlines():
        line = _PREFIX.sub("", raw).strip()
        if not line:
            continue
        for piece in _pieces(line):
            lead = _MARKER_RUN.match(piece)
            if lead and sentences:
                # Markers after the previous sentence's full stop are its citations.
                sentences[-1] = f"{sentences[-1]} {lead.group(0).strip()}"
                piece = piece[lead.end() :]
            piece = piece.strip()
            if piece and _ALNUM.search(_BRACKETED.sub("", piece)):
                sentences.append(piece)
            elif piece and sentences:
                sentences[-1] = f"{sentences[-1]} {piece}"
    return sentences


@dataclass(frozen=True, slots=True)
class CitationFacts:
    """Citation figures of one answer (content-free)."""

    sentences: int
    cited_sentences: int
    cited_documents: int
    cited_relevant: int
    relevant: int
    relevant_in_context: int
    cited_relevant_in_context: int

    @property
    def precision(self) -> float | None:
        return self.cited_relevant / self.cited_documents if self.cited_documents else None

    @property
    def recall(self) -> float | None:
        return self.cited_relevant / self.relevant if self.relevant else None

    @property
    def recall_in_context(self) -> float | None:
        if not self.relevant_in_context:
            return None
        return self.cited_relevant_in_context / self.relevant_in_context

    @property
    def sentence_citation_share(self) -> float | None:
        return self.cited_sentences / self.sentences if self.sentences else None


def citation_facts(
    answer: str,
    source_count: int,
    cited_docs: Iterable[str],
    context_docs: Sequence[str],
    judgments: Mapping[str, int],
) -> CitationFacts:
    """The citation figures of one answer: `source_count` sources were in its
    evidence, `cited_docs` are the documents of its citations, `context_docs`
    the documents of its evidence, `judgments` the query's qrels."""
    sentences = split_sentences(answer)
    cited_sentences = sum(1 for s in sentences if extract_citations(s, source_count))
    relevant = {d for d, g in judgments.items() if g > 0}
    cited = set(cited_docs)
    in_context = relevant & set(context_docs)
    return CitationFacts(
        sentences=len(sentences),
        cited_sentences=cited_sentences,
        cited_documents=len(cited),
        cited_relevant=len(cited & relevant),
        relevant=len(relevant),
        relevant_in_context=len(in_context),
        cited_relevant_in_context=len(cited & in_context),
    )
