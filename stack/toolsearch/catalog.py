"""The deferred catalog: the granted tools that are not offered directly, searchable.

A Catalog is a snapshot of the live registry: an MCP server that leaves or arrives changes the
next model call's catalog. It is kept, with its index and its promotion decisions, for as long as
the registry's version (and the session's grant) stays the same, so the agent loop can assemble
the tool surface before every model call without rebuilding an index that cannot have changed.
It holds exactly the tools granted to the session and outside the core set, so a restricted
session can neither find nor reach anything else.

A first build of many new tools takes seconds with the `embed` extra (embedding 1,000 tools takes
about 3.6 s on two cores, 5,000 tools 18 s, and their example requests several times that), so a
catalog embeds in a background thread and answers with BM25 until its vectors are ready: the shim
starts, and the first `tool_search` answers, without waiting for them.

Tools carry the example requests the lane's model wrote for them (examples.py); each example
written makes the next model call's catalog a new one, indexed again (mostly from cached vectors).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import weakref
from collections import Counter, OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Hashable, Mapping, Sequence

from ..config import Settings
from ..tools.base import RESERVED_NAMES, Tool, ToolContext, ToolError
from ..tools.registry import Registry, granted_tools, split_core
from .embedding import Embedder, default_embedder
from .examples import ExampleBook
from .glossary import english_gloss
from .retrieval import Hit, Method, ToolDoc, ToolIndex, task_words
from .spelling import is_real
from .tokens import split_words

log = logging.getLogger("lane.toolsearch")

# Below both, a top hit is a guess: its text holds under 60% of the query's words and the
# embedder sees little likeness (cosine of all-MiniLM-L6-v2). On scripts/bench/data this flags
# 83% of the queries no tool answers and 23% of the others (9% where the top hit is right).
MIN_QUERY_COVERAGE = 0.6
MIN_COSINE = 0.35
# BM25 alone has only the words: 40% of them flags 77% of hopeless queries and 34% of the others.
MIN_QUERY_COVERAGE_BM25 = 0.4
# A word that begins at least this many of one source's tool names, appears in no other source's
# tool names or descriptions and is no English word names that source: `jira` an `atlassian`
# server (but not `worker` a `cloudflare` one: "restart the worker-3 pod" is about Kubernetes).
SOURCE_WORD_TOOLS = 3
# How long a catalog's first search waits for its vectors before answering with BM25: long enough
# for vectors kept on disk (1,000 known tools load in about 0.2 s) or a few dozen new tools.
VECTOR_WAIT_S = 2.0


_ABBREVIATIONS = ("e.g", "i.e", "etc", "vs", "approx", "incl")


def one_line(text: str, limit: int = 120) -> str:
    """The first sentence of a description, on one line, at most `limit` characters ("e.g." and
    the like end no sentence)."""
    flat = " ".join(text.split())
    for match in re.finditer(r"\. ", flat):
        cut = match.start()
        if cut >= limit:
            break
        if cut > 0 and not flat[:cut].lower().endswith(_ABBREVIATIONS):
            return flat[: cut + 1]
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
    embedder: Embedder | None = None  # None: the installed one
    examples: ExampleBook | None = None
    _lexical: ToolIndex | None = field(default=None, init=False, repr=False, compare=False)
    _full: "Future[ToolIndex] | None" = field(default=None, init=False, repr=False, compare=False)
    _memo: "OrderedDict[Hashable, Any]" = field(default_factory=OrderedDict, init=False,
                                                repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False,
                                  compare=False)
    # Apart from _lock: the index build (under _lock) reads the memoised docs.
    _memo_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False,
                                       compare=False)

    def memo(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """`compute()` once per key while this catalog lives (the last MEMO_SIZE keys): what
        depends only on the tool list and the key, such as promotion for a query."""
        with self._memo_lock:
            if key in self._memo:
                self._memo.move_to_end(key)
                return self._memo[key]
        value = compute()
        with self._memo_lock:
            self._memo[key] = value
            if len(self._memo) > MEMO_SIZE:
                self._memo.popitem(last=False)
        return value

    @property
    def sources(self) -> list[str]:
        return sorted({tool.source for tool in self.tools.values()})

    def named_sources(self, query: str) -> frozenset[str]:
        """The sources (MCP servers) a request names, by the server's name ("in linear", "google
        calendar", or its shorthand: "gh", glossary.py) or by a product word only its tools' names
        begin with ("jira"). A value is no name: "stripe.com/docs" is a web page."""
        said = task_words(query)
        words = f" {' '.join(said)} {' '.join(english_gloss(said))} "
        names: dict[str, frozenset[str]] = self.memo("source names", self._source_names)
        return frozenset(source for source, phrases in names.items()
                         if any(f" {phrase} " in words for phrase in phrases))

    def _source_names(self) -> dict[str, frozenset[str]]:
        """Each server's names: its own, read as words, and its product words."""
        by_source: dict[str, list[Tool]] = {}
        for tool in self.tools.values():
            if tool.server:
                by_source.setdefault(tool.server, []).append(tool)
        sources_of: dict[str, set[str]] = {}
        first_words: dict[str, Counter[str]] = {}
        for source, tools in by_source.items():
            first_words[source] = Counter()
            for tool in tools:
                own = split_words(tool.name.split("__", 1)[-1])
                first_words[source].update(own[:1])
                for word in {*own, *split_words(tool.description)}:
                    sources_of.setdefault(word, set()).add(source)
        return {source: frozenset({" ".join(split_words(source)), *(
            word for word, count in first_words[source].items()
            if count >= SOURCE_WORD_TOOLS and sources_of[word] == {source} and not is_real(word))})
            for source in by_source}

    def docs(self) -> list[ToolDoc]:
        """The tools as retrieval sees them, with their example requests; built once per catalog
        (the example writer asks for them on every idle round)."""
        return self.memo("docs", self._docs)

    def _docs(self) -> list[ToolDoc]:
        docs = [ToolDoc(t.name, t.description, t.parameters, t.server) for t in self.tools.values()]
        return self.examples.with_examples(docs) if self.examples else docs

    @property
    def index(self) -> ToolIndex:
        """The index with vectors once they are ready, BM25 until then. The first call starts
        the build and waits up to VECTOR_WAIT_S for it; later calls never wait."""
        lexical, full, first = self._started()
        if full is None:
            return lexical
        if first and not _finished(full, VECTOR_WAIT_S):
            log.info("embedding %d tools in the background; BM25 answers meanwhile", len(lexical))
        return full.result() if full.done() and full.exception() is None else lexical

    def vectors_ready(self, timeout: float | None = None) -> bool:
        """Waits up to `timeout` s (None: as long as it takes) for the vectors; False when they
        are still building or failed, or the catalog has none."""
        _, full, _ = self._started()
        return full is not None and _finished(full, timeout) and full.exception() is None

    def _started(self) -> "tuple[ToolIndex, Future[ToolIndex] | None, bool]":
        """(the BM25 index, the vectored one to come, whether this call started them)."""
        with self._lock:  # two sessions may ask at once; one build serves both
            first = self._lexical is None
            if self._lexical is None:
                docs = self.docs()
                self._lexical = ToolIndex(docs, method="bm25")
                if self.method != "bm25" and docs:
                    self._full = self._build_in_background(docs)
            return self._lexical, self._full, first

    def _build_in_background(self, docs: list[ToolDoc]) -> "Future[ToolIndex]":
        """A daemon thread: a process that exits mid-build loses only unsaved vectors."""
        future: Future[ToolIndex] = Future()

        def build() -> None:
            started = time.perf_counter()
            try:
                future.set_result(ToolIndex(docs, method=self.method, embedder=self.embedder))
            except Exception as exc:  # BM25 keeps serving; say why once
                log.warning("tool vectors not built, BM25 serves alone: %s", exc)
                future.set_exception(exc)
                return
            log.info("tool vectors ready: %d tools in %.1f s", len(docs),
                     time.perf_counter() - started)

        threading.Thread(target=build, name="lane-tool-vectors", daemon=True).start()
        return future

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    def __len__(self) -> int:
        return len(self.tools)

    def search(self, query: str, limit: int) -> tuple[list[Hit], bool]:
        """The best hits and whether the best one is a confident match, both from one index
        (the vectors may become ready in between)."""
        index = self.index
        hits = index.search(query, limit) if query.strip() else []
        return hits, bool(hits) and confident_in(index, query, hits[0].name)

    def confident(self, query: str, name: str) -> bool:
        return confident_in(self.index, query, name)

    def closest(self, query: str, limit: int) -> list[str]:
        """Names nearest the query even without real evidence: fuzzy name matches first."""
        return self.index.closest(query, limit)


