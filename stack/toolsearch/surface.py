"""The tool surface of one model call: what the model is offered and how its calls are dispatched.

The agent loop knows nothing of modes, bridges or promotion; it asks `assemble` for a Toolset before
each model call and hands every call the model makes to `Toolset.dispatch`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..config import Settings
from ..tools.base import Tool, ToolContext
from ..tools.execute import Outcome, refused, run_tool
from ..tools.registry import Registry, granted_tools

Profile = Literal["search", "full"]


@dataclass
class Toolset:
    direct: dict[str, Tool]
    granted: dict[str, Tool] = field(default_factory=dict)

    @property
    def offered(self) -> list[dict[str, Any]]:
        """The `tools` array of the model request."""
        return [tool.openai_schema() for tool in self.direct.values()]

    def parameters_of(self, name: str) -> dict[str, Any] | None:
        """The argument schema of an offered tool, None when the name is not offered."""
        tool = self.direct.get(name)
        return tool.parameters if tool else None

    def dispatch(self, name: str, raw_arguments: Any, ctx: ToolContext) -> Outcome:
        tool = self.direct.get(name)
        if tool is None:
            return refused(name, f"unknown tool {name!r}; offered tools: {', '.join(self.direct)}",
                           raw_arguments)
        return run_tool(tool, raw_arguments, ctx)


def assemble(registry: Registry, settings: Settings, *, profile: Profile = "search",
             query: str = "") -> Toolset:
    granted = granted_tools(registry, settings)
    return Toolset(direct=granted, granted=granted)
