"""A proxy client's own conversation, read: what it called, what came back, and how the model
reads it.

A client that sends `tools` sends its whole conversation with every request (stateless, as
OpenAI is), so the calls it made, their results and the latest user message are read from the
request rather than from the store: which calls were made since the user's latest message (the
repeat breaker, the decision's "what ran"), the conversation as the model reads it (with the
bridge protocol where tool search is on), and as the store's rows read it (history.earlier_facts).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..tools.base import plain_words
from .ledger import MAX_IDENTICAL_CALLS, call_key
from .llm_client import ModelReply
from .prompt import BRIDGE
from .records import incoming
from .toolcalls import ToolCall, stored


@dataclass
class ClientHistory:
    """What the client's conversation says about calls: those it made, with their results."""

    calls: list[tuple[str, str, str]]  # (id, name, arguments) of every assistant tool call
    results: dict[str, str]  # tool_call_id -> the result the client sent
    before_user: int  # how many of the calls came before the latest user message

    @property
    def used_before(self) -> list[str]:
        return list(dict.fromkeys(name for _, name, _ in self.calls[:self.before_user]))

    @property
    def used_since(self) -> list[str]:
        return list(dict.fromkeys(name for _, name, _ in self.calls[self.before_user:]))

    @property
    def since_user(self) -> set[str]:
        return set(self.used_since)

    def repeats(self, name: str, arguments: str) -> bool:
        """Whether this call, made again now, would repeat itself: it is the call just answered
        (nothing happened in between that could change its result), or it was made
        MAX_IDENTICAL_CALLS times for this user message already. A call from an earlier user
        message may be made again: the world it reads may have changed."""
        key = call_key(name, arguments)
        since = [call_key(n, a) for _, n, a in self.calls[self.before_user:]]
        return bool(since) and (since[-1] == key or Counter(since)[key] >= MAX_IDENTICAL_CALLS)

    def goes_further(self, arguments: str, request: str) -> bool:
        """Whether a call carries words of the user's latest message (`request`) that no call
        made since that message carried: another step of what was asked, not the same step again
        in other words. Seen with Codex on the 1.5B model: asked for a file whose only line is
        "lane-431859", `touch notes.txt` ran first; written next where the answer was due, `echo
        lane-431859 > notes.txt` is the rest of the request. Seen with Hermes: `memory` written
        again after it had succeeded says nothing the first entry did not. Words in any script
        (plain_words); no word list."""
        carried = set(plain_words(" ".join(a for _, _, a in self.calls[self.before_user:])).split())
        asked = set(plain_words(request).split())
        return bool(asked & set(plain_words(arguments).split()) - carried)

    def result_of(self, name: str, arguments: str) -> str:
        key = call_key(name, arguments)
        found = [self.results.get(i, "") for i, n, a in self.calls if call_key(n, a) == key]
        return found[-1] if found else ""


def client_history(messages: list[dict[str, Any]]) -> ClientHistory:
    calls: list[tuple[str, str, str]] = []
    results: dict[str, str] = {}
    before_user = 0
    for message in messages:
        if message["role"] == "user":
            before_user = len(calls)
        for call in message.get("tool_calls") or []:
            function = call["function"]
            calls.append((call["id"], function["name"], function.get("arguments") or ""))
        if message["role"] == "tool":
            results[message["tool_call_id"]] = message.get("content") or ""
    return ClientHistory(calls, results, before_user)


def unanswerable_results(messages: list[dict[str, Any]]) -> list[str]:
    """tool_call_ids of role=tool messages that answer no call an earlier assistant message made."""
    made: set[str] = set()
    stray = []
    for message in messages:
        made.update(call["id"] for call in message.get("tool_calls") or [])
        if message["role"] == "tool" and message["tool_call_id"] not in made:
            stray.append(message["tool_call_id"])
    return stray


def call_names(messages: list[dict[str, Any]]) -> dict[str, str]:
    """tool_call_id -> the function each assistant call of the conversation named."""
    return {call["id"]: call["function"]["name"] for m in messages for call in m.get("tool_calls") or []}


def as_rows(messages: list[dict[str, Any]], conversation: list[dict[str, Any]] | None = None
            ) -> list[dict[str, Any]]:
    """`messages` as the store keeps them (records.incoming), each result under the tool whose
    call it answers in `conversation` (the messages themselves where not given)."""
    names = call_names(messages if conversation is None else conversation)
    return [incoming(message, names) for message in messages]


# How the lane's own account opens, when the model gave no answer (proxy_turn.no_answer); and what
# the model reads in its place when a client sends it back as an assistant message.
NO_FINAL_ANSWER = "The model gave no final answer."
NO_ANSWER_SHOWN = "(no answer)"


def without_bridge(opening: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as model_messages wrote it, without the bridge protocol: for a request
    that offers no tools (an answer), a note on finding hidden tools has nothing to say."""
    if not opening or opening[0]["role"] != "system" or not str(opening[0]["content"]).endswith(BRIDGE):
        return opening
    rest = str(opening[0]["content"])[:-len(BRIDGE)].rstrip()
    return ([{**opening[0], "content": rest}] if rest else []) + opening[1:]


def model_messages(messages: list[dict[str, Any]], bridged: bool) -> list[dict[str, Any]]:
    """The client's conversation as the model reads it; when tool search is on, the bridge
    protocol joins the client's system message (or opens the conversation). An earlier answer
    that was the lane's own account is shown as NO_ANSWER_SHOWN: seen with Hermes on the 1.5B
    model, which sends the conversation back, the model copied such an account at length (888
    tokens, 154 s) in place of its answer. The results it quoted are in the tool messages. A reply
    that is NO_ANSWER_SHOWN itself is held back (proxy_replies: seen with Hermes, twice in one run
    of the six steps, after an earlier answer was shown so)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role == "tool":
            out.append({"role": "tool", "tool_call_id": message["tool_call_id"],
                        "content": message.get("content") or ""})
            continue
        content = message.get("content") or ""
        if role == "assistant" and isinstance(content, str) and content.startswith(NO_FINAL_ANSWER):
            content = NO_ANSWER_SHOWN
        item: dict[str, Any] = {"role": role, "content": content}
        if message.get("tool_calls"):
            item["tool_calls"] = [{"id": c["id"], "type": "function", "function": c["function"]}
                                  for c in message["tool_calls"]]
        out.append(item)
    if bridged:
        if out and out[0]["role"] == "system":
            out[0] = {**out[0], "content": f"{out[0]['content']}\n\n{BRIDGE}".strip()}
        else:
            out.insert(0, {"role": "system", "content": BRIDGE})
    return out


def read_back(reply: ModelReply, calls: list[ToolCall]) -> dict[str, Any]:
    """The model's reply as it reads it back: a call salvaged from text is in tool_calls now."""
    wire = [{k: v for k, v in stored(c).items() if k != "origin"} for c in calls]
    salvaged = any(c.origin == "content" for c in calls)
    return {"role": "assistant", "content": "" if salvaged else reply.content, "tool_calls": wire}
