"""The registry: reserved names, live providers, and the allow-lists' log line."""

import pytest

from stack.config import Settings
from stack.tools.base import Tool, object_schema
from stack.tools.registry import Registry, build_registry, describe_selection, granted_tools


def tool(name, source="builtin"):
    return Tool(name, f"{name} tool", object_schema({}), lambda arguments, ctx: name, source)


def test_bridge_names_are_reserved_and_duplicates_refused():
    with pytest.raises(ValueError, match="reserved"):
        Registry([tool("tool_call")])
    with pytest.raises(ValueError, match="already registered"):
        Registry([tool("a"), tool("a")])


def test_providers_are_read_live_and_cannot_shadow_a_tool():
    live = [tool("srv__x", "srv"), tool("a", "srv"), tool("tool_search", "srv")]
    registry = Registry([tool("a")], providers=[lambda: list(live)])
    assert registry.tools()["a"].source == "builtin"
    assert set(registry.tools()) == {"a", "srv__x"}
    live.clear()
    assert set(registry.tools()) == {"a"}


def test_selection_line_names_what_was_kept_and_ignored():
    settings = Settings(core_tools=("memory", "nope"), tools_subset=("memory", "calculate", "ghost"))
    line = describe_selection(build_registry(), settings)
    assert "core: kept memory; ignored unknown nope" in line
    assert "subset: kept memory,calculate; ignored unknown ghost" in line
    assert set(granted_tools(build_registry(), settings)) == {"memory", "calculate"}
