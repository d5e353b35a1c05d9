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
2. With evidence: the extractive answer (providers/chat/sentences.py). Sources
   are split into sentences (line by line, then at `.`, `!`, `?`; markdown
   headings are not candidates); a sentence's context is its source's title and
   the headings above it in the source. Terms are the product's English analysis
   (`analysis.Analyzer`: Snowball stems, identifiers kept whole and split) minus
   Snowball's stop words, a small list of question stopwords and the stems of
   "many", "much", "long", "often", "quickly", "soon", "big", "get", "tell",
   "know" and of the modal verbs; a term stands for a question term when equal to
   it or when the shorter of the two (at least 5 characters) starts the other
   ("recov" and "recoveri"). A sentence scores BM25 (`domain/bm25.py`, k1 1.2,
   b 0.75, Lucene idf) for the question's distinct terms, N, df and the mean
   length being taken over the candidate sentences of the conversation, so a rare
   question word outweighs several common ones; a question term the sentence lacks
   but its context holds adds half its idf. Only sentences holding a question term
   themselves or in their headings are eligible (the title alone does not make a
   sentence eligible). The answer is the best eligible sentence and up to two
   more scoring at least half as much, best first (ties: source order, then
   position; a sentence repeated word for word counts once), each followed by
   ` [n]`.
3. Otherwise `NO_INFORMATION`: with no evidence, when no sentence is eligible, or
   when the best sentence's source does not answer: its text holds less than
   `MIN_COVERAGE` (0.55) of the question's weight, each distinct question term
   weighing its idf over the candidate sentences (a term no sentence holds weighs
   the most). The threshold is calibrated on eval/answers/key_facts.jsonl
   (bench/bench_extractive_answers.py).

Usage uses the deterministic `text.estimate_tokens`: prompt tokens over every
message's content, completion tokens over the answer (and tool-call arguments).
`ChatOptions` are ignored; the answer is at most three sentences.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence

from groundwire.domain.context_format import CLOSE, OPEN, ContextSource, parse_context
from groundwire.domain.text import estimate_tokens
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
from groundwire.providers.chat.sentences import (
    MIN_COVERAGE,
    candidates_of,
    choose,
    score_bm25_context,
)

__all__ = [
    "MIN_COVERAGE",
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

_WORD_PIECE = re.compile(r"\S+\s*")


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


def _extract(question: str, sources: Sequence[ContextSource]) -> str:
    candidates = candidates_of([(s.number, s.title, s.text) for s in sources])
    texts = [s.text for s in sources]
    chosen = choose(question, candidates, texts, score_bm25_context, limit=MAX_SENTENCES)
    if not chosen:
        return NO_INFORMATION
    return " ".join(f"{c.text} [{c.number}]" for c in chosen)
