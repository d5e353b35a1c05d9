"""The keyword query of a lexical or hybrid search: derived deterministically
from the query (domain/query_rewrite.py), or written by a rewriter model and
validated, falling back to the derived keywords when the model fails.

Only the lexical leg searches the keywords; the semantic leg and the reranker
read the query itself. The model's reply never reaches the agent's prompt: it
is only ever searched, after the same stop-word and bound rules as derived
keywords."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from groundwire.agents.definition import AgentDefinition, RagPolicy
from groundwire.domain.errors import GroundwireError
from groundwire.domain.query_rewrite import (
    InvalidRewrite,
    KeywordMode,
    KeywordRewrite,
    KeywordSource,
    derive_keywords,
    validate_model_keywords,
)
from groundwire.domain.retrieval import RetrievalMode
from groundwire.providers.chat.base import ChatMessage

_KEYWORD_INSTRUCTION = (
    "You turn a question into the keywords of a keyword search engine. Keep "
    "identifiers, codes, names, numbers and double-quoted phrases exactly as "
    "written; drop greetings, filler and question words. Reply with the "
    "keywords only, on one line, separated by spaces."
)
# A rewriter model's reply is only ever a short line of keywords.
_KEYWORD_MAX_TOKENS = 64


async def keyword_rewrite(
    agent: AgentDefinition, rag: RagPolicy, query: str
) -> KeywordRewrite | None:
    """The keyword query for `query`, or None when the agent does not rewrite
    keywords, the retrieval has no lexical leg, or no keyword is left (the
    lexical leg then searches the query itself)."""
    if rag.keyword_query is KeywordMode.NONE or rag.retrieval_mode is RetrievalMode.SEMANTIC:
        return None
    if rag.keyword_query is KeywordMode.MODEL:
        failure = ""
        try:
            written = validate_model_keywords(await _ask_model(agent, rag, query))
            return KeywordRewrite(written.text, KeywordSource.MODEL)
        except InvalidRewrite as bad:
            failure = bad.code
        except TimeoutError:
            failure = "MODEL_TIMEOUT"
        except GroundwireError as err:
            failure = err.reason
        fallback = derive_keywords(query)
        if fallback is None:
            return None
        return KeywordRewrite(fallback.text, KeywordSource.DERIVED_AFTER_MODEL_FAILURE, failure)
    derived = derive_keywords(query)
    return None if derived is None else KeywordRewrite(derived.text, KeywordSource.DERIVED)


async def _ask_model(agent: AgentDefinition, rag: RagPolicy, query: str) -> str:
    model = rag.rewriter_model or agent.model
    options = replace(rag.rewriter_options, max_tokens=_KEYWORD_MAX_TOKENS)
    # Bounded here as well as in the provider: a model that never answers must
    # not hold the execution past the rewriter's own timeout.
    response = await asyncio.wait_for(
        model.complete(
            [ChatMessage("system", _KEYWORD_INSTRUCTION), ChatMessage("user", query)],
            [],
            options,
        ),
        timeout=options.timeout_seconds,
    )
    return response.content