def installed_method() -> Method:
    """Hybrid search where the `embed` extra is installed, BM25 alone where it is not."""
    return "hybrid" if default_embedder() else "bm25"


def catalog_of(docs: Sequence[ToolDoc], method: Method, *, embedder: Embedder | None = None,
               examples: ExampleBook | None = None) -> Catalog:
    """A catalog of tool definitions read from a file, searched as the lane searches its own
    (`lane search --catalog`, the benches); its tools are definitions only and never run."""
    tools = {doc.name: Tool(doc.name, doc.description, dict(doc.parameters), _definition_only,
                            doc.source) for doc in docs}
    return Catalog(tools, method=method, embedder=embedder, examples=examples)


def _definition_only(arguments: dict[str, Any], ctx: ToolContext) -> str:
    raise ToolError("a tool read from a catalog file is a definition only; it cannot run")


def confident_in(index: ToolIndex, query: str, name: str) -> bool:
    """Whether `name` is a real match for the query rather than the least bad guess."""
    coverage = index.query_coverage(query, name)
    if index.method == "bm25":
        return coverage >= MIN_QUERY_COVERAGE_BM25
    return coverage >= MIN_QUERY_COVERAGE or index.cosine(query, name) >= MIN_COSINE


def _finished(future: "Future[ToolIndex]", timeout: float | None) -> bool:
    try:
        future.exception(timeout=timeout)
    except TimeoutError:
        return False
    return True


