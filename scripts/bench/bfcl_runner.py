"""BFCL's own generation and scorers for one arm, run by scripts/bench/bfcl.py inside its throwaway
venv (never the project's .venv) with the temp dir BFCL_PROJECT_ROOT names as working directory.

Kept apart from the lane's code because BFCL's multi-turn scorer `eval`s the call strings a model
wrote: this file imports nothing from the lane, and the lane's venv never imports bfcl_eval.

    python bfcl_runner.py JOB.json   # JOB: {"name", "served_model", "fc", "ids": {category: [id]}, "budget_s"}
    python bfcl_runner.py JOB.json   # JOB: {"steps": category, "ids": [id]}: ground-truth steps, steps.json

It registers `name` as an OpenAICompletionsHandler model at run time (OPENAI_BASE_URL says where),
generates the listed entries, scores them with `bfcl evaluate --partial-eval`'s own function, and
writes summary.json beside JOB: per entry, BFCL's verdict, prompt tokens, requests, wall, the raw
model output, and for multi-turn entries the leading turns BFCL's checker accepts.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any


def register(name: str, served_model: str, fc: bool) -> None:
    """BFCL knows only the models in MODEL_CONFIG_MAPPING; the dict is shared by reference, so one
    entry added here is seen by generation and evaluation alike. `underscore_to_dot` follows FC
    mode: BFCL's OpenAI tool conversion renames `a.b` to `a_b`, and its checker must map it back."""
    from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING, ModelConfig
    from bfcl_eval.model_handler.api_inference.openai_completion import OpenAICompletionsHandler

    MODEL_CONFIG_MAPPING[name] = ModelConfig(
        model_name=served_model, display_name=name, url="https://example.invalid/fallback-lane",
        org="fallback-lane", license="Apache-2.0", model_handler=OpenAICompletionsHandler,
        input_price=None, output_price=None, is_fc_model=fc, underscore_to_dot=fc,
    )


def generate(name: str, ids: dict[str, list[str]]) -> None:
    """`bfcl generate --run-ids` as a call: the id file in the project root picks the entries."""
    from bfcl_eval._llm_response_generation import main
    from bfcl_eval.constants.eval_config import TEST_IDS_TO_GENERATE_PATH

    TEST_IDS_TO_GENERATE_PATH.write_text(json.dumps(ids))
    main(SimpleNamespace(
        model=[name], test_category=list(ids), temperature=0.001, include_input_log=False,
        exclude_state_log=False, num_gpus=1, num_threads=1, gpu_memory_utilization=0.9,
        backend="sglang", skip_server_setup=True, local_model_path=None, result_dir=None,
        allow_overwrite=True, run_ids=True, enable_lora=False, max_lora_rank=None, lora_modules=None,
    ))


def evaluate(name: str, categories: list[str]) -> None:
    """`bfcl evaluate --partial-eval` as a call (scores only the entries generated). Its last step,
    the aggregate leaderboard CSVs (not read here: they count categories not run as 0), fails on a
    run of one entry (the standard deviation of one latency); the score files are written by then."""
    import statistics

    from bfcl_eval.eval_checker.eval_runner import main

    try:
        main([name], categories, None, None, partial_eval=True)
    except statistics.StatisticsError as exc:
        print(f"bfcl evaluate: leaderboard CSVs skipped ({exc})")


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _flat(value: Any) -> list[float]:
    """BFCL keeps token counts and latencies per turn and step for multi-turn entries."""
    if isinstance(value, list):
        return [item for part in value for item in _flat(part)]
    return [float(value)] if isinstance(value, (int, float)) else []


def _one_file(folder: Path, pattern: str) -> Path | None:
    found = sorted(folder.rglob(pattern))
    return found[0] if found else None


def leading_turns_passed(name: str, entry_id: str, raw: Any, category: str) -> tuple[int, int]:
    """(turns, leading turns passed): BFCL's multi_turn_checker run on each prefix of the
    conversation, with fresh instance names per prefix (BFCL keeps executed class instances in
    globals by model name, so a reused name would continue from the last prefix's state)."""
    from bfcl_eval.eval_checker.eval_runner import get_handler
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import is_empty_execute_response
    from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

    entries = load_dataset_entry(category, include_prereq=False, include_language_specific_hint=False)
    index = next(i for i, entry in enumerate(entries) if entry["id"] == entry_id)
    truth = load_ground_truth_entry(category)[index]["ground_truth"]
    if not isinstance(raw, list) or len(raw) != len(truth):
        return len(truth), 0
    handler = get_handler(name)
    decoded: list[list[list[str]]] = []
    for turn in raw:
        steps = []
        for step in turn:
            try:
                calls = handler.decode_execute(step, has_tool_call_tag=False)
            except Exception:  # BFCL's own rule: an undecodable step is chat, not a call
                continue
            if not is_empty_execute_response(calls):
                steps.append(calls)
        decoded.append(steps)
    passed = 0
    for k in range(1, len(truth) + 1):
        verdict = multi_turn_checker(decoded[:k], truth[:k], entries[index], category, f"{name}-prefix{k}")
        if not verdict["valid"]:
            break
        passed = k
    return len(truth), passed


