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
