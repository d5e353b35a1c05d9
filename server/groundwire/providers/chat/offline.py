"""An offline, deterministic, extractive chat model (provider "offline", model
"extractive-v1"), so the whole agent pipeline runs with no network.

It never generates text: it answers with sentences copied from its evidence,
each followed by the citation marker of its source, so it can only ever say
what the sources say (and it follows no instruction written inside them).

Reading the conversation:

- The question is the content of the last "user" message that is not an
  evidence message.
- Evidence is every source of every message containing an
  `<untrusted-external-context>` block (read with `context_format.parse_context`,
  whatever the message's role), plus the sources in results of the
  `search_documents` tool: "tool" messages after the question whose content is
  the JSON object

      {"results": [{"n": 1, "document_id": "...", "chunk_id": "...",
                    "title": "...", "text": "..."}]}

  where `n` is the source number the answer cites (an integer >= 1, unique across
  the conversation: numbering continues across searches) and `text` the chunk
  text; `document_id`, `chunk_id` and `title` are optional strings. Results that
  do not have this shape carry no evidence.

Answering, in order:

1. If a tool named `search_documents` is offered, there is no evidence, and no
   tool result has arrived since the question, the answer is one call of that
   tool with arguments `{"query": <the question>}` (id `call_<k>`, k one more than
   the tool calls already in the conversation), finish reason "tool_calls".
2. With evidence: the extractive answer. Sources are split into sentences (line
   by line, then at `.`, `!`, `?`; markdown headings are not candidates). A
   sentence scores the number of distinct question words it contains, words being
   `text.phrase_words` minus a small stopword list, with a light plural folding.
   The best sentence and up to two more scoring at least half as much are output
   best first (ties: source order, then position), each followed by ` [n]`.
3. Otherwise, or when no sentence shares a word with the question:
   `NO_INFORMATION`.

Usage uses the deterministic `text.estimate_tokens`: prompt tokens over every
message's content, completion tokens over the answer (and tool-call arguments).
`ChatOptions` are ignored; the answer is at most three sentences.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from groundwire.domain.context_format import CLOSE, OPEN, ContextSource, parse_context
from groundwire.domain.text import estimate_tokens, phrase_words
from groundwire.providers.chat.base import (
    ChatMessage,
    ChatOptions,
    ChatResponse,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)

__all__ = [
    "MODEL",
    "NO_INFORMATION",
    "PROVIDER",
    "SEARCH_TOOL",
    "OfflineExtractiveModel",
    "parse_search_results",
]

PROVIDER = "offline"
MODEL = "extractive-v1"
SEARCH_TOOL = "search_documents"
NO_INFORMATION = "I don't have information about that in the provided sources."
MAX_SENTENCES = 3

# Words that say nothing about the topic of a question.
_STOPWORD_TEXT = """
    a an and are as at be been but by can could did do does for from had has have how i if in
    into is it its may me might must my of on or our should so than that the their them then
    there these they this those to was we were what when where which who whom why will with
    would you your about any all also
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_HEADING = re.compile(r"^\s*#{1,6}\s")
_BULLET = re.compile(r"^\s*(?:[-*+>]\s+|\d{1,3}[.)]\s+)+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
# Citation-like markers inside source text must not become citations of the answer.
_MARKER = re.compile(r"\s*\[[0-9,\s]+\]")
_WORD_PIECE = re.compile(r"\S+\s*")


@dataclass(frozen=True, slots=True)
class _Sentence:
    score: int
    source_order: int
    position: int
    number: int
    text: str


class OfflineExtractiveModel:
    """The offline extractive model; stateless and safe to share."""

    @property
    def provider(self) -> str:
        return PROVIDER

    @property
    def model(self) -> str:
        return MODEL

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], options: ChatOptions
    ) -> ChatResponse:
        return answer(messages, tools)

    async def stream(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], options: ChatOptions
    ) -> AsyncIterator[StreamEvent]:
        response = answer(messages, tools)
        for piece in _WORD_PIECE.findall(response.content):
            yield TextDelta(piece)
        yield StreamDone(response)

    async def aclose(self) -> None:
        return None


