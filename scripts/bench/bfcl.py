"""BFCL (the Berkeley Function Calling Leaderboard, PyPI bfcl-eval, Apache-2.0) against the lane:
its own data, generation and scorers, on a fixed even/odd split (issue 33, item 5).

Arms, on one model and one machine:
  P  BFCL's prompt mode straight at `lane llm` (the raw model; calls parsed from text by BFCL)
  D  BFCL's FC mode at `lane shim` in proxy mode, tool search off (every client tool shown)
  H  the same with tool search over the client's tools on

Split: an entry's index (the first number of its id) decides it. Even ids are the tuning split,
odd ids the test split; only the test split is a result, and nothing is changed in response to it.
The samples are drawn by a fixed seed before anything runs, so a run's ids never depend on scores.

bfcl-eval's declared dependencies are heavy (torch, vendor SDKs), and its multi-turn scorer
`eval`s model-written call strings: it lives in a throwaway venv of its own (LANE_BFCL_VENV, default
~/.cache/fallback-lane/bfcl-venv, made on first use with --no-deps, a dozen light packages and
stubs for the vendor SDKs), and scripts/bench/bfcl_runner.py runs it in a temp dir.

    .venv/bin/python scripts/bench/bfcl.py ids --split test
    flock /tmp/lane-model.lock .venv/bin/python scripts/bench/bfcl.py run --arms P --split test \\
        --n live_multiple_7plus=8 --n simple_python=8
    .venv/bin/python scripts/bench/bfcl.py report          # every saved arm and category, one table

Outputs (summaries, BFCL's result and score files, logs) go under .lane/bench/bfcl/ (git-ignored).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import lane_run  # noqa: E402  (scripts/bench, this script's folder)
from lane_run import free_port  # noqa: E402

BFCL_VERSION = "2026.3.23"
VENV = Path(os.environ.get("LANE_BFCL_VENV", Path.home() / ".cache" / "fallback-lane" / "bfcl-venv"))
RUNNER = Path(__file__).with_name("bfcl_runner.py")
DEFAULT_OUT = ROOT / ".lane" / "bench" / "bfcl"
DEFAULT_MODEL = ROOT / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
SEED = 33  # the number; fixed so that the samples are chosen before any result exists

# What runs bfcl-eval's CLI and scorers without its declared dependencies (measured, PLATFORM.md);
# filelock and mpmath at the versions bfcl-eval pins; httpx, which glm.py imports (openai no longer
# brings it).
LIGHT_DEPS = [
    "openai", "httpx", "mpmath==1.3.0", "numpy==1.26.4", "pandas", "pydantic", "python-dotenv", "requests",
    "rich", "tabulate", "tenacity", "tqdm", "typer", "overrides", "filelock==3.20.0",
    "tree-sitter==0.21.3", "tree-sitter-java==0.21.0", "tree-sitter-javascript==0.21.4",
]
# Vendor SDKs that bfcl_eval/constants/model_config.py imports at module level (for handlers this
# benchmark never builds): each becomes a module whose every attribute is an empty class.
STUB_MODULES = [
    "anthropic", "anthropic.types", "boto3", "cohere", "mistralai", "writerai", "qwen_agent",
    "qwen_agent.llm", "google.genai", "google.genai.types", "datamodel_code_generator",
    "datamodel_code_generator.format", "datamodel_code_generator.model", "datamodel_code_generator.parser",
    "datamodel_code_generator.parser.jsonschema",
]
STUB_SOURCE = '''"""Stub written by fallback-lane's scripts/bench/bfcl.py: bfcl-eval imports this vendor SDK at
module level for a handler the benchmark never builds."""


class _Stub(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub(name, (Exception,), {})


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _Stub(name, (Exception,), {})
'''

# The published rows the issue compares against (BFCL leaderboard, FC mode).
REFERENCE = [
    ("Qwen2.5-1.5B-Instruct (FC)", {"live_multiple": 66.1, "live_irrelevance": 62.7, "multi_turn_base": 4.0}),
    ("Qwen3-4B-Instruct-2507 (FC)", {"live_multiple": 76.16, "live_irrelevance": 84.93, "multi_turn_base": 26.5}),
]

# Report labels: live_multiple is drawn twice (every entry with >= 7 functions, and a sample of the
# rest stratified by function count); the others are BFCL's categories under their own names.
LABELS = {
    "live_multiple_7plus": "live_multiple", "live_multiple_strat": "live_multiple",
    "live_irrelevance": "live_irrelevance", "simple_python": "simple_python",
    "multi_turn_base": "multi_turn_base", "multi_turn_miss_param": "multi_turn_miss_param",
    "parallel": "parallel", "parallel_multiple": "parallel_multiple",
}
# Sizes a run of one arm on two cores fits in minutes (~25 s a live_multiple entry, ~4 s a
# simple_python one, minutes a multi-turn entry); None takes every entry of the split.
DEFAULT_SIZES: dict[str, int | None] = {
    "live_multiple_7plus": None, "live_multiple_strat": 8, "live_irrelevance": 8,
    "simple_python": 8, "multi_turn_base": 3, "multi_turn_miss_param": 2, "parallel": 8, "parallel_multiple": 8,
}
# What `run` and `ids` take without --categories: the parallel ones (several calls in one reply,
# issue 55) are asked for by name.
DEFAULT_CATEGORIES = [label for label in LABELS if not label.startswith("parallel")]
# Drawn as one seeded order, so a larger sample can be run in parts (--n simple_python=40:70).
PLAIN_SAMPLES = ("live_multiple_7plus", "live_irrelevance", "simple_python", "parallel", "parallel_multiple")


@dataclass(frozen=True)
class Arm:
    name: str   # BFCL's registry name: no `_`; "FC" in it for function calling
    fc: bool
    via_shim: bool
    shim_env: dict[str, str]


# How an arm switches proxy mode's tool search (stack/config.py: LANE_PROXY_TOOL_SEARCH; on by default).
ARMS = {
    "P": Arm("laneP", fc=False, via_shim=False, shim_env={}),
    "D": Arm("laneD-FC", fc=True, via_shim=True, shim_env={"LANE_PROXY_TOOL_SEARCH": "0"}),
    "H": Arm("laneH-FC", fc=True, via_shim=True, shim_env={"LANE_PROXY_TOOL_SEARCH": "1"}),
}


# ---------------------------------------------------------------- the throwaway venv

def venv_python(venv: Path = VENV) -> Path:
    """The bfcl venv's interpreter, made on first use (about a minute; PyPI must be reachable)."""
    python = venv / "bin" / "python"
    ready = venv / ".fallback-lane-ready"
    if ready.is_file() and ready.read_text().strip() == BFCL_VERSION and python.is_file():
        return python
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    for packages in (["--no-deps", f"bfcl-eval=={BFCL_VERSION}"], LIGHT_DEPS):
        done = subprocess.run([*pip, *packages], capture_output=True, text=True, check=False)
        if done.returncode != 0:  # pip's resolver warns about the deps left out: only failures count
            raise RuntimeError(f"pip install {' '.join(packages)} failed:\n{done.stdout}{done.stderr}")
    write_stubs(venv)
    with tempfile.TemporaryDirectory() as root:  # importing bfcl_eval writes result/ under its root
        subprocess.run([str(python), "-c", "import bfcl_eval.constants.model_config"], check=True,
                       cwd=root, env={**clean_env(), "BFCL_PROJECT_ROOT": root})
    ready.write_text(BFCL_VERSION + "\n")
    return python


