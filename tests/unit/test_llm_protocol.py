"""The llm service's request rules and stop-string scanning, without a model."""

from __future__ import annotations

import json

import pytest

from stack.llm.engine import _StopScanner
from stack.llm.protocol import ChatRequest, parse_chat_request
from stack.wire import ApiError, clamp_max_tokens

USER = [{"role": "user", "content": "hi"}]


def parse(body: object, cap: int) -> ChatRequest:
    return parse_chat_request(json.dumps(body).encode(), cap)


@pytest.mark.parametrize("asked, expected", [(None, 64), (0, 64), (-3, 64), (65, 64), (100_000, 64), (64, 64), (5, 5)])
def test_the_cap_clamps_and_never_rejects(asked: int | None, expected: int) -> None:
    assert clamp_max_tokens(asked, 64) == expected


def test_max_completion_tokens_wins_over_max_tokens() -> None:
    request = parse({"messages": USER, "max_tokens": 50, "max_completion_tokens": 7}, 64)
    assert request.max_tokens == 7 and request.requested_max_tokens == 7


def test_include_usage_only_applies_to_streams() -> None:
    options = {"include_usage": True}
    assert parse({"messages": USER, "stream": True, "stream_options": options}, 8).include_usage
    assert not parse({"messages": USER, "stream_options": options}, 8).include_usage


def test_text_parts_are_joined_and_null_content_becomes_empty() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]},
    ]
    parsed = parse({"messages": messages}, 8).messages
    assert parsed[0]["content"] == "a\nb"
    assert parsed[1]["content"] == "" and parsed[1]["tool_calls"] == [{"id": "1"}]


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"messages": "hi"},
        {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
        {"messages": USER, "max_tokens": True},
        {"messages": USER, "max_tokens": 1.5},
        {"messages": USER, "top_p": 2},
        {"messages": USER, "stop": ["a", "b", "c", "d", "e"]},
        {"messages": USER, "stop": 3},
        {"messages": USER, "tools": {"type": "function"}},
        {"messages": USER, "stream_options": []},
        {"messages": USER, "tools": [1]},
        {"messages": USER, "top_k": "5"},
    ],
)
def test_malformed_requests_are_refused(body: object) -> None:
    with pytest.raises(ApiError) as raised:
        parse(body, 8)
    assert raised.value.status == 400


def scan(pieces: list[str], stops: tuple[str, ...]) -> tuple[list[str], bool, str]:
    out: list[str] = []
    scanner = _StopScanner(stops, out.append)
    stopped = any(scanner.feed(p) for p in pieces)
    scanner.flush()
    return out, stopped, scanner.emitted


def test_a_stop_string_split_across_pieces_is_caught_and_never_emitted() -> None:
    out, stopped, text = scan(["Hello <|im", "_e", "nd|> tail"], ("<|im_end|>",))
    assert stopped and text == "Hello " and "".join(out) == "Hello "


def test_a_partial_match_that_does_not_complete_is_released() -> None:
    out, stopped, text = scan(["a <|i", "x b"], ("<|im_end|>",))
    assert not stopped and text == "a <|ix b" and "".join(out) == text
    assert out[0] == "a "  # the possible start of a stop string was held back


def test_the_earliest_of_several_stops_wins() -> None:
    _out, stopped, text = scan(["one, two. three"], (".", ","))
    assert stopped and text == "one"


def test_an_embeddings_request_takes_one_text():
    from stack.llm.protocol import parse_embedding_request

    assert parse_embedding_request(b'{"input": "hello", "model": "m"}') == "hello"
    assert parse_embedding_request(b'{"input": ["hello"]}') == "hello"
    for body in (b'{"input": ["a", "b"]}', b'{"input": ""}', b'{"input": 3}', b'{}',
                 b'{"input": "a", "encoding_format": "base64"}', b'[1]'):
        with pytest.raises(ApiError) as raised:
            parse_embedding_request(body)
        assert raised.value.status == 400
