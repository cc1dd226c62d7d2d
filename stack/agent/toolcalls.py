"""Tool calls a small model wrote as text instead of `tool_calls`.

Recovered forms: Hermes/Qwen `<tool_call>{...}</tool_call>` (a missing closing tag at the very end is
forgiven), a fenced ```json block, and a bare JSON object `{"name": ..., "arguments": ...}` in prose;
several in one message; doubled braces `{{...}}` and arguments flattened beside the name. A call
only counts when its name is an offered tool. A `<tool_call>` tag is an unmistakable attempt, so
its call goes through even with bad arguments and the model gets the validation error back;
untagged JSON must also validate against the tool's schema, otherwise it is just text (a model
explaining JSON is not calling anything).
"""

from __future__ import annotations

import ast
import difflib
import json
import re
import uuid
from dataclasses import dataclass, replace
from typing import Any, Callable, Literal

from ..tools.base import ToolError
from ..tools.validation import parse_arguments, validate_arguments
from .ledger import call_key

_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_FENCED = re.compile(r"```(?:json|tool_call|tool)?\s*\n?(.*?)```", re.DOTALL)

SchemaLookup = Callable[[str], "dict[str, Any] | None"]


@dataclass(frozen=True)
class ToolCall:
    """One call the model made, the lane's one call type from reply to store. `arguments` are as
    the model gave them: a JSON string on the native channel; an object, or the raw text of a
    tagged call, when recovered from text. `origin` is stored with the execution."""

    id: str
    name: str
    arguments: Any
    origin: Literal["native", "content"]

    def json_arguments(self) -> str:
        """The arguments as JSON text (as the model wrote them, where it wrote text): what an
        execution row keeps."""
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments, ensure_ascii=False)


def extract_calls(text: str, parameters_of: SchemaLookup) -> list[ToolCall]:
    if not text or "{" not in text:
        return []
    tagged = [m.group(1) for m in _TAGGED.finditer(text)]
    if tagged:
        return [call for body in tagged for call in _tagged_calls(body, parameters_of)]
    fenced = [m.group(1) for m in _FENCED.finditer(text)]
    sources = fenced if fenced else [text]
    return [call for source in sources for call in _json_calls(source, parameters_of)]


def _tagged_calls(body: str, parameters_of: SchemaLookup) -> list[ToolCall]:
    try:
        value = json.loads(body)
    except json.JSONDecodeError:
        # `{{"name": ...}}`, copied from a template's doubled braces, holds a well-formed call.
        embedded = _json_calls(body, parameters_of)
        if embedded:
            return embedded
        name = _name_in_broken_json(body)
        if name and parameters_of(name) is not None:
            return [ToolCall(new_call_id(), name, _raw_arguments_text(body), "content")]
        return []
    calls = []
    for item in value if isinstance(value, list) else [value]:
        shape = _call_shape(item)
        if shape and parameters_of(shape[0]) is not None:
            calls.append(ToolCall(new_call_id(), shape[0], shape[1], "content"))
    return calls


def _json_calls(text: str, parameters_of: SchemaLookup) -> list[ToolCall]:
    calls = []
    for value in json_values(text):
        for item in value if isinstance(value, list) else [value]:
            shape = _call_shape(item)
            if not shape:
                continue
            name, raw_arguments = shape
            schema = parameters_of(name)
            if schema is None:
                continue
            try:
                arguments = validate_arguments(name, schema, parse_arguments(raw_arguments))
            except ToolError:
                continue
            calls.append(ToolCall(new_call_id(), name, arguments, "content"))
    return calls


_PYTHON_CALL = re.compile(r"(?<![\w.])([A-Za-z_][\w.]*)\s*\(")


