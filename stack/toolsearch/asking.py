"""What tool search needs of a model: one chat call, named as a protocol.

Tool search asks the lane's model to write example requests for its tools (examples_writer.py), in
the background and from the shell (`lane examples`, model_commands.py). The client that
speaks to the llm service (agent/llm_client.py) lives above tool search, since imports run
api -> agent -> toolsearch, and it is wanted there (it parses tool calls with agent/toolcalls.py).
So tool search names only what it uses of a client, and the owner of one passes it in: the shim
for the writer, `lane` (cli.py) for the commands. A client's failures derive
from ModelFailed, so tool search can tell a failed call from a bug without knowing the client.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar


class ModelFailed(Exception):
    """A model call failed: the service unreachable, erring or too slow (agent/llm_client.py's
    LlmError derives from it)."""


class Answer(Protocol):
    """A model's reply, as far as tool search reads it."""

    @property
    def content(self) -> str: ...


A_co = TypeVar("A_co", bound=Answer, covariant=True)
A = TypeVar("A", bound=Answer)  # what a function that asks gets back: the client's own reply type


class ChatModel(Protocol[A_co]):
    """A model tool search can ask (agent/llm_client.LlmClient is one)."""

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                   max_tokens: int, temperature: float | None = None) -> A_co: ...

    async def model_name(self) -> str: ...

    async def aclose(self) -> None: ...
