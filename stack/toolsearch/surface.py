"""The tool surface of one model call: what the model is offered and how its calls are dispatched.

The agent loop knows nothing of modes, bridges or promotion; it asks `assemble` for a Toolset before
each model call and hands every call the model makes to `Toolset.dispatch`. Each assembly reads the
live registry again, so the surface follows tools that come and go between two model calls; while
the registry's version is unchanged the catalog, its index and the promotion for a query are the
ones already built (catalog.py), so assembling again costs well under a millisecond.

Modes (`LANE_TOOL_SEARCH`): `on` offers the core set plus the bridges whenever anything is
deferred; `auto` does so only when the deferred schemas would take more than `threshold_pct` of
the context; `off`, and the `full` profile (the A/B control arm), offer every granted tool.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from ..config import Settings
from ..token_estimate import estimate_tokens
from ..tools.base import Tool, ToolContext, ToolError
from ..tools.execute import Outcome, refused, run_tool
from ..tools.registry import Registry
from ..tools.validation import parse_arguments
from .bridges import (
    CALL,
    CALL_SCHEMA,
    SEARCH,
    bridge_target,
    bridge_tools,
    call_through_bridge,
    forced_bridge_schema,
)
from .catalog import Catalog, build_catalog, installed_method
from .promotion import promoted_tools
from .retrieval import ToolDoc, ToolIndex
from .tokens import split_words

Profile = Literal["search", "full"]
PROFILES: tuple[Profile, ...] = get_args(Profile)
# How many of the index's best tools for a request are candidates for its next step.
NEXT_STEP_CANDIDATES = 3
# How much of a guessed call becomes the search for the tool it meant.
GUESS_WORDS = 24
GUESS_VALUE_CHARS = 40


@dataclass
class Toolset:
    direct: dict[str, Tool]
    catalog: Catalog = field(default_factory=lambda: Catalog({}))
    bridges: dict[str, Tool] = field(default_factory=dict)
    promoted: list[str] = field(default_factory=list)

    @property
    def bridged(self) -> bool:
        return bool(self.bridges)

    @property
    def offered(self) -> list[dict[str, Any]]:
        """The `tools` array of the model request: direct tools, then the bridges. Promoted tools
        are not in it: they change per turn, and the array sits in the prompt's stable prefix."""
        schemas = [tool.openai_schema() for name, tool in self.direct.items() if name not in self.promoted]
        if self.bridged:
            schemas += [tool.openai_schema() for tool in self.bridges.values()] + [CALL_SCHEMA]
        return schemas

    def without_promotion(self) -> "Toolset":
        """The same surface with no tool promoted (the promoted ones stay reachable by search)."""
        direct = {name: tool for name, tool in self.direct.items() if name not in self.promoted}
        return replace(self, direct=direct, promoted=[])

    @property
    def promoted_schemas(self) -> list[dict[str, Any]]:
        """The promoted tools' schemas, which the agent offers in a message after the user's."""
        return [self.direct[name].openai_schema() for name in self.promoted]

    def parameters_of(self, name: str) -> dict[str, Any] | None:
        """The argument schema of an offered tool, None when the name is not offered."""
        tool = self.direct.get(name) or self.bridges.get(name)
        if tool is not None:
            return tool.parameters
        return CALL_SCHEMA["function"]["parameters"] if self.bridged and name == CALL else None

    def reaches(self, name: str) -> bool:
        """Whether a call to `name` can be forced here: offered, or hidden behind the bridge."""
        return self.parameters_of(name) is not None or (self.bridged and name in self.catalog)

    def forced_through_bridge(self, tool: str | None) -> dict[str, Any] | None:
        """The reply schema that forces a call to a hidden tool (bridges.forced_bridge_schema);
        None for a tool that is not hidden here."""
        return forced_bridge_schema(self.catalog, tool) if self.bridged else None

    def best_for(self, request: str, limit: int = NEXT_STEP_CANDIDATES) -> list[str]:
        """The tools the index ranks best for the request, over every tool this surface reaches
        (only those with some evidence): the candidates for a request's next step."""
        tools = {**self.direct, **self.catalog.tools}
        index = self.catalog.memo(("every tool", tuple(tools)), lambda: ToolIndex(
            [ToolDoc.from_definition(tool.openai_schema()) for tool in tools.values()],
            method=installed_method()))
        return [hit.name for hit in index.search(request, limit)]

    def tool_named(self, name: str) -> Tool | None:
        """The tool a call of this name runs: offered directly, a bridge, or a hidden one."""
        return self.direct.get(name) or self.bridges.get(name) or self.catalog.tools.get(name)

    def target(self, name: str, raw_arguments: Any) -> tuple[Tool, Any, bool] | None:
        """The tool a call runs, the arguments meant for it, and whether it goes through the
        bridge; None when it reaches no tool."""
        if self.bridged and name == CALL:
            found = bridge_target(self.catalog, self.direct, raw_arguments)
            return None if isinstance(found, Outcome) else (*found, True)
        tool = self.tool_named(name)
        return None if tool is None else (tool, raw_arguments, False)

    def dispatch(self, name: str, raw_arguments: Any, ctx: ToolContext) -> Outcome:
        """Run one call; every path ends in an Outcome."""
        if self.bridged and name == CALL:
            return call_through_bridge(self.catalog, self.direct, raw_arguments, ctx)
        tool = self.tool_named(name)
        if tool is None:
            return refused(name, self._unknown(name, raw_arguments, ctx), raw_arguments)
        # A deferred tool called by its own name (seen in tool_search results) is in scope: run it.
        return run_tool(tool, raw_arguments, ctx)


    def _unknown(self, name: str, raw_arguments: Any, ctx: ToolContext) -> str:
        """What a call to a tool that does not exist is told: with bridges, what tool_search finds
        for the guess (its name and argument words), so the next call can be the right one."""
        if not self.bridged:
            offered = ", ".join(t["function"]["name"] for t in self.offered) or "none"
            return f"unknown tool {name!r}; offered tools: {offered}"
        found = self.bridges[SEARCH].run({"query": guessed_task(name, raw_arguments)}, ctx)
        return f"There is no tool named {name!r}, so nothing ran. Hidden tools for it:\n{found}"


