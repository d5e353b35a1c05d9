"""Prompt assembly: the messages a model sees and the prompt costs the context
budget is computed from.

Framework rules and the agent's instructions are the only system text; evidence
goes in one separate user message; the question comes last."""

from __future__ import annotations

import json
from collections.abc import Sequence

from groundwire.agents.definition import AgentDefinition, RagPolicy
from groundwire.agents.execution_input import ExecutionInput
from groundwire.agents.tools import Tool
from groundwire.domain.context_format import render_context
from groundwire.domain.rag_policy import PromptCosts, source_for
from groundwire.domain.retrieval import RankedResult
from groundwire.domain.text import estimate_tokens
from groundwire.providers.chat.base import ChatMessage, ToolSpec


def tool_spec(tool: Tool) -> ToolSpec:
    """What the model is told about a tool."""
    return ToolSpec(tool.name, tool.description, tool.parameters)


def question_text(rag: RagPolicy | None, question: str, source_count: int) -> str:
    """The question as the model reads it: the agent's template, when it has one."""
    if rag is None or not rag.question_template:
        return question
    return rag.question_template.format(question=question, source_count=source_count)


def prompt_costs(
    agent: AgentDefinition,
    rag: RagPolicy,
    rules: str,
    inp: ExecutionInput,
    tools: Sequence[Tool],
) -> PromptCosts:
    """The estimated tokens of everything in the prompt except the context: the
    rules and instructions, the history, the question and the tool schemas."""
    return PromptCosts(
        instructions=estimate_tokens(rules + agent.instructions),
        history=sum(estimate_tokens(t.content) for t in inp.history),
        query=estimate_tokens(question_text(rag, inp.message, 0)),
        other=sum(estimate_tokens(json.dumps(tool_spec(t).parameters)) for t in tools),
    )


def assemble_messages(
    agent: AgentDefinition,
    rag: RagPolicy | None,
    rules: str,
    inp: ExecutionInput,
    selected: Sequence[RankedResult],
) -> list[ChatMessage]:
    """The conversation sent to the model; `selected` becomes numbered sources."""
    messages: list[ChatMessage] = []
    if rules:
        messages.append(ChatMessage("system", rules))
    if agent.instructions:
        messages.append(ChatMessage("system", agent.instructions))
    messages.extend(
        ChatMessage("user" if t.role == "user" else "assistant", t.content) for t in inp.history
    )
    if selected:
        sources = [source_for(r, i) for i, r in enumerate(selected, start=1)]
        messages.append(ChatMessage("user", render_context(sources)))
    messages.append(ChatMessage("user", question_text(rag, inp.message, len(selected))))
    return messages
