"""Deeply nested JSON is refused by a byte scan before json.loads can recurse on it."""

import json

import pytest

from stack.api.chat_request import parse_chat_request
from stack.wire import MAX_JSON_DEPTH, ApiError, json_depth


def request_with_depth(depth: int) -> bytes:
    """A valid chat request whose deepest point is `depth` levels (in an ignored field)."""
    value: object = {}
    for _ in range(depth - 2):
        value = [value]
    return json.dumps({"messages": [{"role": "user", "content": "hi"}], "extra": value}).encode()


@pytest.mark.parametrize("raw,depth", [
    (b"1", 0), (b"{}", 1), (b'[[], {"a": [1]}]', 3),
    (b'{"a": "[[[{{{ not brackets", "b": "\\"]]]"}', 1),
    (b"[" * 100_000 + b"]" * 100_000, 100_000),
])
def test_depth_counts_brackets_outside_strings(raw, depth):
    assert json_depth(raw) == depth


def test_the_limit_itself_is_accepted_and_one_more_level_refused():
    assert json_depth(request_with_depth(MAX_JSON_DEPTH)) == MAX_JSON_DEPTH
    assert parse_chat_request(request_with_depth(MAX_JSON_DEPTH), max_tokens_cap=8).messages
    with pytest.raises(ApiError) as refused:
        parse_chat_request(request_with_depth(MAX_JSON_DEPTH + 1), max_tokens_cap=8)
    assert (refused.value.status, refused.value.code) == (400, "invalid_json")


@pytest.mark.parametrize("raw", [
    b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"a": ' * 100_000 + b"1" + b"}" * 100_000,
    # UTF-16, which json.loads also reads: the byte scan sees through it or json.loads' own
    # RecursionError is turned into the same 400.
    ('{"messages": ' + "[" * 5_000 + "]" * 5_000 + "}").encode("utf-16"),
])
def test_a_body_nested_100000_deep_is_a_400(raw):
    with pytest.raises(ApiError) as refused:
        parse_chat_request(raw, max_tokens_cap=8)
    assert (refused.value.status, refused.value.code) == (400, "invalid_json")
