"""Tool search over a client's own tools (proxy mode): which of them the model sees directly.

A client that brings its tools (Hermes, an OpenAI-SDK agent, a gateway's fallback) sends all of
them with every request; dozens of schemas drown a small model and its context. When they take
more than `tool_search_threshold_pct` of the context, the model is offered the bridges plus a few
tools directly: those the conversation already called (so the history it reads calls offered
tools), the ones promotion finds for the latest user message, and a tool `tool_choice` names. It
reaches the rest through tool_search/tool_describe, answered by the lane over a Catalog of the
client's tools, and tool_call, which the proxy turns back into a call to the real tool.

The offered list is ordered so that the rendered tools block only grows at its end while a user's
request is being worked on (the prompt cache keeps everything before the first change): the
bridges, the tools called before the latest user message (in the order first called), the tools
promoted for that message (the same for each request of that user turn), then the tools called
since, and a tool tool_choice names. The catalog of one tool list is
kept across requests (a client sends the same list each time), with its index. It is searched with
BM25 alone: the list arrives with the request, and embedding it (about 2 s per 100 new tools on two
cores) would take the CPU the model needs, for a list that may never come again.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..config import Settings
from ..token_estimate import estimate_tokens
from ..tools.base import RESERVED_NAMES, Tool
from .bridges import CALL, CALL_SCHEMA, bridge_tools
from .catalog import Catalog, catalog_of
from .promotion import promoted_tools
from .retrieval import ToolDoc

CLIENT_SOURCE = "client"
# A client sends the same tool list request after request; a few lists are kept indexed.
CATALOGS_KEPT = 8

_CATALOGS: "OrderedDict[str, Catalog]" = OrderedDict()
_CATALOGS_LOCK = threading.Lock()


@dataclass
class ClientSurface:
    """The client's tools as one model call sees them."""

    catalog: Catalog  # every client tool (definitions only: the client runs them)
    direct: list[str]  # offered with their schemas, in offered order
    bridges: dict[str, Tool] = field(default_factory=dict)  # tool_search, tool_describe
    promoted: frozenset[str] = frozenset()  # direct only because promotion found them for the request

    @property
    def bridged(self) -> bool:
        return bool(self.bridges)

    @property
    def offered(self) -> list[dict[str, Any]]:
        schemas = [tool.openai_schema() for tool in self.bridges.values()]
        if self.bridged:
            schemas.append(CALL_SCHEMA)
        return schemas + [self.catalog.tools[name].openai_schema() for name in self.direct]

    def forced_to(self, name: str) -> list[dict[str, Any]]:
        """The tools block of a call forced to the client tool `name`. Without tool search, every
        tool, as always. With it, the call can name no other tool, so it is offered the tools the
        conversation called (the history it reads calls them) and `name`: not the bridges nor
        promotion's picks, which serve an open reply (about 250 tokens, and up to 1,200, of every
        forced call's prompt). A hidden `name` is offered by its own schema: forced through the
        bridge instead, its arguments were decoded from the grammar alone, with no description to
        read (measured on BFCL even ids: live_multiple >= 7 functions 2/6 with search, 3/6
        without)."""
        if not self.bridged:
            return self.offered
        kept = [tool for tool in self.direct if tool not in self.promoted or tool == name]
        return [self.catalog.tools[tool].openai_schema() for tool in dict.fromkeys([*kept, name])]

    def parameters_of(self, name: str) -> dict[str, Any] | None:
        """The argument schema of a name the model may call: any client tool (a hidden one called
        by its own name, as tool_search showed it, is still the client's tool) or a bridge."""
        tool = self.catalog.tools.get(name) or self.bridges.get(name)
        if tool is not None:
            return tool.parameters
        return CALL_SCHEMA["function"]["parameters"] if self.bridged and name == CALL else None

    def is_client_tool(self, name: str) -> bool:
        return name in self.catalog.tools

    def bridges_named(self, text: str) -> list[str]:
        """The lane's bridges `text` names, as whole names (identifiers the lane chose, not words
        of any language), where this surface has them: a client never has the lane's bridges, so
        a reply to it must not name them (a client tool so named turns the bridges off)."""
        if not self.bridged or not text:
            return []
        return [name for name in (*self.bridges, CALL)
                if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text)]


def client_catalog(tools: Sequence[dict[str, Any]]) -> Catalog:
    """The catalog of a client's tool list (validated OpenAI definitions), shared by the requests
    that send the same list."""
    key = hashlib.sha256(json.dumps(list(tools), sort_keys=True).encode()).hexdigest()
    with _CATALOGS_LOCK:
        catalog = _CATALOGS.get(key)
        if catalog is not None:
            _CATALOGS.move_to_end(key)
            return catalog
    docs = [ToolDoc(t["function"]["name"], t["function"].get("description") or "",
                    t["function"]["parameters"], CLIENT_SOURCE) for t in tools]
    catalog = catalog_of(docs, "bm25")
    with _CATALOGS_LOCK:
        _CATALOGS[key] = catalog
        while len(_CATALOGS) > CATALOGS_KEPT:
            _CATALOGS.popitem(last=False)
    return catalog


def needs_search(tools: Sequence[dict[str, Any]], settings: Settings, context_tokens: int) -> bool:
    """Whether the client's schemas exceed the share of the context tool search starts at. Never
    when a client tool is named like a bridge: that client's own tool_search stays its own."""
    if not settings.proxy_tool_search or not tools:
        return False
    if any(t["function"]["name"] in RESERVED_NAMES for t in tools):
        return False
    return estimate_tokens(list(tools)) > settings.tool_search_threshold_pct / 100 * context_tokens


def client_surface(tools: Sequence[dict[str, Any]], settings: Settings, *, search: bool,
                   used_before: Sequence[str] = (), used_since: Sequence[str] = (), query: str = "",
                   pinned: str | None = None) -> ClientSurface:
    """All the client's tools when `search` is off; else the bridges, the tools the conversation
    called before the latest user message (`query`), promotion's picks for it, the tools called
    since, and `pinned` (a tool tool_choice names)."""
    catalog = client_catalog(tools)
    if not search:
        return ClientSurface(catalog, list(catalog.tools))
    promoted = promoted_tools(catalog, query)
    later = [*used_since, *([pinned] if pinned else [])]
    direct = list(dict.fromkeys(name for name in [*used_before, *promoted, *later] if name in catalog.tools))
    return ClientSurface(catalog, direct, bridge_tools(catalog, settings),
                         frozenset(promoted) - {*used_before, *later})
