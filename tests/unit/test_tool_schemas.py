"""The core tools' schemas: valid, strict, and short, since a 4B model reads them every call."""

from __future__ import annotations

import json

import jsonschema
import pytest

from stack.config import DEFAULT_CORE_TOOLS
from stack.tools import clarify, files, memory, session_search, terminal, todo
from stack.tools.base import ToolError
from stack.tools.registry import builtin_tools
from stack.tools.validation import (
    example_arguments,
    outside_reference,
    validate_arguments,
    without_unasked_numbers,
)

TOOLS = [tool for module in (memory, terminal, session_search, files, todo, clarify)
         for tool in module.TOOLS]


def test_every_default_core_tool_is_a_registered_core_tool():
    # clarify is checked with them but deferred: offered directly, a 1.5B model asked it back for greetings
    assert sorted(tool.name for tool in TOOLS if tool.name != "clarify") == sorted(DEFAULT_CORE_TOOLS)
    assert {tool.name for tool in TOOLS} <= {tool.name for tool in builtin_tools()}


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.name)
def test_schema_is_valid_strict_and_short(tool):
    schema = tool.parameters
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert set(schema["required"]) <= set(schema["properties"])
    assert tool.description.endswith(".") and ". " not in tool.description  # one sentence
    assert len(tool.description) <= 100
    assert len(json.dumps(tool.openai_schema(), separators=(",", ":"))) <= 600
    example = example_arguments(schema)
    assert validate_arguments(tool.name, schema, example) == example


def test_an_example_fills_nested_objects_with_their_required_keys():
    # Neon's run_sql wraps everything in `params`; `{"params": {}}` taught the model nothing.
    schema = {"type": "object", "required": ["params"], "properties": {"params": {
        "type": "object", "required": ["sql", "projectId"],
        "properties": {"sql": {"type": "string"}, "projectId": {"type": "string"},
                       "branchId": {"type": "string"}}}}}
    assert example_arguments(schema) == {"params": {"sql": "<sql>", "projectId": "<projectId>"}}
    assert example_arguments({"type": "object", "required": ["meta"],
                              "properties": {"meta": {"type": "object"}}}) == {"meta": {}}


def test_arguments_sent_without_the_object_the_schema_wraps_them_in_are_wrapped():
    schema = {"type": "object", "required": ["params"], "additionalProperties": False,
              "properties": {"params": {
                  "type": "object", "required": ["sql", "projectId"], "additionalProperties": False,
                  "properties": {"sql": {"type": "string"}, "projectId": {"type": "string"},
                                 "limit": {"type": "integer"}}}}}
    assert validate_arguments("run_sql", schema, {"sql": "SELECT 1", "project_id": "p1", "limit": "5"}) == \
        {"params": {"sql": "SELECT 1", "projectId": "p1", "limit": 5}}
    assert validate_arguments("run_sql", schema, {"Params": {"sql": "SELECT 1", "projectId": "p1"}}) == \
        {"params": {"sql": "SELECT 1", "projectId": "p1"}}
    # A key the object does not have, or an empty call: nothing is guessed, the error explains.
    for unwrappable in ({"sql": "SELECT 1", "projectId": "p1", "database": "d"}, {}):
        with pytest.raises(ToolError, match="invalid arguments for run_sql"):
            validate_arguments("run_sql", schema, unwrappable)
    two = {"type": "object", "properties": {"params": schema["properties"]["params"], "dry": {"type": "boolean"}}}
    assert validate_arguments("run_sql", two, {"sql": "SELECT 1"}) == {"sql": "SELECT 1"}


def test_an_argument_named_in_another_case_style_is_read_as_the_schema_names_it():
    schema = {"type": "object", "additionalProperties": False,
              "properties": {"fullPage": {"type": "boolean"}, "scale": {"type": "string"},
                             "page_id": {"type": "string"}, "pageId": {"type": "string"}}}
    assert validate_arguments("shot", schema, {"full_page": "true", "Scale": "css"}) == \
        {"fullPage": True, "scale": "css"}
    # Two properties share the spelling, or the right one is given too: nothing is guessed.
    for ambiguous in ({"PAGE-ID": "x"}, {"full_page": True, "fullPage": False}):
        with pytest.raises(ToolError, match="Additional properties"):
            validate_arguments("shot", schema, ambiguous)


