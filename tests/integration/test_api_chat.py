"""End to end through real HTTP: a client -> the shim on uvicorn -> the agent -> a scripted model
on uvicorn, with the session store asserted with SQL after each turn."""

import json
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import pytest

from stack.config import Settings
from stack.tools.base import Tool, object_schema
from stack.tools.registry import Registry
from tests.fakes.scripted_model import Reply, ScriptedModel, call, text
from tests.integration.shim_server import ShimServer

NUMBER = {"type": "integer"}


def _add(arguments, ctx):
    return str(arguments["a"] + arguments["b"])


def _ask(arguments, ctx):
    ctx.question_for_user = arguments["question"]
    return "asked"


TOOLS = [
    Tool("add", "Add two integers.", object_schema({"a": NUMBER, "b": NUMBER}, ["a", "b"]), _add),
    Tool("ask_user", "Ask the user a question.",
         object_schema({"question": {"type": "string"}}, ["question"]), _ask),
]


@dataclass
class Lane:
    client: httpx.Client
    model: ScriptedModel
    settings: Settings

    def chat(self, content="hi", *, session=None, messages=None, headers=None, **fields):
        sent = dict(headers or {})
        if session:
            sent["X-Session-Id"] = session
        payload = {"model": "anything", "messages": messages or [{"role": "user",
                                                                  "content": content}],
                   **fields}
        return self.client.post("/v1/chat/completions", json=payload, headers=sent)

    def rows(self, sql, *params):
        with sqlite3.connect(self.settings.db_path) as db:
            return db.execute(sql, params).fetchall()

    def history(self, session):
        """(role, content) of the stored conversation, without the lane's own system prompt."""
        return self.rows("SELECT role, content FROM messages WHERE session_id = ? AND"
                         " lane_prompt = 0 ORDER BY id", session)


@contextmanager
def running_lane(tmp_path, script, *, registry=None, keepalive_s=10.0, decision=None, reading=None, n_ctx=None,
                 **overrides):
    with ScriptedModel(script, decision=decision, reading=reading, n_ctx=n_ctx) as model:
        options = {"tool_search": "off", "core_tools": ("add", "ask_user"), **overrides}
        settings = Settings(home=tmp_path, llm_url=model.url, **options)
        with ShimServer(settings, registry=registry or Registry(TOOLS),
                        keepalive_s=keepalive_s) as shim:
            with httpx.Client(base_url=shim.url, timeout=20) as client:
                yield Lane(client, model, settings)


