"""A scripted model for the agent-client benchmarks (scripts/bench/claude_code.py, codex_cli.py):
the wiring check of a real client (Claude Code, Codex) against the lane without a real model.

The client brings its own tools (proxy mode). For each task the bench announces (`begin`), this
model runs the task's shell command once through whichever shell tool the client offers (Claude
Code's `Bash`, Codex's `shell` / `exec_command`), then answers with what the command printed. It
reads the argument shape from the tool's own schema (a `command` string, a `command` argv list, or
`cmd`), so the same script fits every client. It is a fake: it knows each task's command; what it
proves is the plumbing (request shapes, tool calls returned and their results coming back,
store rows), never the model's judgement.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from stack.agent.decide import ANSWER
from tests.fakes.scripted_model import Reply, ScriptedModel, call, text

# Shell-running tools of the clients, in the order a choice is made among those offered.
SHELL_TOOLS = ("Bash", "shell", "exec_command", "shell_command", "local_shell", "terminal")


@dataclass
class ShellTasks:
    """The task in progress (`begin`), and whether its command has been handed out yet."""

    command: str = ""
    called: bool = False
    calls: list[str] = field(default_factory=list)
    delay_s: float = 0.0  # every reply waits this long, as a slow model's would

    def begin(self, command: str) -> None:
        self.command, self.called = command, False

    def model(self) -> ScriptedModel:
        return ScriptedModel(script=self.reply, decision=self.decision, fit=0.05,
                             model_name="scripted-agent-model")

    def decision(self, body: dict[str, Any]) -> Reply:
        """The shell tool until the task's command ran, then "answer"."""
        choices = body["response_format"]["json_schema"]["schema"]["properties"]["next"]["enum"]
        shell = next((name for name in SHELL_TOOLS if name in choices), None)
        picked = shell if shell and self.command and not self.called else ANSWER
        return Reply(json.dumps({"next": picked}), delay_s=self.delay_s)

    def reply(self, body: dict[str, Any]) -> Reply:
        tools = {t["function"]["name"]: t["function"] for t in body.get("tools") or []}
        shell = next((name for name in SHELL_TOOLS if name in tools), None)
        if shell and self.command and not self.called:
            self.called = True
            self.calls.append(shell)
            return call(shell, _arguments(tools[shell].get("parameters") or {}, self.command),
                        delay_s=self.delay_s)
        return Reply(_last_result(body.get("messages") or []) or "Done.", delay_s=self.delay_s)


def _arguments(schema: dict[str, Any], command: str) -> dict[str, Any]:
    """`command` in the shape the tool's schema asks for."""
    properties = schema.get("properties") or {}
    if "cmd" in properties and "command" not in properties:
        return {"cmd": command}
    if (properties.get("command") or {}).get("type") == "array":
        return {"command": ["bash", "-lc", command]}
    return {"command": command}


def _last_result(messages: list[dict[str, Any]]) -> str:
    """What the last tool result said, without an envelope a client may wrap it in."""
    for message in reversed(messages):
        if message.get("role") != "tool":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        result = str(content or "")
        try:
            parsed = json.loads(result)
        except ValueError:
            return result.strip()
        if isinstance(parsed, dict):
            return str(parsed.get("output", parsed.get("stdout", result))).strip()
        return result.strip()
    return ""


@dataclass
class HermesSixSteps:
    """The six steps as a competent model behind Hermes Agent would take them, with Hermes's own
    tools (`memory` with a `target`, `terminal`, `session_search` whose result is JSON). It serves
    Hermes directly (the raw llm arm) and the lane's questions in proxy mode (the decision: the
    tool the step still needs, read from the conversation the lane last forwarded)."""

    wanted: str = ANSWER
    delay_s: float = 0.0  # every reply waits this long, as a slow model's would

    def model(self) -> ScriptedModel:
        return ScriptedModel(script=self.reply, decision=self.decision, fit=0.05,
                             model_name="scripted-hermes-model")

    def begin(self, command: str) -> None:
        """Nothing to announce: each step's prompt says what it needs."""

    def decision(self, body: dict[str, Any]) -> Reply:
        choices = body["response_format"]["json_schema"]["schema"]["properties"]["next"]["enum"]
        return Reply(json.dumps({"next": self.wanted if self.wanted in choices else ANSWER}),
                     delay_s=self.delay_s)

    def reply(self, body: dict[str, Any]) -> Reply:
        reply = self._step(body)
        self.wanted = reply.tool_calls[0]["name"] if reply.tool_calls else ANSWER
        reply.delay_s = self.delay_s
        return reply

    def _step(self, body: dict[str, Any]) -> Reply:
        from tests.fakes.six_step_models import _split_turn, competent

        messages = body.get("messages") or []
        ask, turn = _split_turn(messages)
        ask = ask if isinstance(ask, str) else json.dumps(ask)
        called = [c["function"]["name"] for m in turn for c in m.get("tool_calls") or []]
        if "Search my past sessions" in ask:
            return self._search(ask, called, _last_result(turn))
        reply = competent({**body, "messages": [_plain(m) for m in messages]})
        for item in reply.tool_calls or []:
            if item["name"] == "memory":
                item["arguments"] = {**item["arguments"], "target": "memory"}
        return reply

    @staticmethod
    def _search(ask: str, called: list[str], result: str) -> Reply:
        import re

        phrase = ask.split("phrase ", 1)[1].split()[0]
        if not called:
            return call("session_search", {"query": phrase})
        if called == ["session_search"]:
            hit = re.search(r'"session_id":\s*"([^"]+)"', result)
            if not hit:
                return text(f"No past session contains {phrase}.")
            return call("memory", {"action": "add", "target": "memory",
                                   "content": f"Session containing {phrase}: {hit[1]}"})
        return text("I found the session and saved its id to memory.")


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    """A message whose content is text (Hermes may send a list of parts)."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return {**message, "content": content or ""}
