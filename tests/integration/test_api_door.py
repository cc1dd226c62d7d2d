"""The shim's door, through real HTTP: it lets in nobody the lane did not let in.

A web page must not drive a loopback lane (a foreign Host from DNS rebinding, a foreign Origin, a
body not declared JSON); a client's tool schema must not make the lane read files or URLs; text
the store cannot hold is a 400 before anything is stored. Local agents (no Origin, a loopback Host)
and the trace page's own forms pass as before.
"""

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

import stack.api.app as app_module
from tests.fakes.scripted_model import call, text
from tests.integration.test_api_chat import running_lane
from tests.integration.test_api_requests import assert_openai_error
from tests.integration.test_proxy import ASK, WEATHER, only_call

SECRET = "door-secret-ORCHID-4821"
KEY = "door-key"


def stored_bytes(lane) -> bytes:
    """Everything the lane wrote beside its store: the database, its WAL, its state folder."""
    return b"".join(path.read_bytes() for path in lane.settings.home.rglob("*") if path.is_file())


def leaky_tool(reference: str, *, nested: bool = False):
    """A client tool whose schema refers outside itself, at the top or deep in its $defs."""
    city = {"$ref": reference}
    parameters = {"type": "object", "properties": {"city": city}, "required": ["city"]}
    if nested:
        parameters = {"type": "object", "$defs": {"place": {"anyOf": [{"type": "integer"}, city]}},
                      "properties": {"city": {"$ref": "#/$defs/place"}}, "required": ["city"]}
    return {"type": "function", "function": {"name": "read_it", "description": "Looks a city up.",
                                             "parameters": parameters}}


# schema references

def test_a_client_schema_referring_to_a_file_or_url_is_refused_before_anything_runs(tmp_path):
    secret_file = tmp_path / "secret.json"
    secret_file.write_text(json.dumps({"type": "string", "enum": [SECRET]}))
    leaks = [leaky_tool(secret_file.as_uri()), leaky_tool(secret_file.as_uri(), nested=True),
             leaky_tool("http://127.0.0.1:9/schema.json"), leaky_tool(str(secret_file))]
    with running_lane(tmp_path / "lane", [call("read_it", {"city": "Paris"})] * 4) as lane:
        for tool in leaks:
            response = lane.chat(messages=ASK, tools=[tool])
            error = assert_openai_error(response, 400, "invalid_tools")
            assert "read_it" in error["message"] and "#/" in error["message"]
            assert SECRET not in response.text
        assert lane.model.requests == [] and lane.model.decide_requests == []
        assert lane.rows("SELECT count(*) FROM sessions") == [(0,)]
        assert SECRET.encode() not in stored_bytes(lane)


def test_a_local_reference_still_resolves(tmp_path):
    local = {"type": "function", "function": {"name": "get_weather", "description": "Weather.",
             "parameters": {"type": "object", "$defs": {"city": {"type": "string"}},
                            "properties": {"city": {"$ref": "#/$defs/city"}}, "required": ["city"]}}}
    with running_lane(tmp_path, [call("get_weather", {"city": 7}), call("get_weather", {"city": "Oslo"})]) as lane:
        response = lane.chat(messages=ASK, tools=[local])
        assert response.status_code == 200, response.text
        # the first call broke the referenced schema and was corrected inside the lane
        assert only_call(response.json())[:2] == ("get_weather", {"city": "Oslo"})


# Host and Origin

def test_a_foreign_host_is_refused_everywhere_but_health(tmp_path):
    with running_lane(tmp_path, [text("unused")]) as lane:
        for method, path in (("GET", "/v1/models"), ("POST", "/v1/chat/completions"), ("GET", "/ui"),
                             ("GET", "/v1/sessions/x"), ("GET", "/nowhere")):
            response = lane.client.request(method, path, headers={"Host": "rebound.example:8642"},
                                           json={"messages": [{"role": "user", "content": "hi"}]})
            error = assert_openai_error(response, 421, "host_not_allowed")
            assert "rebound.example" in error["message"] and "LANE_ALLOWED_HOSTS" in error["message"]
        assert lane.client.get("/health", headers={"Host": "10.0.0.7:8642"}).status_code == 200
        assert lane.model.requests == [] and lane.rows("SELECT count(*) FROM sessions") == [(0,)]


