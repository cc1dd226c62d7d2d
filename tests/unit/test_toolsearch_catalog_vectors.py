"""A catalog answers with BM25 while its tool vectors are built in the background."""

import logging
import threading

import numpy as np
import pytest

from stack.tools.base import Tool, object_schema
from stack.toolsearch import catalog as catalog_module
from stack.toolsearch.catalog import Catalog
from stack.toolsearch.tokens import tokens

# Words that share a meaning but no letters: BM25 cannot link "money" to "balance", vectors can.
CONCEPTS = {"money": 0, "balanc": 0, "fund": 0, "email": 1, "mail": 1, "messag": 1,
            "issu": 2, "bug": 2}
PARAPHRASE = "how much money do we have"


def never_run(arguments, ctx):
    raise AssertionError("catalog tests never run tools")


def tool(name, description):
    return Tool(name, description, object_schema({}), never_run, "test")


TOOLS = {t.name: t for t in [
    tool("retrieve_balance", "Retrieve the current account balance."),
    tool("send_email", "Send an email message to a recipient."),
    tool("create_issue", "Open an issue in a repository."),
]}


class ConceptEmbedder:
    """One dimension per concept of CONCEPTS, plus one for every other word."""

    name = "concepts"

    def __init__(self, gate: threading.Event | None = None, fail: bool = False):
        self.gate, self.fail, self.calls = gate, fail, 0

    def embed(self, texts):
        self.calls += 1
        if self.fail:
            raise RuntimeError("model file unreadable")
        if self.gate is not None and self.calls == 1:  # the catalog's build
            assert self.gate.wait(10)
        rows = np.zeros((len(texts), 4), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in tokens(text):
                rows[row, CONCEPTS.get(word, 3)] += 1.0
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)


def top(catalog, query):
    hits, _ = catalog.search(query, 3)
    return hits[0].name if hits else None


def test_bm25_answers_until_the_vectors_are_ready(monkeypatch):
    monkeypatch.setattr(catalog_module, "VECTOR_WAIT_S", 0.05)
    gate = threading.Event()
    catalog = Catalog(TOOLS, method="hybrid", embedder=ConceptEmbedder(gate))

    assert top(catalog, "send an email") == "send_email"
    assert catalog.index.method == "bm25"
    assert top(catalog, PARAPHRASE) != "retrieve_balance"
    assert not catalog.vectors_ready(timeout=0)

    gate.set()
    assert catalog.vectors_ready(timeout=10)
    assert catalog.index.method == "hybrid"
    assert top(catalog, PARAPHRASE) == "retrieve_balance"


def test_vectors_ready_at_once_are_used_by_the_first_search():
    catalog = Catalog(TOOLS, method="hybrid", embedder=ConceptEmbedder())
    assert top(catalog, PARAPHRASE) == "retrieve_balance"
    assert catalog.index.method == "hybrid"


def test_a_failing_embedder_leaves_bm25_serving(caplog):
    caplog.set_level(logging.WARNING, logger="lane.toolsearch")
    catalog = Catalog(TOOLS, method="hybrid", embedder=ConceptEmbedder(fail=True))
    assert top(catalog, "open an issue") == "create_issue"
    assert not catalog.vectors_ready(timeout=10)
    assert catalog.index.method == "bm25"
    assert "model file unreadable" in caplog.text


@pytest.mark.parametrize("tools", [TOOLS, {}])
def test_a_bm25_or_empty_catalog_builds_no_vectors(tools):
    embedder = ConceptEmbedder()
    catalog = Catalog(tools, method="bm25" if tools else "hybrid", embedder=embedder)
    assert catalog.index.method == "bm25"
    assert not catalog.vectors_ready(timeout=0)
    assert embedder.calls == 0
