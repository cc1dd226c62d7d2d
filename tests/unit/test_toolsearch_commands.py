"""`lane search`: single and batch queries over catalog files and over the configured lane."""

import argparse
import json

import pytest

from stack.tools.execute import run_tool
from stack.toolsearch import commands
from stack.toolsearch.catalog import catalog_of
from tests.fakes.tool_context import tool_context

OPENAI = [
    {"type": "function", "function": {"name": "get_accounts", "description": "Accounts.",
                                      "parameters": {"type": "object", "properties": {}}},
     "x-extra": 1},
    {"type": "function", "function": {"name": "get_accounts_list", "description": "Account list.",
                                      "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "send_email", "description": "Send an email.",
                                      "parameters": {"type": "object", "properties": {
                                          "to": {"type": "string"}}}}},
]
MCP = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [
    {"name": "read_file", "description": "Read a file.", "inputSchema": {"type": "object"}},
    {"name": "list_directory", "description": "List a directory.", "inputSchema": {}},
]}}


def lane_search(argv):
    parser = argparse.ArgumentParser()
    commands.register(parser.add_subparsers())
    args = parser.parse_args(["search", *argv])
    return args.func(args)


def test_single_query_over_an_openai_catalog(tmp_path, capsys):
    catalog = tmp_path / "tools.json"
    catalog.write_text(json.dumps(OPENAI))
    assert lane_search(["--catalog", str(catalog), "--limit", "2", "get accounts"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in lines] == ["get_accounts", "get_accounts_list"]


def test_batch_json_over_an_mcp_tools_list_result(tmp_path, capsys):
    catalog = tmp_path / "mcp.json"
    catalog.write_text(json.dumps(MCP))
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "q1", "query": "read a file"}\n\n{"id": 7, "query": "ls folder"}\n')
    assert lane_search(["--catalog", str(catalog), "--queries", str(queries), "--json"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [o["id"] for o in out] == ["q1", 7]
    assert out[0]["ranked"][0] == "read_file"
    assert len(out[0]["ranked"]) == len(out[0]["scores"])
    assert out[0]["scores"] == sorted(out[0]["scores"], reverse=True)


@pytest.mark.parametrize("content, message", [
    ("{not json", "not JSON"),
    ('{"tools": 3}', "expected a list"),
    ('[{"description": "no name"}]', "no name"),
])
def test_bad_catalogs_are_clear_errors(tmp_path, capsys, content, message):
    catalog = tmp_path / "bad.json"
    catalog.write_text(content)
    assert lane_search(["--catalog", str(catalog), "anything"]) == 2
    assert message in capsys.readouterr().err


def test_query_and_queries_are_exclusive_and_lines_must_be_queries(tmp_path, capsys):
    assert lane_search([]) == 2
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": 1}\n')
    catalog = tmp_path / "tools.json"
    catalog.write_text(json.dumps(OPENAI))
    assert lane_search(["--catalog", str(catalog), "--queries", str(queries)]) == 2
    assert "q.jsonl:1" in capsys.readouterr().err


def test_without_catalog_the_lanes_deferred_tools_are_searched(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LANE_HOME", str(tmp_path))
    monkeypatch.setenv("LANE_CONFIG", str(tmp_path / "none.yaml"))
    (tmp_path / "none.yaml").write_text("{}\n")
    monkeypatch.setenv("LANE_CORE_TOOLS", "memory")
    assert lane_search(["--json", "--limit", "10", "run a shell command in the terminal"]) == 0
    ranked = json.loads(capsys.readouterr().out)["ranked"]
    assert "terminal" in ranked and "memory" not in ranked


def test_a_catalog_file_is_searched_as_the_lane_searches_but_its_tools_never_run(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([{**OPENAI[2], "x-server": "mail"}]))
    catalog = catalog_of(commands.load_catalog_file(path), "bm25")
    hits, confident = catalog.search("send an email", 1)
    assert [h.name for h in hits] == ["send_email"] and confident
    assert catalog.sources == ["mail"]
    with tool_context(tmp_path) as ctx:
        outcome = run_tool(catalog.tools["send_email"], {"to": "a@b.c"}, ctx)
    assert (outcome.status, outcome.output) == (
        "error", "a tool read from a catalog file is a definition only; it cannot run")