def guessed_task(name: str, raw_arguments: Any) -> str:
    """A guessed call in words: its name, then its argument names and the words of short values
    (`playwright {"path": "screenshot.png"}` -> "playwright path screenshot png": the value's
    words, since search reads a file name whole as "the file")."""
    try:
        arguments = parse_arguments(raw_arguments)
    except ToolError:
        arguments = {}
    words = split_words(name)
    for key, value in arguments.items():
        words += split_words(key)
        if isinstance(value, str) and len(value) <= GUESS_VALUE_CHARS:
            words += split_words(value)
    return " ".join(words[:GUESS_WORDS])


def assemble(registry: Registry, settings: Settings, *, profile: Profile = "search",
             query: str = "") -> Toolset:
    """The tools for the next model call, rebuilt from the live registry; `query` (the turn's
    request) decides what is promoted."""
    if profile not in PROFILES:
        raise ValueError(f"unknown tool profile {profile!r}; use search or full")
    core, catalog = build_catalog(registry, settings)
    if profile == "full" or not use_bridges(catalog, settings):
        return Toolset(direct={**core, **catalog.tools})
    promoted = promoted_tools(catalog, query)
    direct = {**core, **{name: catalog.tools[name] for name in promoted}}
    return Toolset(direct, catalog, bridge_tools(catalog, settings), promoted)


def use_bridges(catalog: Catalog, settings: Settings) -> bool:
    if settings.tool_search == "off" or not catalog:
        return False
    if settings.tool_search == "auto":
        deferred = catalog.memo("schema_tokens", lambda: estimate_tokens(
            [t.openai_schema() for t in catalog.tools.values()]))
        return deferred > settings.tool_search_threshold_pct / 100 * settings.context_tokens
    return True
