"""The several-calls benchmark's judge (scripts/bench/several_calls.py) and its data file: a judge
that passed a guessed call, or counted one returned call for two wanted ones, would skew the
numbers item 7 of issue 55 is decided on."""
import json
from pathlib import Path

import pytest

from tests.bench_scripts import bench_script

DATA = Path(__file__).resolve().parents[2] / "scripts" / "bench" / "data" / "several_calls_heldout.json"


@pytest.fixture(scope="module")
def sc():
    with bench_script("several_calls") as module:
        yield module


def test_every_wanted_call_is_matched_once_by_name_and_the_values_the_request_fixes(sc):
    item = {"kind": "independent", "first_reply": [{"name": "get_weather", "arguments": {"city": "Lisbon"}},
                                                   {"name": "get_weather", "arguments": {}}], "never_first": []}
    both = [("get_weather", {"city": "lisbon "}), ("get_weather", {"city": "Porto"})]
    assert sc.judged(item, both)["passed"]
    assert sc.judged(item, both[:1]) == {"passed": False, "missing": 1, "guessed": []}  # one call, two wanted
    assert not sc.judged(item, [("get_weather", {"city": "Porto"}), ("get_weather", {"city": "Faro"})])["passed"]
    assert sc.judged(item, [*both, ("notes_add", {"text": "x"})])["passed"]  # more is not wrong here
    assert sc.matches({"name": "fx", "arguments": {"amount": 10}}, ("fx", {"amount": 10.0}))


def test_a_dependent_request_fails_on_a_guessed_call_or_anything_beyond_the_wanted(sc):
    item = {"kind": "dependent", "first_reply": [{"name": "contacts_lookup", "arguments": {}}],
            "never_first": ["sendEmail"]}
    assert sc.judged(item, [("contacts_lookup", {"name": "Marta"})])["passed"]
    guessed = sc.judged(item, [("contacts_lookup", {}), ("sendEmail", {"to": "marta@example.com"})])
    assert guessed == {"passed": False, "missing": 0, "guessed": ["sendEmail"]}
    assert not sc.judged(item, [("contacts_lookup", {}), ("notes_add", {})])["passed"]
    assert not sc.judged(item, [])["passed"]


def test_the_data_file_names_only_tools_it_defines_and_each_request_offers():
    data = json.loads(DATA.read_text())
    assert len(data["requests"]) >= 30
    assert {r["kind"] for r in data["requests"]} == {"dependent", "independent"}
    assert len({r["lang"] for r in data["requests"]}) >= 4
    for item in data["requests"]:
        assert set(item["tools"]) <= set(data["tools"])
        wanted = [c["name"] for c in item["first_reply"]]
        assert wanted and set(wanted) | set(item["never_first"]) <= set(item["tools"])
        for call in item["first_reply"]:
            properties = data["tools"][call["name"]]["function"]["parameters"]["properties"]
            assert set(call["arguments"]) <= set(properties)