def python_calls(text: str, parameters_of: SchemaLookup) -> list[ToolCall]:
    """Calls written as Python (`get_weather(city="Paris")`, `[f(a=1), g(b=2)]`), the shape small
    models copy from function-calling prompts: only an offered tool's name, keyword arguments with
    literal values, and arguments that pass the tool's schema (like untagged JSON, prose that
    merely shows such a call in passing must fit to count)."""
    calls = []
    for match in _PYTHON_CALL.finditer(text):
        schema = parameters_of(match.group(1))
        if schema is None:
            continue
        arguments = _python_arguments(text, match.start(), match.group(1))
        if arguments is None:
            continue
        try:
            arguments = validate_arguments(match.group(1), schema, arguments)
        except ToolError:
            continue
        calls.append(ToolCall(new_call_id(), match.group(1), arguments, "content"))
    return calls


def _python_arguments(text: str, start: int, name: str) -> dict[str, Any] | None:
    """The keyword arguments of the call that starts at `start`, if it parses as one."""
    for end in (i + 1 for i, char in enumerate(text) if i > start and char == ")"):
        try:
            node = ast.parse(text[start:end].replace(name, "f", 1), mode="eval").body
        except SyntaxError:
            continue
        if not isinstance(node, ast.Call) or node.args:
            return None
        try:
            return {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg is not None}
        except ValueError:
            return None
    return None


def guessed_call(text: str, parameters_of: SchemaLookup) -> ToolCall | None:
    """A call to a tool that is not offered, made unmistakably: tagged, fenced, or the whole reply.
    Small models guess names (`calendar` for a hidden `create-event`); the lane answers the guess
    like any unknown call (with the hidden tools that fit) instead of passing the JSON on as the
    answer. Prose that merely contains such JSON is not a guess."""
    return next((c for c in unmistakable_calls(text) if parameters_of(c.name) is None), None)


def unmistakable_calls(text: str) -> list[ToolCall]:
    """Calls made unmistakably (tagged, fenced, or the whole reply is the JSON), whatever their
    name and however their arguments fit: proxy mode corrects a fenced call whose arguments do not
    fit its tool rather than let call-shaped text through as the answer."""
    whole = text.strip()
    sources = [m.group(1) for m in _TAGGED.finditer(text)] or \
        [m.group(1) for m in _FENCED.finditer(text)] or \
        ([whole] if whole.startswith("{") and whole.endswith("}") else [])
    return [ToolCall(new_call_id(), shape[0], shape[1], "content")
            for source in sources for value in json_values(source) if (shape := _call_shape(value))]


def described_call(text: str, parameters_of: SchemaLookup) -> ToolCall | None:
    """A call told in prose ("I called the memory function with {"action": "add", ...}"): an
    offered tool named in the text and, after it, a JSON object that fits that tool's schema once
    its nulls are dropped. Never run as such (a model also describes calls it made before); the
    agent shows it back to the model as the call to make."""
    for value, position in _json_values_at(text):
        if not isinstance(value, dict):
            continue
        arguments = {k: v for k, v in value.items() if v is not None}
        for name in re.findall(r"[A-Za-z_][\w.-]*", text[:position]):
            schema = parameters_of(name)
            if schema is None:
                continue
            try:
                return ToolCall(new_call_id(), name, validate_arguments(name, schema, arguments), "content")
            except ToolError:
                continue
    return None


def json_values(text: str) -> list[Any]:
    """Every top-level JSON object or array embedded in text, left to right."""
    return [value for value, _ in _json_values_at(text)]


def _json_values_at(text: str) -> list[tuple[Any, int]]:
    """Every top-level JSON object or array embedded in text, left to right, with its offset."""
    decoder = json.JSONDecoder()
    values: list[tuple[Any, int]] = []
    position = 0
    while True:
        starts = [i for i in (text.find("{", position), text.find("[", position)) if i >= 0]
        if not starts:
            return values
        start = min(starts)
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            position = start + 1
            continue
        values.append((value, start))
        position = end


