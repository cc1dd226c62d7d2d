"""Example requests: how the model is asked, how its answer is read, how they are kept and found."""

import json
import logging

import pytest

from stack.config import Settings
from stack.tools.base import Tool, object_schema
from stack.tools.registry import Registry
from stack.toolsearch import catalog as catalog_module
from stack.toolsearch.examples import (
    DIRECT,
    EXAMPLE_MAX_TOKENS,
    REQUESTS_PER_STYLE,
    SITUATION,
    STYLES,
    ExampleBook,
    definition_key,
    entry_key,
    parse_requests,
    request_messages,
)
from stack.toolsearch.retrieval import ToolDoc, ToolIndex

ONCALL = ToolDoc("grafana__get_current_oncall_users",
                 "Get the list of users currently on-call for a schedule.",
                 {"properties": {"schedule_id": {"type": "string"}}}, "grafana")
OTHERS = [
    ToolDoc("grafana__list_teams", "List the teams of the organisation.", {}, "grafana"),
    ToolDoc("slack__post_message", "Post a message to a channel.", {}, "slack"),
    ToolDoc("pager__send_page", "Send a page to a phone number.", {}, "pager"),
]
PAGER_REQUESTS = ("who is carrying the pager for backend tonight",
                  "which engineer answers alerts this week", "who do I wake up if prod breaks")
PAGER_SITUATIONS = ("the checkout page is down and I need someone awake",
                    "alerts are firing and I don't know whose week it is")


@pytest.mark.parametrize("style", STYLES, ids=lambda style: style.name)
def test_the_model_is_asked_about_one_tool_after_two_worked_answers(style):
    messages = request_messages(ONCALL, style)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant",
                                             "user"]
    assert messages[0]["content"] == style.instruction
    card = messages[-1]["content"]
    assert "grafana__get_current_oncall_users" in card and "schedule_id" in card
    assert "on-call" in card
    for answer in (messages[2]["content"], messages[4]["content"]):
        assert parse_requests(answer) and len(answer.splitlines()) == REQUESTS_PER_STYLE
    assert EXAMPLE_MAX_TOKENS <= 100  # three short lines; a drifting model is cut off


def test_the_styles_ask_differently_about_the_same_tools():
    assert len({style.name for style in STYLES}) == len(STYLES) == 2
    assert DIRECT.instruction != SITUATION.instruction
    assert [doc for doc, _ in DIRECT.shots] == [doc for doc, _ in SITUATION.shots]
    assert not {answer for _, answer in DIRECT.shots} & {answer for _, answer in SITUATION.shots}


def test_answers_are_read_line_by_line_without_preamble_marks_or_repeats():
    answer = ("Sure! Here are three requests a user might type:\n"
              "1. who is on call for payments right now\n"
              "- \"page whoever is on call tonight\"\n"
              "ok\n"
              "* who is on call for payments right now\n"
              "2) is Sam on call this weekend?\n"
              "4. one more request that is not needed")
    assert parse_requests(answer) == ("who is on call for payments right now",
                                      "page whoever is on call tonight",
                                      "is Sam on call this weekend?")
    assert parse_requests("") == ()
    assert parse_requests("x" * 300 + " a b c") == ()


def test_the_key_names_the_definition_not_the_examples():
    key = definition_key(ONCALL)
    assert definition_key(ToolDoc(ONCALL.name, ONCALL.description, ONCALL.parameters,
                                  ONCALL.source, ("anything",))) == key
    assert definition_key(ToolDoc(ONCALL.name, "Changed.", ONCALL.parameters)) != key
    assert definition_key(ToolDoc(ONCALL.name, ONCALL.description, {})) != key