def write_stubs(venv: Path) -> None:
    """The stub packages in venv/stubs, put on the venv's path by a .pth file."""
    stubs = venv / "stubs"
    for module in STUB_MODULES:
        folder = stubs.joinpath(*module.split("."))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text(STUB_SOURCE)
    (stubs / "google" / "__init__.py").unlink(missing_ok=True)  # a namespace package, as upstream
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "fallback_lane_bfcl_stubs.pth").write_text(str(stubs) + "\n")


def data_dir(venv: Path = VENV) -> Path:
    return next(venv.glob("lib/python3*/site-packages/bfcl_eval/data"))


def clean_env() -> dict[str, str]:
    """This process's environment without the project venv's marks, for the bfcl venv's python."""
    return {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}


# ---------------------------------------------------------------- split and samples

def entry_index(entry_id: str) -> int:
    """`live_multiple_12-4-0` -> 12, `multi_turn_base_7` -> 7."""
    return int(entry_id.rsplit("_", 1)[1].split("-")[0])


def in_split(entry_id: str, split: str) -> bool:
    return entry_index(entry_id) % 2 == (0 if split == "tuning" else 1)


def load_entries(category: str, data: Path) -> list[dict[str, Any]]:
    path = data / f"BFCL_v4_{category}.json"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def shuffled(items: list[str], salt: str) -> list[str]:
    ordered = sorted(items, key=entry_index)
    random.Random(f"{SEED}:{salt}").shuffle(ordered)
    return ordered