@pytest.mark.parametrize("host", ["127.0.0.1:8642", "localhost:9999", "LOCALHOST", "[::1]:8642",
                                  "localhost.:8642"])
def test_loopback_hosts_are_served_without_a_key_or_setting(tmp_path, host):
    with running_lane(tmp_path, []) as lane:
        assert lane.client.get("/v1/models", headers={"Host": host}).status_code == 200


def test_allowed_hosts_and_the_bound_host_are_served(tmp_path):
    with running_lane(tmp_path, [], allowed_hosts=("shim", "Lane.Example.com"), host="10.1.2.3") as lane:
        for host in ("shim:8642", "lane.example.com", "10.1.2.3:8642"):
            assert lane.client.get("/v1/models", headers={"Host": host}).status_code == 200, host
        assert lane.client.get("/v1/models", headers={"Host": "other:8642"}).status_code == 421
    with running_lane(tmp_path, [], allowed_hosts=("*",)) as lane:
        assert lane.client.get("/v1/models", headers={"Host": "anything:1"}).status_code == 200


@pytest.mark.parametrize("origin", ["http://evil.example", "https://evil.example:8642", "null",
                                    "file://", "http://127.0.0.1.evil.example"])
def test_a_foreign_origin_is_refused_before_the_turn_runs(tmp_path, origin):
    with running_lane(tmp_path, [text("I ran")]) as lane:
        response = lane.chat("run rm -rf", headers={"Origin": origin})
        error = assert_openai_error(response, 403, "origin_not_allowed")
        assert error["type"] == "permission_error"
        assert lane.model.requests == [] and lane.rows("SELECT count(*) FROM sessions") == [(0,)]


def test_pages_on_the_lanes_own_hosts_and_allowed_origins_are_served(tmp_path):
    with running_lane(tmp_path, [text("one"), text("two"), text("three")],
                      allowed_origins=("https://app.example.com",)) as lane:
        for origin in (str(lane.client.base_url).rstrip("/"), "http://localhost:3000",
                       "https://app.example.com"):
            response = lane.chat("hi", headers={"Origin": origin})
            assert response.status_code == 200, (origin, response.text)


# bodies

@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x"])
def test_a_body_not_declared_json_is_415_and_runs_nothing(tmp_path, content_type):
    raw = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    with running_lane(tmp_path, [text("I ran")]) as lane:
        headers = {"Content-Type": content_type} if content_type else {}
        response = lane.client.post("/v1/chat/completions", content=raw, headers=headers)
        assert_openai_error(response, 415, "unsupported_media_type")
        assert lane.model.requests == [] and lane.rows("SELECT count(*) FROM sessions") == [(0,)]


def test_json_with_a_charset_is_json(tmp_path):
    raw = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    with running_lane(tmp_path, [text("hello")]) as lane:
        response = lane.client.post("/v1/chat/completions", content=raw,
                                    headers={"Content-Type": "Application/JSON; charset=utf-8"})
        assert response.status_code == 200, response.text


@pytest.mark.parametrize("where", ["content", "tool description", "tool schema", "tool name"])
def test_a_lone_surrogate_is_a_400_and_nothing_is_stored(tmp_path, where):
    tool = json.loads(json.dumps(WEATHER))
    content = "Weather in Paris?"
    if where == "content":
        content = "Paris \ud800?"
    elif where == "tool description":
        tool["function"]["description"] = "Weather \udfff."
    elif where == "tool schema":
        tool["function"]["parameters"]["properties"]["city"]["description"] = "a city \ud83d"
    else:
        tool["function"]["name"] = "get_\ud800weather"
    raw = json.dumps({"messages": [{"role": "user", "content": content}], "tools": [tool]})
    assert "\\ud8" in raw or "\\udf" in raw  # the JSON escape a client sends
    with running_lane(tmp_path, [call("get_weather", {"city": "Paris"})]) as lane:
        response = lane.client.post("/v1/chat/completions", content=raw,
                                    headers={"Content-Type": "application/json"})
        error = assert_openai_error(response, 400, "invalid_text")
        assert ("content" if where == "content" else "tools[0].function") in error["message"]
        assert lane.model.requests == [] and lane.rows("SELECT count(*) FROM messages") == [(0,)]


