"""BFCL's own generation and scorers through proxy mode, with a scripted model that replays BFCL's
ground truth: every entry must score, so a failure is the plumbing (proxy mode, the harness in
scripts/bench/bfcl.py, bfcl-eval in its throwaway venv), never a model.

The bfcl venv is made on first use from PyPI (about a minute; LANE_BFCL_VENV, default
~/.cache/fallback-lane/bfcl-venv) and reused after. Entries come from the tuning split (even ids).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from stack.config import Settings
from tests.fakes.bfcl_replay import replay, replay_decision, turn_truths
from tests.fakes.scripted_model import Reply, ScriptedModel, text
from tests.integration.shim_server import ShimServer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "bench"))
import bfcl  # noqa: E402  (scripts/bench/bfcl.py)

# About 18 s with the bfcl venv made, 45 s when this run makes it (a fresh CI machine).
pytestmark = pytest.mark.slow

PER_CATEGORY = {"live_multiple_7plus": 2, "live_multiple_strat": 2, "live_irrelevance": 2,
                "simple_python": 2, "multi_turn_base": 1, "multi_turn_miss_param": 1, "parallel": 2,
                "parallel_multiple": 2}


@pytest.fixture(scope="module")
def bfcl_python() -> Path:
    return bfcl.venv_python()


def plan_and_truths() -> tuple[dict[str, list[str]], dict[str, list[str]], dict]:
    data = bfcl.data_dir()
    plan = {label: bfcl.select(label, "tuning", size, data) for label, size in PER_CATEGORY.items()}
    ids = bfcl.by_category(plan)
    truths: dict = {}
    for category, category_ids in ids.items():
        truths.update(turn_truths(data, category, category_ids))
    return plan, ids, truths


def scores(out: Path, arm: str, plan: dict[str, list[str]], summary: dict) -> dict[str, tuple[int, int, int]]:
    """Per report label: (entries, passed, call-shaped text replies), as the report counts them."""
    bfcl.save(out, arm, plan, summary, "tuning", {})
    rows = {}
    for label in plan:
        record = json.loads((out / arm / f"{label}.json").read_text())
        entries = record["entries"]
        rows[label] = (len(entries), sum(e["passed"] for e in entries), sum(e["text_calls"] or 0 for e in entries))
    return rows


@pytest.mark.parametrize("arm", ["D", "H"])
def test_ground_truth_through_proxy_mode_scores_every_entry(tmp_path, bfcl_python, arm):
    plan, ids, truths = plan_and_truths()
    with ScriptedModel(replay(truths), decision=replay_decision(truths)) as model:
        settings = Settings(home=tmp_path, llm_url=model.url, proxy_tool_search=arm == "H")
        with ShimServer(settings) as shim:
            summary = bfcl.run_arm(bfcl.ARMS[arm], ids, f"{shim.url}/v1", tmp_path / "files", python=bfcl_python)
    result = scores(tmp_path, arm, plan, summary)
    assert result == {label: (len(plan[label]), len(plan[label]), 0) for label in plan}
    multi = summary["multi_turn_base"]["entries"] + summary["multi_turn_miss_param"]["entries"]
    assert all(e["turns_passed"] == e["turns"] > 0 for e in multi)


def test_prompt_mode_harness_scores_ground_truth_text(tmp_path, bfcl_python):
    """Arm P's path (BFCL's prompt mode, calls parsed from text) against the scripted model alone."""
    plan, ids, truths = plan_and_truths()
    with ScriptedModel(replay(truths)) as model:
        summary = bfcl.run_arm(bfcl.ARMS["P"], ids, model.url, tmp_path / "files", python=bfcl_python)
    result = scores(tmp_path, "P", plan, summary)
    assert {label: (n, passed) for label, (n, passed, _) in result.items()} == {
        label: (len(plan[label]), len(plan[label])) for label in plan}


def test_split_is_by_entry_id_parity_and_samples_are_fixed(bfcl_python):
    data = bfcl.data_dir()
    for split, parity in (("test", 1), ("tuning", 0)):
        for label in bfcl.LABELS:
            picked = bfcl.select(label, split, 3, data)
            assert picked and all(bfcl.entry_index(i) % 2 == parity for i in picked)
            assert picked == bfcl.select(label, split, 3, data)
    # a larger sample run in parts is the same sample
    whole = bfcl.select("simple_python", "test", 6, data)
    assert sorted(bfcl.select("simple_python", "test", 3, data) + bfcl.select("simple_python", "test", 6, data, 3),
                  key=bfcl.entry_index) == whole
    assert bfcl.parse_sizes(["simple_python=40:70", "live_irrelevance=all"])["simple_python"] == (40, 70)
    # a multi-turn sample is prefix-stable too, so it runs in parts as well; a stratified one is not
    parts = bfcl.select("multi_turn_base", "test", 3, data) + bfcl.select("multi_turn_base", "test", 6, data, 3)
    assert sorted(parts, key=bfcl.entry_index) == bfcl.select("multi_turn_base", "test", 6, data)
    assert len(set(parts)) == 6
    with pytest.raises(SystemExit):
        bfcl.select("live_multiple_strat", "test", 6, data, 3)
    assert bfcl.entry_index("live_multiple_12-4-0") == 12
    assert bfcl.text_calls("[get_weather(city='Paris')]") == 1
    assert bfcl.text_calls('{"name": "get_weather", "arguments": {"city": "Paris"}}') == 1
    assert bfcl.text_calls("The difference between a CPU and a GPU is parallelism.") == 0
    assert bfcl.text_calls([[[{"cd": "{}"}], "Done."]]) == 0
    # With the entry's functions, only a call to one of them counts, wherever it is written.
    snippet = "Let's compute it.\n```python\nP5 = P0 * math.exp(r * t)\nprint(P5)\n```\nAbout 40,000."
    assert bfcl.text_calls(snippet) == 1 and bfcl.text_calls(snippet, frozenset({"calc_population"})) == 0
    assert bfcl.text_calls("```python\ncalc_population(years=5)\n```", frozenset({"calc_population"})) == 1
    assert bfcl.text_calls("<tool_call>", frozenset({"calc_population"})) == 1


def _step_of(body: dict) -> tuple[str, int]:
    """(the latest user message, how many client results follow it) of a proxy-mode request."""
    messages = body["messages"]
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    return messages[last_user]["content"], sum(m["role"] == "tool" for m in messages[last_user:])


def test_steps_bench_scores_each_step_against_the_ground_truth(bfcl_python):
    """scripts/bench/bfcl_steps.py: records from BFCL's own classes, one proxy request per step; a
    scripted model that makes the ground truth's next call is right on every step, and exact; one
    that only ever answers in words is right on the steps after a turn's last call alone."""
    import asyncio

    import bfcl_steps

    records = bfcl_steps.records_of("tuning", 1, 0)
    chosen = bfcl_steps.records_of("tuning", 1, 0, [12])
    assert {r["id"] for r in chosen} == {"multi_turn_base_12"} != {r["id"] for r in records}
    with pytest.raises(SystemExit, match="only even ids"):
        bfcl_steps.records_of("tuning", 1, 0, [13])  # the test split's are never tuned on
    first_turn = [r for r in records if r["turn"] == 0]
    assert len(first_turn) == len(first_turn[-1]["ran"]) + 1 and first_turn[-1]["call"] is None
    assert all(result and "rror" not in result for _, result in first_turn[-1]["ran"])  # BFCL's own results
    assert records[-1]["earlier"] and all(r["tools"] for r in records)
    calls = {(r["request"], r["step"]): r["call"] for r in records}

    def follower(body):
        call = calls.get(_step_of(body))
        if call is None:
            return text("Done.")
        name, arguments = bfcl_steps.parsed(call)
        return Reply(tool_calls=[{"name": name, "arguments": arguments}])

    kinds = ("first", "next", "answer")
    words_only = [r for r in records if r["call"] is None]
    for script, right in ((follower, len(records)), (lambda body: text("Done."), len(words_only))):
        with ScriptedModel(script) as model:
            tally = asyncio.run(bfcl_steps.score(records, model.url, search=True))
        assert sum(tally[k, "steps"] for k in kinds) == len(records)
        assert sum(tally[k, "right"] for k in kinds) == sum(tally[k, "exact"] for k in kinds) == right
