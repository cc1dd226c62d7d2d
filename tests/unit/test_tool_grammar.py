"""What of a client's schema the grammar holds (stack/llm/tool_grammar.for_grammar)."""

from stack.llm.tool_grammar import MAX_BOUND, for_grammar

SCHEMA = {"type": "object", "properties": {
    "pattern": {"type": "string", "pattern": "^a+$", "maxLength": 20000, "minLength": 2},
    "tags": {"type": "array", "items": {"type": "string", "pattern": "^#"}, "maxItems": MAX_BOUND + 1},
    "mode": {"enum": [{"pattern": "kept: data, not a schema"}]}},
    "required": ["pattern"]}


def test_huge_bounds_leave_the_grammar_and_small_ones_stay():
    held = for_grammar(SCHEMA)
    assert held["properties"]["pattern"] == {"type": "string", "pattern": "^a+$", "minLength": 2}
    assert "maxItems" not in held["properties"]["tags"]


def test_without_patterns_a_property_named_pattern_and_data_stay():
    held = for_grammar(SCHEMA, patterns=False)
    assert held["properties"]["pattern"] == {"type": "string", "minLength": 2}
    assert held["properties"]["tags"]["items"] == {"type": "string"}
    assert held["properties"]["mode"] == SCHEMA["properties"]["mode"] and held["required"] == ["pattern"]


def test_the_forced_opening_runs_through_constants_into_the_last_property():
    from stack.llm.tool_grammar import forced_opening, grammar_text

    bridged = {"type": "object", "required": ["name", "arguments"], "properties": {
        "name": {"const": "tool_call"}, "arguments": {"type": "object", "required": ["name", "arguments"],
                                                      "properties": {"name": {"const": "memory"},
                                                                     "arguments": SCHEMA}}}}
    opening = forced_opening(bridged)
    # SCHEMA has optional properties: its own opening is the model's to write
    assert opening is not None and opening.rest == SCHEMA and opening.closing == 2
    assert opening.text == '{"name": "tool_call", "arguments": {"name": "memory", "arguments":'
    grammar = grammar_text(for_grammar(opening.rest, patterns=False), opening.closing)
    assert grammar.splitlines()[0] == 'root ::= space lane-rest "}" space "}" space'
    assert sum(line.startswith("root ::=") for line in grammar.splitlines()) == 1


def test_no_opening_where_the_model_has_a_choice_from_the_first_token():
    from stack.llm.tool_grammar import forced_opening

    assert forced_opening(None) is None and forced_opening({"type": "array", "items": {}}) is None
    assert forced_opening({"oneOf": [SCHEMA, SCHEMA]}) is None
    # an optional property could come first, or a second property's value is not a constant
    assert forced_opening(SCHEMA) is None
    two = {"type": "object", "required": ["a", "b"], "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    assert forced_opening(two) is None
    decision = {"type": "object", "required": ["next"], "properties": {"next": {"enum": ["x", "answer"]}}}
    assert forced_opening(decision).text == '{"next":'