def wait_for(condition, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def sse_events(raw: str):
    """The data payloads of an SSE body, in order ([DONE] as the string)."""
    events = []
    for block in raw.split("\n\n"):
        for line in block.splitlines():
            if line.startswith("data: "):
                data = line[6:]
                events.append(data if data == "[DONE]" else json.loads(data))
    return events


def test_stateless_turn_with_a_tool_call(tmp_path):
    with running_lane(tmp_path, [call("add", {"a": 2, "b": 3}), text("It is 5.")]) as lane:
        response = lane.chat(messages=[{"role": "system", "content": "Be brief."},
                                       {"role": "user", "content": "Add 2 and 3, then tell me the sum"}])
        assert response.status_code == 200, response.text
        session = response.headers["x-session-id"]
        reply = response.json()
        assert reply["object"] == "chat.completion"
        assert reply["model"] == "fallback-lane"
        assert reply["choices"][0]["message"] == {"role": "assistant", "content": "It is 5."}
        assert reply["choices"][0]["finish_reason"] == "stop"

        assert lane.rows("SELECT id, title FROM sessions") == [(session, "Add 2 and 3, then tell me the sum")]
        assert [r for r, _ in lane.history(session)] == ["system", "user", "assistant", "tool",
                                                         "assistant"]
        assert lane.history(session)[3] == ("tool", "5")
        assert lane.rows("SELECT tool_name, status, origin, via_bridge FROM tool_executions"
                         " WHERE session_id = ?", session) == [("add", "ok", "native", 0)]

        usage = reply["usage"]
        prompt, completion, peak = lane.rows(  # the conversation's model calls and the lane's own
            "SELECT sum(p), sum(c), max(p) FROM (SELECT prompt_tokens p, completion_tokens c FROM messages"
            " WHERE session_id = ?1 AND role = 'assistant' AND prompt_tokens IS NOT NULL UNION ALL"
            " SELECT prompt_tokens, completion_tokens FROM lane_calls WHERE session_id = ?1)",
            session)[0]
        assert (usage["prompt_tokens"], usage["completion_tokens"]) == (prompt, completion)
        assert usage["total_tokens"] == prompt + completion
        # two tasks ("add ..., then tell me ..."): a decision before the call and one after it,
        # the forced call, the composed answer and its reading
        assert usage["lane"] == {"model_calls": 5, "peak_prompt_tokens": peak,
                                 "tools_executed": ["add"], "finish_reason": "stop"}
        assert lane.rows("SELECT purpose, content FROM lane_calls WHERE session_id = ? ORDER BY id",
                         session) == [("decide", '{"next": "add"}'), ("decide", '{"next": "answer"}'),
                                      ("read", '{"done": []}')]
        assert len(lane.model.decide_requests) == 2
        forced, composed = lane.model.requests
        assert forced["tool_choice"] == {"type": "function", "function": {"name": "add"}}
        assert {"role": "system", "content": "Be brief."} in forced["messages"]
        assert not composed.get("tools")
        assert composed["messages"][-1] == {"role": "user", "content": "Add 2 and 3, then tell me the sum"}
        assert composed["messages"][1] == {"role": "system", "content": "Be brief."}  # the client's own
        assert "- add (ok): 5" in composed["messages"][2]["content"]


def test_an_answer_held_back_reaches_the_client_as_the_lanes_account(tmp_path):
    with running_lane(tmp_path, [call("add", {"a": 2, "b": 3}), text("Done!"), text("All done!")]) as lane:
        response = lane.chat("what is 2 plus 3?", session="held")
        assert response.status_code == 200, response.text
        answer = response.json()["choices"][0]["message"]["content"]
        assert answer == ("I could not write a reliable answer. What ran for this request:\n- add returned 5\n"
                          "(The model's reply was not passed on: it leaves out what the tools returned.)")
        assert response.json()["choices"][0]["finish_reason"] == "stop"
        # the conversation is what the client got; the model's answers the lane held back are
        # kept apart, each with why and what it cost
        assert lane.rows("SELECT content FROM messages WHERE session_id = 'held' AND role = 'assistant'"
                         " AND tool_calls IS NULL") == [(answer,)]
        assert lane.rows("SELECT role, content FROM messages WHERE session_id = 'held'"
                         " AND role != 'tool' AND lane_prompt = 0 AND tool_calls IS NULL ORDER BY id") == [
            ("user", "what is 2 plus 3?"), ("assistant", answer)]
        leaves_out = "it leaves out what the tools returned"
        assert lane.rows("SELECT content, reason, prompt_tokens > 0 FROM lane_calls WHERE session_id = 'held'"
                         " AND purpose = 'held' ORDER BY id") == [
            ("Done!", leaves_out, 1)]  # not written again
        usage = response.json()["usage"]
        assert usage["prompt_tokens"] == lane.rows(  # every model call counted once, in one place
            "SELECT (SELECT sum(prompt_tokens) FROM messages WHERE session_id = 'held' AND role = 'assistant')"
            " + (SELECT sum(prompt_tokens) FROM lane_calls WHERE session_id = 'held')")[0][0]


def test_stateless_request_stores_every_given_message(tmp_path):
    given = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "add"}, {"type": "text",
                                                                       "text": "1 and 1"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add",
                                                          "arguments": '{"a":1,"b":1}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "2"},
        {"role": "assistant", "content": "2"},
        {"role": "user", "content": "and again?"},
    ]
    with running_lane(tmp_path, [text("Still 2.")]) as lane:
        response = lane.chat(messages=given)
        assert response.status_code == 200, response.text
        session = response.headers["x-session-id"]
        assert lane.history(session) == [
            ("system", "Be brief."), ("user", "add\n1 and 1"), ("assistant", None), ("tool", "2"),
            ("assistant", "2"), ("user", "and again?"), ("assistant", "Still 2.")]
        stored_call = lane.rows("SELECT tool_calls FROM messages WHERE session_id = ? AND"
                                " role = 'assistant' ORDER BY id LIMIT 1", session)[0][0]
        assert json.loads(stored_call)[0]["function"]["name"] == "add"
        assert lane.rows("SELECT tool_call_id FROM messages WHERE role = 'tool'") == [("c1",)]
        # A second stateless request is a new session.
        assert lane.chat("hello").headers["x-session-id"] != session