def summarise(name: str, ids: dict[str, list[str]]) -> dict[str, Any]:
    """Per category and entry: BFCL's verdict (an id listed in its score file failed), prompt
    tokens and requests (usage as the endpoint reported it), wall (BFCL's latency) and the output."""
    from bfcl_eval.constants.eval_config import RESULT_PATH, SCORE_PATH

    summary: dict[str, Any] = {}
    for category in ids:
        result_file = _one_file(RESULT_PATH / name, f"BFCL_v4_{category}_result.json")
        score_file = _one_file(SCORE_PATH / name, f"BFCL_v4_{category}_score.json")
        results = _lines(result_file) if result_file else []
        scores = _lines(score_file) if score_file else [{}]
        failed = {row["id"] for row in scores[1:] if "id" in row}
        rows = []
        for result in results:
            tokens = _flat(result.get("input_token_count"))
            row = {"id": result["id"], "passed": bool(score_file) and result["id"] not in failed,
                   "prompt_tokens": int(sum(tokens)), "requests": len(tokens),
                   "wall_s": round(sum(_flat(result.get("latency"))), 2), "result": result.get("result")}
            if category.startswith("multi_turn"):
                row["turns"], row["turns_passed"] = leading_turns_passed(name, result["id"], row["result"], category)
            rows.append(row)
        summary[category] = {"header": scores[0], "entries": rows}
    return summary


def generate_within(name: str, ids: dict[str, list[str]], budget_s: float | None) -> dict[str, list[str]]:
    """Generation one entry at a time, taking the categories in turn, until the budget is spent
    (a shared machine can be slow, and a run cut off from outside would lose every score): the
    entries that were generated, per category."""
    started = time.monotonic()
    queues = {category: list(category_ids) for category, category_ids in ids.items()}
    done: dict[str, list[str]] = {category: [] for category in ids}
    while any(queues.values()):
        for category, queue in queues.items():
            if not queue:
                continue
            if budget_s is not None and time.monotonic() - started > budget_s:
                print(f"budget of {budget_s:.0f} s spent; not run: {[i for q in queues.values() for i in q]}")
                return {category: generated for category, generated in done.items() if generated}
            entry_id = queue.pop(0)
            generate(name, {category: [entry_id]})
            done[category].append(entry_id)
    return {category: generated for category, generated in done.items() if generated}


def steps(category: str, ids: list[str]) -> list[dict[str, Any]]:
    """Every step of the ground truth of multi-turn entries, for scripts/bench/bfcl_steps.py: per
    turn and step, the turn's request, the earlier turns and this turn's earlier calls, each with
    the result BFCL's own classes return for it, and the step's call (None after the turn's last)."""
    from bfcl_eval.constants.enums import ModelStyle
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call
    from bfcl_eval.model_handler.utils import convert_to_tool
    from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

    truth = {entry["id"]: entry["ground_truth"] for entry in load_ground_truth_entry(category)}
    records = []
    for entry in (e for e in load_dataset_entry(category) if e["id"] in ids):
        tools = convert_to_tool(entry["function"], GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS)
        earlier: list[dict[str, Any]] = []
        for turn, (messages, calls) in enumerate(zip(entry["question"], truth[entry["id"]], strict=False)):
            request = " ".join(m["content"] for m in messages if m["role"] == "user")
            results, _ = execute_multi_turn_func_call(calls, entry["initial_config"], entry["involved_classes"],
                                                      "steps", entry["id"])
            ran = [[call, str(result)] for call, result in zip(calls, results, strict=True)]
            for step in range(len(calls) + 1):
                records.append({"id": entry["id"], "turn": turn, "step": step, "request": request,
                                "earlier": list(earlier), "ran": ran[:step],
                                "call": calls[step] if step < len(calls) else None, "tools": tools})
            earlier.append({"request": request, "ran": ran})
    return records


def main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    if not os.environ.get("BFCL_PROJECT_ROOT"):
        print("BFCL_PROJECT_ROOT must name the temp dir this runs in", file=sys.stderr)
        return 2
    if "steps" in job:
        Path(job_path).with_name("steps.json").write_text(json.dumps(steps(job["steps"], job["ids"])))
        return 0
    register(job["name"], job["served_model"], job["fc"])
    generated = generate_within(job["name"], job["ids"], job.get("budget_s"))
    if generated:
        evaluate(job["name"], list(generated))
    summary = summarise(job["name"], generated)
    Path(job_path).with_name("summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