def test_the_book_keeps_examples_by_definition_across_processes(tmp_path):
    path = tmp_path / "home" / "tool_examples.json"
    book = ExampleBook(path)
    docs = [ONCALL, *OTHERS]
    assert book.missing(docs) == [(doc, style) for style in STYLES for doc in docs]
    before = book.version
    book.add(ONCALL, DIRECT, PAGER_REQUESTS, "qwen")
    book.add(OTHERS[0], DIRECT, (), "qwen")  # nothing usable: not asked again either
    book.add(ONCALL, SITUATION, PAGER_SITUATIONS, "qwen")
    assert book.version == before + 3
    reread = ExampleBook(path)
    assert reread.requests_for(ONCALL, DIRECT) == PAGER_REQUESTS
    assert reread.requests_for(ONCALL, SITUATION) == PAGER_SITUATIONS
    assert reread.missing(docs) == [(OTHERS[1], DIRECT), (OTHERS[2], DIRECT),
                                    *((doc, SITUATION) for doc in OTHERS)]
    carried = reread.with_examples([ONCALL, OTHERS[1]])
    assert (carried[0].examples, carried[0].situations) == (PAGER_REQUESTS, PAGER_SITUATIONS)
    assert (carried[1].examples, carried[1].situations) == ((), ())
    changed = ToolDoc(ONCALL.name, "Get on-call users (v2).", ONCALL.parameters, ONCALL.source)
    assert reread.with_examples([changed]) == [changed]
    assert reread.missing([changed]) == [(changed, DIRECT), (changed, SITUATION)]
    stored = json.loads(path.read_text())
    # A book written before there were two styles holds direct requests under the bare key.
    assert entry_key(ONCALL, DIRECT) == definition_key(ONCALL)
    assert stored[definition_key(ONCALL)] == {"tool": ONCALL.name, "style": "direct",
                                              "model": "qwen", "requests": list(PAGER_REQUESTS)}
    assert stored[entry_key(ONCALL, SITUATION)]["requests"] == list(PAGER_SITUATIONS)


def test_two_processes_sharing_a_book_keep_each_others_examples(tmp_path):
    path = tmp_path / "tool_examples.json"
    shim, command = ExampleBook(path), ExampleBook(path)
    shim.add(ONCALL, DIRECT, PAGER_REQUESTS, "qwen-1.5b")
    command.add(OTHERS[0], DIRECT, ("show me every team we have",), "cloud")  # merges the shim's
    before = shim.version
    shim.refresh()
    assert shim.version == before + 1 and shim.requests_for(OTHERS[0], DIRECT)
    command.add(ONCALL, DIRECT, ("who is on call tonight",), "cloud")  # lane examples --again
    shim.add(OTHERS[1], DIRECT, ("post the release note to #general",), "qwen-1.5b")
    final = ExampleBook(path)
    assert final.requests_for(ONCALL, DIRECT) == ("who is on call tonight",)
    assert final.requests_for(OTHERS[0], DIRECT) and final.requests_for(OTHERS[1], DIRECT)
    unchanged = shim.version
    shim.refresh()  # its own write is no news
    assert shim.version == unchanged


def test_an_unreadable_book_starts_empty_and_is_written_again(tmp_path, caplog):
    path = tmp_path / "tool_examples.json"
    path.write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="lane.toolsearch"):
        book = ExampleBook(path)
    assert len(book) == 0 and "unreadable" in caplog.text
    book.add(ONCALL, DIRECT, PAGER_REQUESTS, "qwen")
    assert ExampleBook(path).requests_for(ONCALL, DIRECT) == PAGER_REQUESTS


