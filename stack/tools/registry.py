"""Every tool the lane knows, and which of them a session may see and call.

Built-in tools come from the family modules in FAMILIES (a new family is one module and one line
there). Tools that change at run time, such as those of MCP servers, come from providers: callables
asked for their current list on every read, so a server that leaves takes its tools with it.

The registry has a version that changes whenever the list does (a tool registered, a provider's
list changed: an MCP server re-listed on tools/list_changed, left or came back), so what is built
from the list (the tool-search catalog and its index) is rebuilt only when it has to be.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Iterable, Iterator

from ..config import Settings
from . import calculator, clarify, clock, files, memory, python_exec, session_search, terminal, todo, web
from .base import RESERVED_NAMES, Tool

log = logging.getLogger("lane.tools")

FAMILIES = (memory, terminal, session_search, files, todo, clarify,
            clock, calculator, python_exec, web)  # offline extras, deferred by default

ToolProvider = Callable[[], Iterable[Tool]]


class Registry:
    def __init__(self, tools: Iterable[Tool] = (), providers: Iterable[ToolProvider] = ()):
        self._static: dict[str, Tool] = {}
        self._providers: list[ToolProvider] = list(providers)
        self._version = 0
        # The provider tools of the last read, held so that a changed list is seen by identity:
        # a provider hands back the same Tool objects until its list changes (mcp_provider does).
        self._provided: list[Tool] = []
        self._lock = threading.Lock()
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in RESERVED_NAMES:
            raise ValueError(f"{tool.name} is reserved for the tool-search bridge")
        if tool.name in self._static:
            raise ValueError(f"a tool named {tool.name} is already registered")
        self._static[tool.name] = tool
        with self._lock:
            self._version += 1

    def tools(self) -> dict[str, Tool]:
        """The live list: static tools first, then each provider's, reserved names and clashes
        dropped with a log line rather than shadowing a tool already there."""
        return self.snapshot()[1]

    def snapshot(self) -> tuple[int, dict[str, Tool]]:
        """(version, the live list). Equal versions mean the same tools, the same objects."""
        provided = [tool for provider in self._providers for tool in provider()]
        with self._lock:
            if len(provided) != len(self._provided) or any(
                    a is not b for a, b in zip(provided, self._provided, strict=True)):
                self._provided = provided
                self._version += 1
            version = self._version
        current = dict(self._static)
        for tool in provided:
            if tool.name in RESERVED_NAMES or tool.name in current:
                log.warning("ignoring tool %s from %s: name taken", tool.name, tool.source)
                continue
            current[tool.name] = tool
        return version, current

    @property
    def version(self) -> int:
        """Changes whenever the tool list changes; reads the providers to find out."""
        return self.snapshot()[0]

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools().values())


def builtin_tools() -> list[Tool]:
    return [tool for family in FAMILIES for tool in family.TOOLS]


def build_registry(providers: Iterable[ToolProvider] = ()) -> Registry:
    return Registry(builtin_tools(), providers)


def granted_tools(registry: Registry, settings: Settings) -> dict[str, Tool]:
    """The tools this lane grants: all of them, or those named in LANE_TOOLS_SUBSET."""
    tools = registry.tools()
    if settings.tools_subset is None:
        return tools
    return {name: tool for name, tool in tools.items() if name in settings.tools_subset}


def split_core(tools: dict[str, Tool], settings: Settings) -> tuple[dict[str, Tool], dict[str, Tool]]:
    """(core, deferred): core tools are offered directly, the rest only through tool search."""
    core = {name: tool for name, tool in tools.items() if name in settings.core_tools}
    deferred = {name: tool for name, tool in tools.items() if name not in core}
    return core, deferred


def describe_selection(registry: Registry, settings: Settings) -> str:
    """One log line saying what LANE_CORE_TOOLS / LANE_TOOLS_SUBSET kept and what they ignored."""
    known = set(registry.tools())
    parts = []
    for label, names in (("core", settings.core_tools), ("subset", settings.tools_subset)):
        if names is None:
            continue
        kept = [n for n in names if n in known]
        ignored = [n for n in names if n not in known]
        parts.append(f"{label}: kept {','.join(kept) or '-'}"
                     + (f"; ignored unknown {','.join(ignored)}" if ignored else ""))
    return "tool selection " + " | ".join(parts)