def test_a_year_first_date_is_written_as_the_schema_asks_and_nothing_else_is_touched():
    described = {"type": "string", "description": "The date of the event, in the format 'YYYY-MM-DD'."}
    schema = {"type": "object", "properties": {"date": described, "day": {"type": "string", "format": "date"},
                                               "note": {"type": "string"}}}
    assert validate_arguments("find", schema, {"date": "2023.10.1", "day": "2024/2/9", "note": "2023.10.1"}) == \
        {"date": "2023-10-01", "day": "2024-02-09", "note": "2023.10.1"}
    # Not a year-first date, or no such day: left as written (the schema does not say more).
    for kept in ("10/1/2023", "2023-13-01", "2023-10-01T10:00", "next Saturday", "2023.10-1"):
        assert validate_arguments("find", schema, {"date": kept}) == {"date": kept}


READ = next(tool for tool in files.TOOLS if tool.name == "read_file").parameters
TERMINAL = next(tool for tool in terminal.TOOLS if tool.name == "terminal").parameters


@pytest.mark.parametrize("schema, arguments, request_, context, kept", [
    # made up: the whole file was asked for, the range is the model's
    (READ, {"path": "groceries.txt", "offset": 1, "limit": 1}, "read it back to me please", "",
     {"path": "groceries.txt"}),
    (TERMINAL, {"command": "hostname", "timeout": -1000000000000000}, "what's this machine called?", "",
     {"command": "hostname"}),
    # given: in the request's digits, in its words, or in what the conversation said
    (READ, {"path": "a.txt", "limit": 5}, "show me the first 5 lines of a.txt", "", {"path": "a.txt", "limit": 5}),
    (READ, {"path": "a.txt", "limit": 3}, "the first three lines of a.txt", "", {"path": "a.txt", "limit": 3}),
    (READ, {"path": "a.txt", "offset": 41}, "go on", "truncated: continue with offset=41",
     {"path": "a.txt", "offset": 41}),
    # a number the conversation spelled only as part of an earlier message's words is no source
    (READ, {"path": "a.txt", "limit": 1}, "read a.txt", "that one's done", {"path": "a.txt"}),
])
def test_an_optional_number_nobody_gave_is_left_out(schema, arguments, request_, context, kept):
    assert without_unasked_numbers(schema, arguments, request_, context) == kept


def test_required_numbers_and_other_values_are_never_left_out():
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "flag": {"type": "boolean"},
                                               "name": {"type": "string"}}, "required": ["n"]}
    arguments = {"n": 7, "flag": True, "name": "x"}
    assert without_unasked_numbers(schema, arguments, "do it", "") == arguments


def test_a_reference_outside_the_schema_is_never_fetched(tmp_path):
    """jsonschema's default would open the file (or URL) and show its contents in the error."""
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"type": "string", "enum": ["ORCHID-4821"]}))
    schema = {"type": "object", "properties": {"city": {"$ref": secret.as_uri()}}}
    with pytest.raises(ToolError) as raised:
        validate_arguments("read_it", schema, {"city": "guess"})
    assert "ORCHID-4821" not in str(raised.value)
    assert secret.as_uri() in str(raised.value) and "read_it" in str(raised.value)


def test_local_references_resolve():
    schema = {"type": "object", "$defs": {"n": {"type": "integer"}},
              "properties": {"a": {"$ref": "#/$defs/n"}}, "required": ["a"]}
    assert validate_arguments("f", schema, {"a": 3}) == {"a": 3}
    with pytest.raises(ToolError, match="at a"):
        validate_arguments("f", schema, {"a": "three"})


@pytest.mark.parametrize("schema, found", [
    ({"properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"$ref": "#"}}}, None),
    ({"properties": {"a": {"$ref": "file:///etc/passwd"}}}, "/properties/a/$ref: 'file:///etc/passwd'"),
    ({"anyOf": [{"type": "null"}, {"$dynamicRef": "https://x/s"}]}, "/anyOf/1/$dynamicRef: 'https://x/s'"),
    ({"$defs": {"a": {"$ref": "other.json#/a"}}}, "/$defs/a/$ref: 'other.json#/a'"),
    ({"properties": {"$ref": {"type": "string"}}}, None),  # a property named $ref is no reference
])
def test_outside_reference_finds_any_reference_that_leaves_the_schema(schema, found):
    assert outside_reference(schema) == found