def round_robin(groups: dict[str, list[str]], size: int | None, salt: str) -> list[str]:
    """One id from each group in turn (groups and members in seeded order), until `size`."""
    queues = {key: shuffled(ids, f"{salt}:{key}") for key, ids in groups.items()}
    order = sorted(queues)
    random.Random(f"{SEED}:{salt}:groups").shuffle(order)
    picked: list[str] = []
    limit = size if size is not None else sum(map(len, queues.values()))
    while len(picked) < limit and any(queues.values()):
        for key in order:
            if queues[key] and len(picked) < limit:
                picked.append(queues[key].pop(0))
    return picked


def proportional(groups: dict[str, list[str]], size: int, salt: str) -> list[str]:
    """A stratified sample: each group's share of `size` by its share of the ids (largest
    remainders), members in seeded order."""
    total = sum(map(len, groups.values()))
    quotas = {key: size * len(ids) / total for key, ids in groups.items()}
    counts = {key: int(quota) for key, quota in quotas.items()}
    for key in sorted(quotas, key=lambda k: counts[k] - quotas[k])[: size - sum(counts.values())]:
        counts[key] += 1
    return [i for key in sorted(groups) for i in shuffled(groups[key], f"{salt}:{key}")[: counts[key]]]


def select(label: str, split: str, size: int | None, data: Path, start: int = 0) -> list[str]:
    """The ids of one report label in one split, in BFCL's order; `start` leaves out the first
    ids of a plain seeded sample (a larger sample run in parts: `--n simple_python=40:70`)."""
    if start and label not in PLAIN_SAMPLES and not label.startswith("multi_turn"):
        raise SystemExit(f"--n {label}=A:B: only {', '.join(PLAIN_SAMPLES)} and the multi-turn "
                         "categories are sampled in parts")
    entries = [e for e in load_entries(LABELS[label], data) if in_split(e["id"], split)]
    if label == "live_multiple_7plus":
        ids = shuffled([e["id"] for e in entries if len(e["function"]) >= 7], label)
        picked = ids[start:size] if size is not None else ids[start:]
    elif label == "live_multiple_strat":
        groups: dict[str, list[str]] = {}
        for e in entries:
            if len(e["function"]) < 7:
                groups.setdefault(f"{len(e['function'])} functions", []).append(e["id"])
        picked = proportional(groups, size or 8, label)
    elif label.startswith("multi_turn"):
        groups = {}
        for e in entries:
            groups.setdefault("+".join(sorted(e["involved_classes"])), []).append(e["id"])
        picked = round_robin(groups, size, label)[start:]  # prefix-stable: parts add up
    else:
        ids = shuffled([e["id"] for e in entries], label)
        picked = ids[start:size] if size is not None else ids[start:]
    return sorted(picked, key=entry_index)


# ---------------------------------------------------------------- the lane

