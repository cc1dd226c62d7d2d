"""Recovering tool calls that a small model wrote as text."""

import json

import pytest

from stack.agent.toolcalls import ToolCall, as_spelled, extract_calls, guessed_call, python_calls, unmistakable_calls

SCHEMAS = {
    "memory": {
        "type": "object",
        "properties": {"action": {"type": "string", "enum": ["add", "read"]},
                       "content": {"type": "string"}},
        "required": ["action"],
        "additionalProperties": False,
    },
    "terminal": {
        "type": "object",
        "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
        "required": ["command"],
        "additionalProperties": False,
    },
}


def offered(name):
    return SCHEMAS.get(name)


def names_and_args(text):
    return [(c.name, c.arguments) for c in extract_calls(text, offered)]


def test_hermes_tagged_call():
    text = 'Sure.\n<tool_call>\n{"name": "memory", "arguments": {"action": "add", "content": "x"}}\n</tool_call>'
    assert names_and_args(text) == [("memory", {"action": "add", "content": "x"})]


def test_tagged_call_without_closing_tag_at_end():
    text = '<tool_call>{"name": "terminal", "arguments": {"command": "ls"}}'
    assert names_and_args(text) == [("terminal", {"command": "ls"})]


def test_several_tagged_calls_in_one_message():
    text = ('<tool_call>{"name": "terminal", "arguments": {"command": "echo 1"}}</tool_call>'
            '<tool_call>{"name": "memory", "arguments": {"action": "read"}}</tool_call>')
    assert [n for n, _ in names_and_args(text)] == ["terminal", "memory"]


def test_bare_json_object_in_prose():
    text = 'I will run it: {"name": "terminal", "arguments": {"command": "echo $((6*7))"}} now.'
    assert names_and_args(text) == [("terminal", {"command": "echo $((6*7))"})]


def test_fenced_json_block_and_parameters_key():
    text = 'Calling:\n```json\n{"name": "memory", "parameters": {"action": "read"}}\n```'
    assert names_and_args(text) == [("memory", {"action": "read"})]


def test_list_of_calls_in_a_fence():
    text = ('```json\n[{"name": "terminal", "arguments": {"command": "date"}},'
            ' {"name": "memory", "arguments": {"action": "read"}}]\n```')
    assert [n for n, _ in names_and_args(text)] == ["terminal", "memory"]


def test_openai_function_wrapper_shape():
    text = '{"type": "function", "function": {"name": "terminal", "arguments": {"command": "ls"}}}'
    assert names_and_args(text) == [("terminal", {"command": "ls"})]


def test_safe_coercion_in_untagged_call():
    text = '{"name": "terminal", "arguments": {"command": "sleep 1", "timeout": "5"}}'
    assert names_and_args(text) == [("terminal", {"command": "sleep 1", "timeout": 5})]


def test_unknown_tool_name_is_plain_content():
    text = '<tool_call>{"name": "web_browser", "arguments": {"url": "x"}}</tool_call>'
    assert names_and_args(text) == []


def test_an_unmistakable_call_to_an_unknown_tool_is_a_guess():
    for text in ('<tool_call>{"name": "calendar", "arguments": {"title": "Standup"}}</tool_call>',
                 'Sure:\n```json\n{"name": "calendar", "arguments": {"title": "Standup"}}\n```',
                 ' {"name": "calendar", "title": "Standup"} '):
        guess = guessed_call(text, offered)
        assert guess is not None and guess.origin == "content", text
        assert (guess.name, guess.arguments) == ("calendar", {"title": "Standup"})


def test_prose_quoting_an_unknown_call_or_an_offered_tool_is_no_guess():
    assert guessed_call('I would call {"name": "calendar", "arguments": {}} for that.', offered) is None
    assert guessed_call('```json\n{"name": "memory", "arguments": {"x": 1}}\n```', offered) is None
    assert guessed_call('```json\n{"title": "Standup"}\n```', offered) is None
    assert guessed_call("", offered) is None


def test_untagged_json_with_invalid_arguments_is_plain_content():
    text = 'Example: {"name": "terminal", "arguments": {"cmd": "ls"}}'
    assert names_and_args(text) == []


def test_json_that_is_not_a_call_is_plain_content():
    text = 'The config is {"name": "terminal", "color": "blue"} and {"a": 1}.'
    assert names_and_args(text) == []


def test_prose_mentioning_a_tool_is_not_a_call():
    assert names_and_args("I used the terminal tool and memory to do it.") == []


def test_tagged_call_with_broken_json_is_kept_for_an_error_reply():
    text = '<tool_call>{"name": "terminal", "arguments": {"command": "ls"</tool_call>'
    calls = extract_calls(text, offered)
    assert [c.name for c in calls] == ["terminal"]
    assert isinstance(calls[0].arguments, str)


def test_tagged_call_with_wrong_arguments_is_kept_for_an_error_reply():
    text = '<tool_call>{"name": "terminal", "arguments": "{\\"command\\": \\"ls\\"}"}</tool_call>'
    calls = extract_calls(text, offered)
    assert [(c.name, c.arguments) for c in calls] == [("terminal", '{"command": "ls"}')]


def test_each_call_gets_a_distinct_id():
    text = ('<tool_call>{"name": "memory", "arguments": {"action": "read"}}</tool_call>'
            '<tool_call>{"name": "memory", "arguments": {"action": "read"}}</tool_call>')
    ids = [c.id for c in extract_calls(text, offered)]
    assert len(set(ids)) == 2


