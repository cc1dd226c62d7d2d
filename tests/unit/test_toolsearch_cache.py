"""Assembling only when something changed: the registry's version moves with its tool list, and
the catalog, its index and promotion are reused while it does not (issue 12)."""

import json

from stack.config import Settings
from stack.tools.base import Tool, object_schema
from stack.tools.registry import Registry
from stack.toolsearch import catalog as catalog_module
from stack.toolsearch import promotion
from stack.toolsearch.surface import assemble


def tool(name, description, source="builtin"):
    return Tool(name, description, object_schema({"text": {"type": "string"}}, ["text"]),
                lambda arguments, ctx: json.dumps(arguments), source)


def lane(live):
    return Registry([tool("memory", "Save a note to memory.")], providers=[lambda: list(live)])


SETTINGS = Settings(core_tools=("memory",))


def test_version_changes_only_when_the_tool_list_does():
    live = [tool("srv__a", "First.", "srv")]
    registry = lane(live)
    first = registry.version
    assert registry.version == first  # the same objects again: unchanged
    live.append(tool("srv__b", "Second.", "srv"))
    second = registry.version
    assert second != first
    live[0] = tool("srv__a", "First, described anew.", "srv")  # a re-listed server
    assert registry.version not in (first, second)
    registry.register(tool("extra", "Registered late."))
    assert registry.version != second


def test_catalog_and_index_are_built_once_while_the_list_is_unchanged(monkeypatch):
    built = []
    real = catalog_module.ToolIndex

    def counting(*args, **kwargs):
        built.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(catalog_module, "ToolIndex", counting)
    live = [tool("srv__send_mail", "Send an email.", "srv"),
            tool("srv__read_calendar", "Read calendar events.", "srv")]
    registry = lane(live)
    first = assemble(registry, SETTINGS, query="send an email to bob")
    first.catalog.vectors_ready(timeout=10)  # with the embed extra: BM25 now, vectors behind it
    once = len(built)
    assert once in (1, 2)
    for _ in range(5):
        again = assemble(registry, SETTINGS, query="send an email to bob")
    assert again.catalog is first.catalog and len(built) == once
    live.append(tool("srv__post_chat", "Post a chat message.", "srv"))
    changed = assemble(registry, SETTINGS, query="send an email to bob")
    changed.catalog.vectors_ready(timeout=10)
    assert changed.catalog is not first.catalog and "srv__post_chat" in changed.catalog
    assert len(built) == 2 * once


def test_promotion_runs_once_per_query_and_catalog(monkeypatch):
    calls = []
    real = promotion._winners
    monkeypatch.setattr(promotion, "_winners",
                        lambda *args: calls.append(1) or real(*args))
    registry = lane([tool("srv__send_mail", "Send an email to someone.", "srv"),
                     tool("srv__read_calendar", "Read calendar events.", "srv")])
    first = assemble(registry, SETTINGS, query="send an email")
    first.promoted.clear()  # the loop may drop promotion for its own toolset ...
    second = assemble(registry, SETTINGS, query="send an email")
    assert second.promoted == ["srv__send_mail"]  # ... without touching the memo
    assert len(calls) == 1
    assemble(registry, SETTINGS, query="read my calendar")
    assert len(calls) == 2


def test_a_different_grant_gets_its_own_catalog():
    registry = lane([tool("srv__a", "First.", "srv"), tool("srv__b", "Second.", "srv")])
    everything = assemble(registry, SETTINGS)
    narrow = assemble(registry, Settings(core_tools=("memory",), tools_subset=("srv__a",)))
    assert set(everything.catalog.tools) == {"srv__a", "srv__b"}
    assert set(narrow.catalog.tools) == {"srv__a"}