@contextlib.contextmanager
def lane_tree(rev: str) -> Iterator[tuple[Path, str]]:
    """The lane's committed code at `rev`, unpacked in a temp dir, and its commit: the working tree
    is shared with people editing it, and their unfinished edits must not reach a measured run."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", rev], capture_output=True, text=True,
                            check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="lane-tree-") as tree:
        archive = subprocess.Popen(["git", "-C", str(ROOT), "archive", commit], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", tree], stdin=archive.stdout, check=True)
        archive.wait()
        yield Path(tree), commit


@contextlib.contextmanager
def lane_process(name: str, args: list[str], env: dict[str, str], log_path: Path, tree: Path = ROOT) -> Iterator[str]:
    """`lane NAME ARGS` run from `tree` until the block ends; yields its base URL once /health
    answers (lane_run.lane_process)."""
    port = free_port()
    with lane_run.lane_process(f"lane {name}", [*args, "--port", str(port)], {**os.environ, **env}, log_path,
                               f"http://127.0.0.1:{port}/health", tree=tree):
        yield f"http://127.0.0.1:{port}/v1"


def lane_shim(llm_url: str, env: dict[str, str], log_dir: Path, tree: Path) -> contextlib.AbstractContextManager[str]:
    """A shim in a fresh LANE_HOME (its own store, no lane.yaml tools) in front of `llm_url`."""
    home = Path(tempfile.mkdtemp(prefix="lane-bfcl-"))
    (home / "none.yaml").write_text("{}\n")
    settings = {"LANE_HOME": str(home), "LANE_CONFIG": str(home / "none.yaml"), **env}
    return lane_process("shim", ["shim", "--llm-url", llm_url, "--home", str(home)],
                        settings, log_dir / f"shim-{int(time.time())}.log", tree)


# ---------------------------------------------------------------- one arm

def run_arm(arm: Arm, ids: dict[str, list[str]], base_url: str, out: Path, *, python: Path | None = None,
            api_key: str = "sk-fallback-lane", served_model: str = "lane", budget_s: float | None = None
            ) -> dict[str, Any]:
    """BFCL's generation and scoring of `ids` (BFCL category -> ids) for one arm, through
    bfcl_runner.py in the bfcl venv and a temp dir; keeps its result/score files and log in `out`.
    With `budget_s`, generation stops starting entries once that much time is spent."""
    python = python or venv_python()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bfcl-run-") as root:
        job = Path(root) / "job.json"
        job.write_text(json.dumps({"name": arm.name, "served_model": served_model, "fc": arm.fc, "ids": ids,
                                   "budget_s": budget_s}))
        env = {**clean_env(), "BFCL_PROJECT_ROOT": root, "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": api_key,
               "TQDM_DISABLE": "1"}
        with (out / f"bfcl-{arm.name}.log").open("a") as log:
            done = subprocess.run([str(python), str(RUNNER), str(job)], cwd=root, env=env,
                                  stdout=log, stderr=subprocess.STDOUT, check=False)
        for folder in ("result", "score"):
            if (Path(root) / folder).is_dir():
                shutil.copytree(Path(root) / folder, out / folder, dirs_exist_ok=True)
        if done.returncode != 0 or not job.with_name("summary.json").is_file():
            raise RuntimeError(f"bfcl_runner failed ({done.returncode}); see {out / f'bfcl-{arm.name}.log'}")
        return json.loads(job.with_name("summary.json").read_text())


# A reply whose text content is a tool call (what proxy mode must return as `tool_calls` instead):
# a Hermes/Qwen tag, a JSON object with a name and arguments, or a Python-style call with keyword
# arguments or alone on its line. Written independently of the lane's own salvage parser. Each
# shape but the tag captures the name it calls.
_CALL_SHAPES = [
    re.compile(r"<tool_call>"),
    re.compile(r'"name"\s*:\s*"([^"]+)"\s*,\s*"(?:arguments|parameters)"\s*:'),
    re.compile(r"\b([A-Za-z_][\w.]*)\(\s*[A-Za-z_]\w*\s*="),
    re.compile(r"^\s*\[?\s*([A-Za-z_][\w.]*)\([^()]*\)\s*\]?\s*$", re.MULTILINE),
]


def text_calls(result: Any, names: frozenset[str] | None = None) -> int:
    """Text replies in a BFCL FC result (a string where calls would be a list) that are call-shaped;
    multi-turn results are turns of steps. With `names` (offered_names: the functions the entry
    offered, dotted and not), only a
    shape that calls one of them counts: a `print(total)` line of a Python snippet in a prose
    answer calls no tool (seen on simple_python, 2026-11-26)."""
    if isinstance(result, str):
        if result.startswith("Error during inference"):  # BFCL's note of a failed request
            return 0
        return int(any(_calls_offered(match, names) for shape in _CALL_SHAPES for match in shape.finditer(result)))
    if isinstance(result, list):
        return sum(text_calls(item, names) for item in result if isinstance(item, (str, list)))
    return 0


def _calls_offered(match: re.Match[str], names: frozenset[str] | None) -> bool:
    if names is None or not match.groups():
        return True
    called = match.group(1)
    return called in names or called.rsplit(".", 1)[-1] in names


def offered_names(category: str, data: Path) -> dict[str, frozenset[str]]:
    """id -> the names of the functions an entry offers, each also without its dotted prefix
    (`math.gcd` is called as `gcd` too); entries without a `function` list, such as multi-turn
    ones, are left out: every shape counts for them."""
    return {entry["id"]: frozenset(form for f in entry["function"]
                                   for form in (f["name"], f["name"].rsplit(".", 1)[-1]))
            for entry in load_entries(category, data) if entry.get("function")}


# ---------------------------------------------------------------- saving and the table

def save(out: Path, arm_key: str, plan: dict[str, list[str]], summary: dict[str, Any], split: str,
         note: dict[str, Any]) -> None:
    """One file per arm and report label, so runs of different categories add up in one table."""
    for label, ids in plan.items():
        part = summary.get(LABELS[label], {"entries": [], "header": {}})
        rows = [row for row in part["entries"] if row["id"] in ids]
        names = offered_names(LABELS[label], data_dir()) if rows and ARMS[arm_key].fc else {}
        for row in rows:
            row["text_calls"] = text_calls(row["result"], names.get(row["id"])) if ARMS[arm_key].fc else None
        record = {"arm": arm_key, "label": label, "split": split, "ids": ids, "entries": rows, **note}
        (out / arm_key).mkdir(parents=True, exist_ok=True)
        (out / arm_key / f"{label}.json").write_text(json.dumps(record, indent=1, default=str))


def table_rows(out: Path, split: str, own: bool = False) -> list[list[str]]:
    """One row per category and arm, over the entries every arm that ran the category has (a
    sample cut short by its time budget is compared on what all arms ran); with `own`, over each
    arm's own entries."""
    rows = []
    for label in LABELS:
        records = {arm: json.loads(p.read_text()) for arm in ARMS if (p := out / arm / f"{label}.json").is_file()}
        records = {arm: r for arm, r in records.items() if r["split"] == split}
        common = set.intersection(*({e["id"] for e in r["entries"]} for r in records.values())) if records else set()
        for arm_key, record in records.items():
            rows.append(format_row(label, arm_key, [e for e in record["entries"] if own or e["id"] in common]))
    return rows


