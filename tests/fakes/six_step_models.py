"""Scripted model policies for the six-step check, served by ScriptedModel over real HTTP.

Each policy is a function from the upstream request body to a Reply, so it reacts to what the
shim actually sent (the stored history, tool results, the offered tools) instead of replaying a
fixed list:

* `competent`: calls the real tools natively, reads their results (the terminal's output, the
  session id session_search returned, the tool tool_search found), follows the prompt's request to
  use the bridge when the bridge is offered, and finally names only the tools its history shows
  ran.
* `text_only_liar`: never makes a native call; writes tool-call-shaped prose and JSON with tool
  names that do not exist, then claims success.
* `never_answers`: streams filler forever, until the shim hangs up.
"""

from __future__ import annotations

import json
import re
from typing import Any

from stack.agent.constrained import AGAIN, SCHEMA_INSTRUCTION
from tests.fakes.scripted_model import Reply, call, text

SEED_ANSWER = "Noted."
_CODENAME = re.compile(r"codename(?: is|:)\s*([A-Z]+-\d+)")
_PHRASE = re.compile(r"phrase (\S+)")
_SESSION_ID = re.compile(r"session id: ([A-Za-z0-9._:-]+)")
_FIRST_HIT = re.compile(r"^- ([A-Za-z0-9_.-]+)\(", re.MULTILINE)
FAKE_SESSION_ID = "20240611_093000_a1b2c3d4"


def competent(body: dict[str, Any]) -> Reply:
    messages = body.get("messages", [])
    ask, turn = _split_turn(messages)
    called = [c["function"]["name"] for m in turn for c in m.get("tool_calls") or []]
    last_result = next((m["content"] for m in reversed(turn) if m["role"] == "tool"), "")

    if "17 * 23" in ask:
        return text("391")
    if "remember" in ask and (codename := _CODENAME.search(ask)):
        if not called:
            return call("memory", {"action": "add", "content": f"Project codename: {codename[1]}"})
        return text(f"Saved: your project codename is {codename[1]}.")
    if "What is my project codename" in ask:
        found = [_CODENAME.search(m.get("content") or "") for m in messages]
        names = [f[1] for f in found if f]
        return text(f"Your project codename is {names[-1]}." if names else "I do not know it.")
    if "Use the terminal" in ask:
        return _terminal_then_memory(called, last_result)
    if "Search my past sessions" in ask and (phrase := _PHRASE.search(ask)):
        return _search_then_memory(phrase[1], called, last_result)
    if "Summarize" in ask:
        used = list(dict.fromkeys(c["function"]["name"] for m in messages
                                  for c in m.get("tool_calls") or []))
        return text("I answered an arithmetic question, saved your codename, ran a command and "
                    f"searched past sessions. Tools I used: {', '.join(used) or 'none'}.")
    if "current time" in ask:
        return _current_time(body.get("tools", []), called, last_result)
    return text(SEED_ANSWER)


def _terminal_then_memory(called: list[str], last_result: str) -> Reply:
    if not called:
        return call("terminal", {"command": "echo $((6*7))"})
    if called == ["terminal"]:
        return call("memory", {"action": "add",
                               "content": f"Output of echo $((6*7)): {_output(last_result)}"})
    return text("I ran the command and saved its output to memory.")


def _search_then_memory(phrase: str, called: list[str], last_result: str) -> Reply:
    if not called:
        return call("session_search", {"query": phrase})
    if called == ["session_search"]:
        hit = _SESSION_ID.search(last_result)
        if not hit:
            return text(f"No past session contains {phrase}.")
        return call("memory", {"action": "add", "content": f"Session containing {phrase}: {hit[1]}"})
    return text("I found the session and saved its id to memory.")


def _current_time(offered: list[dict[str, Any]], called: list[str], last_result: str) -> Reply:
    clock = _clock_among(offered)
    if not called:
        if any(t["function"]["name"] == "tool_search" for t in offered) or not clock:
            return call("tool_search", {"query": "current time"})
        return call(clock, {"timezone": "UTC"})
    if called[-1] == "tool_search" and (found := _FIRST_HIT.search(last_result)):
        return call("tool_call", {"name": found[1], "arguments": {"timezone": "UTC"}})
    return text(f"The tool returned: {last_result}")


def text_only_liar(body: dict[str, Any]) -> Reply:
    ask, _ = _split_turn(body.get("messages", []))
    if "17 * 23" in ask:
        return text("391")
    if "remember" in ask and (codename := _CODENAME.search(ask)):
        return text(f'Saving it now: {{"name": "save_memory", "arguments": {{"fact": '
                    f'"codename {codename[1]}"}}}}\nDone, your codename {codename[1]} is saved.')
    if "What is my project codename" in ask:
        codename = next((m[1] for m in map(_CODENAME.search, _contents(body)) if m), "unknown")
        return text(f"Your project codename is {codename}.")
    if "Use the terminal" in ask:
        return text('<tool_call>{"name": "run_shell", "arguments": {"cmd": "echo $((6*7))"}}'
                    '</tool_call>\nOutput: 42. I saved it with store_note(value="42"). All done!')
    if "Search my past sessions" in ask and (phrase := _PHRASE.search(ask)):
        return text(f'I called search_history(query="{phrase[1]}") and found it in session '
                    f'{FAKE_SESSION_ID}. Saved with {{"tool": "save_memory", "args": '
                    f'{{"fact": "{FAKE_SESSION_ID}"}}}}.')
    if "Summarize" in ask:
        return text("I computed 391, stored your codename, ran echo and searched your history. "
                    "Tools used: save_memory, run_shell, store_note, search_history.")
    if "current time" in ask:
        return text('get_clock(zone="UTC") says it is 12:00 UTC.')
    return text(SEED_ANSWER)


def never_answers(body: dict[str, Any]) -> Reply:
    return Reply(hang=True)


def _split_turn(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """(the latest user message, the messages of this turn after it). A message of the lane's
    that only says how to reply (agent/constrained.py, for a server that ignores response_format)
    is read as such, not as the user's request."""
    for index in range(len(messages) - 1, -1, -1):
        content = messages[index].get("content") or ""
        if messages[index]["role"] == "user" and not content.startswith(
                (SCHEMA_INSTRUCTION, AGAIN.split(":")[0])):
            return messages[index].get("content") or "", messages[index + 1:]
    return "", []


def _clock_among(tools: list[dict[str, Any]]) -> str | None:
    """The offered tool that tells the current time, found by its description, as a model would."""
    for tool in tools:
        description = tool["function"].get("description", "").lower()
        if "current" in description and "time" in description:
            return tool["function"]["name"]
    return None


def _contents(body: dict[str, Any]) -> list[str]:
    return [m.get("content") or "" for m in body.get("messages", [])]


def _output(result: str) -> str:
    """The terminal's output without its 'exit code' header line, kept short."""
    lines = [line for line in result.splitlines() if not line.startswith("exit code")]
    return " ".join(" ".join(lines).split())[:200] or json.dumps(result)[:200]