def _call_shape(item: Any) -> tuple[str, Any] | None:
    """(name, arguments) of the shapes models use: {name, arguments|parameters},
    {function: {name, arguments}}, {function: name, arguments}, or the arguments flattened beside the name
    ({name, command, timeout}: untagged, that shape still has to pass the tool's schema)."""
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("function"), dict):
        item = item["function"]
    elif "name" not in item and isinstance(item.get("function"), str):  # {"function": NAME, "arguments"}
        item = {"name": item["function"], **{k: v for k, v in item.items() if k != "function"}}
    name = item.get("name")
    if not isinstance(name, str) or not name:
        return None
    extra = set(item) - {"name", "arguments", "parameters", "id", "type"}
    if extra and ("arguments" in item or "parameters" in item):
        return None
    if extra:
        return name, {key: item[key] for key in extra}
    return name, item.get("arguments", item.get("parameters", {}))


def _name_in_broken_json(body: str) -> str | None:
    match = re.search(r'"name"\s*:\s*"([^"]+)"', body)
    return match.group(1) if match else None


def _raw_arguments_text(body: str) -> str:
    match = re.search(r'"(?:arguments|parameters)"\s*:\s*(.*)', body, re.DOTALL)
    return match.group(1).rstrip().rstrip("}").strip() if match else body


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:12]


def calls_in(content: str, native: list[ToolCall], parameters_of: SchemaLookup) -> list[ToolCall]:
    """The calls of one reply: its native tool_calls, else those written as text, else a guessed
    call to a tool that is not offered (answered with what search finds for it)."""
    if native:
        return native
    calls = extract_calls(content, parameters_of)
    if calls:
        return calls
    guess = guessed_call(content, parameters_of)
    return [guess] if guess else []


def forced(tool: str | None) -> dict[str, Any] | None:
    """OpenAI's tool_choice that makes the next reply a call to `tool` (None: a free reply)."""
    return {"type": "function", "function": {"name": tool}} if tool else None


def stored(call: ToolCall) -> dict[str, Any]:
    """A call as the store keeps it in messages.tool_calls: OpenAI's shape, its arguments as JSON,
    marked when it was salvaged from text."""
    arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
    wire = {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}
    return {**wire, "origin": "content"} if call.origin == "content" else wire


# A file name as a user writes it: a word with an extension ("shoping.txt", "data/q3.csv").
_FILE_NAME = re.compile(r"[\w/-][\w./-]*\.[A-Za-z0-9]{1,5}(?![\w.])")
# How alike a call's file name and the request's must be to be one name misspelt (shopping.txt
# against shoping.txt is 0.96; notes.txt against notes_old.txt 0.82, two different files).
SAME_NAME = 0.9


def as_spelled(call: ToolCall, request: str) -> ToolCall:
    """The call with a file name the model respelled put back as the request spells it. Seen on
    the 1.5B model: asked to "make a new file shoping.txt", it wrote shopping.txt, and the next
    request's file was not there. Only a name the request does not hold, one edit or two from
    exactly one name it does hold, with the same extension, is changed: the user named the file."""
    asked = set(_FILE_NAME.findall(request))
    if not asked:
        return call
    try:
        arguments = parse_arguments(call.arguments)
    except ToolError:
        return call
    respelled = _respelled(arguments, asked)
    if respelled == arguments:
        return call
    raw = json.dumps(respelled, ensure_ascii=False) if isinstance(call.arguments, str) else respelled
    return replace(call, arguments=raw)


def _respelled(value: Any, asked: set[str]) -> Any:
    if isinstance(value, dict):
        return {key: _respelled(item, asked) for key, item in value.items()}
    if not isinstance(value, str) or value in asked or not _FILE_NAME.fullmatch(value):
        return value
    suffix = value.rsplit(".", 1)[1]
    near = [name for name in asked if name.rsplit(".", 1)[1] == suffix
            and difflib.SequenceMatcher(None, name, value).ratio() >= SAME_NAME]
    return near[0] if len(near) == 1 else value


def distinct(calls: list[ToolCall]) -> list[ToolCall]:
    """The calls less those that repeat an earlier one of the same reply (same tool, same
    arguments, ledger.call_key): a client runs each once."""
    kept: dict[str, ToolCall] = {}
    for call in calls:
        kept.setdefault(call_key(call.name, call.arguments), call)
    return list(kept.values())