def format_row(label: str, arm_key: str, entries: list[dict[str, Any]]) -> list[str]:
    if not entries:  # no entry that every arm ran
        return [label, arm_key, "0/0"] + ["-"] * (len(HEADER) - 3)
    n = len(entries)
    passed = sum(row["passed"] for row in entries)
    tokens = sum(row["prompt_tokens"] for row in entries)
    requests = sum(row["requests"] for row in entries) or 1
    turns = sum(row.get("turns", 0) for row in entries)
    turns_text = f"{sum(row.get('turns_passed', 0) for row in entries)}/{turns}" if turns else "-"
    calls = [row["text_calls"] for row in entries if row.get("text_calls") is not None]
    return [label, arm_key, f"{passed}/{len(entries)}", f"{100 * passed / n:.1f}", turns_text,
            f"{tokens / n:.0f}", f"{requests / n:.1f}", f"{tokens / requests:.0f}",
            f"{sum(row['wall_s'] for row in entries) / n:.1f}", str(sum(calls)) if calls else "n/a"]


HEADER = ["category", "arm", "passed", "acc %", "turns", "prompt tok/entry", "requests/entry",
          "tok/request", "wall s/entry", "text calls"]


def print_table(out: Path, split: str, own: bool = False) -> None:
    rows = table_rows(out, split, own)
    widths = [max(len(str(r[i])) for r in [HEADER, *rows]) for i in range(len(HEADER))]
    print(f"\nBFCL {BFCL_VERSION}, {split} split ({'odd' if split == 'test' else 'even'} entry ids), saved in {out}; "
          + ("each arm's own entries" if own else "entries every arm ran"))
    for row in [HEADER, *rows]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)))
    print("\nPublished (BFCL leaderboard, whole categories): live_multiple / live_irrelevance / multi_turn_base")
    for name, scores in REFERENCE:
        print(f"  {name}: " + " / ".join(f"{scores[k]:.2f}" for k in ("live_multiple", "live_irrelevance",
                                                                      "multi_turn_base")))
    print("turns: leading turns BFCL's multi-turn checker accepts; text calls: replies whose content is "
          "call-shaped (FC arms only)")
    print_runs(out, split)