def test_session_header_keeps_history_and_appends_only_the_last_user_message(tmp_path):
    with running_lane(tmp_path, [text("Noted, Falcon."), text("Your codename is Falcon.")]) \
            as lane:
        first = lane.chat(session="conv-1", messages=[
            {"role": "system", "content": "client system prompt"},
            {"role": "user", "content": "an old question the client replays"},
            {"role": "assistant", "content": "an old answer"},
            {"role": "user", "content": "My codename is Falcon."}])
        assert first.status_code == 200, first.text
        assert first.headers["x-session-id"] == "conv-1"
        second = lane.chat("What is my codename?", session="conv-1")
        assert second.headers["x-session-id"] == "conv-1"
        assert second.json()["choices"][0]["message"]["content"] == "Your codename is Falcon."
        assert lane.history("conv-1") == [
            ("user", "My codename is Falcon."), ("assistant", "Noted, Falcon."),
            ("user", "What is my codename?"), ("assistant", "Your codename is Falcon.")]
        # The answer is composed from the session's earlier turn as facts (only what the lane
        # stored: not the history the client replayed), and the user's message last.
        _, facts, asked = lane.model.requests[1]["messages"]
        assert "The user said: My codename is Falcon." in facts["content"]
        assert "The assistant answered: Noted, Falcon." in facts["content"]
        assert "an old question the client replays" not in facts["content"]
        assert asked == {"role": "user", "content": "What is my codename?"}
        assert "My codename is Falcon." in lane.model.decide_requests[1]["messages"][-1]["content"]
        assert lane.rows("SELECT count(*) FROM sessions") == [(1,)]


def test_hermes_alias_header_is_the_same_session(tmp_path):
    with running_lane(tmp_path, [text("one"), text("two")]) as lane:
        lane.chat("first", headers={"X-Hermes-Session-Id": "hermes:42"})
        response = lane.chat("second", session="hermes:42")
        assert response.headers["x-session-id"] == "hermes:42"
        assert [c for _, c in lane.history("hermes:42")] == ["first", "one", "second", "two"]


def test_stream_sends_role_answer_usage_and_done(tmp_path):
    with running_lane(tmp_path, [call("add", {"a": 20, "b": 22}), text("The sum is 42.")]) \
            as lane:
        with lane.client.stream("POST", "/v1/chat/completions", headers={"X-Session-Id": "s1"},
                                json={"messages": [{"role": "user", "content": "20+22?"}],
                                      "stream": True}) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["x-session-id"] == "s1"
            raw = response.read().decode()
        events = sse_events(raw)
        assert events[-1] == "[DONE]"
        chunks = events[:-1]
        assert all(c["object"] == "chat.completion.chunk" for c in chunks)
        assert len({c["id"] for c in chunks}) == 1
        assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
        text_out = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        assert text_out == "The sum is 42."
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
        assert chunks[-1]["usage"]["lane"]["tools_executed"] == ["add"]
        # the decision, the forced call, the answer: one task, so no decision after add ran
        assert chunks[-1]["usage"]["lane"]["model_calls"] == 4  # with the answer's reading
        assert len(lane.model.decide_requests) == 1
        assert lane.rows("SELECT tool_name, status FROM tool_executions WHERE session_id = 's1'"
                         ) == [("add", "ok")]
        assert lane.history("s1")[-1] == ("assistant", "The sum is 42.")


def test_stream_sends_keepalive_comments_while_the_turn_runs(tmp_path):
    with running_lane(tmp_path, [Reply(content="late", delay_s=0.8)], keepalive_s=0.15) as lane:
        response = lane.chat("slow please", stream=True)
        assert response.status_code == 200
        assert response.text.count(": keep-alive\n\n") >= 2
        assert sse_events(response.text)[-2]["choices"][0]["finish_reason"] == "stop"


