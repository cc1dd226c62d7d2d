"""Ranking tools for a natural-language query: BM25, optional embeddings, and their fusion.

BM25 (bm25s) sees each tool as one bag of words in which the name counts three times, then the
source (server) and parameter names once and the description once: names are short and precise,
descriptions long and chatty. On top of plain BM25:

* name coverage: the share of a tool's name words that the query contains, so `get_accounts`
  beats `get_accounts_list` for "get accounts" (BM25's length normalisation alone can't see that
  the longer name has a word the user never asked for);
* an exact name in the query ("call github__create_issue", or just "kv_put") wins outright;
* query words are read generously: weaker synonyms (tokens.py), misspellings corrected against
  the catalog's own words (spelling.py), common foreign task words in English (glossary.py);
* a request with several tasks ("find the page and comment on it") is also scored per task.

Paraphrases with no word in common with the tool need meaning, not words: `method="embed"`
ranks by cosine similarity of sentence embeddings and `method="hybrid"` fuses both. Without an
embedder installed the hybrid is plain BM25 (and says so once in the log). A tool's own vector
reads its name and the opening of its description.

A tool may also carry example requests (examples.py): what a user would write when they need it,
in a user's words rather than its author's. Both halves rank with them (BM25 as words of the
tool, the embedder as one more vector each); how much of a query a tool covers, and its cosine for
the confidence rule, still come from the tool's own text.

"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal, Mapping, Sequence

import bm25s
import numpy as np

from ..text_bounds import bounded
from .embedding import Embedder
from .embedding import default_embedder as _default_embedder
from .glossary import english, english_gloss
from .spelling import Speller, trigrams
from .tokens import STOPWORDS, clauses, expansions, split_words, stem, tokens

log = logging.getLogger("lane.toolsearch")
# bm25s sets its own logger to DEBUG and would log every index build (one per model call).
logging.getLogger("bm25s").setLevel(logging.WARNING)

Method = Literal["bm25", "embed", "hybrid"]

NAME_REPEAT = 3
EXPANSION_WEIGHT = 0.35
COVERAGE_WEIGHT = 0.35
EXACT_NAME_BONUS = 2.0
# Weight of the lexical evidence (0..1, from the tool's lexical rank) next to the cosine
# similarity (about 0.2-0.8 for related texts) in the hybrid; tuned on scripts/bench/data.
LEXICAL_WEIGHT = 0.2
# The lexical share halves by rank LEXICAL_RANK_HALF + 1: the fusion reads BM25 by rank, not by
# score, because how far BM25's best lies above the rest depends on the query's rare words more
# than on how well the tools fit (one rare word makes a single tool tower over near-equals).
LEXICAL_RANK_HALF = 10
# The hits a model reads first (tool_search's default limit): a request of several tasks shows each
# task's best tool among them.
TASK_PAGE = 5
_IDENTIFIER = re.compile(r"[A-Za-z0-9][\w.\-]*")
_CODE_LIKE = re.compile(r"[_\-]|[a-z][A-Z]")
# "acme/api", "src/utils", "https://x.com/docs", "config.json", "example.com": values the tool will
# receive, not words for what it does ("kubernetes/kubernetes" is a GitHub repository, not a
# Kubernetes task; "read config.json" is a file read, not a configuration tool).
_VALUE = re.compile(r"\S*\w/\w\S*|\b[\w-]+(?:\.[A-Za-z]\w{0,4})+\b")
# Values whose kind says what the task needs: "go to example.com/pricing" asks for a web page (not
# Stripe's prices), "mail bob@example.com" for an email address, "read config.json" for a file,
# "book 2 hours against PROJ-88" for an issue (Jira's and Linear's keys), "post in #releases" for a
# channel. Both halves read the kind instead of the value (first match wins, in this order). No
# ".js": "Node.js" and "Vue.js" are what a request asks about, not files it names.
_DOMAIN = r"[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|io|dev|app|ai|co|de|fr|uk|edu|gov)\b"
_VALUE_KINDS = (
    (re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"), "the email address"),
    (re.compile(rf"\bhttps?://\S+|\b{_DOMAIN}/\S*", re.IGNORECASE), "the web page"),
    (re.compile(rf"\b{_DOMAIN}", re.IGNORECASE), "the website"),
    (re.compile(r"[\w./-]*\w\.(?:json|txt|md|py|csv|ya?ml|html?|log|pdf|png|jpe?g|toml|ini|"
                r"sh|sql|xml|docx?|xlsx?|bak)\b", re.IGNORECASE), "the file"),
    (re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d+\b"), "the issue"),
    (re.compile(r"(?<![\w#])#[A-Za-z][\w-]*"), "the channel"),
)
# Description words a tool's vector reads after its name words. A tool has one vector, its name
# and the description's opening: 15 words read as well as 60 words plus a vector for the first
# sentence (hybrid R@5 within a point on the tuning set, with and without example requests) at
# two fifths of a first build's model work (1,000 tools: 23k WordPiece tokens instead of 58k).
EMBED_WORDS = 15
# Paging and formatting knobs that half of all tools take: they say nothing about what a tool does.
GENERIC_PARAMETERS = frozenset({"page", "per_page", "perpage", "limit", "offset", "cursor",
                                "page_size", "pagesize", "after", "before", "format"})


@dataclass(frozen=True)
class ToolDoc:
    """What retrieval needs to know of a tool: its name, words and parameters."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""
    # Requests users write for the tool (examples.py): direct ones rank it as words and vectors;
    # situations, which by design share no word with it, as vectors only (as words their made-up
    # details matched other tools: BM25 alone lost 2 points on the third set).
    examples: tuple[str, ...] = ()
    situations: tuple[str, ...] = ()

    @classmethod
    def from_definition(cls, item: Mapping[str, Any]) -> "ToolDoc":
        """An OpenAI tool (`{"type":"function","function":{...}}`), a bare function object or an
        MCP `tools/list` item (`{"name","description","inputSchema"}`); other keys are ignored."""
        if not isinstance(item, Mapping):
            raise ValueError(f"a tool definition must be an object, got {type(item).__name__}")
        inner = item.get("function")
        function: Mapping[str, Any] = inner if isinstance(inner, Mapping) else item
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("a tool definition has no name")
        params = function.get("parameters", function.get("inputSchema")) or {}
        source = item.get("x-server") or item.get("server") or ""
        return cls(name, str(function.get("description") or ""),
                   params if isinstance(params, Mapping) else {}, str(source))

    @property
    def parameter_names(self) -> list[str]:
        props = self.parameters.get("properties")
        return list(props) if isinstance(props, Mapping) else []

    def embedding_text(self) -> str:
        """The text an embedder sees: readable name words, then the description's opening."""
        words = " ".join(split_words(self.name))
        first = " ".join(self.description.split()[:EMBED_WORDS])
        return f"{words}: {first}" if first else words