def test_a_book_that_cannot_be_written_keeps_its_examples_in_memory(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    book = ExampleBook(blocker / "tool_examples.json")  # its folder cannot be created
    book.add(ONCALL, DIRECT, PAGER_REQUESTS, "qwen")
    assert book.requests_for(ONCALL, DIRECT) == PAGER_REQUESTS


def test_a_request_in_users_words_finds_the_tool_through_its_examples():
    query = "who is carrying the pager for the backend rotation"
    plain = ToolIndex([ONCALL, *OTHERS], method="bm25")
    assert [h.name for h in plain.search(query, 1)] == ["pager__send_page"]
    book = ExampleBook(None)
    book.add(ONCALL, DIRECT, PAGER_REQUESTS, "qwen")
    taught = ToolIndex(book.with_examples([ONCALL, *OTHERS]), method="bm25")
    assert [h.name for h in taught.search(query, 1)] == [ONCALL.name]


def test_the_lane_catalog_indexes_examples_as_soon_as_they_are_written(tmp_path):
    def tool(doc):
        return Tool(doc.name, doc.description, object_schema({}),
                    lambda arguments, ctx: "{}", doc.source)

    registry = Registry([tool(ToolDoc("memory", "Save a note."))],
                        providers=[lambda: [tool(d) for d in (ONCALL, *OTHERS)]])
    settings = Settings(home=tmp_path, core_tools=("memory",))
    _, before = catalog_module.build_catalog(registry, settings)
    assert all(doc.examples == () for doc in before.docs())
    query = "who do I wake up when prod breaks"
    row = before.index.names.index(ONCALL.name)
    assert before.index.lexical_scores(query)[row] == 0.0
    as_listed = {doc.name: doc for doc in before.docs()}[ONCALL.name]  # what the writer asks about
    catalog_module.example_book(settings.examples_path).add(as_listed, DIRECT, PAGER_REQUESTS,
                                                            "qwen")
    _, after = catalog_module.build_catalog(registry, settings)
    assert after is not before
    assert {d.name: d.examples for d in after.docs()}[ONCALL.name] == PAGER_REQUESTS
    assert after.index.lexical_scores(query)[row] > 0.0
    posted = {doc.name: doc for doc in after.docs()}["slack__post_message"]
    ExampleBook(settings.examples_path).add(posted, SITUATION, ("tell the team lunch is here",),
                                            "cloud")
    _, later = catalog_module.build_catalog(registry, settings)  # `lane examples` meanwhile
    assert later is not after
    assert {d.name: d.situations for d in later.docs()}["slack__post_message"] == (
        "tell the team lunch is here",)


class WordEmbedder:
    """One dimension per word: texts are alike exactly as far as they share words."""

    name = "words"

    def __init__(self):
        self.words: dict[str, int] = {}

    def embed(self, texts):
        import numpy as np

        rows = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().replace("?", "").split():
                rows[row, self.words.setdefault(word, len(self.words) % 64)] += 1.0
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)


def test_examples_rank_a_tool_but_only_its_own_words_vouch_for_it():
    from stack.toolsearch.catalog import confident_in

    query = "who do I wake up when prod breaks"
    book = ExampleBook(None)
    book.add(ONCALL, DIRECT, PAGER_REQUESTS, "qwen")
    for method in ("bm25", "hybrid"):
        index = ToolIndex(book.with_examples([ONCALL, *OTHERS]), method=method,
                          embedder=WordEmbedder())
        assert [h.name for h in index.search(query, 1)] == [ONCALL.name], method
        assert index.query_coverage(query, ONCALL.name) == 0.0
        assert not confident_in(index, query, ONCALL.name), method
    hybrid = ToolIndex(book.with_examples([ONCALL]), method="hybrid", embedder=WordEmbedder())
    plain = ToolIndex([ONCALL], method="hybrid", embedder=WordEmbedder())
    own_words = "get the list of users currently on-call"
    assert hybrid.cosine(own_words, ONCALL.name) == pytest.approx(plain.cosine(own_words, ONCALL.name))
    assert hybrid.cosine(query, ONCALL.name) == pytest.approx(plain.cosine(query, ONCALL.name))


def test_situations_rank_a_tool_by_meaning_but_never_as_words():
    query = "checkout page is down need someone awake"
    book = ExampleBook(None)
    book.add(ONCALL, SITUATION, PAGER_SITUATIONS, "qwen")
    docs = book.with_examples([ONCALL, *OTHERS])
    hybrid = ToolIndex(docs, method="hybrid", embedder=WordEmbedder())
    assert [h.name for h in hybrid.search(query, 1)] == [ONCALL.name]
    lexical = ToolIndex(docs, method="bm25")
    assert lexical.lexical_scores(query)[lexical.names.index(ONCALL.name)] == 0.0
    plain = ToolIndex([ONCALL], method="hybrid", embedder=WordEmbedder())
    assert hybrid.cosine(query, ONCALL.name) == pytest.approx(plain.cosine(query, ONCALL.name))
