"""Arguments against a tool's JSON schema: parse, coerce what is safe, validate, explain.

A small model learns from the error it gets back, so an error says where the arguments are wrong,
shows the schema and gives an example call that would pass. Coercion is limited to changes that
cannot alter meaning: "42" to 42 for a number, "true" to true for a boolean, 42 to "42" for a string,
an argument name in another case style than the schema's ("full_page" for `fullPage`),
arguments sent without the one object the schema wraps them in (`{"sql": ...}` for Neon's
`{"params": {"sql": ...}}`; the 1.5B model sent them flat again after an error showing the wrapper),
and a year-first date written another way ("2023-10-1", "2023.10.01") where the schema asks for
YYYY-MM-DD (`format: date`, or its description names that format): the 1.5B model copies the user's
"2023.10.1" into a field whose description says 'YYYY-MM-DD'.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
from referencing import Registry
from referencing.exceptions import Unresolvable

from .base import ToolError, numbers_in, spells_a_number

_INTEGER = re.compile(r"^[+-]?\d+$")
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_YEAR_FIRST_DATE = re.compile(r"^(\d{4})([-./])(\d{1,2})\2(\d{1,2})$")
# What a schema's `$ref` may reach: the schema itself, nothing else. jsonschema's default fetches
# any URI it meets (http, https, and through urlopen also file:), so a client's tool whose schema
# refers to file:///etc/passwd would have the lane read that file into the error the model and the
# store see. This registry holds no documents and retrieves none.
_NOTHING_OUTSIDE: Registry[Any] = Registry()
_REFERENCE_KEYS = ("$ref", "$dynamicRef")


def parse_arguments(raw: Any) -> dict[str, Any]:
    """The arguments of a call as an object. OpenAI encodes them as a JSON string; some models send
    an object, a string that holds JSON of a string, or broken JSON."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        raise ToolError(f"arguments must be a JSON object, got {type(raw).__name__}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ToolError(
            f"arguments are not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    if isinstance(value, str):
        raise ToolError(
            "arguments must be a JSON object, not a string that contains JSON: "
            'send {"key": value}, not "{\\"key\\": value}"'
        )
    if not isinstance(value, dict):
        raise ToolError(f"arguments must be a JSON object, got {type(value).__name__}")
    return value


def validate_arguments(name: str, schema: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments, safely coerced, or ToolError with the schema, the error path and an example."""
    coerced = coerce(schema, arguments)
    validator = jsonschema.Draft202012Validator(schema, registry=_NOTHING_OUTSIDE)
    try:
        errors = sorted(validator.iter_errors(coerced), key=lambda e: list(e.absolute_path))
    except Unresolvable as exc:
        raise ToolError(f"the schema of {name} refers to {exc.ref!r}, which is not inside it; "
                        "the lane resolves only references within a schema") from None
    if not errors:
        return coerced
    first = errors[0]
    where = "/".join(str(p) for p in first.absolute_path) or "(top level)"
    raise ToolError(
        f"invalid arguments for {name} at {where}: {first.message}\n"
        f"schema: {json.dumps(schema, separators=(',', ':'))}\n"
        f"example: {json.dumps({'name': name, 'arguments': example_arguments(schema)})}"
    )


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why `schema` is not a valid JSON schema (Draft 2020-12), None when it is: a client's tool
    definition is checked once, on arrival, rather than failing every call made to it."""
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        return f"at {where}: {exc.message}"
    return None


def outside_reference(schema: Any, where: str = "") -> str | None:
    """Where `schema` holds a reference that is not local (`#...`), as `path: $ref 'value'`; None
    when every reference stays inside it. Data keywords (enum, const, default) are searched too: a
    stray "$ref" there costs the client a clear 400, missing a real one could cost a file."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            at = f"{where}/{key}"
            if key in _REFERENCE_KEYS and isinstance(value, str) and not value.startswith("#"):
                return f"{at}: {value!r}"
            found = outside_reference(value, at)
            if found:
                return found
    elif isinstance(schema, list):
        for index, item in enumerate(schema):
            found = outside_reference(item, f"{where}/{index}")
            if found:
                return found
    return None


def explain_schema(name: str, schema: dict[str, Any]) -> str:
    """The schema and an example, for errors raised before validation (broken JSON)."""
    return (
        f"schema of {name}: {json.dumps(schema, separators=(',', ':'))}\n"
        f"example: {json.dumps({'name': name, 'arguments': example_arguments(schema)})}"
    )


def coerce(schema: dict[str, Any], value: Any) -> Any:
    kinds = _types(schema)
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        value = _named_as_schema(_into_sole_object(value, props), props)
        return {k: coerce(props[k], v) if k in props else v for k, v in value.items()}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [coerce(schema["items"], item) for item in value]
    if isinstance(value, str):
        text = value.strip()
        if "integer" in kinds and _INTEGER.match(text):
            return int(text)
        if "number" in kinds and _NUMBER.match(text):
            return float(text) if any(c in text for c in ".eE") else int(text)
        if "boolean" in kinds and text.lower() in ("true", "false"):
            return text.lower() == "true"
        if "string" in kinds and _asks_iso_date(schema):
            return _iso_date(text) or value
    if kinds == {"string"} and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    # A whole number stays whole where the schema says "number": JSON's number admits integers,
    # and a client may read the field as one (Codex's `max_output_tokens`, declared "number",
    # rejects 10000.0: "expected usize"). docs/measurements.md: what that costs on BFCL.
    return value


def without_defaults(schema: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments less each optional one set to its schema's own `default`: such an argument
    says nothing the call would not say without it, and a small model fills them in from the
    schema. For a client's tools (proxy mode), whose schemas declare defaults: seen on BFCL even
    ids, "What is the contact of Adriel" called `adriel_contact(contact_id=1, format="json")`,
    both the declared defaults, where the request asked for neither."""
    props, required = schema.get("properties") or {}, set(schema.get("required") or ())
    return {key: value for key, value in arguments.items()
            if key in required or not isinstance(props.get(key), dict) or "default" not in props[key]
            or not _same(props[key]["default"], value)}


def without_unasked_numbers(schema: dict[str, Any], arguments: dict[str, Any], request: str,
                            context: str) -> dict[str, Any]:
    """The arguments less each optional number that nobody gave: not written in digits in the
    request or in what the conversation said (`context`: its messages and tool results), with the
    request spelling no number in words. Such a number is a setting the model made up, and the
    tool's own default serves the user better. Seen on the 1.5B model: asked to read a three-line
    file back, read_file(path, offset=1, limit=1) showed its first line only, twice; a terminal
    call with timeout -1000000000000000. The lane's own tools (agent/loop.py); a client's tools
    are the client's business."""
    props, required = schema.get("properties") or {}, set(schema.get("required") or ())
    if spells_a_number(request):
        return arguments
    given = numbers_in(f"{request}\n{context}")
    return {key: value for key, value in arguments.items()
            if key in required or not _is_number(value) or not isinstance(props.get(key), dict)
            or props[key].get("type") not in ("integer", "number") or float(value) in given}


def without_unsourced(schema: dict[str, Any], arguments: dict[str, Any], said: str) -> dict[str, Any]:
    """The arguments less each optional text nobody gave: a string none of whose words (runs of
    letters or digits, any script) the conversation (`said`: its messages and calls, the client's
    own instructions, its tools' results) holds, "..." included, for a property that is no choice
    among the schema's own values (`enum`). A client's tool reads a left-out argument as its own
    default; a made-up one it acts on. Seen through proxy mode on the 1.5B model: Hermes's
    session_search(query, session_id="...") failed with "session_id not found: ...". A text the
    model composes from the conversation's words (a note's content) stays; numbers stay."""
    props, required = schema.get("properties") or {}, set(schema.get("required") or ())
    known = set(re.findall(r"\w+", said.casefold()))

    def made_up(key: str, value: Any) -> bool:
        spec = props.get(key)
        return (key not in required and isinstance(spec, dict) and "enum" not in spec
                and isinstance(value, str) and not known & set(re.findall(r"\w+", value.casefold())))

    return {key: value for key, value in arguments.items() if not made_up(key, value)}


def sourced_share(schema: dict[str, Any], arguments: dict[str, Any], said: str) -> float:
    """The share of the words (runs of letters or digits, any script) of the arguments' texts that
    the conversation (`said`) holds: every string at the top level outside a choice among the
    schema's own values (`enum`); 1.0 where there is none. A call whose texts the conversation
    mostly does not hold writes what it has not been told: a second call of one reply that needs
    the first's result guesses it (seen on the 1.5B model through proxy mode: "find the user
    alice, then send her a welcome email" drew send_email to "alice@example.com" beside find_user;
    "run `echo $((6*7))`, then save the output to memory" a memory of "42"). A word counts where
    the conversation holds it anywhere, so that a request in a script without spaces holds its
    words too."""
    props = schema.get("properties") or {}
    said = said.casefold()
    words = [word for key, value in arguments.items() if isinstance(value, str)
             and not (isinstance(props.get(key), dict) and "enum" in props[key])
             for word in re.findall(r"\w+", value.casefold())]
    # held anywhere in the text, not as a whole word: scripts written without spaces (Japanese,
    # Chinese) make a whole request one run of letters (seen: "ユーロ" in "100米ドルと50ユーロを…")
    return sum(word in said for word in words) / len(words) if words else 1.0


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same(default: Any, value: Any) -> bool:
    """Equal as JSON values, a boolean never equal to a number (True == 1 in Python)."""
    if isinstance(default, bool) or isinstance(value, bool):
        return default is value
    return bool(default == value)


def _asks_iso_date(schema: dict[str, Any]) -> bool:
    return schema.get("format") == "date" or "yyyy-mm-dd" in str(schema.get("description", "")).lower()


def _iso_date(text: str) -> str | None:
    """`text` as YYYY-MM-DD when it is a year-first date with a real month and day, else None."""
    match = _YEAR_FIRST_DATE.match(text)
    if not match:
        return None
    year, month, day = int(match[1]), int(match[3]), int(match[4])
    return f"{year:04d}-{month:02d}-{day:02d}" if 1 <= month <= 12 and 1 <= day <= 31 else None


def example_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema's own first `examples` entry, else its required keys with placeholder values."""
    examples = schema.get("examples")
    if isinstance(examples, list) and examples and isinstance(examples[0], dict):
        return examples[0]
    props = schema.get("properties") or {}
    required = schema.get("required") or list(props)[:1]
    return {key: _example_value(key, props.get(key, {})) for key in required}


def _example_value(key: str, schema: dict[str, Any]) -> Any:
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    kind = next(iter(sorted(_types(schema))), "string")
    if kind == "object" and schema.get("properties"):
        return example_arguments(schema)  # a nested object shows its own required keys
    return {
        "integer": 1,
        "number": 1,
        "boolean": True,
        "array": [],
        "object": {},
        "null": None,
    }.get(kind, f"<{key}>")


def _named_as_schema(value: dict[str, Any], props: dict[str, Any]) -> dict[str, Any]:
    """`value` with each unknown key renamed to the one property it spells in another case style
    (`full_page`, `FullPage` -> `fullPage`), unless that property is given too."""
    forms: dict[str, list[str]] = {}
    for prop in props:
        forms.setdefault(_key_form(prop), []).append(prop)
    renamed = {}
    for key, item in value.items():
        same = forms.get(_key_form(key), []) if key not in props else []
        renamed[same[0] if len(same) == 1 and same[0] not in value else key] = item
    return renamed


def _into_sole_object(value: dict[str, Any], props: dict[str, Any]) -> dict[str, Any]:
    """`value` as the content of the schema's only property, when that is an object, `value` does
    not name it, and every key of `value` is one of that object's properties."""
    if len(props) != 1 or not value:
        return value
    (wrapper, inner), = props.items()
    fields = {_key_form(field) for field in inner.get("properties") or {}}
    if "object" not in _types(inner) or _key_form(wrapper) in {_key_form(key) for key in value}:
        return value
    return {wrapper: value} if all(_key_form(key) in fields for key in value) else value


def _key_form(key: str) -> str:
    return re.sub(r"[_\-\s]", "", key).lower()


def _types(schema: dict[str, Any]) -> set[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return set(kind)
    return set()