@dataclass(frozen=True)
class Hit:
    name: str
    score: float


def name_terms(name: str, source: str = "") -> list[str]:
    """Name words without the server prefix ("github__create_issue" -> create, issue)."""
    own = name.split("__", 1)[1] if "__" in name else name
    terms = tokens(own)
    prefix = set(tokens(source))
    return [t for t in terms if t not in prefix] or terms


@functools.lru_cache(maxsize=8192)
def _analysed(name: str, description: str, source: str, parameters: tuple[str, ...]
              ) -> tuple[tuple[str, ...], frozenset[str], tuple[str, ...]]:
    """(BM25 terms, name terms, words as written) of one tool. Remembered by content: the
    catalog is rebuilt for every model call, its tools rarely change between two calls."""
    kept = " ".join(p for p in parameters if p.lower() not in GENERIC_PARAMETERS)
    text = f"{name} {source} {kept} {description}"
    terms = tokens(name) * NAME_REPEAT + tokens(f"{source} {kept} {description}")
    words = tuple(w for w in split_words(text) if w not in STOPWORDS)
    return tuple(terms), frozenset(name_terms(name, source)), words


class ToolIndex:
    """A searchable snapshot of a list of tools. Cheap to build (about 30 ms per 1,000 tools once
    their texts were seen), so callers rebuild it whenever the tool list may have changed."""

    def __init__(self, docs: Sequence[ToolDoc], *, method: Method = "bm25",
                 embedder: Embedder | None = None):
        if method not in ("bm25", "embed", "hybrid"):
            raise ValueError(f"unknown retrieval method {method!r}")
        self.docs = list(docs)
        self.names = [d.name for d in self.docs]
        self._by_name = {d.name.lower(): i for i, d in enumerate(self.docs)}
        self._by_own_name: dict[str, list[int]] = {}
        for i, d in enumerate(self.docs):
            if "__" in d.name:
                self._by_own_name.setdefault(d.name.split("__", 1)[1].lower(), []).append(i)
        self._analysed = [_analysed(d.name, d.description, d.source, tuple(d.parameter_names))
                          for d in self.docs]
        # Example requests count as words of the tool for ranking; the tool's own words alone
        # decide how much of a query it covers (confidence: examples rank, they cannot vouch).
        corpus = [[*terms, *_example_terms(d.examples)] for d, (terms, _, _) in
                  zip(self.docs, self._analysed, strict=True)]
        self._bm25 = bm25s.BM25()
        if self.docs:
            self._bm25.index([terms or ["_"] for terms in corpus], show_progress=False)
        self._name_postings, self._name_length = _name_index([n for _, n, _ in self._analysed])
        self._term_sets = [frozenset(terms) for terms, _, _ in self._analysed]
        self._vocabulary = frozenset(t for terms in corpus for t in terms)
        self._speller: Speller | None = None
        self.embedder = embedder
        if method != "bm25" and embedder is None:
            embedder = _default_embedder()
            self.embedder = embedder
        if method != "bm25" and embedder is None:
            log.info("no embedder installed: %s retrieval falls back to BM25", method)
            method = "bm25"
        self.method: Method = method
        # One column per text (numpy's own einsum loop reads a query against columns about a third
        # faster than against rows). Each tool's vectors are one run of columns, its own text
        # first: _starts[i] is tool i's own column, and its example and situation columns follow
        # up to the next tool's.
        self._vectors: np.ndarray | None = None
        self._starts = np.zeros(0, dtype=np.int64)
        if embedder is not None and method != "bm25" and self.docs:
            groups = [[d.embedding_text(), *d.examples, *d.situations] for d in self.docs]
            self._starts = np.cumsum([0, *map(len, groups[:-1])])
            rows = embedder.embed([text for group in groups for text in group])
            self._vectors = np.ascontiguousarray(rows.T)

    @classmethod
    def from_openai(cls, tools: Iterable[Mapping[str, Any]], method: Method = "bm25",
                    embedder: Embedder | None = None) -> "ToolIndex":
        return cls([ToolDoc.from_definition(t) for t in tools], method=method, embedder=embedder)

    def __len__(self) -> int:
        return len(self.docs)

    def search(self, query: str, limit: int = 5) -> list[Hit]:
        """The best `limit` tools for the query, best first; only tools with some evidence."""
        if not self.docs or limit <= 0:
            return []
        scores, bests = self._task_scores(bounded(query))
        order = np.argsort(-scores, kind="stable")
        if bests:
            order = _each_task_shown(order, bests)
        return [Hit(self.names[i], float(scores[i])) for i in order[:limit] if scores[i] > 0]

    def _task_scores(self, text: str) -> tuple[np.ndarray, list[int]]:
        """Each tool's score for the text, and the best tool of each of its tasks. A request with
        several tasks is also scored task by task, and each tool keeps its best score, so the tool
        for the second task is not crowded out by neighbours of the first."""
        tasks = clauses(text)
        per_text = self._scores(text, tasks)
        bests = [int(np.argmax(s)) for s in per_text[1:] if s.max() > 0]
        return np.maximum.reduce(per_text), bests

    def _scores(self, query: str, tasks: list[str]) -> list[np.ndarray]:
        texts = [query, *tasks]
        if self.method == "bm25":
            return [self.lexical_scores(text) for text in texts]
        semantic = self._semantic(query, tasks)
        if self.method == "embed":
            return semantic
        return [self._fused(text, cosine) for text, cosine in zip(texts, semantic, strict=True)]

    def query_terms(self, query: str) -> list[str]:
        """The query's task words (values such as paths, slugs and file names left out), a
        misspelt word read as the catalog word it was meant to be."""
        terms: list[str] = []
        for word in task_words(query):  # bounded there
            if word in STOPWORDS:
                continue
            # A foreign task word adds its English reading (what the catalog says) and stays
            # itself where the catalog has it too: it may be English ("knowledge base").
            meaning = english(word)
            terms.extend(stem(m) for m in meaning)
            term = stem(word)
            if meaning and term not in self._vocabulary:
                continue
            if term not in self._vocabulary:
                if self._speller is None:
                    self._speller = Speller(w for _, _, words in self._analysed for w in words)
                term = stem(self._speller.correct(word) or word)
            terms.append(term)
        return terms

    def query_coverage(self, query: str, name: str) -> float:
        """The share of the query's terms (or their synonyms) found in the named tool's text."""
        terms = self.query_terms(query)
        i = self._by_name.get(name.lower())
        if not terms or i is None:
            return 0.0
        doc = self._term_sets[i]
        found = sum(1 for t in terms if t in doc or any(s in doc for s in expansions([t])))
        return found / len(terms)

    def cosine(self, query: str, name: str) -> float:
        """The semantic score of the named tool for the query, as the ranking computes it but
        from the tool's own text only: its example requests rank it, they cannot vouch for it."""
        i = self._by_name.get(name.lower())
        if self.embedder is None or self._vectors is None or i is None:
            return 0.0
        query = bounded(query)
        vector = self._query_vectors(query, clauses(query))[0]
        return max(float(vector @ self._vectors[:, self._starts[i]]), 0.0)

    def closest(self, query: str, limit: int) -> list[str]:
        """Tool names ranked by shared character trigrams with the query: a last resort that
        still points somewhere when no word matches."""
        grams = trigrams(bounded(query).lower())
        scored = sorted(((len(grams & trigrams(n.lower())), n) for n in self.names),
                        key=lambda pair: -pair[0])
        return [name for _, name in scored[:limit]]

    def lexical_scores(self, query: str) -> np.ndarray:
        """BM25 on the query's words (plus weaker synonyms), normalised to the best document,
        plus name coverage and the exact-name bonus."""
        query = bounded(query)
        terms = self.query_terms(query)
        scores = self._bm25.get_scores(terms).astype(np.float64) if terms else np.zeros(len(self))
        extra = expansions(terms)
        if extra:
            scores += EXPANSION_WEIGHT * self._bm25.get_scores(extra)
        top = scores.max(initial=0.0)
        if top > 0:
            scores /= top
        scores += COVERAGE_WEIGHT * self._coverage(terms) * (scores > 0)
        for word in _IDENTIFIER.findall(query):
            exact = self._by_name.get(word.lower())
            if exact is not None:
                scores[exact] += EXACT_NAME_BONUS
            elif _CODE_LIKE.search(word):  # "kv_put" names cloudflare__kv_put
                scores[self._by_own_name.get(word.lower(), [])] += EXACT_NAME_BONUS
        return scores

    def _semantic(self, query: str, tasks: list[str]) -> list[np.ndarray]:
        """For the query and then each of its tasks, each tool's mean of its own text's cosine and
        its best vector's cosine: the best vector (an example request) lifts a tool, its own text
        keeps one lucky example from outranking a tool that fits throughout."""
        assert self._vectors is not None
        vectors = self._query_vectors(query, tasks)
        # einsum runs numpy's own loop on this thread; a BLAS product of this size (several
        # thousand rows) is split over threads that, next to the embedder on two busy cores, spin
        # for milliseconds.
        cosines = np.clip(np.einsum("qd,dv->qv", vectors, self._vectors), 0.0, None)
        best = np.maximum.reduceat(cosines, self._starts, axis=1)
        return list(0.5 * cosines[:, self._starts] + 0.5 * best)

    def _query_vectors(self, query: str, tasks: list[str]) -> np.ndarray:
        """The query's vector, then one per task. A request of several tasks is read as the mean
        of its tasks' vectors instead of in a model pass of its own: the pass is two thirds of a
        search, and reading the request whole ranked no better (hybrid R@5 within two queries on
        each of the three query sets). The embedder remembers each task's vector, so the confidence check
        after a search runs no pass."""
        assert self.embedder is not None
        if not tasks:
            return self.embedder.embed([_embedder_text(query)])
        each = self.embedder.embed([_embedder_text(task) for task in tasks])
        whole = each.mean(axis=0)
        return np.vstack([whole / max(float(np.linalg.norm(whole)), 1e-12), each])

    def _fused(self, query: str, cosine: np.ndarray) -> np.ndarray:
        """Cosine similarity plus a share of the lexical rank: the embedder orders paraphrases,
        the words break its near-ties, and an exact name stays on top."""
        lexical = self.lexical_scores(query)
        exact = lexical >= EXACT_NAME_BONUS
        lexical -= exact * EXACT_NAME_BONUS
        return cosine + exact * EXACT_NAME_BONUS + LEXICAL_WEIGHT * _rank_share(lexical)

    def _coverage(self, terms: list[str]) -> np.ndarray:
        counts = np.zeros(len(self), dtype=np.float64)
        for term in set(terms):
            postings = self._name_postings.get(term)
            if postings is not None:
                counts[postings] += 1.0
        return counts / self._name_length


