"""The lane's system prompt: short, because a 4B model pays attention per token.

It says who the assistant is, how to use tools (the bridge protocol only when bridges are offered),
that only tools whose results it saw count as used. What it remembered when the session began (a
snapshot, byte-identical for the whole session) follows in a message of its own, so a memory write
moves no cached prefix and different sessions share the prompt and the tools block.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from ..toolsearch.catalog import one_line

BASE = (
    "You are a helpful assistant running on a local model. You act by calling tools: when the user "
    "asks you to remember something, run a command, search past sessions or work with files, call "
    "the tool that does it. Writing about a call does nothing; only a real call runs. Make one call "
    "at a time and wait for its result. When the task is done, reply in one short sentence with the "
    "result. Greetings, thanks and general questions need no tool: just answer them. Only say a "
    "tool was used if you saw its result."
)

BRIDGE = (
    "Tools not listed are hidden: find them with tool_search, then run one with "
    'tool_call(name, arguments).'
)


def promoted_tools_note(schemas: list[dict[str, Any]]) -> str:
    """The deferred tools this turn's request singles out, offered in a message of their own."""
    listed = "\n".join(json.dumps(schema, ensure_ascii=False) for schema in schemas)
    return f"Also available for this request, called like the other tools:\n<tools>\n{listed}\n</tools>"


def system_prompt(*, bridged: bool) -> str:
    """The same text for every session of a profile: templates render the tools block right after
    it, so sessions share the llm's cached prefix up to their first own message."""
    return "\n\n".join([BASE, BRIDGE] if bridged else [BASE])


def memory_note(memory: str) -> str | None:
    """The memory snapshot, in a system message of its own after the prompt and the tools block."""
    return "What you remember (from the memory tool):\n" + memory.strip() if memory.strip() else None


COMPOSE = (
    "You are a helpful assistant on the user's own computer. Answer the user's last message "
    "directly, in one to three short sentences, speaking to them as \"you\", in the language of "
    "their message. The facts below say what the tools returned for it: give the user the numbers, "
    "text, times or output they asked for, quoted from there. Only say something was done (saved, "
    "run, written, found) if the facts show it ran. If nothing ran, answer from what you know or "
    "from the facts about now and this computer, or say plainly what you could not do. "
    "If you cannot tell what or whom the message means, ask the user one short question instead."
)
# What the lane can do, from the tools actually granted; the rest it cannot, and says so.
CAPABILITIES = (
    "What you can do here, only through these tools:\n{tools}\n"
    "Nothing else: you cannot send messages or email, book, buy, pay, call or contact anyone, or "
    "act outside this computer. When asked for such a thing, say plainly that you cannot do it, "
    "and what you can do instead (for example a todo item, or a draft in a file)."
)
CAPABILITY_CHARS = 80
MAX_CAPABILITIES = 40
COMPOSE_RESULT_CHARS = 1500


def turn_facts(request: str, results: Sequence[tuple[str, str, str]], earlier: str = "", *,
               result_chars: int = COMPOSE_RESULT_CHARS) -> str:
    """This turn as facts for the lane's own questions (the decision): what the conversation said
    before, the user's message, and each tool that ran for it as (tool, status, output); no tools
    offered and no history to imitate."""
    return "\n\n".join([*_earlier_part(earlier), f"The user's message: {request.strip()}",
                        _ran_part(results, result_chars, "it")])


def compose_messages(request: str, results: Sequence[tuple[str, str, str]], earlier: str = "",
                     memory: str | None = None, session_tools: Sequence[str] = (),
                     instructions: str = "",
                     tools: Sequence[tuple[str, str]] = (), now: str = "") -> list[dict[str, str]]:
    """The question that writes an answer: the fixed instruction with what the granted `tools`
    can do (a stable, warmed prefix per tool set), the client's own system message
    (`instructions`: "answer in French" holds for the answer too), the facts (`now`: the date and
    this computer, the notes the user asked the lane to keep, earlier turns, this turn's results,
    the tools that ran in the session), then the user's own message, which the model answers as it
    would in a chat."""
    facts = [now] if now else []
    facts += [f"Notes the user asked you to keep:\n{memory.strip()}"] if memory and memory.strip() else []
    facts += [*_earlier_part(earlier), _ran_part(results, COMPOSE_RESULT_CHARS, "the user's last message")]
    facts.append("Tools that ran in this conversation: " + (", ".join(session_tools) or "none"))
    own = [{"role": "system", "content": instructions.strip()}] if instructions.strip() else []
    return [{"role": "system", "content": compose_instruction(tools)}, *own,
            {"role": "system", "content": "\n\n".join(facts)},
            {"role": "user", "content": request.strip()}]


def compose_instruction(tools: Sequence[tuple[str, str]]) -> str:
    """COMPOSE, and what the granted tools can do, one line each."""
    if not tools:
        return COMPOSE
    listed = "\n".join(f"- {name}: {one_line(description)[:CAPABILITY_CHARS]}"
                       for name, description in tools[:MAX_CAPABILITIES])
    if len(tools) > MAX_CAPABILITIES:
        listed += f"\n- and {len(tools) - MAX_CAPABILITIES} more tools of the same kinds"
    return f"{COMPOSE}\n\n{CAPABILITIES.format(tools=listed)}"


def _earlier_part(earlier: str) -> list[str]:
    return [f"Earlier in the conversation:\n{earlier.strip()}"] if earlier.strip() else []


def _ran_part(results: Sequence[tuple[str, str, str]], result_chars: int, what: str) -> str:
    if not results:
        return f"Nothing has run for {what} yet."
    return f"What ran for {what}:\n" + "\n".join(
        f"- {name} ({status}): {_clip(output, result_chars)}" for name, status, output in results)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split()) if limit < 400 else text.strip()
    return text if len(text) <= limit else text[:limit] + " …(cut)"
