"""The retrieval benchmark corpus stays consistent: a broken gold name or a tool without a recorded
source would silently skew every number `scripts/bench/retrieval.py` prints."""
import json
import re
from pathlib import Path

import pytest

from tests.bench_scripts import bench_script

DATA = Path(__file__).resolve().parents[2] / "scripts" / "bench" / "data"
CATEGORIES = {"lexical", "semantic", "ambiguous", "multi-tool", "negative"}
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@pytest.fixture(scope="module")
def bench():
    with bench_script("retrieval") as module:
        yield module


@pytest.fixture(scope="module")
def catalog() -> list[dict]:
    return json.loads((DATA / "catalog.json").read_text(encoding="utf-8"))


QUERY_SETS = ("queries.jsonl", "queries_heldout.jsonl", "queries_third.jsonl", "queries_fourth.jsonl",
              "queries_fifth.jsonl", "queries_sixth.jsonl", "queries_seventh.jsonl")


@pytest.fixture(scope="module", params=QUERY_SETS)
def queries(request) -> list[dict]:
    """Each query set in turn: the tuning set, the held-out and third sets, and the blind ones."""
    lines = (DATA / request.param).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_catalog_is_several_hundred_openai_tools(catalog):
    assert len(catalog) >= 400
    for tool in catalog:
        assert tool["type"] == "function"
        fn = tool["function"]
        assert NAME.match(fn["name"]), fn["name"]
        assert isinstance(fn["description"], str)
        assert fn["parameters"].get("type") == "object", fn["name"]


def test_catalog_names_are_unique_and_server_prefixed(catalog):
    names = [t["function"]["name"] for t in catalog]
    assert len(names) == len(set(names))
    for tool in catalog:
        assert tool["function"]["name"].startswith(tool["x-server"] + "__")


def test_every_tool_records_its_source(catalog):
    for tool in catalog:
        assert tool.get("x-source", "").strip(), tool["function"]["name"]
        assert tool.get("x-package", "").strip(), tool["function"]["name"]


def test_catalog_covers_many_servers(catalog):
    assert len({t["x-server"] for t in catalog}) >= 20


def test_queries_are_enough_and_well_formed(queries):
    assert len(queries) >= 100
    ids = [q["id"] for q in queries]
    assert len(ids) == len(set(ids))
    for q in queries:
        assert q["category"] in CATEGORIES, q["id"]
        assert q["query"].strip(), q["id"]
        assert isinstance(q["gold"], list), q["id"]


def test_every_category_is_represented(queries):
    counts = {c: sum(q["category"] == c for q in queries) for c in CATEGORIES}
    assert all(n >= 15 for n in counts.values()), counts


def test_gold_names_exist_in_catalog(catalog, queries):
    names = {t["function"]["name"] for t in catalog}
    missing = [(q["id"], g) for q in queries for g in q["gold"] if g not in names]
    assert not missing


def test_gold_shape_matches_category(queries):
    for q in queries:
        if q["category"] == "negative":
            assert q["gold"] == [], q["id"]
        elif q["category"] == "multi-tool":
            assert len(q["gold"]) >= 2, q["id"]
        elif q["category"] == "ambiguous":
            assert len(q["gold"]) >= 2, q["id"]
        else:
            assert len(q["gold"]) >= 1, q["id"]
        assert len(q["gold"]) == len(set(q["gold"])), q["id"]


def test_retrieval_bench_scores_every_category_with_bm25(bench, capsys):
    """The bench runs end to end on the committed corpus and keeps negatives out of recall."""
    assert bench.main(["--methods", "bm25", "--no-latency", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result["sets"]) == {name.split(".")[0] for name in QUERY_SETS}
    for one in result["sets"].values():
        bm25 = one["methods"]["bm25"]
        assert set(bm25["categories"]) == CATEGORIES - {"negative"}
        assert bm25["overall"]["n"] == one["answerable"] == one["queries"] - one["negatives"]
        for row in [*bm25["categories"].values(), bm25["overall"]]:
            assert 0.0 <= row["R@1"] <= row["R@3"] <= row["R@5"] <= 1.0
        assert bm25["negative"]["n"] == one["negatives"] > 0


def test_padding_reaches_size_with_unique_renamed_servers(bench):
    tools = [{"type": "function", "x-server": "slack",
              "function": {"name": f"slack__t{i}", "description": "", "parameters": {}}}
             for i in range(3)]
    grown = bench.padded(tools, 8)
    names = [t["function"]["name"] for t in grown]
    assert len(names) == 8 == len(set(names))
    assert "slack_2__t0" in names and "slack_3__t1" in names


def test_the_example_book_covers_every_catalog_tool_as_the_lane_reads_it(catalog):
    """A tool edited in catalog.json without new examples would silently lose them (the book is
    keyed by the definition's hash)."""
    from stack.toolsearch.examples import (
        REQUESTS_PER_STYLE,
        STYLES,
        ExampleBook,
        entry_key,
        parse_requests,
    )
    from stack.toolsearch.retrieval import ToolDoc

    book = ExampleBook(DATA / "examples.json")
    entries = json.loads((DATA / "examples.json").read_text())
    docs = [ToolDoc.from_definition(tool) for tool in catalog]
    assert book.missing(docs) == [] and len(book) == len(docs) * len(STYLES)
    for doc in docs:
        for style in STYLES:
            entry = entries[entry_key(doc, style)]
            assert (entry["tool"], entry["style"]) == (doc.name, style.name)
            requests = tuple(entry["requests"])
            assert len(requests) <= REQUESTS_PER_STYLE
            assert parse_requests("\n".join(requests)) == requests, doc.name  # as the lane reads them


def test_client_toolsets_name_real_tools_of_their_toolset(catalog):
    """The held-out requests of scripts/bench/client_toolsets.py: each toolset 35-47 real tools,
    every expected tool in its request's toolset, every follow-up ending with its tool's result,
    and the judge passing a right call and failing a wrong one."""
    data = json.loads((DATA / "client_toolsets_heldout.json").read_text(encoding="utf-8"))
    with bench_script("client_toolsets") as judge:
        for request in data["requests"]:
            tools = judge.toolset_tools(catalog, data["toolsets"][request["toolset"]])
            assert 35 <= len(tools) <= 47
            names = {t["function"]["name"] for t in tools}
            assert set(request["expect"]["tools"]) <= names
            assert (request["kind"] == "tool") == bool(request["expect"]["tools"])
            assert request["messages"][-1]["role"] == ("tool" if request["kind"] == "followup" else "user")
            if request["kind"] == "tool":
                name = request["expect"]["tools"][0]
                schema = next(t["function"]["parameters"] for t in tools if t["function"]["name"] == name)
                made = {k: "x" for k in schema.get("required", [])}
                call = {"function": {"name": name, "arguments": json.dumps(made)}}
                assert judge.verdict(request, {"tool_calls": [call]}, tools) == (True, "")
                assert judge.verdict(request, {"content": "Done."}, tools) == (False, "no call")
            else:
                assert judge.verdict(request, {"content": "Use tool_search."}, tools) == (False, "named a bridge")
    assert {r["lang"] for r in data["requests"]} >= {"en", "es", "de", "fr"}