def print_runs(out: Path, split: str) -> None:
    """Which lane commit, when and on how many threads each arm's saved rows were measured."""
    for arm_key in ARMS:
        records = [json.loads(path.read_text()) for path in sorted((out / arm_key).glob("*.json"))]
        runs = sorted({f"{r.get('lane_commit', '?')[:7]} {r.get('when', '?')} {r.get('threads', '?')} threads"
                       for r in records if r["split"] == split})
        if runs:
            print(f"arm {arm_key} runs: " + "; ".join(runs))


def print_plan(plan: dict[str, list[str]], split: str) -> None:
    print(f"split: {split} ({'odd' if split == 'test' else 'even'} entry ids; seed {SEED})")
    for label, ids in plan.items():
        print(f"  {label} ({len(ids)}): {' '.join(ids)}")


def print_entries(out: Path, split: str) -> None:
    """Per entry and arm: pass (+) or fail (-), prompt tokens, wall seconds."""
    print("\nper entry: arm pass prompt-tokens wall-s")
    for label in LABELS:
        records = {arm: json.loads(p.read_text()) for arm in ARMS if (p := out / arm / f"{label}.json").is_file()}
        by_id: dict[str, list[str]] = {}
        for arm, record in records.items():
            if record["split"] != split:
                continue
            for row in record["entries"]:
                mark = "+" if row["passed"] else "-"
                turns = f" t{row['turns_passed']}/{row['turns']}" if "turns" in row else ""
                by_id.setdefault(row["id"], []).append(
                    f"{arm} {mark}{turns} {row['prompt_tokens']} {row['wall_s']:.1f}")
        for entry_id in sorted(by_id, key=entry_index):
            print(f"  {entry_id:<28} " + " | ".join(by_id[entry_id]))


# ---------------------------------------------------------------- command line

def parse_sizes(items: list[str]) -> dict[str, tuple[int, int | None]]:
    """Each category's part of its seeded sample, (first, end): "N" is (0, N), "A:B" (A, B)."""
    sizes: dict[str, tuple[int, int | None]] = {label: (0, n) for label, n in DEFAULT_SIZES.items()}
    for item in items:
        label, _, value = item.partition("=")
        if label not in LABELS:
            raise SystemExit(f"--n {item}: no category {label!r} (one of {', '.join(LABELS)})")
        first, _, end = value.rpartition(":")
        sizes[label] = (int(first or 0), None if end == "all" else int(end))
    return sizes


def plan_of(args: argparse.Namespace) -> dict[str, list[str]]:
    sizes = parse_sizes(args.n)
    data = data_dir(VENV if (VENV / ".fallback-lane-ready").is_file() else venv_python().parents[1])
    return {label: select(label, args.split, sizes[label][1], data, sizes[label][0]) for label in args.categories}


def by_category(plan: dict[str, list[str]]) -> dict[str, list[str]]:
    """BFCL category -> ids (both live_multiple labels are one BFCL category)."""
    merged: dict[str, list[str]] = {}
    for label, ids in plan.items():
        merged.setdefault(LABELS[label], []).extend(i for i in ids if i not in merged.get(LABELS[label], []))
    return merged