def test_paired_surrogates_are_text(tmp_path):
    with running_lane(tmp_path, [text("Nice.")]) as lane:
        raw = json.dumps({"messages": [{"role": "user", "content": "I like \U0001F600"}]})
        assert "\\ud83d\\ude00" in raw
        response = lane.client.post("/v1/chat/completions", content=raw,
                                    headers={"Content-Type": "application/json"})
        assert response.status_code == 200, response.text
        assert ("user", "I like \U0001F600") in lane.history(response.headers["x-session-id"])


# roles

@pytest.mark.parametrize("proxy", [False, True], ids=["agent endpoint", "proxy"])
def test_openais_developer_role_is_a_system_instruction(tmp_path, proxy):
    messages = [{"role": "developer", "content": "Answer in French."}, *ASK]
    with running_lane(tmp_path, [text("Il fait beau.")]) as lane:
        response = lane.chat(messages=messages, **({"tools": [WEATHER]} if proxy else {}))
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["message"]["content"] == "Il fait beau."
        assert {"role": "system", "content": "Answer in French."} in lane.model.requests[-1]["messages"]
        assert ("system", "Answer in French.") in lane.history(response.headers["x-session-id"])


# the trace page behind its key

def test_the_login_form_and_a_post_with_the_cookie_are_answered(tmp_path):
    with running_lane(tmp_path, [], api_key=KEY) as lane:
        own = str(lane.client.base_url).rstrip("/")
        # the browser's login form: a same-origin form POST
        response = lane.client.post("/ui", data={"key": KEY}, headers={"Origin": own})
        assert response.status_code == 303, response.text
        assert lane.client.cookies.get("lane_ui")
        assert lane.client.get("/ui").status_code == 200
        # with the cookie, a POST under /ui is answered (no such form handler: 405), not left hanging
        response = lane.client.post("/ui", data={"key": ""}, headers={"Origin": own}, timeout=5)
        assert_openai_error(response, 405, "method_not_allowed")
        response = lane.client.post("/ui/sessions/x", data={"other": "1"}, timeout=5)
        assert_openai_error(response, 405, "method_not_allowed")
        # and a foreign page cannot post the form at all
        response = lane.client.post("/ui", data={"key": KEY}, headers={"Origin": "http://evil.example"})
        assert_openai_error(response, 403, "origin_not_allowed")


# the door's own cost

def test_checking_a_request_does_not_hold_up_health(tmp_path, monkeypatch):
    """Checking a client's tool schemas costs about a millisecond per property, seconds for a large
    catalog; meanwhile /health (and every other client) is answered."""
    checked = app_module.parse_chat_request
    started = threading.Event()

    def slow_check(*args, **kwargs):
        started.set()
        time.sleep(2.0)  # a catalog of a few thousand properties, without the CPU
        return checked(*args, **kwargs)

    monkeypatch.setattr(app_module, "parse_chat_request", slow_check)
    with running_lane(tmp_path, [text("done")]) as lane:
        with ThreadPoolExecutor(1) as pool:
            slow = pool.submit(lane.chat, "hi")
            assert started.wait(10)
            began = time.monotonic()
            health = httpx.get(str(lane.client.base_url.join("/health")), timeout=10)
            waited = time.monotonic() - began
            assert slow.result().status_code == 200
        assert health.status_code == 200 and waited < 1.0, waited
