"""The hand-kept word lists, tested as data: they may only add readings, never take a task word
away or rewrite an English one, and no word may mean two things."""

import tomllib
from fnmatch import fnmatch
from pathlib import Path

from stack.toolsearch import wordlists
from stack.toolsearch.glossary import GLOSSARY, english
from stack.toolsearch.retrieval import ToolDoc, ToolIndex
from stack.toolsearch.tokens import _SYNONYM_GROUPS, STOPWORDS, split_words, stem, tokens

TASK_WORDS = {"done", "close", "open", "start", "stop", "move", "set", "show", "find", "call"}


def test_no_word_is_in_two_synonym_groups():
    seen: dict[str, str] = {}
    for group in _SYNONYM_GROUPS:
        for word in {stem(w) for w in group.split()}:
            assert word not in seen, f"{word!r} in {seen[word]!r} and {group!r}"
            seen[word] = group


def test_no_stopword_is_a_task_word():
    synonyms = {w for group in _SYNONYM_GROUPS for w in group.split()}
    assert not STOPWORDS & (synonyms | TASK_WORDS)
    assert tokens("mark the task as done") == ["mark", "task", "done"]


def test_every_synonym_is_one_token():
    for group in _SYNONYM_GROUPS:
        for word in group.split():
            assert split_words(word) == [word], word


def test_on_call_is_one_word_as_in_tool_names():
    assert split_words("who is on-call?") == split_words("who is on call?") == ["who", "is", "oncall"]
    assert "oncall" in split_words("get_current_oncall_users")


def test_the_glossary_adds_and_never_rewrites_a_word_the_catalog_has():
    index = ToolIndex([ToolDoc("kb__query_knowledge_base", "Query a knowledge base."),
                       ToolDoc("db__create_database", "Create a database."),
                       ToolDoc("slack__list_channels", "List Slack channels.")])
    assert index.query_terms("query the knowledge base") == ["query", "knowledg", "databas",
                                                             "base"]
    assert index.search("query the knowledge base", 1)[0].name == "kb__query_knowledge_base"
    assert "channel" in index.query_terms("muestra los canales")  # a foreign word still reads


def test_shorthand_reads_as_what_it_stands_for_beside_every_other_reading():
    index = ToolIndex([ToolDoc("kubernetes__events_list", "List the events of the cluster, newest first."),
                       ToolDoc("sentry__events_list", "List events.")])
    assert index.search("k8s events", 1)[0].name == "kubernetes__events_list"
    assert english("k8s") == ("kubernetes",) and english("gh") == ("github",)
    # one English word read from shorthand and from foreign words keeps both
    assert english("msg") == english("nachrichten") == english("mensaje") == ("message",)


def test_glossary_words_are_not_english_words_for_something_else():
    # Wrong readings found once: German "andere" is "other", not "change".
    assert "andere" not in GLOSSARY
    for word, meanings in GLOSSARY.items():
        assert word == word.lower() and word.isalnum(), word
        assert meanings and all(m == m.lower() for m in meanings), word


def test_spelling_corrects_typos_but_not_real_words_the_catalog_lacks():
    from stack.toolsearch.spelling import Speller

    speller = Speller(["list", "stack", "pods", "screenshot"])
    assert speller.correct("lsit") == "list"
    assert speller.correct("scrennshot") == "screenshot"
    assert speller.correct("stuck") is None  # a word, not a typo of "stack"


def test_inflected_real_words_are_not_typos_of_catalog_words():
    from stack.toolsearch.spelling import Speller, is_real

    speller = Speller(["replaces", "fails", "logging", "page", "access", "calendar"])
    for word in ("replicas", "mails", "hogging", "pager", "queries", "boxes"):
        assert is_real(word), word
        assert speller.correct(word) is None, word
    assert not is_real("acess") and speller.correct("acess") == "access"
    assert speller.correct("calender") == "calendar"


def test_the_lists_are_data_files_the_package_ships():
    shipped = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    patterns = shipped["tool"]["setuptools"]["package-data"]["stack.toolsearch"]
    for name in ("stopwords.txt", "synonyms.txt", "glossary.txt"):
        assert wordlists.entries(name), name
        assert any(fnmatch(f"data/{name}", pattern) for pattern in patterns), name
    # an indented line goes on with the entry above it; a comment is no word
    assert english("novo") == ("create",) and "#" not in " ".join(GLOSSARY)
