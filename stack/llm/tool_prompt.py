"""Offered tools for chat templates that have no place for them.

Many small GGUFs (SmolLM2 among them) ship a chat template that silently drops `tools`, so the
model would be asked to use tools it never saw. When a template renders the same prompt with and
without tools, the engine renders again with the tools described in the system message, in the
Hermes/Qwen `<tool_call>` convention that the shim knows how to read back from plain text.
"""

from __future__ import annotations

import json
from typing import Any

INSTRUCTIONS = (
    "# Tools\n\nYou may call one or more functions to assist with the user query. The function "
    "signatures are within <tools></tools> XML tags:\n<tools>\n{signatures}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)


def with_tools_in_system_message(messages: list[dict[str, Any]],
                                 tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    signatures = "\n".join(json.dumps(tool, separators=(",", ":")) for tool in tools)
    block = INSTRUCTIONS.format(signatures=signatures)
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0], content=f"{messages[0].get('content') or ''}\n\n{block}")
        return [first, *messages[1:]]
    return [{"role": "system", "content": block}, *messages]