def test_doubled_braces_copied_from_a_template_still_make_a_call():
    text = '{{"name": "terminal", "arguments": {"command": "echo $((6*7))"}}}'
    assert names_and_args(text) == [("terminal", {"command": "echo $((6*7))"})]
    tagged = '<tool_call>\n{{"name": "memory", "arguments": {"action": "add", "content": "42"}}}\n</tool_call>'
    assert names_and_args(tagged) == [("memory", {"action": "add", "content": "42"})]


def test_arguments_flattened_beside_the_name_count_only_when_they_fit_the_schema():
    assert names_and_args('{{"name": "terminal", "command": "echo hi", "timeout": 10}}') == [
        ("terminal", {"command": "echo hi", "timeout": 10})]
    assert names_and_args('{"name": "terminal", "cmd": "echo hi"}') == []
    # a name with both flattened keys and an arguments object is no known shape
    assert names_and_args('{"name": "terminal", "arguments": {"command": "ls"}, "why": "x"}') == []


def test_function_named_as_a_string_beside_the_arguments():
    """Measured on Qwen2.5-Coder-1.5B: {"function": NAME, "arguments": {...}}."""
    text = '{"function": "memory", "arguments": {"action": "add", "content": "ORCHID-4349"}}'
    assert names_and_args(text) == [("memory", {"action": "add", "content": "ORCHID-4349"})]


def test_python_style_calls_to_offered_tools_are_recovered():
    calls = python_calls('[terminal(command="ls (all)", timeout="5"), memory(action="read")]', SCHEMAS.get)
    assert [(c.name, c.arguments, c.origin) for c in calls] == [
        ("terminal", {"command": "ls (all)", "timeout": 5}, "content"),
        ("memory", {"action": "read"}, "content")]


def test_python_style_text_that_is_no_call_of_an_offered_tool_is_left_alone():
    for text in ('terminal("ls")', "terminal(command=ls)", 'shell.terminal(command="ls")',
                 'memory(action="forget")', 'weather(city="Paris")', "terminal(command="):
        assert python_calls(text, SCHEMAS.get) == [], text


def test_unmistakable_calls_keep_any_name_and_arguments():
    calls = unmistakable_calls('```json\n{"name": "memory", "arguments": {"action": "forget"}}\n```')
    assert [(c.name, c.arguments) for c in calls] == [("memory", {"action": "forget"})]
    assert unmistakable_calls('I would use {"name": "memory", "arguments": {}} here.') == []


@pytest.mark.parametrize("request_text, arguments, path", [
    ("make a new file shoping.txt with eggs", {"path": "shopping.txt"}, "shoping.txt"),  # respelled: put back
    ("rename notes_old.txt to notes.txt", {"path": "notes.txt"}, "notes.txt"),  # the request holds it
    ("rename notes_old.txt to notes.txt", {"path": "notes_new.txt"}, "notes_new.txt"),  # near neither alone
    ("open report.md", {"path": "report.txt"}, "report.txt"),  # another extension: another file
    ("what is in shoping.txt?", {"name": "read_file", "arguments": {"path": "shopping.txt"}}, "shoping.txt"),
])
def test_a_file_name_is_spelled_as_the_request_spells_it(request_text, arguments, path):
    for raw in (arguments, json.dumps(arguments)):
        fixed = as_spelled(ToolCall("c1", "read_file", raw, "native"), request_text).arguments
        fixed = json.loads(fixed) if isinstance(fixed, str) else fixed
        assert (fixed.get("arguments") or fixed)["path"] == path


def test_several_calls_schema_lists_each_tool_under_its_own_schema_first_one_first():
    from stack.agent.parallel_calls import MAX_CALLS_IN_REPLY, several_calls_schema

    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    clock = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}
    anyone = several_calls_schema([weather, clock])
    assert anyone["type"] == "array" and anyone["minItems"] == 1 and anyone["maxItems"] == MAX_CALLS_IN_REPLY
    variants = anyone["items"]["anyOf"]
    assert [v["properties"]["name"]["const"] for v in variants] == ["get_weather", "get_time"]
    assert variants[0]["properties"]["arguments"] == weather["function"]["parameters"]
    assert several_calls_schema([weather])["items"]["properties"]["name"] == {"const": "get_weather"}
    assert several_calls_schema([]) is None
    # With the decision's pick: a call to it first, then calls to any of them.
    led = several_calls_schema([weather, clock], first="get_time")
    assert led["$defs"]["first"]["properties"]["name"] == {"const": "get_time"}
    assert [v["properties"]["name"]["const"] for v in led["$defs"]["call"]["anyOf"]] == ["get_time", "get_weather"]
    lists = led["anyOf"]
    assert [len(s["prefixItems"]) for s in lists] == list(range(1, MAX_CALLS_IN_REPLY + 1))
    assert lists[2]["prefixItems"] == [{"$ref": "#/$defs/first"}, {"$ref": "#/$defs/call"}, {"$ref": "#/$defs/call"}]
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate([{"name": "get_time", "arguments": {}}, {"name": "get_weather", "arguments": {"city": "A"}}],
                        led)
    with pytest.raises(jsonschema.ValidationError):  # the decision's tool comes first
        jsonschema.validate([{"name": "get_weather", "arguments": {"city": "A"}}], led)


def test_distinct_drops_a_call_repeated_in_one_reply_whatever_its_key_order():
    from stack.agent.toolcalls import ToolCall, distinct

    calls = [ToolCall("a", "f", {"x": 1, "y": 2}, "content"), ToolCall("b", "g", "{}", "native"),
             ToolCall("c", "f", '{"y": 2, "x": 1}', "native"), ToolCall("d", "f", {"x": 2}, "content")]
    assert [c.id for c in distinct(calls)] == ["a", "b", "d"]
