"""The deferred catalog: the granted tools that are not offered directly, searchable.

A Catalog is a snapshot of the live registry: an MCP server that leaves or arrives changes the
next model call's catalog. It is kept, with its index and its promotion decisions, for as long as
the registry's version (and the session's grant) stays the same, so the agent loop can assemble
the tool surface before every model call without rebuilding an index that cannot have changed.
It holds exactly the tools granted to the session and outside the core set, so a restricted
session can neither find nor reach anything else.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Mapping

from ..config import Settings
from ..tools.base import RESERVED_NAMES, Tool
from ..tools.registry import Registry, granted_tools, split_core
from .embedding import default_embedder
from .retrieval import Hit, Method, ToolDoc, ToolIndex

# Below both, a top hit is a guess: its text holds under 60% of the query's words and the
# embedder sees little likeness (cosine of all-MiniLM-L6-v2). On scripts/bench/data this flags
# 83% of the queries no tool answers and 23% of the others (9% where the top hit is right).
MIN_QUERY_COVERAGE = 0.6
MIN_COSINE = 0.35
# BM25 alone has only the words: 40% of them flags 77% of hopeless queries and 34% of the others.
MIN_QUERY_COVERAGE_BM25 = 0.4


def one_line(text: str, limit: int = 120) -> str:
    """The first sentence of a description, on one line, at most `limit` characters."""
    flat = " ".join(text.split())
    for stop in (". ", "\n"):
        cut = flat.find(stop)
        if 0 < cut < limit:
            return flat[: cut + 1] if stop == ". " else flat[:cut]
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def type_of(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = "|".join(str(k) for k in kind if k != "null") or "null"
    if "enum" in schema and isinstance(schema["enum"], list) and len(schema["enum"]) <= 5:
        return "|".join(json.dumps(v) for v in schema["enum"])
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        return f"{type_of(schema['items'])}[]"
    return str(kind or "any")


def required_parameters(tool: Tool) -> list[tuple[str, str]]:
    props = tool.parameters.get("properties") or {}
    return [(name, type_of(props.get(name) or {})) for name in tool.parameters.get("required") or []]


def signature(tool: Tool) -> str:
    """`name(arg: type, ...)`: the required arguments, enough to call the tool."""
    args = ", ".join(f"{n}: {t}" for n, t in required_parameters(tool))
    optional = [n for n in (tool.parameters.get("properties") or {})
                if n not in (tool.parameters.get("required") or [])]
    if optional:
        listed = ", ".join(optional[:6]) + ("…" if len(optional) > 6 else "")
        args = f"{args}; optional: {listed}" if args else f"optional: {listed}"
    return f"{tool.name}({args})"


# Per registry: the last catalog built, under the key it was built for.
_BUILT: "weakref.WeakKeyDictionary[Registry, tuple[Hashable, dict[str, Tool], Catalog]]" = (
    weakref.WeakKeyDictionary())
_BUILT_LOCK = threading.Lock()
MEMO_SIZE = 64


@dataclass
class Catalog:
    tools: dict[str, Tool]
    method: Method = "hybrid"
    _index: ToolIndex | None = field(default=None, init=False, repr=False, compare=False)
    _memo: "OrderedDict[Hashable, Any]" = field(default_factory=OrderedDict, init=False,
                                                repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False,
                                  compare=False)

    def memo(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """`compute()` once per key while this catalog lives (the last MEMO_SIZE keys): what
        depends only on the tool list and the key, such as promotion for a query."""
        with self._lock:
            if key in self._memo:
                self._memo.move_to_end(key)
                return self._memo[key]
        value = compute()
        with self._lock:
            self._memo[key] = value
            if len(self._memo) > MEMO_SIZE:
                self._memo.popitem(last=False)
        return value

    @property
    def sources(self) -> list[str]:
        return sorted({tool.source for tool in self.tools.values()})

    @property
    def index(self) -> ToolIndex:
        with self._lock:  # two sessions may ask at once; one build serves both
            if self._index is None:
                docs = [ToolDoc(t.name, t.description, t.parameters, "" if t.source == "builtin"
                                else t.source) for t in self.tools.values()]
                self._index = ToolIndex(docs, method=self.method)
            return self._index

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    def __len__(self) -> int:
        return len(self.tools)

    def search(self, query: str, limit: int) -> tuple[list[Hit], bool]:
        """The best hits and whether the best one is a confident match."""
        hits = self.index.search(query, limit) if query.strip() else []
        return hits, bool(hits) and self.confident(query, hits[0].name)

    def confident(self, query: str, name: str) -> bool:
        index = self.index
        coverage = index.query_coverage(query, name)
        if index.method == "bm25":
            return coverage >= MIN_QUERY_COVERAGE_BM25
        return coverage >= MIN_QUERY_COVERAGE or index.cosine(query, name) >= MIN_COSINE

    def closest(self, query: str, limit: int) -> list[str]:
        """Names nearest the query even without real evidence: fuzzy name matches first."""
        return self.index.closest(query, limit)


def build_catalog(registry: Registry, settings: Settings) -> tuple[dict[str, Tool], Catalog]:
    """(core tools to offer directly, the deferred catalog), both within the granted tools.
    The same objects come back while the registry's version and the grant are unchanged."""
    method: Method = "hybrid" if default_embedder() else "bm25"
    key = (registry.version, settings.tools_subset, settings.core_tools, method)
    with _BUILT_LOCK:
        built = _BUILT.get(registry)
    if built is not None and built[0] == key:
        return dict(built[1]), built[2]
    granted = granted_tools(registry, settings)
    core, deferred = split_core(granted, settings)
    deferred = {n: t for n, t in deferred.items() if n not in RESERVED_NAMES}
    catalog = Catalog(deferred, method=method)
    with _BUILT_LOCK:
        _BUILT[registry] = (key, core, catalog)
    return dict(core), catalog


def warm_up(registry: Registry, settings: Settings) -> int:
    """Build the catalog index once, so the first model call does not pay for embedding every
    deferred tool (about 1 s per 100 tools on two cores). Returns the number of deferred tools."""
    _, catalog = build_catalog(registry, settings)
    if catalog:
        catalog.index.search("warm up", 1)
    return len(catalog)
