"""Malformed requests get an OpenAI-shaped error with the right status, never a traceback or a
dropped connection, and never touch the store. No model is needed: none of these reach one."""

import json
import socket
import sqlite3

import httpx
import pytest

from stack.config import Settings
from stack.tools.registry import Registry
from tests.integration.shim_server import ShimServer

LIMIT = 64 * 1024
OK_MESSAGES = [{"role": "user", "content": "hi"}]


def _dead_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}/v1"


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    settings = Settings(home=tmp_path_factory.mktemp("lane"), llm_url=_dead_url(),
                        max_body_bytes=LIMIT, llm_timeout_s=2.0)
    with ShimServer(settings, registry=Registry()) as server:
        with httpx.Client(base_url=server.url, timeout=10) as client:
            yield client, settings


def body(**fields):
    return json.dumps({"model": "x", "messages": OK_MESSAGES, **fields})


def nested(depth: int):
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


FUNCTION = {"name": "get_weather", "description": "Weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


def tool(**changes):
    """A client tool definition with some of its function's fields changed (None: left out)."""
    function = {k: v for k, v in {**FUNCTION, **changes}.items() if v is not None}
    return {"type": "function", "function": function}


# 65 levels of arrays inside a message part: 70 in all, past the limit (64).
NESTED_65 = nested(65)


# (kind, raw body, extra headers, status, code)
CASES = [
    ("invalid JSON", "{not json", {}, 400, "invalid_json"),
    ("empty body", "", {}, 400, "invalid_json"),
    ("truncated JSON", '{"messages": [', {}, 400, "invalid_json"),
    ("JSON array body", "[]", {}, 400, "invalid_json"),
    ("JSON string body", '"hello"', {}, 400, "invalid_json"),
    ("JSON null body", "null", {}, 400, "invalid_json"),
    ("non-UTF-8 bytes", b"\xff\xfe{\x00", {}, 400, "invalid_json"),
    ("messages missing", json.dumps({"model": "x"}), {}, 400, "invalid_messages"),
    ("messages not a list", json.dumps({"messages": "hi"}), {}, 400, "invalid_messages"),
    ("messages empty", json.dumps({"messages": []}), {}, 400, "invalid_messages"),
    ("message not an object", json.dumps({"messages": ["hi"]}), {}, 400, "invalid_messages"),
    ("role missing", json.dumps({"messages": [{"content": "hi"}]}), {}, 400, "invalid_messages"),
    ("unknown role", json.dumps({"messages": [{"role": "wizard", "content": "hi"}]}), {}, 400,
     "invalid_messages"),
    ("role not a string", json.dumps({"messages": [{"role": 1, "content": "hi"}]}), {}, 400,
     "invalid_messages"),
    ("content missing", json.dumps({"messages": [{"role": "user"}]}), {}, 400,
     "invalid_messages"),
    ("content a number", json.dumps({"messages": [{"role": "user", "content": 7}]}), {}, 400,
     "invalid_messages"),
    ("content null on a user message", json.dumps({"messages": [{"role": "user",
                                                                 "content": None}]}), {}, 400,
     "invalid_messages"),
    ("image content part", json.dumps({"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]}), {}, 400,
     "invalid_messages"),
    ("tool message without tool_call_id", json.dumps({"messages": [
        {"role": "user", "content": "hi"}, {"role": "tool", "content": "42"}]}), {}, 400,
     "invalid_messages"),
    ("tool_calls on a user message", json.dumps({"messages": [
        {"role": "user", "content": "hi", "tool_calls": []}]}), {}, 400, "invalid_messages"),
    ("malformed assistant tool_calls", json.dumps({"messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": 3}}]}]}),
     {}, 400, "invalid_messages"),
    ("message name not a string", json.dumps({"messages": [
        {"role": "user", "content": "hi", "name": 5}]}), {}, 400, "invalid_messages"),
    ("no user message", json.dumps({"messages": [{"role": "system", "content": "be nice"}]}),
     {}, 400, "invalid_messages"),
    ("stream not a boolean", body(stream="true"), {}, 400, "invalid_type"),
    ("max_tokens a string", body(max_tokens="100"), {}, 400, "invalid_type"),
    ("max_tokens a float", body(max_tokens=1.5), {}, 400, "invalid_type"),
    ("max_tokens a boolean", body(max_tokens=True), {}, 400, "invalid_type"),
    ("max_completion_tokens a list", body(max_completion_tokens=[1]), {}, 400, "invalid_type"),
    ("temperature a string", body(temperature="hot"), {}, 400, "invalid_type"),
    ("temperature out of range", body(temperature=5), {}, 400, "invalid_value"),
    ("model not a string", body(model=12), {}, 400, "invalid_type"),
    ("n other than 1", body(n=3), {}, 400, "invalid_value"),
    ("stream_options not an object", body(stream_options="yes"), {}, 400, "invalid_type"),
    ("tools not a list", body(tools="abc"), {}, 400, "invalid_type"),
    ("tools item not an object", body(tools=[1]), {}, 400, "invalid_type"),
    ("tool_choice a number", body(tool_choice=5), {}, 400, "invalid_type"),
    ("stop a number", body(stop=3), {}, 400, "invalid_type"),
    ("stop list of numbers", body(stop=[1, 2]), {}, 400, "invalid_type"),
    ("top_p a string", body(top_p="high"), {}, 400, "invalid_type"),
    ("presence_penalty a list", body(presence_penalty=[0]), {}, 400, "invalid_type"),
    ("frequency_penalty a boolean", body(frequency_penalty=True), {}, 400, "invalid_type"),
    ("seed a float", body(seed=1.5), {}, 400, "invalid_type"),
    ("user an object", body(user={"id": 1}), {}, 400, "invalid_type"),
    ("response_format a string", body(response_format="json"), {}, 400, "invalid_type"),
    ("parallel_tool_calls a string", body(parallel_tool_calls="yes"), {}, 400, "invalid_type"),
    ("logprobs a number", body(logprobs=1), {}, 400, "invalid_type"),
    ("metadata a list", body(metadata=["a"]), {}, 400, "invalid_type"),
    ("temperature NaN", body().replace('"model"', '"temperature": NaN, "model"'), {}, 400,
     "invalid_value"),
    ("max_tokens of 5,000 digits", body().replace('"model"', f'"max_tokens": {"9" * 5000}, "model"'),
     {}, 400, "invalid_json"),
    ("arrays nested 30,000 deep", '{"messages": ' + "[" * 30_000 + "]" * 30_000 + "}", {}, 400,
     "invalid_json"),
    ("objects nested 9,000 deep", '{"a":' * 9_000 + "1" + "}" * 9_000, {}, 400,
     "invalid_json"),
    ("nesting past the depth limit in content", body(messages=[{"role": "user", "content": [
        {"type": "text", "text": "hi", "extra": NESTED_65}]}]), {}, 400, "invalid_json"),
    ("lone surrogate in content", '{"messages": [{"role": "user", "content": "hi \\ud800"}]}', {},
     400, "invalid_text"),
    ("lone low surrogate in a key", '{"messages": [{"role": "user", "content": "hi"}], '
     '"metadata": {"\\udc00": 1}}', {}, 400, "invalid_text"),
    ("surrogate encoded as UTF-8 bytes", b'{"messages": [{"role": "user", "content": "\xed\xa0\x80"}]}',
     {}, 400, "invalid_text"),
    # Proxy mode (a request with `tools`): the client's tool definitions and what refers to them.
    ("tool without a function", body(tools=[{"type": "function"}]), {}, 400, "invalid_tools"),
    ("tool of another type", body(tools=[{"type": "retrieval", "function": FUNCTION}]), {}, 400,
     "invalid_tools"),
    ("tool name missing", body(tools=[tool(name=None)]), {}, 400, "invalid_tools"),
    ("tool name with a space", body(tools=[tool(name="get weather")]), {}, 400, "invalid_tools"),
    ("tool name of 65 characters", body(tools=[tool(name="f" * 65)]), {}, 400, "invalid_tools"),
    ("duplicate tool names", body(tools=[tool(), tool()]), {}, 400, "invalid_tools"),
    ("tool description a number", body(tools=[tool(description=5)]), {}, 400, "invalid_tools"),
    ("tool parameters a string", body(tools=[tool(parameters="city")]), {}, 400, "invalid_tools"),
    ("tool parameters not an object schema", body(tools=[tool(parameters={"type": "string"})]), {},
     400, "invalid_tools"),
    ("tool parameters an invalid schema", body(tools=[tool(parameters={
        "type": "object", "properties": {"city": {"type": "strng"}}})]), {}, 400, "invalid_tools"),
    ("tool parameters with a bad required", body(tools=[tool(parameters={
        "type": "object", "required": "city"})]), {}, 400, "invalid_tools"),
    ("tool_choice an unknown word", body(tools=[tool()], tool_choice="sometimes"), {}, 400,
     "invalid_tool_choice"),
    ("tool_choice naming an unknown function", body(tools=[tool()], tool_choice={
        "type": "function", "function": {"name": "get_time"}}), {}, 400, "invalid_tool_choice"),
    ("tool_choice object without a name", body(tools=[tool()], tool_choice={"type": "function"}), {},
     400, "invalid_tool_choice"),
    ("tool_choice required without tools", body(tool_choice="required"), {}, 400,
     "invalid_tool_choice"),
    ("tool result answering no call", body(tools=[tool()], messages=OK_MESSAGES + [
        {"role": "tool", "tool_call_id": "call_nobody_made", "content": "42"}]), {}, 400,
     "invalid_messages"),
    ("tool result before its call", body(tools=[tool()], messages=OK_MESSAGES + [
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]}]),
     {}, 400, "invalid_messages"),
    ("X-Session-Id too long", body(), {"X-Session-Id": "a" * 129}, 400, "invalid_session_id"),
    ("X-Session-Id with a space", body(), {"X-Session-Id": "a b"}, 400, "invalid_session_id"),
    ("X-Session-Id with a slash", body(), {"X-Session-Id": "../etc"}, 400,
     "invalid_session_id"),
    ("X-Session-Id empty", body(), {"X-Session-Id": ""}, 400, "invalid_session_id"),
    ("X-Hermes-Session-Id invalid", body(), {"X-Hermes-Session-Id": "semi;colon"}, 400,
     "invalid_session_id"),
    ("session headers disagree", body(), {"X-Session-Id": "a", "X-Hermes-Session-Id": "b"}, 400,
     "invalid_session_id"),
    ("X-Lane-Tools unknown", body(), {"X-Lane-Tools": "everything"}, 400, "invalid_header"),
    ("X-Lane-Tools empty", body(), {"X-Lane-Tools": ""}, 400, "invalid_header"),
    ("body over the limit (Content-Length)", "x" * (LIMIT + 1), {}, 413, "body_too_large"),
    ("body of 5 MB", "x" * 5_000_000, {}, 413, "body_too_large"),
]


