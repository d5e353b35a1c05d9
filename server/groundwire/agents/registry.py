"""Agent lookup and request validation (transport-neutral)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from groundwire.agents.definition import AgentDefinition
from groundwire.agents.execution_input import ExecutionInput, Turn
from groundwire.domain.auth import check_tenant
from groundwire.domain.errors import invalid, not_found
from groundwire.domain.query import split_phrases, validate_query_text
from groundwire.retrieval.requests import FilterCondition, build_filter


@dataclass(frozen=True, slots=True)
class AgentLimits:
    max_message_chars: int = 16_384
    max_history_turns: int = 50
    # The retrieval engine's bound: a RAG agent searches with the message.
    max_query_chars: int = 4096


class AgentRegistry:
    def __init__(self, agents: Iterable[AgentDefinition], limits: AgentLimits) -> None:
        self._agents = {a.id: a for a in agents}
        self.limits = limits

    def get(self, agent_id: str) -> AgentDefinition:
        agent = self._agents.get(agent_id)
        if agent is None:
            raise not_found("AGENT_NOT_FOUND", "no agent with the requested id")
        return agent

    def register(self, agent: AgentDefinition) -> None:
        """Add or replace an agent (configuration reloads and tests)."""
        self._agents[agent.id] = agent

    def ids(self) -> list[str]:
        return sorted(self._agents)

    def validate(
        self,
        *,
        agent_id: str,
        message: str,
        history: Sequence[tuple[str | None, str]],
        tenant: str,
        conditions: Sequence[FilterCondition],
    ) -> tuple[AgentDefinition, ExecutionInput]:
        """Check every field; roles are "user"/"assistant" or None (unknown)."""
        if not agent_id:
            raise invalid("FIELD_REQUIRED", "input.agent_id", "agent_id is required")
        agent = self.get(agent_id)
        text = validate_query_text(message, self.limits.max_message_chars, "input.message")
        if agent.rag is not None and not agent.rag.agentic:
            # The message is the search query: refuse what retrieval would refuse
            # now, before any event, rather than as a failed search mid-execution.
            validate_query_text(text, self.limits.max_query_chars, "input.message")
            split_phrases(text, "input.message")
        if len(history) > self.limits.max_history_turns:
            raise invalid(
                "FIELD_OUT_OF_RANGE",
                "input.history",
                f"at most {self.limits.max_history_turns} history turns",
            )
        turns = []
        for i, (role, content) in enumerate(history):
            if role is None:
                raise invalid("UNKNOWN_ENUM_VALUE", f"input.history[{i}].role", "unknown turn role")
            if not content.strip():
                raise invalid(
                    "FIELD_REQUIRED", f"input.history[{i}].content", "turn content is empty"
                )
            if len(content) > self.limits.max_message_chars:
                raise invalid("FIELD_TOO_LONG", f"input.history[{i}].content", "turn is too long")
            turns.append(Turn(role, content))
        check_tenant(tenant, "input.tenant")
        flt = build_filter(conditions, "input.filter")
        return agent, ExecutionInput(text, tuple(turns), tenant, flt)
