"""`GET /metrics` after real requests on every API: the Prometheus text counts what the replies
and the store say happened."""

import re

from tests.fakes.scripted_model import Reply, call, text
from tests.integration.test_api_chat import running_lane

KEY = "lane-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
WEATHER = {"name": "get_weather", "description": "Current weather for a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
SAMPLE = re.compile(r'^([a-z_]+)(?:\{(.*)\})? (\S+)$')


def samples(body: str) -> dict[tuple[str, frozenset], float]:
    """Every sample line as {(name, labels): value}; any other line must be a HELP or TYPE comment."""
    found = {}
    for line in body.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        name, labels, value = SAMPLE.fullmatch(line).groups()
        pairs = frozenset(tuple(p.split("=", 1)) for p in labels.split(",")) if labels else frozenset()
        found[(name, frozenset((k, v.strip('"')) for k, v in pairs))] = float(value)
    return found


def labelled(**labels) -> frozenset:
    return frozenset(labels.items())


def test_metrics_count_requests_tokens_tools_and_latency(tmp_path):
    script = [call("add", {"a": 2, "b": 3}), text("It is 5."), call("get_weather", {"city": "Paris"}),
              Reply(hang=True), text("Hi."), text("Hi.")]
    with running_lane(tmp_path, script, api_key=KEY, llm_timeout_s=1.0) as lane:
        chat = lane.client.post("/v1/chat/completions", headers=AUTH, json={
            "model": "m", "messages": [{"role": "user", "content": "What is 2+3?"}]}).json()
        messages = lane.client.post("/v1/messages", headers=AUTH, json={
            "model": "m", "max_tokens": 50, "tools": [WEATHER],
            "messages": [{"role": "user", "content": "Weather in Paris?"}]}).json()
        timed_out = lane.client.post("/v1/responses", headers=AUTH, json={"model": "m", "input": "hang"})
        responses = lane.client.post("/v1/responses", headers=AUTH, json={"model": "m", "input": "hi"}).json()
        refused = lane.client.post("/v1/chat/completions", headers=AUTH, json={"model": "m", "messages": []})
        response = lane.client.get("/metrics", headers=AUTH)

    assert (refused.status_code, timed_out.status_code) == (400, 504)
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    found = samples(response.text)
    requests = {labels: value for (name, labels), value in found.items() if name == "lane_requests_total"}
    assert requests == {labelled(api="chat", mode="agent", status="200"): 1,
                        labelled(api="messages", mode="proxy", status="200"): 1,
                        labelled(api="responses", mode="agent", status="200"): 1,
                        labelled(api="chat", mode="none", status="400"): 1,
                        labelled(api="responses", mode="agent", status="504"): 1}
    lanes = [chat["usage"]["lane"], messages["usage"]["lane"], responses["usage"]["lane"]]
    assert found[("lane_model_calls_total", frozenset())] == sum(lane["model_calls"] for lane in lanes)
    prompt = chat["usage"]["prompt_tokens"] + messages["usage"]["input_tokens"] + responses["usage"]["input_tokens"]
    assert found[("lane_tokens_total", labelled(kind="prompt"))] == prompt
    assert found[("lane_tokens_total", labelled(kind="cached"))] == 0
    assert found[("lane_tool_executions_total", labelled(status="ok"))] == 1
    assert found[("lane_tool_executions_total", labelled(status="refused"))] == 0
    assert found[("lane_returned_calls_total", frozenset())] == 1
    assert found[("lane_turns_in_flight", frozenset())] == 0
    assert sum(v for (name, _), v in found.items() if name == "lane_warm") == 1
    assert found[("lane_turn_seconds_count", labelled(api="chat", mode="agent"))] == 1
    assert found[("lane_turn_seconds_bucket", labelled(api="responses", mode="agent", le="+Inf"))] == 2
    assert found[("lane_turn_seconds_bucket", labelled(api="responses", mode="agent", le="0.25"))] <= 1


def test_metrics_need_the_key(tmp_path):
    with running_lane(tmp_path, [], api_key=KEY) as lane:
        assert lane.client.get("/metrics").status_code == 401
