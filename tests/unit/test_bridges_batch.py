"""The bridge protocol peers converged on: several queries per tool_search, several names per
tool_describe, the single forms still working."""

import json

import pytest

from stack.config import Settings
from stack.store import Store
from stack.tools.base import Tool, ToolContext, object_schema
from stack.tools.registry import Registry
from stack.toolsearch.surface import assemble


def tool(name, description, source):
    return Tool(name, description, object_schema({"text": {"type": "string"}}, ["text"]),
                lambda arguments, ctx: "ok", source)


TOOLS = [tool("memory", "Save a note to memory.", "builtin"),
         tool("github__create_issue", "Create a new issue in a GitHub repository.", "github"),
         tool("slack__post_message", "Post a message to a Slack channel.", "slack"),
         tool("weather__forecast", "Weather forecast for a city.", "weather")]


@pytest.fixture
def run(tmp_path):
    settings = Settings(home=tmp_path, core_tools=("memory",))
    store = Store(settings.db_path)
    ctx = ToolContext(settings, store, store.create_session())
    toolset = assemble(Registry(TOOLS), settings)
    yield lambda name, arguments: toolset.dispatch(name, arguments, ctx)
    store.close()


def test_several_queries_answer_in_groups_in_order(run):
    outcome = run("tool_search", {"queries": ["open a github issue", "post to slack"],
                                  "limit": 1})
    lines = outcome.output.splitlines()
    assert outcome.status == "ok"
    assert lines[0] == "'open a github issue':" and lines[1].startswith("- github__create_issue(")
    assert lines[2] == "'post to slack':" and lines[3].startswith("- slack__post_message(")
    assert "Connected sources" not in outcome.output


def test_query_and_queries_combine_without_repeats(run):
    output = run("tool_search", {"query": "post to slack",
                                 "queries": ["post to slack", "weather in Oslo"]}).output
    assert output.count("'post to slack'") == 1 and "'weather in Oslo'" in output


def test_a_hopeless_query_among_several_lists_the_sources(run):
    output = run("tool_search", {"queries": ["post to slack", "qqzx vvkp"]}).output
    assert "'qqzx vvkp' (low confidence, closest):" in output
    assert "Connected sources: github, slack, weather." in output


def test_search_without_any_query_is_an_error(run):
    outcome = run("tool_search", {"queries": []})
    assert outcome.status == "error" and "query" in outcome.output


def test_several_names_describe_the_known_and_list_the_unknown(run):
    outcome = run("tool_describe", {"names": ["slack__post_message", "slack__post_mesage",
                                              "weather__forecast"]})
    answer = json.loads(outcome.output)
    assert [t["name"] for t in answer["tools"]] == ["slack__post_message", "weather__forecast"]
    assert answer["unknown"][0]["name"] == "slack__post_mesage"
    assert answer["unknown"][0]["closest"][0] == "slack__post_message"


def test_one_name_keeps_the_plain_answer_and_all_unknown_is_an_error(run):
    single = json.loads(run("tool_describe", {"name": "weather__forecast"}).output)
    assert single["name"] == "weather__forecast" and "parameters" in single
    outcome = run("tool_describe", {"names": ["nope", "nada"]})
    assert outcome.status == "error" and "'nope'" in outcome.output
