"""What the lane tells a small model when its turn goes wrong, decided from plain data.

Measured on Qwen2.5-Coder-1.5B through the lane: the model describes a call in prose ("you can call
the memory function") instead of making it, writes call-shaped JSON that does not fit the tool,
repeats one call with the same arguments until the iterations run out, and ends turns with an
empty answer that later turns then imitate. Each has a remedy here:
* one corrective message per turn when a reply makes no call but names a tool that has not run in
  this session or spells a call that did not parse, one when a reply is empty, and one when it
  answers before a tool the user's request names has run ("run X, then save it to memory");
* a repeated identical call is not run again: the model is told the earlier result (or error);
  a third identical call ends the turn;
* a final answer is never empty: when the model gives none, the lane says what ran and what failed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..store.claims import named_tools
from ..tools.execute import Outcome, refused
from ..tools.validation import example_arguments
from .toolcalls import described_call

# Asking twice makes a third identical call the end of the turn.
MAX_IDENTICAL_CALLS = 2
RESULT_PREVIEW_CHARS = 300

_CALL_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')


@dataclass
class TurnLedger:
    """What this turn has run and said, keyed by call (name + arguments as JSON)."""

    outcomes: dict[str, Outcome] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    # Correction.once_per of those given, and "guess" once a call to a tool that does not exist
    # has forced tool_call
    corrected: set[str] = field(default_factory=set)

    def attempt(self, name: str, arguments: Any) -> tuple[str, Outcome | None]:
        """Count a call; its key and the outcome of the same call made earlier in the turn."""
        key = call_key(name, arguments)
        self.attempts[key] = self.attempts.get(key, 0) + 1
        return key, self.outcomes.get(key)

    def too_many(self, key: str) -> bool:
        return self.attempts.get(key, 0) > MAX_IDENTICAL_CALLS


def call_key(name: str, arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            pass
    return f"{name}:{json.dumps(arguments, sort_keys=True, ensure_ascii=False)}"


def repeated(name: str, arguments: Any, earlier: Outcome) -> Outcome:
    """The refusal a repeated identical call gets instead of running again."""
    if earlier.status == "ok":
        reason = (f"Already done: this exact call ran earlier in this turn and returned: "
                  f"{_preview(earlier.output)}\nDo not call it again. Reply to the user now with that result.")
    else:
        reason = (f"Not run: this exact call already failed in this turn with: {_preview(earlier.output)}\n"
                  "Do not repeat it. Call a tool with different arguments, or tell the user what failed.")
    return refused(name, reason, arguments)


@dataclass(frozen=True)
class Correction:
    """The note the model reads next, and the tool its next reply must call (None: free reply)."""

    note: str
    force: str | None = None
    kind: str = "call"  # "call": a call told, spelled or named but not made; "empty": no reply;
    # "unfinished": an answer while a tool the user's request names has not run in this turn

    @property
    def once_per(self) -> str:
        """What the correction is given once per turn for: its kind, and for an unfinished request
        each tool the user named ("run X, then save it to memory" may need both forced)."""
        return f"{self.kind}:{self.force}" if self.kind == "unfinished" else self.kind


@dataclass(frozen=True)
class TurnFacts:
    """What a correction is decided from, besides the reply."""

    request: str  # the user's message of this turn
    offered: dict[str, dict[str, Any]]  # each offered tool's argument schema
    ran_in_session: set[str]
    ran_in_turn: set[str]
    last_result: str | None = None  # the latest result of a tool that ran ok in this turn


def correction(content: str, facts: TurnFacts) -> Correction | None:
    """The correction for a reply that made no call, or None when it is a real answer.

    A call is forced (the llm decodes under a grammar) only where the reply told the call in full,
    or the user's own words named the tool: a tool named in a summary is a claim, not a task."""
    text = content.strip()
    asked = requested_tools(facts.request, facts.offered, exclude=facts.ran_in_turn)
    if not text:
        return Correction("Your reply was empty. Answer the user now in one or two sentences, using the "
                          "tool results above; or call a tool if the task still needs one.",
                          asked[0] if asked else None, "empty")
    return _unmade_call(text, facts, asked) or _unfinished(facts, asked)


def _unmade_call(text: str, facts: TurnFacts, asked: list[str]) -> Correction | None:
    """A call the reply told, spelled or named without making it."""
    offered = facts.offered
    described = described_call(text, offered.get)
    if described is not None and described.name not in facts.ran_in_session:
        arguments = json.dumps(described.arguments, ensure_ascii=False)
        return Correction(f"You described a call to {described.name} but did not make it, so nothing ran. "
                          f'To run it, reply with only:\n<tool_call>\n{{"name": "{described.name}", '
                          f'"arguments": {arguments}}}\n</tool_call>', described.name)
    spelled = [n for n in _CALL_NAME.findall(text) if n in offered]
    if spelled:
        return Correction(f"That was not a valid call, so {spelled[0]} did not run. To call a tool, reply "
                          f"with only:\n{call_example(spelled[0], offered[spelled[0]])}", spelled[0])
    mentioned = named_tools(text, frozenset(offered))
    named = [n for n in offered if n not in facts.ran_in_session and n in mentioned]
    if not named:
        return None
    tool = next((n for n in asked if n in named), None)
    if tool is not None:
        return Correction(f"The user asked for {tool}, and writing about it does not run it. Call it "
                          f"now:\n{call_example(tool, offered[tool])}", tool)
    return Correction(f"You mentioned {named[0]}, but it has not run in this session: a tool only runs when "
                      f"you call it. If the request needs it, call it now:\n"
                      f"{call_example(named[0], offered[named[0]])}")


def _unfinished(facts: TurnFacts, asked: list[str]) -> Correction | None:
    """An answer while a tool the user's request names has not run in this turn."""
    if not asked:
        return None
    tool = asked[0]
    latest = f" The latest tool result was: {_preview(facts.last_result)}" if facts.last_result else ""
    return Correction(f"The user also asked for {tool}, which has not run yet.{latest} Call {tool} now, "
                      f"with the arguments the user's request needs.", tool, "unfinished")


def requested_tools(request: str, offered: dict[str, Any], *, exclude: set[str]) -> list[str]:
    """The offered tools the user's words name, in the order the request names them."""
    lowered = request.lower()
    named = [n for n in offered if n not in exclude and named_in(n, request)]
    return sorted(named, key=lambda n: min(lowered.find(p.rstrip("s")) for p in re.findall(r"[a-z]+", n.lower())))


def named_in(tool: str, request: str) -> bool:
    """Whether every word of a tool's name is in the request ("search my past sessions" names
    session_search), plurals included."""
    words = {w.rstrip("s") for w in re.findall(r"[a-z]+", request.lower())}
    return all(part.rstrip("s") in words for part in re.findall(r"[a-z]+", tool.lower()))


def call_example(name: str, schema: dict[str, Any]) -> str:
    arguments = json.dumps(example_arguments(schema), ensure_ascii=False)
    return f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'


def fallback_answer(outcomes: list[Outcome]) -> str:
    """A final answer the lane writes when the model wrote none: what ran and what failed."""
    if not outcomes:
        return "I could not produce an answer to that. No tool ran."
    lines = [f"- {o.tool_name} {'returned' if o.status == 'ok' else o.status + ':'} {_preview(o.output)}"
             for o in outcomes]
    return "The model gave no final answer. What happened in this turn:\n" + "\n".join(lines)


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= RESULT_PREVIEW_CHARS else flat[:RESULT_PREVIEW_CHARS] + "…"