def test_max_tokens_is_clamped_never_rejected_and_temperature_passes(tmp_path):
    with running_lane(tmp_path, [text("a")] * 5, max_tokens=64) as lane:
        for asked in (100_000, 0, -5, None, 10):
            fields = {} if asked is None else {"max_tokens": asked}
            assert lane.chat("hi", **fields).status_code == 200
        assert lane.chat("hi", max_completion_tokens=20, temperature=0.3).status_code == 200
        sent = [(r["max_tokens"], r.get("temperature")) for r in lane.model.requests]
        # without one from the client, the lane's LANE_TEMPERATURE (default 0) is sent
        assert sent == [(64, 0.0), (64, 0.0), (64, 0.0), (64, 0.0), (10, 0.0), (20, 0.3)]


def test_tools_profile_header_full_offers_every_granted_tool(tmp_path):
    script = [call("add", {"a": 1, "b": 2}), text("It is 3."), call("add", {"a": 1, "b": 2}), text("It is 3.")]
    with running_lane(tmp_path, script, tool_search="on", core_tools=("add",)) as lane:
        assert lane.chat("add 1 and 2", headers={"X-Lane-Tools": "full"}).status_code == 200
        assert lane.chat("add 1 and 2", headers={"X-Lane-Tools": "search"}).status_code == 200
        forced = [r for r in lane.model.requests if r.get("tool_choice")]
        assert len(forced) == 2
        full, search = ({t["function"]["name"] for t in r.get("tools", [])} for r in forced)
        assert {"add", "ask_user"} <= full
        assert not {"tool_search", "tool_call"} & full
        assert "add" in search and "ask_user" not in search
        # the decision lists the tools offered directly
        full_decision, search_decision = (r["messages"][0]["content"] for r in lane.model.decide_requests)
        assert "- ask_user:" in full_decision and "- add:" in full_decision
        assert "- ask_user:" not in search_decision and "- add:" in search_decision


def test_model_timeout_is_504_and_the_session_stays_usable(tmp_path):
    with running_lane(tmp_path, [Reply(hang=True), text("I am back.")],
                      llm_timeout_s=0.5) as lane:
        response = lane.chat("never ending story", session="slow")
        assert response.status_code == 504, response.text
        assert response.json()["error"]["type"] == "timeout_error"
        assert response.json()["error"]["code"] == "llm_timeout"
        assert response.headers["x-session-id"] == "slow"
        assert wait_for(lambda: lane.model.disconnects >= 1), "upstream call was not closed"
        again = lane.chat("are you there?", session="slow")
        assert again.status_code == 200
        assert again.json()["choices"][0]["message"]["content"] == "I am back."
        assert lane.history("slow") == [("user", "never ending story"),
                                        ("user", "are you there?"), ("assistant", "I am back.")]


def test_model_failure_is_502_and_the_session_stays_usable(tmp_path):
    replies = iter([None, text("Recovered.")])

    def script(body):
        reply = next(replies)
        if reply is None:
            raise RuntimeError("the model server broke")
        return reply

    with running_lane(tmp_path, script) as lane:
        response = lane.chat("hello?", session="flaky")
        assert response.status_code == 502
        assert response.json()["error"]["type"] == "upstream_error"
        again = lane.chat("hello again", session="flaky")
        assert again.json()["choices"][0]["message"]["content"] == "Recovered."
        assert lane.history("flaky") == [("user", "hello?"), ("user", "hello again"),
                                         ("assistant", "Recovered.")]


def test_a_decision_that_fails_is_502_and_nothing_runs(tmp_path):
    asked = []

    def decision(body):
        asked.append(body)
        if len(asked) == 1:
            raise RuntimeError("the model server broke while deciding")
        return Reply(content='{"next": "add"}')

    with running_lane(tmp_path, [call("add", {"a": 2, "b": 2}), text("It is 4.")],
                      decision=decision) as lane:
        response = lane.chat("what is 2 plus 2?", session="undecided")
        assert response.status_code == 502, response.text
        assert response.json()["error"]["type"] == "upstream_error"
        assert lane.model.requests == []  # no call forced, no answer composed
        assert lane.rows("SELECT count(*) FROM tool_executions") == [(0,)]
        again = lane.chat("what is 2 plus 2?", session="undecided")
        assert again.json()["choices"][0]["message"]["content"] == "It is 4."
        assert lane.rows("SELECT tool_name, status FROM tool_executions") == [("add", "ok")]


