"""The first answer is fast: the shim has the llm service hold its stable prefixes before it
reports healthy.

Every turn's model calls begin with one of four fixed prefixes: the decision's question, the
lane's system prompt with the tools block of the default profile (the forced calls; the memory
snapshot comes after them, in a message of its own), the answer's instruction and the reading of
an answer. On two laptop
cores the tools block alone costs 30 s or more to evaluate; evaluated at start (or restored from
the llm service's disk on a restart, stack/llm/prefix_state.py), they cost a user's first request
nothing. The decision's goes last, so that the context holds it when the first request comes.

A request that arrives while the lane warms waits for the model like any other and needs the same
prefix, so warming never costs it more than it would have paid itself. The example writer starts
only after warming (api/app.py), so it never competes with it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Callable, Literal

from ..config import Settings
from ..tools.registry import Registry
from ..toolsearch.surface import assemble
from .answers import decision_tools, granted
from .decide import decide_opening
from .llm_client import LlmClient, LlmError, LlmNotReady
from .prompt import compose_instruction, system_prompt
from .reading import reader_messages, shortlist

log = logging.getLogger("lane.warmup")

# How long to wait before asking an llm service that is not up yet (or still loading) again.
RETRY_S = 1.0
State = Literal["waiting", "warming", "ok", "unsupported", "failed"]


@dataclass(frozen=True)
class Opening:
    """The messages and tools a kind of model call always begins with."""

    purpose: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]


def openings(settings: Settings, registry: Registry) -> list[Opening]:
    """What the default profile's calls begin with, in the order to warm them (the decision's
    last, as every turn begins with it, so the context holds it when the first request comes):
    the answer's instruction with what the granted tools do, the reading of an answer, the
    agent's system prompt with the tools block (its calls), and the decision's question."""
    toolset = assemble(registry, settings, profile="search")
    agent = [{"role": "system", "content": system_prompt(bridged=toolset.bridged)}]
    decide = decide_opening(decision_tools(toolset), set(toolset.catalog.tools))
    tools = granted(toolset)
    compose = [{"role": "system", "content": compose_instruction(tools)}]
    read = reader_messages("", "", shortlist(tools, set()))[:1]
    return [Opening("compose", compose, []), Opening("read", read, []), Opening("agent", agent, toolset.offered),
            Opening("decide", decide, [])]


class WarmUp:
    """Warms the openings once; `ready` is set when they are held, or when they cannot be (an
    upstream without the route, a prefix the model refuses): the lane then works, only slower."""

    def __init__(self, llm: LlmClient, make_openings: Callable[[], list[Opening]], *,
                 retry_s: float = RETRY_S) -> None:
        self.llm, self.make_openings, self.retry_s = llm, make_openings, retry_s
        self.ready = asyncio.Event()
        self.state: State = "waiting"
        self.results: dict[str, dict[str, Any]] = {}

    async def probe(self) -> None:
        """Settle at once when the llm service is another OpenAI server (no route to warm), so a
        lane in front of one is healthy as soon as it starts."""
        if await self.llm.warm_supported() is False:
            self._settle("unsupported")

    async def run(self) -> None:
        """Until warm: an llm service that is not up yet is asked again every `retry_s`."""
        while not self.ready.is_set():
            try:
                await self._warm_all()
            except LlmNotReady as exc:
                log.debug("warm-up waits for the llm service: %s", exc)
                await asyncio.sleep(self.retry_s)
            except LlmError as exc:
                log.warning("the stable prefix was not warmed; first requests evaluate it: %s", exc)
                self._settle("failed")
            except Exception:  # the tools could not be read: the lane still answers, unwarmed
                log.exception("the stable prefix was not warmed")
                self._settle("failed")

    async def _warm_all(self) -> None:
        for opening in await asyncio.to_thread(self.make_openings):
            self.state = "warming"
            result = await self.llm.warm(opening.messages, opening.tools)
            if result is None:
                log.info("the llm service has no warm-up route; nothing warmed")
                self._settle("unsupported")
                return
            self.results[opening.purpose] = result
            log.info("warmed the %s prefix: %s", opening.purpose, result)
        self._settle("ok")

    def _settle(self, state: State) -> None:
        self.state = state
        self.ready.set()
