"""The agent loop: ask the model, run the tools it calls, record everything, repeat.

Every message is committed to the store before the next model call, so a crash or a timeout loses
at most the call in flight, and the store is always the truth about what ran.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from ..config import Settings
from ..store import Store
from ..tools.base import ToolContext
from ..tools.memory import read_memory
from ..tools.registry import Registry
from ..toolsearch.surface import Toolset, assemble
from .history import conversation, estimate_tokens
from .llm_client import LlmClient, ModelReply
from .prompt import promoted_tools_note, system_prompt
from .toolcalls import extract_calls, new_call_id


@dataclass
class TurnResult:
    session_id: str
    content: str
    finish_reason: str  # stop | length | clarify | iteration_limit
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    model_calls: int = 0
    peak_prompt_tokens: int = 0
    tools_executed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Call:
    id: str
    name: str
    arguments: Any
    origin: str  # native | content


class Agent:
    def __init__(self, settings: Settings, store: Store, registry: Registry, llm: LlmClient):
        self.settings, self.store, self.registry, self.llm = settings, store, registry, llm

    async def run_turn(self, session_id: str, new_messages: list[dict[str, Any]], *,
                       profile: str = "search", max_tokens: int | None = None,
                       temperature: float | None = None) -> TurnResult:
        for message in new_messages:
            self._store_incoming(session_id, message)
        cap = min(max_tokens, self.settings.max_tokens) if max_tokens and max_tokens > 0 \
            else self.settings.max_tokens
        query = next((_text(m.get("content")) or "" for m in reversed(new_messages)
                      if m.get("role") == "user"), "")
        ctx = ToolContext(self.settings, self.store, session_id)
        turn = TurnResult(session_id, "", "stop")

        for iteration in range(self.settings.max_iterations):
            toolset = assemble(self.registry, self.settings, profile=profile, query=query)
            if iteration == 0 and toolset.promoted:
                # After the turn's user message, not in `tools`: what changes per turn never moves
                # the prompt's cached prefix (the system prompt and the tools block before it).
                self.store.add_message(session_id, "system", promoted_tools_note(toolset.promoted_schemas))
            messages = self._request_messages(session_id, toolset, cap,
                                              await self.llm.context_window())
            reply = await self.llm.chat(messages, toolset.offered, max_tokens=cap,
                                        temperature=temperature)
            _count(turn, reply)
            calls = _calls_of(reply, toolset)
            message_id = self.store.add_message(
                session_id, "assistant", reply.content, tool_calls=[_stored(c) for c in calls],
                prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
                cached_tokens=reply.cached_tokens)
            if not calls:
                turn.content = reply.content
                turn.finish_reason = "length" if reply.finish_reason == "length" else "stop"
                return turn
            for call in calls:
                await self._execute(call, toolset, ctx, message_id, turn)
            if ctx.question_for_user:
                return self._finish(turn, ctx.question_for_user, "clarify")

        ran = ", ".join(turn.tools_executed) or "none"
        return self._finish(turn, f"I stopped after {turn.model_calls} model calls without reaching "
                            f"a final answer. Tools that ran: {ran}.", "iteration_limit")

    def _store_incoming(self, session_id: str, message: dict[str, Any]) -> None:
        self.store.add_message(session_id, message["role"], _text(message.get("content")),
                               tool_calls=message.get("tool_calls"),
                               tool_call_id=message.get("tool_call_id"),
                               tool_name=message.get("name"))

    def _request_messages(self, session_id: str, toolset: Toolset, cap: int,
                          upstream_context: int | None) -> list[dict[str, Any]]:
        memory = self.store.memory_snapshot(session_id, lambda: read_memory(self.settings))
        prompt = system_prompt(memory, bridged=toolset.bridged)
        if self.store.last_lane_prompt(session_id) != prompt:
            self.store.add_message(session_id, "system", prompt, lane_prompt=True)
        context = min(self.settings.context_tokens,
                      upstream_context or self.settings.context_tokens)
        # The llm service generates into whatever room is left, so a quarter of the window is
        # enough to keep free; reserving the whole cap would starve history on an 8k model.
        budget = context - min(cap, context // 4) - estimate_tokens(toolset.offered) \
            - estimate_tokens(prompt)
        history = conversation(self.store.messages(session_id), max(budget, 0))
        return [{"role": "system", "content": prompt}, *history]

    async def _execute(self, call: _Call, toolset: Toolset, ctx: ToolContext, message_id: int,
                       turn: TurnResult) -> None:
        outcome = await asyncio.to_thread(toolset.dispatch, call.name, call.arguments, ctx)
        session = ctx.session_id
        self.store.add_message(session, "tool", outcome.for_model, tool_call_id=call.id,
                               tool_name=outcome.tool_name)
        self.store.record_execution(
            session, message_id, tool_call_id=call.id, tool_name=outcome.tool_name,
            via_bridge=outcome.via_bridge, origin=call.origin, arguments=outcome.arguments,
            status=outcome.status, result=outcome.output if outcome.status == "ok" else None,
            error=None if outcome.status == "ok" else outcome.output,
            started_at=outcome.started_at, duration_ms=outcome.duration_ms)
        if outcome.status == "ok":
            turn.tools_executed.append(outcome.tool_name)

    def _finish(self, turn: TurnResult, content: str, reason: str) -> TurnResult:
        self.store.add_message(turn.session_id, "assistant", content)
        turn.content, turn.finish_reason = content, reason
        return turn


def _calls_of(reply: ModelReply, toolset: Toolset) -> list[_Call]:
    if reply.tool_calls:
        return [_Call(c.id or new_call_id(), c.name, c.arguments, "native")
                for c in reply.tool_calls]
    return [_Call(c.id, c.name, c.arguments, "content")
            for c in extract_calls(reply.content, toolset.parameters_of)]


def _stored(call: _Call) -> dict[str, Any]:
    arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
    stored = {"id": call.id, "type": "function",
              "function": {"name": call.name, "arguments": arguments}}
    return {**stored, "origin": "content"} if call.origin == "content" else stored


def _count(turn: TurnResult, reply: ModelReply) -> None:
    turn.model_calls += 1
    turn.prompt_tokens += reply.prompt_tokens
    turn.completion_tokens += reply.completion_tokens
    turn.cached_tokens += reply.cached_tokens
    turn.peak_prompt_tokens = max(turn.peak_prompt_tokens, reply.prompt_tokens)


def _text(content: Any) -> str | None:
    """OpenAI content is a string, null, or a list of parts; the store keeps the text."""
    if content is None or isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