def test_a_decision_that_hangs_is_504(tmp_path):
    with running_lane(tmp_path, [text("unused")], decision=Reply(hang=True), llm_timeout_s=0.5) as lane:
        response = lane.chat("what is 2 plus 2?", session="slow-decision")
        assert response.status_code == 504, response.text
        assert response.json()["error"]["code"] == "llm_timeout"
        assert wait_for(lambda: lane.model.disconnects >= 1), "the decision's call was not closed"
        assert lane.model.requests == []
        assert lane.history("slow-decision") == [("user", "what is 2 plus 2?")]


def test_stream_reports_upstream_timeout_as_an_error_event(tmp_path):
    with running_lane(tmp_path, [Reply(hang=True)], llm_timeout_s=0.4) as lane:
        response = lane.chat("stream forever", stream=True, session="st")
        events = sse_events(response.text)
        assert events[-1] == "[DONE]"
        assert events[-2]["error"]["code"] == "llm_timeout"
        assert lane.history("st") == [("user", "stream forever")]


def test_client_disconnect_cancels_the_turn(tmp_path):
    with running_lane(tmp_path, [Reply(hang=True)], llm_timeout_s=60) as lane:
        with pytest.raises(httpx.ReadTimeout):
            lane.client.post("/v1/chat/completions", timeout=0.5,
                             json={"messages": [{"role": "user", "content": "go on"}]})
        assert wait_for(lambda: lane.model.disconnects >= 1), "upstream call outlived its client"


def test_streaming_client_disconnect_cancels_the_turn(tmp_path):
    with running_lane(tmp_path, [Reply(hang=True)], llm_timeout_s=60) as lane:
        with lane.client.stream("POST", "/v1/chat/completions",
                                json={"messages": [{"role": "user", "content": "go on"}],
                                      "stream": True}) as response:
            lines = response.iter_lines()  # kept: a dropped iterator closes the response
            assert next(lines).startswith("data: ")
            assert wait_for(lambda: lane.model.requests), "the turn never reached the model"
        assert wait_for(lambda: lane.model.disconnects >= 1), "upstream call outlived its client"


def test_requests_on_one_session_take_turns(tmp_path):
    script = [Reply(content="first answer", delay_s=0.3), Reply(content="second answer",
                                                                delay_s=0.3)]
    with running_lane(tmp_path, script) as lane:
        statuses = []

        def ask(words):
            statuses.append(lane.chat(words, session="busy").status_code)

        threads = [threading.Thread(target=ask, args=(f"question {i}",)) for i in (1, 2)]
        for thread in threads:
            thread.start()
            time.sleep(0.05)
        for thread in threads:
            thread.join(10)
        assert statuses == [200, 200]
        assert [r for r, _ in lane.history("busy")] == ["user", "assistant", "user", "assistant"]
        # the second turn's answer is composed knowing the first turn
        first_question = lane.history("busy")[0][1]
        facts = lane.model.requests[1]["messages"][1]["content"]
        assert f"The user said: {first_question}" in facts
        assert "The assistant answered: first answer" in facts


def test_clarify_and_iteration_limit_map_to_openai_finish_reasons(tmp_path):
    # ask_user ends the turn with its question; then add fails (no b), is forced once more and
    # runs, and that second step was the last one max_iterations allows: the answer is still
    # composed, and the turn reports that its steps ran out.
    script = [call("ask_user", {"question": "Which file?"}),
              call("add", {"a": 1}), call("add", {"a": 1, "b": 2}), text("1 and 2 make 3.")]
    with running_lane(tmp_path, script, max_iterations=2) as lane:
        asked = lane.chat("edit the file").json()
        assert asked["choices"][0]["message"]["content"] == "Which file?"
        assert asked["choices"][0]["finish_reason"] == "stop"
        assert asked["usage"]["lane"]["finish_reason"] == "clarify"
        # the decision, the call and the reading of its question (the model's words); no answer composed
        assert asked["usage"]["lane"]["model_calls"] == 3
        looped = lane.chat("add one and two", session="looped").json()
        assert looped["choices"][0]["message"]["content"] == "1 and 2 make 3."
        assert looped["choices"][0]["finish_reason"] == "length"
        assert looped["usage"]["lane"]["finish_reason"] == "iteration_limit"
        assert looped["usage"]["lane"]["tools_executed"] == ["add"]
        assert lane.rows("SELECT tool_name, status FROM tool_executions WHERE session_id = 'looped'"
                         " ORDER BY id") == [("add", "error"), ("add", "ok")]
        assert [r.get("tool_choice", {}).get("function", {}).get("name")
                for r in lane.model.requests[1:]] == ["add", "add", None]