def _each_task_shown(order: np.ndarray, bests: list[int]) -> np.ndarray:
    """`order` with each task's best tool among the first TASK_PAGE when it ranks within the
    first 2 x TASK_PAGE. Ranked by their best score over the request and its tasks, one task's
    close neighbours can fill the page ("find the sentry issues with the most errors and file a
    Linear issue": five sentry tools, Linear's sixth). A task whose best ranks lower is left where
    it is: that is mostly a clause of chatter ("so I've been going back and forth"), not a task."""
    near = {int(i): rank for rank, i in enumerate(order[:2 * TASK_PAGE])}
    # The best hit over the whole request stays first, however many tasks it has.
    lifted = list(dict.fromkeys([int(order[0]), *(i for i in bests if i in near)]))[:TASK_PAGE]
    others = [i for i in near if i not in lifted][:TASK_PAGE - len(lifted)]
    page = np.array(sorted(lifted + others, key=near.__getitem__), dtype=order.dtype)
    return np.concatenate([page, order[~np.isin(order, page)]])


def _rank_share(scores: np.ndarray) -> np.ndarray:
    """1 for the best lexical score, halving by rank LEXICAL_RANK_HALF + 1, 0 without any
    evidence; equal scores share a rank."""
    descending = np.sort(scores)[::-1]
    ranks = np.searchsorted(-descending, -scores, side="left")
    return (LEXICAL_RANK_HALF / (LEXICAL_RANK_HALF + ranks)) * (scores > 0)