def answer(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> ChatResponse:
    """The model's complete turn for a conversation (pure)."""
    prompt_tokens = sum(estimate_tokens(m.content) for m in messages)
    question_at, question = _question(messages)
    sources, searched = _evidence(messages, question_at)

    if not sources and not searched and question.strip() and _offers_search(tools):
        prior_calls = sum(len(m.tool_calls) for m in messages)
        arguments = json.dumps({"query": question})
        call = ToolCall(id=f"call_{prior_calls + 1}", name=SEARCH_TOOL, arguments=arguments)
        return ChatResponse(
            content="",
            tool_calls=(call,),
            usage=Usage(prompt_tokens, estimate_tokens(arguments)),
            model=MODEL,
            finish_reason="tool_calls",
        )

    text = _extract(question, sources) if sources else NO_INFORMATION
    return ChatResponse(
        content=text,
        usage=Usage(prompt_tokens, estimate_tokens(text)),
        model=MODEL,
        finish_reason="stop",
    )


def parse_search_results(content: str) -> list[ContextSource] | None:
    """The sources of a `search_documents` tool result, or None if `content` is
    not one (see the module docstring for the shape)."""
    try:
        payload = json.loads(content)
    except (ValueError, RecursionError):
        return None
    results = payload.get("results") if isinstance(payload, dict) else None
    if not isinstance(results, list):
        return None
    out: list[ContextSource] = []
    for item in results:
        if not isinstance(item, dict):
            return None
        number, text = item.get("n"), item.get("text")
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            return None
        if not isinstance(text, str):
            return None
        attrs = [item.get(k, "") for k in ("document_id", "chunk_id", "title")]
        if not all(isinstance(a, str) for a in attrs):
            return None
        out.append(ContextSource(number, str(attrs[0]), str(attrs[1]), str(attrs[2]), text))
    return out


# -- reading the conversation --------------------------------------------------------


def _is_evidence(content: str) -> bool:
    start = content.find(OPEN)
    return start != -1 and content.find(CLOSE, start) != -1


def _question(messages: Sequence[ChatMessage]) -> tuple[int, str]:
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if message.role == "user" and not _is_evidence(message.content):
            return i, message.content
    return -1, ""


def _evidence(
    messages: Sequence[ChatMessage], question_at: int
) -> tuple[list[ContextSource], bool]:
    """Every evidence source in conversation order, and whether a search result
    (or any answer to a search call) has arrived since the question."""
    sources: list[ContextSource] = []
    search_ids: set[str] = set()
    searched = False
    for i, message in enumerate(messages):
        if _is_evidence(message.content):
            sources.extend(parse_context(message.content))
            continue
        if i <= question_at:
            continue
        if message.role == "assistant":
            search_ids.update(c.id for c in message.tool_calls if c.name == SEARCH_TOOL)
        elif message.role == "tool":
            results = parse_search_results(message.content)
            if results is not None:
                sources.extend(results)
                searched = True
            elif message.tool_call_id in search_ids:
                searched = True  # a failed search: do not ask again
    return sources, searched


def _offers_search(tools: Sequence[ToolSpec]) -> bool:
    return any(t.name == SEARCH_TOOL for t in tools)


# -- extraction ----------------------------------------------------------------------


def _fold(word: str) -> str:
    """A light plural folding so "days" matches "day" and "policies" "policy"."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _terms(text: str) -> set[str]:
    return {_fold(w) for w in phrase_words(text) if w not in _STOPWORDS}


def _logical_lines(text: str) -> list[str]:
    """Re-join hard-wrapped paragraph lines (Markdown wraps prose at ~100
    characters) so a sentence is not cut at a line break; headings, list items,
    table rows and blank lines start new lines."""
    out: list[str] = []
    joinable = False
    for raw in text.split("\n"):
        line = raw.strip()
        starts_block = (
            not line or bool(_HEADING.match(line)) or bool(_BULLET.match(line)) or line[0] in "|>`"
        )
        if joinable and not starts_block:
            out[-1] = f"{out[-1]} {line}"
        else:
            out.append(line)
        joinable = bool(line) and not _HEADING.match(line) and line[0] not in "|`"
    return out


def _sentences(text: str) -> list[str]:
    out: list[str] = []
    for line in _logical_lines(text):
        if _HEADING.match(line):
            continue
        line = _MARKER.sub("", _BULLET.sub("", line)).strip()
        out.extend(s.strip() for s in _SENTENCE_END.split(line) if phrase_words(s))
    return out


def _extract(question: str, sources: Sequence[ContextSource]) -> str:
    wanted = _terms(question)
    if not wanted:
        return NO_INFORMATION
    scored: list[_Sentence] = []
    for order, source in enumerate(sources):
        for position, text in enumerate(_sentences(source.text)):
            score = len(wanted & _terms(text))
            if score > 0:
                scored.append(_Sentence(score, order, position, source.number, text))
    if not scored:
        return NO_INFORMATION
    scored.sort(key=lambda s: (-s.score, s.source_order, s.position))
    best = scored[0].score
    chosen: list[_Sentence] = []
    seen: set[str] = set()
    for sentence in scored:
        if len(chosen) == MAX_SENTENCES or sentence.score * 2 < best:
            break
        if sentence.text in seen:
            continue
        seen.add(sentence.text)
        chosen.append(sentence)
    return " ".join(f"{s.text} [{s.number}]" for s in chosen)
