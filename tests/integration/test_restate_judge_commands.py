"""`lane restate` asks a real HTTP model to restate each query of a file, as the agent does, and
`lane search --restatements` ranks with what it wrote; `lane judge` and `--judgements` likewise."""

import json
import math

from stack.cli import main
from stack.toolsearch.restate import RESTATE_MAX_TOKENS
from tests.fakes.scripted_model import Reply, ScriptedModel, text

TOOLS = [{"type": "function", "function": {"name": name, "description": description,
                                            "parameters": {}}}
         for name, description in (
             ("grafana__get_current_oncall_users", "Get the users currently on-call."),
             ("slack__post_message", "Post a message to a channel."),
             ("github__list_issues", "List issues in a repository."))]
PAGER = "checkout is down, I need a human awake now"
RELEASE = "let everybody know v2 shipped"
LINES = {PAGER: "find the users currently on call", RELEASE: "post a message to a channel"}


def restated(body) -> Reply:
    return text(LINES[body["messages"][-1]["content"]])


def files(tmp_path, queries):
    catalog, query_file = tmp_path / "tools.json", tmp_path / "queries.jsonl"
    catalog.write_text(json.dumps(TOOLS))
    query_file.write_text("".join(json.dumps({"id": i, "query": q}) + "\n"
                                  for i, q in enumerate(queries)))
    return catalog, query_file


def test_restated_queries_are_written_once_and_searched_with(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LANE_HOME", str(tmp_path / "home"))
    catalog, queries = files(tmp_path, [PAGER, RELEASE, PAGER])
    out = tmp_path / "restated.json"
    search = ["search", "--catalog", str(catalog), "--method", "bm25", "--queries", str(queries),
              "--json", "--limit", "1"]
    assert main(search) == 0
    assert [json.loads(line)["ranked"] for line in capsys.readouterr().out.splitlines()] == [
        [], [], []]  # no word in common with any tool

    with ScriptedModel([], restatement=restated) as model:
        assert main(["restate", "--queries", str(queries), "--out", str(out),
                     "--llm-url", model.url]) == 0
        assert main(["restate", "--queries", str(queries), "--out", str(out),
                     "--llm-url", model.url]) == 0  # all restated: nothing asked again
    assert [body["messages"][-1]["content"] for body in model.restate_requests] == [PAGER, RELEASE]
    assert all(body["temperature"] == 0 and body["max_tokens"] == RESTATE_MAX_TOKENS
               for body in model.restate_requests)
    assert json.loads(out.read_text()) == {q: [line] for q, line in LINES.items()}
    assert "0 of 2 queries restated already; asking about 2" in capsys.readouterr().err

    assert main([*search, "--restatements", str(out)]) == 0
    ranked = [json.loads(line)["ranked"] for line in capsys.readouterr().out.splitlines()]
    assert ranked == [["grafana__get_current_oncall_users"], ["slack__post_message"],
                      ["grafana__get_current_oncall_users"]]


def test_an_unreachable_model_keeps_what_was_written_and_says_why(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LANE_HOME", str(tmp_path / "home"))
    _, queries = files(tmp_path, [PAGER, RELEASE])
    out = tmp_path / "restated.json"
    out.write_text(json.dumps({PAGER: ["find who is on call"]}))
    assert main(["restate", "--queries", str(queries), "--out", str(out),
                 "--llm-url", "http://127.0.0.1:9/v1", "--model", "m"]) == 2
    assert "lane restate: llm service at http://127.0.0.1:9/v1 failed" in capsys.readouterr().err
    assert json.loads(out.read_text()) == {PAGER: ["find who is on call"]}
    out.write_text("[1, 2]")
    assert main(["restate", "--queries", str(queries), "--out", str(out)]) == 2
    assert 'expected {"query": ["task line", ...]}' in capsys.readouterr().err


CHANNEL = "post a message to the release channel and list the open issues in the repository"


def yes_for_github(body) -> Reply:
    yes = "\nTool: list_issues (github):" in body["messages"][-1]["content"]
    odds = {"Yes": math.log(0.8), "No": math.log(0.2)}
    return Reply("Yes" if yes else "No", first_token_logprobs=odds if yes else {"No": 0.0})


def test_judged_queries_are_written_once_and_rank_their_hits(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LANE_HOME", str(tmp_path / "home"))
    catalog, queries = files(tmp_path, [CHANNEL, CHANNEL])
    out = tmp_path / "judged.json"
    search = ["search", "--catalog", str(catalog), "--method", "bm25", "--queries", str(queries),
              "--json", "--limit", "2"]
    assert main(search) == 0
    plain = json.loads(capsys.readouterr().out.splitlines()[0])["ranked"]
    assert plain == ["slack__post_message", "github__list_issues"]

    judge = ["judge", "--catalog", str(catalog), "--queries", str(queries), "--out", str(out)]
    with ScriptedModel([], judgement=yes_for_github) as model:
        assert main([*judge, "--llm-url", model.url]) == 0
        assert main([*judge, "--llm-url", model.url]) == 0  # all judged: nothing asked again
    asked = [body["messages"][-1]["content"].split("\nTool: ")[1].split(" ")[0] for body in model.judge_requests]
    assert len(asked) == len(set(asked)) and {"list_issues", "post_message"} <= set(asked)  # each hit once
    assert all(body["logprobs"] and body["max_tokens"] == 1 for body in model.judge_requests)
    written = json.loads(out.read_text())
    assert list(written) == [CHANNEL] and len(written[CHANNEL]) == len(asked)
    assert written[CHANNEL]["github__list_issues"] == 0.8 and written[CHANNEL]["slack__post_message"] == 0.0
    assert "0 of 1 queries judged already; asking about 1" in capsys.readouterr().err

    assert main([*search, "--judgements", str(out)]) == 0
    judged = json.loads(capsys.readouterr().out.splitlines()[0])["ranked"]
    assert judged == ["github__list_issues", "slack__post_message"]


def test_judge_asks_about_as_many_hits_as_it_is_told(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LANE_HOME", str(tmp_path / "home"))
    catalog, queries = files(tmp_path, [CHANNEL])
    out = tmp_path / "judged.json"
    judge = ["judge", "--catalog", str(catalog), "--queries", str(queries), "--out", str(out)]
    assert main([*judge, "--candidates", "0"]) == 2
    assert "--candidates must be at least 1" in capsys.readouterr().err and not out.exists()
    with ScriptedModel([], judgement=yes_for_github) as model:
        assert main([*judge, "--candidates", "1", "--llm-url", model.url]) == 0
    assert len(model.judge_requests) == 1 and len(json.loads(out.read_text())[CHANNEL]) == 1


def test_a_judgement_file_of_another_shape_is_refused_and_kept(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LANE_HOME", str(tmp_path / "home"))
    catalog, queries = files(tmp_path, [CHANNEL])
    out = tmp_path / "judged.json"
    out.write_text(json.dumps({CHANNEL: {"slack__post_message": 1.5}}))
    assert main(["judge", "--catalog", str(catalog), "--queries", str(queries), "--out", str(out)]) == 2
    assert "expected {\"query\": {\"tool\": probability from 0 to 1, ...}}" in capsys.readouterr().err
    assert json.loads(out.read_text()) == {CHANNEL: {"slack__post_message": 1.5}}
    search = ["search", "--catalog", str(catalog), "--queries", str(queries), "--judgements", str(out)]
    assert main(search) == 2