def assert_openai_error(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert set(error) == {"message", "type", "code"}
    assert error["code"] == code
    assert error["message"] and "Traceback" not in error["message"]
    return error


@pytest.mark.parametrize("kind,raw,headers,status,code", CASES, ids=[c[0] for c in CASES])
def test_malformed_chat_request(shim, kind, raw, headers, status, code):
    client, _ = shim
    response = client.post("/v1/chat/completions", content=raw,
                           headers={"Content-Type": "application/json", **headers})
    error = assert_openai_error(response, status, code)
    assert error["type"] == "invalid_request_error"


def test_chunked_body_over_the_limit_is_413(shim):
    client, _ = shim

    def pieces():
        for _ in range(LIMIT // 4096 + 2):
            yield b" " * 4096

    response = client.post("/v1/chat/completions", content=pieces())
    assert "content-length" not in response.request.headers
    assert_openai_error(response, 413, "body_too_large")


def test_chunked_body_under_the_limit_is_read_whole(shim):
    client, _ = shim
    raw = json.dumps({"messages": []}).encode()
    response = client.post("/v1/chat/completions", content=iter([raw[:5], raw[5:]]),
                           headers={"Content-Type": "application/json"})
    assert_openai_error(response, 400, "invalid_messages")


def test_unknown_path_is_404_in_openai_shape(shim):
    client, _ = shim
    error = assert_openai_error(client.get("/v1/nothing-here"), 404, "not_found")
    assert "/v1/nothing-here" in error["message"]


def test_wrong_method_is_405_in_openai_shape(shim):
    client, _ = shim
    assert_openai_error(client.get("/v1/chat/completions"), 405, "method_not_allowed")
    assert_openai_error(client.delete("/v1/models"), 405, "method_not_allowed")


def test_session_lookup_validates_the_id(shim):
    client, _ = shim
    assert_openai_error(client.get("/v1/sessions/bad%20id"), 400, "invalid_session_id")
    assert_openai_error(client.get("/v1/sessions/" + "a" * 200), 400, "invalid_session_id")
    assert_openai_error(client.get("/v1/sessions/never-seen"), 404, "session_not_found")


def test_upstream_down_is_502_and_health_is_503(shim):
    client, settings = shim
    response = client.post("/v1/chat/completions", content=body(),
                           headers={"Content-Type": "application/json", "X-Session-Id": "down-1"})
    error = assert_openai_error(response, 502, "llm_unavailable")
    assert error["type"] == "upstream_error"
    assert response.headers["x-session-id"] == "down-1"
    health = client.get("/health")
    assert health.status_code == 503
    assert health.json() == {"status": "unavailable", "store": "ok", "llm": "unreachable", "capabilities": None}


def test_models_lists_the_lane(shim):
    client, _ = shim
    response = client.get("/v1/models")
    assert response.status_code == 200
    assert [m["id"] for m in response.json()["data"]] == ["fallback-lane"]


def test_rejected_requests_store_nothing(shim):
    """Runs after the cases above (module order): only the 502 request made a session."""
    _, settings = shim
    with sqlite3.connect(settings.db_path) as db:
        assert db.execute("SELECT id FROM sessions").fetchall() == [("down-1",)]
        stored = db.execute("SELECT role, content FROM messages WHERE lane_prompt = 0")
        assert stored.fetchall() == [("user", "hi")]
        # its decision never got an answer, so none is recorded
        assert db.execute("SELECT count(*) FROM lane_calls").fetchall() == [(0,)]
