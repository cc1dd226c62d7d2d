"""Template repairs: decided by rendering a probe, never by a template's name."""

from __future__ import annotations

import json

from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from stack.llm.template_quirks import single_braces, wants_object_arguments, with_object_arguments

# The shapes of real templates: Qwen2.5 (tojson of the arguments, the doubled-brace instruction)
# and one that prints `arguments` as it comes (right for OpenAI's JSON strings).
TOJSON = (
    "{% for m in messages %}<{{ m.role }}>{{ m.content }}"
    "{% for c in m.tool_calls or [] %}<call>{\"name\": \"{{ c.function.name }}\", "
    "\"arguments\": {{ c.function.arguments | tojson }}}</call>{% endfor %}{% endfor %}"
    "{{ '{{\"name\": <function-name>, \"arguments\": <args-json-object>}}' }}"
)
RAW = (
    "{% for m in messages %}<{{ m.role }}>{{ m.content }}"
    "{% for c in m.tool_calls or [] %}<call>{{ c.function.arguments }}</call>{% endfor %}{% endfor %}"
)
CALL = {"id": "c1", "type": "function",
        "function": {"name": "memory", "arguments": json.dumps({"action": "add", "content": "x"})}}
HISTORY = [{"role": "user", "content": "remember x"},
           {"role": "assistant", "content": "", "tool_calls": [CALL]},
           {"role": "tool", "tool_call_id": "c1", "content": "saved"}]


def render_with(template: str):
    formatter = Jinja2ChatFormatter(template=template, eos_token="</s>", bos_token="<s>")
    return lambda messages: formatter(messages=messages).prompt


def test_a_tojson_template_gets_objects_and_shows_the_call_as_the_model_should_write_it() -> None:
    render = render_with(TOJSON)
    assert wants_object_arguments(render)
    before, after = render(HISTORY), render(with_object_arguments(HISTORY))
    assert '"arguments": "{\\"action\\"' in before  # the defect: double-encoded
    assert '<call>{"name": "memory", "arguments": {"action": "add", "content": "x"}}</call>' in after


def test_a_template_that_prints_arguments_as_given_keeps_strings() -> None:
    render = render_with(RAW)
    assert not wants_object_arguments(render)
    assert '<call>{"action": "add", "content": "x"}</call>' in render(HISTORY)


def test_arguments_that_are_not_a_json_object_are_left_alone() -> None:
    broken = {**CALL, "function": {"name": "memory", "arguments": "{not json"}}
    message = {"role": "assistant", "content": "", "tool_calls": [broken]}
    assert with_object_arguments([message]) == [message]
    assert with_object_arguments(HISTORY[:1]) == HISTORY[:1]


def test_the_doubled_brace_instruction_is_printed_single() -> None:
    rendered = render_with(TOJSON)(HISTORY)
    assert '{{"name": <function-name>' in rendered
    assert single_braces(rendered).endswith('{"name": <function-name>, "arguments": <args-json-object>}')
