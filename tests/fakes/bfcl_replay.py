"""A ScriptedModel script that answers BFCL entries with BFCL's own ground truth, so that a BFCL run
through the lane scores 100 % when the plumbing (proxy mode, the harness, the scorers) is right,
whatever a real model would do.

It recognises an entry's turn by the user message the request carries (the lane passes the
client's user messages through), answers the turn's ground-truth calls as native `tool_calls`
(FC) or as BFCL's Python-style call text (prompt mode), and once the calls' results are back, or
where the ground truth has no call (irrelevance, a turn missing a parameter), a plain sentence.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any, Callable

from tests.fakes.scripted_model import Reply, several_allowed

# Where ground truth lists "" among a parameter's acceptable values, leaving it out is acceptable.
_OMITTED = ""
PLAIN_ANSWER = "None of the available functions fits this request, so I answer without calling one."
TURN_DONE = "Done."
NOTHING_RAN = "Nothing has run for it yet."  # the decision question's words (agent/prompt.py)


def load_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def turn_truths(data: Path, category: str, ids: list[str]) -> dict[str, list[list[dict[str, Any]]]]:
    """User message text -> that turn's ground-truth calls ({name, arguments}), for these ids."""
    entries = load_lines(data / f"BFCL_v4_{category}.json")
    answers_path = data / "possible_answer" / f"BFCL_v4_{category}.json"
    answers = load_lines(answers_path) if answers_path.is_file() else [{} for _ in entries]
    order = parameter_order(data)
    truths: dict[str, list[list[dict[str, Any]]]] = {}
    for entry, answer in zip(entries, answers, strict=True):
        if entry["id"] not in ids:
            continue
        turns = answer.get("ground_truth") if category.startswith("multi_turn") else [answer.get("ground_truth", [])]
        for turn, messages in zip(turns or [[]], entry["question"], strict=False):
            users = [m["content"] for m in messages if m["role"] == "user"]
            if users:
                truths[users[-1]] = [_call(item, order) for item in turn]
    return truths


def parameter_order(data: Path) -> dict[str, list[str]]:
    """Multi-turn function name -> its parameter names in order, for ground-truth calls written
    with positional arguments (`sort('report.pdf')`): both BFCL's prompt-mode decoder and a
    JSON tool call need them named."""
    order: dict[str, list[str]] = {}
    for path in sorted((data / "multi_turn_func_doc").glob("*.json")):
        for doc in load_lines(path):
            order.setdefault(doc["name"], list(doc["parameters"].get("properties", {})))
    return order


def _call(item: str | dict[str, Any], order: dict[str, list[str]]) -> dict[str, Any]:
    """A multi-turn call string `cd(folder='x')`, or an AST ground truth {name: {param: [options]}},
    as {name, arguments}."""
    if isinstance(item, str):
        node = ast.parse(item, mode="eval").body
        assert isinstance(node, ast.Call)
        name = ast.unparse(node.func)
        positional = zip(order.get(name, []), [ast.literal_eval(a) for a in node.args], strict=False)
        return {"name": name, "arguments": {**dict(positional),
                                            **{k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}}}
    (name, params), = item.items()
    return {"name": name, "arguments": _chosen(params)}


def _chosen(params: dict[str, list[Any]]) -> dict[str, Any]:
    """The first acceptable value of each parameter, left out where leaving it out is acceptable
    (an explicit null for an optional string would fail the client's schema); nested dict values
    hold options likewise."""
    chosen = {}
    for key, options in params.items():
        if _OMITTED in options:
            continue
        value = options[0]
        chosen[key] = _chosen(value) if isinstance(value, dict) else value
    return chosen


def _python_text(calls: list[dict[str, Any]]) -> str:
    """BFCL's prompt-mode answer format: `[f(a=1), g(b='x')]`."""
    parts = [f"{call['name']}({', '.join(f'{k}={v!r}' for k, v in call['arguments'].items())})" for call in calls]
    return "[" + ", ".join(parts) + "]"


def replay_decision(truths: dict[str, list[list[dict[str, Any]]]]) -> Callable[[dict[str, Any]], Reply]:
    """The lane's decision question (agent/decide.py) answered as the replay goes on: the turn's
    first ground-truth call while nothing has run for it, else "answer"."""
    def decide(body: dict[str, Any]) -> Reply:
        question = body["messages"][-1]["content"]
        for user, calls in truths.items():
            if f"The user's message: {user.strip()[:200]}" in question and calls and NOTHING_RAN in question:
                return Reply(content=json.dumps({"next": calls[0]["name"].replace(".", "_")}))
        return Reply(content=json.dumps({"next": "answer"}))
    return decide


def replay(truths: dict[str, list[list[dict[str, Any]]]]) -> Callable[[dict[str, Any]], Reply]:
    """The script: the latest known user message picks the turn; anything after it means the
    turn's calls were already answered."""
    def script(body: dict[str, Any]) -> Reply:
        messages = body.get("messages", [])
        for position in range(len(messages) - 1, -1, -1):
            message = messages[position]
            if message.get("role") == "user" and message.get("content") in truths:
                calls = truths[message["content"]]
                if position < len(messages) - 1 or not calls:
                    return Reply(content=TURN_DONE if calls else PLAIN_ANSWER)
                if body.get("tools"):  # BFCL offers `a.b` as `a_b` to OpenAI-style models
                    return Reply(tool_calls=held([{"name": c["name"].replace(".", "_"), "arguments": c["arguments"]}
                                                  for c in calls], body))
                return Reply(content=_python_text(calls))
        return Reply(content=PLAIN_ANSWER)
    return script


def held(calls: list[dict[str, Any]], body: dict[str, Any]) -> list[dict[str, Any]]:
    """The turn's calls as the request admits them: one call (to the tool forced, else the first)
    where a call is forced to one tool; all of them where the reply is free or a list of calls
    (written natively, as the replay always does: a list's schema names only the tools the forced
    call is offered, and a plumbing check does not stand for a model's choice among them)."""
    choice = body.get("tool_choice")
    if several_allowed(body) is None and (isinstance(choice, dict) or choice == "required"):
        named = choice["function"]["name"] if isinstance(choice, dict) else None
        return [next((c for c in calls if c["name"] == named), calls[0])]
    return calls