def run(args: argparse.Namespace) -> int:
    plan = plan_of(args)
    print_plan(plan, args.split)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with lane_tree(args.lane_rev) as (tree, commit):
        print(f"lane at {commit}")
        llm: contextlib.AbstractContextManager[str]
        if args.base_url:
            llm = contextlib.nullcontext(args.base_url)
        else:
            llm = lane_process("llm", ["llm", "--model", args.model, "--ctx", str(args.ctx), "--threads",
                                       str(args.threads)], {}, out / f"llm-{int(time.time())}.log", tree)
        with llm as llm_url:
            for arm_key in args.arms:
                run_one(args, arm_key, plan, llm_url, tree, {"lane_commit": commit})
    print_table(out, args.split)
    print_entries(out, args.split)
    return 0


def run_one(args: argparse.Namespace, arm_key: str, plan: dict[str, list[str]], llm_url: str, tree: Path,
            note: dict[str, Any]) -> None:
    """One arm: its endpoint (the llm itself, or a fresh shim in front of it), BFCL, the saved rows."""
    arm, out = ARMS[arm_key], Path(args.out)
    endpoint = (lane_shim(llm_url, arm.shim_env, out, tree) if arm.via_shim and not args.base_url
                else contextlib.nullcontext(llm_url))
    started = time.monotonic()
    with endpoint as url:
        summary = run_arm(arm, by_category(plan), url, out / "bfcl-files" / arm_key,
                          budget_s=args.budget_min * 60 if args.budget_min else None)
    note = {**note, "model": args.model, "threads": args.threads, "ctx": args.ctx,
            "run_wall_s": round(time.monotonic() - started, 1),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    save(out, arm_key, plan, summary, args.split, note)
    print(f"arm {arm_key}: {note['run_wall_s']} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("ids", "run", "report"):
        command = sub.add_parser(name)
        command.add_argument("--split", choices=("test", "tuning"), default="test")
        command.add_argument("--out", help=f"where summaries are saved and read (default {DEFAULT_OUT}/SPLIT)")
        categories = list(LABELS) if name == "report" else DEFAULT_CATEGORIES
        command.add_argument("--categories", type=lambda s: s.split(","), default=categories,
                             help=f"comma-separated, of {', '.join(LABELS)} (default: all but the parallel ones)")
        command.add_argument("--n", action="append", default=[], metavar="CATEGORY=N",
                             help="sample size of a category (`all`: the whole split; A:B the part of its "
                             "seeded sample from A to B, for plain samples); defaults: "
                             + ", ".join(f"{k}={v or 'all'}" for k, v in DEFAULT_SIZES.items()))
    sub.choices["report"].add_argument("--own-entries", action="store_true",
                                       help="each arm's rows over all its entries, not only those every arm ran")
    run_parser = sub.choices["run"]
    run_parser.add_argument("--arms", type=lambda s: s.split(","), default=["P", "D", "H"])
    run_parser.add_argument("--model", default=str(DEFAULT_MODEL))
    run_parser.add_argument("--ctx", type=int, default=16384)
    run_parser.add_argument("--threads", type=int, default=2)
    run_parser.add_argument("--budget-min", type=float, help="per arm: start no new entry after this "
                            "many minutes (entries not run are left out of the rows, and listed in the log)")
    run_parser.add_argument("--lane-rev", default="HEAD", help="the commit whose lane runs (unpacked "
                            "apart from the working tree; default HEAD)")
    run_parser.add_argument("--base-url", help="an OpenAI-compatible endpoint to use for every arm "
                            "instead of starting `lane llm` and `lane shim`")
    args = parser.parse_args()
    args.out = args.out or str(DEFAULT_OUT / args.split)
    if args.command == "ids":
        print_plan(plan_of(args), args.split)
        return 0
    if args.command == "report":
        print_table(Path(args.out), args.split, args.own_entries)
        print_entries(Path(args.out), args.split)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