def test_session_endpoint_shows_messages_and_executions(tmp_path):
    with running_lane(tmp_path, [call("add", {"a": 1, "b": 2}), text("3")]) as lane:
        lane.chat("add 1 and 2, then show me the sum", session="shown")
        found = lane.client.get("/v1/sessions/shown")
        assert found.status_code == 200
        data = found.json()
        assert data["session"]["id"] == "shown"
        assert [m["role"] for m in data["messages"] if not m["lane_prompt"]] == [
            "user", "assistant", "tool", "assistant"]
        assert [(e["tool_name"], e["status"]) for e in data["executions"]] == [("add", "ok")]
        # two tasks: a decision before add and one after it (which answered)
        assert [(c["purpose"], c["content"]) for c in data["lane_calls"]] == [
            ("decide", '{"next": "add"}'), ("decide", '{"next": "answer"}'), ("read", '{"done": []}')]


def test_health_is_ok_when_store_and_model_are_up(tmp_path):
    with running_lane(tmp_path, []) as lane:
        response = lane.client.get("/health")
        assert response.status_code == 200
        assert response.json() == {"status": "ok", "store": "ok", "llm": "ok", "capabilities": {
            "json_schema": True, "tool_choice": True, "tool_calls": True, "logprobs": True, "hidden_state": False,
            "paths": {"decision": "schema", "forced_call": "named", "yes_no": "logprobs", "reading": "list"}}}


def test_bearer_key_guards_everything_but_health(tmp_path):
    with running_lane(tmp_path, [text("welcome")], api_key="s3cret-key") as lane:
        assert lane.client.get("/health").status_code == 200
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-key"},
                        {"Authorization": "Basic s3cret-key"}):
            for method, path in (("GET", "/v1/models"), ("POST", "/v1/chat/completions"),
                                 ("GET", "/v1/sessions/x"), ("GET", "/nowhere")):
                response = lane.client.request(method, path, headers=headers)
                assert response.status_code == 401, (headers, path)
                assert response.json()["error"]["type"] == "authentication_error"
        good = {"Authorization": "Bearer s3cret-key"}
        assert lane.client.get("/v1/models", headers=good).status_code == 200
        assert lane.client.get("/v1/models", headers={"Authorization": "bearer s3cret-key"}
                               ).status_code == 200
        response = lane.chat("hi", headers=good)
        assert response.status_code == 200
        assert response.json()["choices"][0]["message"]["content"] == "welcome"
        assert lane.rows("SELECT count(*) FROM sessions") == [(1,)]


def test_unexpected_exception_is_500_without_a_traceback(tmp_path):
    def broken_provider():
        raise RuntimeError("secret internals")

    registry = Registry(TOOLS, providers=[broken_provider])
    with running_lane(tmp_path, [text("unused")], registry=registry) as lane:
        response = lane.chat("hi")
        assert response.status_code == 500
        error = response.json()["error"]
        assert error["type"] == "server_error"
        assert "secret internals" not in response.text and "Traceback" not in response.text
        streamed = sse_events(lane.chat("hi", stream=True).text)
        assert streamed[-2]["error"]["type"] == "server_error"
        assert lane.client.get("/v1/models").status_code == 200


def test_a_long_first_message_titles_its_session_cut_between_words(tmp_path):
    message = ("For the record: the plumber who fixed the boiler last winter was called Ostrowski, "
               "and he charged 180 euros.")
    with running_lane(tmp_path, [text("Noted.")]) as lane:
        response = lane.chat(messages=[{"role": "user", "content": message}])
        assert response.status_code == 200, response.text
        [(title,)] = lane.rows("SELECT title FROM sessions")
    assert title == "For the record: the plumber who fixed the boiler last winter was called …"
