"""What a proxy-mode request asks of the lane and what the lane gives back, as plain data.

The wire modules (api/) translate each API's request into a ProxyRequest and write a ProxyResult
back in the client's shape; a call the lane returns is a ClientCall, always to the client's own
tool, never to a bridge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .turn import TurnResult

ChoiceMode = Literal["auto", "none", "required", "function"]


@dataclass(frozen=True)
class ToolChoice:
    mode: ChoiceMode = "auto"
    name: str | None = None  # the function a named choice forces


@dataclass(frozen=True)
class ProxyRequest:
    """What a proxy-mode request asks, already validated (api/chat_request.py)."""

    messages: list[dict[str, Any]]  # the client's conversation, normalised
    tools: list[dict[str, Any]]  # OpenAI function definitions, each with an object schema
    tool_choice: ToolChoice = ToolChoice()
    parallel_tool_calls: bool = True
    max_tokens: int = 4096  # already clamped to the lane's cap
    temperature: float | None = None


@dataclass
class ProxyResult(TurnResult):
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # OpenAI shape, for the client


@dataclass(frozen=True)
class ClientCall:
    """A call the lane returns: the model's call id, the client's real tool, arguments as JSON."""

    id: str
    name: str
    arguments: str
    via_bridge: bool
    origin: Literal["native", "content"]

    def wire(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}


class CallsReturned(Exception):
    """Ends a turn: these calls go to the client."""

    def __init__(self, calls: list[ClientCall], message_id: int):
        super().__init__(f"{len(calls)} calls returned")
        self.calls, self.message_id = calls, message_id