def build_catalog(registry: Registry, settings: Settings) -> tuple[dict[str, Tool], Catalog]:
    """(core tools to offer directly, the deferred catalog), both within the granted tools.
    The same objects come back while the registry's version and the grant are unchanged."""
    method = installed_method()
    examples = example_book(settings.examples_path)
    key = (registry.version, settings.tools_subset, settings.core_tools, method, examples.version)
    with _BUILT_LOCK:
        built = _BUILT.get(registry)
    if built is not None and built[0] == key:
        return dict(built[1]), built[2]
    granted = granted_tools(registry, settings)
    core, deferred = split_core(granted, settings)
    deferred = {n: t for n, t in deferred.items() if n not in RESERVED_NAMES}
    catalog = Catalog(deferred, method=method, examples=examples)
    with _BUILT_LOCK:
        _BUILT[registry] = (key, core, catalog)
    return dict(core), catalog


_BOOKS: dict[Path, ExampleBook] = {}


def example_book(path: Path) -> ExampleBook:
    """One book per file in a process: the shim's writer and every catalog share it. It takes
    up what another process wrote since (`lane examples` beside a running shim)."""
    with _BUILT_LOCK:
        book = _BOOKS.get(path.resolve())
        if book is None:
            book = _BOOKS[path.resolve()] = ExampleBook(path)
    book.refresh()
    return book


def warm_up(registry: Registry, settings: Settings) -> int:
    """Start indexing the catalog at start-up rather than at the first model call (embedding is
    about 2 s per 100 new tools on two cores). Returns the number of deferred tools."""
    _, catalog = build_catalog(registry, settings)
    if catalog:
        catalog.index.search("warm up", 1)
    return len(catalog)