@functools.lru_cache(maxsize=8192)
def _example_terms(examples: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(tokens(" ".join(examples)))


def _name_index(names: list[frozenset[str]]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Which tools have each name word, and how many name words each tool has."""
    postings: dict[str, list[int]] = {}
    lengths = np.ones(len(names), dtype=np.float64)
    for i, unique in enumerate(names):
        lengths[i] = max(len(unique), 1)
        for term in unique:
            postings.setdefault(term, []).append(i)
    return {t: np.array(ids, dtype=np.int64) for t, ids in postings.items()}, lengths


def task_words(text: str) -> list[str]:
    """The words of a request with its values read as their kinds and other values (paths,
    slugs) left out: "star kubernetes/kubernetes" is a star for a repository, not Kubernetes."""
    return split_words(_VALUE.sub(" ", _kinds_of_values(bounded(text))))


def _kinds_of_values(text: str) -> str:
    """`text` with its URLs, addresses, file names, issue keys and channels read as their kind:
    "screenshot example.com/pricing" -> "screenshot the web page"."""
    for pattern, kind in _VALUE_KINDS:
        text = pattern.sub(kind, text)
    return text


def _embedder_text(query: str) -> str:
    """What the English embedder reads of a query: its values as their kinds, followed by the
    English reading of its foreign task words: "crea una rama" -> "crea una rama (create branch)"."""
    text = _kinds_of_values(bounded(query))
    gloss = english_gloss(split_words(text))
    return f"{text} ({' '.join(gloss)})" if gloss else text
