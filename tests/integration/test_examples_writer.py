"""The example writer asks the real HTTP model about each deferred tool while the lane is idle, and
steps aside (its request cancelled upstream) the moment a turn starts."""

import asyncio
import json
import logging
import time

import httpx

from stack.agent.llm_client import LlmClient
from stack.cli import main
from stack.config import Settings
from stack.tools.base import Tool, object_schema
from stack.tools.registry import Registry
from stack.toolsearch.examples import DIRECT, EXAMPLE_MAX_TOKENS, SITUATION, ExampleBook
from stack.toolsearch.examples_writer import ExampleWriter
from stack.toolsearch.retrieval import ToolDoc
from tests.fakes.scripted_model import Reply, ScriptedModel, text
from tests.integration.shim_server import ShimServer
from tests.integration.test_api_chat import wait_for

DOCS = [ToolDoc("grafana__get_current_oncall_users", "Get the users currently on-call.", {}),
        ToolDoc("slack__post_message", "Post a message to a channel.", {})]
ANSWER = ("Sure, here are three requests:\n1. who is on call for payments tonight\n"
          "2. who do I page if checkout breaks\n3. is Sam carrying the pager this week")
REQUESTS = ("who is on call for payments tonight", "who do I page if checkout breaks",
            "is Sam carrying the pager this week")
SITUATIONS = ("checkout is down and nobody is answering", "alerts keep firing at 3am")


def by_style(body):
    if body["messages"][0]["content"] == SITUATION.instruction:
        return text("\n".join(SITUATIONS))
    return text(ANSWER)


async def until(condition, timeout=10.0):
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


def asked_about(body):
    return body["messages"][-1]["content"].splitlines()[0].removeprefix("Tool: ")


def test_idle_writer_asks_about_every_tool_once_a_style_and_keeps_the_answers(tmp_path):
    path = tmp_path / "tool_examples.json"

    async def go(model):
        llm = LlmClient(model.url, model=None, timeout_s=10)
        writer = ExampleWriter(ExampleBook(path), llm, lambda: DOCS, idle_s=0.05)
        task = asyncio.create_task(writer.run())
        await until(lambda: len(writer.book) == 2 * len(DOCS))
        await asyncio.sleep(0.3)  # nothing left to ask: no further request
        task.cancel()
        await llm.aclose()

    with ScriptedModel(by_style) as model:
        asyncio.run(go(model))
    # Every tool's direct requests come before any tool's situations.
    assert [(asked_about(body), body["messages"][0]["content"]) for body in model.requests] == [
        (d.name, style.instruction) for style in (DIRECT, SITUATION) for d in DOCS]
    assert {body["max_tokens"] for body in model.requests} == {EXAMPLE_MAX_TOKENS}
    assert all(body["temperature"] == 0.0 and "tools" not in body for body in model.requests)
    book = ExampleBook(path)  # what a new process reads
    assert [(d.examples, d.situations) for d in book.with_examples(DOCS)] == [
        (REQUESTS, SITUATIONS)] * 2
    assert json.loads(path.read_text())
    assert {entry["model"] for entry in json.loads(path.read_text()).values()} == {"scripted-model"}


def test_a_turn_cancels_the_request_in_flight_and_the_tool_is_asked_again_later(tmp_path):
    replies = iter([Reply(hang=True), text(ANSWER), text(ANSWER)])

    async def go(model):
        llm = LlmClient(model.url, model=None, timeout_s=30)
        writer = ExampleWriter(ExampleBook(tmp_path / "b.json"), llm, lambda: DOCS[:1],
                               idle_s=0.2)
        task = asyncio.create_task(writer.run())
        await until(lambda: len(model.requests) == 1)
        with writer.turn():
            await until(lambda: model.disconnects == 1)  # the llm service stops generating
            await asyncio.sleep(0.5)
            assert len(model.requests) == 1 and len(writer.book) == 0  # quiet during the turn
        await until(lambda: len(writer.book) == 2)
        task.cancel()
        await llm.aclose()
        return writer.book

    with ScriptedModel(lambda body: next(replies)) as model:
        book = asyncio.run(go(model))
    assert [(asked_about(body), body["messages"][0]["content"]) for body in model.requests] == [
        (DOCS[0].name, DIRECT.instruction)] * 2 + [(DOCS[0].name, SITUATION.instruction)]
    assert book.requests_for(DOCS[0], DIRECT) == REQUESTS


def test_an_unreachable_model_is_logged_and_asked_again_after_a_pause(tmp_path, caplog):
    async def go():
        llm = LlmClient("http://127.0.0.1:9/v1", model="m", timeout_s=2)
        writer = ExampleWriter(ExampleBook(tmp_path / "b.json"), llm, lambda: DOCS,
                               idle_s=0.01, retry_s=0.2)
        task = asyncio.create_task(writer.run())
        await asyncio.sleep(0.7)
        assert not task.done()  # the writer keeps running
        task.cancel()
        await llm.aclose()
        return writer.book

    with caplog.at_level(logging.WARNING, logger="lane.examples"):
        book = asyncio.run(go())
    failures = [r for r in caplog.records if "not written" in r.getMessage()]
    assert 2 <= len(failures) <= 5 and len(book) == 0


def test_a_tool_source_that_fails_is_logged_and_read_again(tmp_path, caplog):
    reads = iter([RuntimeError("MCP server gone"), DOCS[:1]])

    def docs():
        item = next(reads, DOCS[:1])
        if isinstance(item, Exception):
            raise item
        return item

    async def go(model):
        llm = LlmClient(model.url, model=None, timeout_s=10)
        writer = ExampleWriter(ExampleBook(None), llm, docs, idle_s=0.01, retry_s=0.1)
        task = asyncio.create_task(writer.run())
        await until(lambda: len(writer.book) == 2)
        task.cancel()
        await llm.aclose()

    with caplog.at_level(logging.ERROR, logger="lane.examples"):
        with ScriptedModel(lambda body: text(ANSWER)) as model:
            asyncio.run(go(model))
    assert "could not read the tools" in caplog.text and len(model.requests) == 2


def deferred_tool(name, description):
    return Tool(name, description, object_schema({}), lambda arguments, ctx: "{}", "srv")


def test_the_shim_writes_examples_for_its_deferred_tools_while_idle(tmp_path, monkeypatch):
    monkeypatch.setattr("stack.toolsearch.examples_writer.IDLE_S", 0.2)
    registry = Registry([deferred_tool("memory", "Save a note.")], providers=[lambda: [
        deferred_tool("srv__get_oncall", "Get the users currently on-call."),
        deferred_tool("srv__post_message", "Post a message to a channel.")]])

    def reply(body):
        if "find software tools" in body["messages"][0]["content"]:
            return text(ANSWER)
        return text("Hello.")

    with ScriptedModel(reply) as model:
        settings = Settings(home=tmp_path, llm_url=model.url, core_tools=("memory",))
        with ShimServer(settings, registry=registry) as shim:
            response = httpx.post(f"{shim.url}/v1/chat/completions", timeout=20,
                                  json={"messages": [{"role": "user", "content": "hi"}]})
            assert response.status_code == 200
            book_path = settings.examples_path
            deadline = asyncio.run(_wait_for_file(book_path, 4))
        assert deadline, "the shim wrote no examples"
    entries = json.loads(book_path.read_text())
    assert sorted((e["tool"], e["style"]) for e in entries.values()) == [
        (name, style) for name in ("srv__get_oncall", "srv__post_message")
        for style in ("direct", "situation")]
    asked = [asked_about(b) for b in model.requests if "find software tools"
             in b["messages"][0]["content"]]
    # each tool asked once per style; a call the user's turn interrupted (slow cores) is asked again
    assert sorted(set(asked)) == ["srv__get_oncall", "srv__post_message"] and len(asked) >= 4


def test_a_turn_that_starts_while_the_writer_waits_on_a_slow_model_drops_that_call_at_once(
        tmp_path, monkeypatch):
    """The writer's call is still being read by the model (5 s, as a long prompt on two cores);
    the user's request must not wait for it: the shim's turn makes the writer drop the call at
    once (its connection closed, nothing kept), and the tool is asked again once the lane is idle."""
    slow_s = 5.0
    monkeypatch.setattr("stack.toolsearch.examples_writer.IDLE_S", 0.2)
    registry = Registry([deferred_tool("memory", "Save a note.")], providers=[lambda: [
        deferred_tool("srv__get_oncall", "Get the users currently on-call.")]])
    writer_calls = []

    def reply(body):
        if "find software tools" not in body["messages"][0]["content"]:
            return text("Hello.")
        writer_calls.append(body)
        return Reply(content=ANSWER, delay_s=slow_s) if len(writer_calls) == 1 else by_style(body)

    with ScriptedModel(reply) as model:
        settings = Settings(home=tmp_path, llm_url=model.url, core_tools=("memory",))
        with ShimServer(settings, registry=registry) as shim:
            assert wait_for(lambda: writer_calls, 10.0), "the writer never asked"
            started = time.monotonic()
            response = httpx.post(f"{shim.url}/v1/chat/completions", timeout=20,
                                  json={"messages": [{"role": "user", "content": "hi"}]})
            answered_s = time.monotonic() - started
            assert wait_for(lambda: model.disconnects == 1, slow_s / 2), \
                "the writer's call was not dropped when the turn started"
            dropped_s = time.monotonic() - started
            assert wait_for(lambda: len(writer_calls) >= 3, 10.0), "the tool was not asked again"
        book = json.loads(settings.examples_path.read_text())
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "Hello."
    assert answered_s < slow_s / 2 and dropped_s < slow_s / 2
    assert [asked_about(body) for body in writer_calls[:2]] == ["srv__get_oncall"] * 2
    # from the second call: the first kept nothing
    assert [(e["tool"], e["style"], e["requests"]) for e in book.values()][:1] == [
        ("srv__get_oncall", "direct", list(REQUESTS))]


def test_the_shim_writes_no_examples_when_switched_off(tmp_path, monkeypatch):
    monkeypatch.setattr("stack.toolsearch.examples_writer.IDLE_S", 0.05)
    registry = Registry([deferred_tool("memory", "Save a note.")],
                        providers=[lambda: [deferred_tool("srv__get_oncall", "Get on-call.")]])
    with ScriptedModel(lambda body: text(ANSWER)) as model:
        settings = Settings(home=tmp_path, llm_url=model.url, core_tools=("memory",),
                            tool_examples=False)
        with ShimServer(settings, registry=registry):
            asyncio.run(asyncio.sleep(1.0))
    assert model.requests == [] and not settings.examples_path.exists()


async def _wait_for_file(path, entries, timeout=10.0):
    try:
        await until(lambda: path.exists() and len(json.loads(path.read_text())) >= entries,
                    timeout)
    except TimeoutError:
        return False
    return True


def test_lane_examples_writes_a_book_that_lane_search_reads(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LANE_HOME", str(tmp_path / "home"))
    catalog = tmp_path / "tools.json"
    catalog.write_text(json.dumps([
        {"type": "function", "function": {"name": d.name, "description": d.description,
                                          "parameters": {}}} for d in DOCS]))
    book = tmp_path / "book.json"

    def answer(body):
        if asked_about(body) == DOCS[0].name:
            return text(ANSWER)
        return text("post hello to the team channel\nshare the release note in #general\n"
                    "tell everyone in chat that lunch is here")

    with ScriptedModel(answer) as model:
        assert main(["examples", "--catalog", str(catalog), "--book", str(book),
                     "--llm-url", model.url]) == 0
        assert main(["examples", "--catalog", str(catalog), "--book", str(book),
                     "--llm-url", model.url]) == 0  # all written: nothing asked again
        assert main(["examples", "--catalog", str(catalog), "--book", str(book),
                     "--llm-url", model.url, "--again", "--limit", "1"]) == 0
    assert [asked_about(body) for body in model.requests] == [d.name for d in DOCS] * 2 + [
        DOCS[0].name]
    out = capsys.readouterr()
    assert f"[1/4] {DOCS[0].name} (direct): {' | '.join(REQUESTS)}" in out.out
    assert "2 of 2 tools have all their examples; asking" in out.err

    query = "who carries the pager this week"
    assert main(["search", "--catalog", str(catalog), "--method", "bm25", "--examples", str(book),
                 "--limit", "1", query]) == 0
    assert capsys.readouterr().out.split()[-1] == DOCS[0].name


def test_lane_examples_sends_the_key_named_by_key_env(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LANE_HOME", str(tmp_path / "home"))
    catalog = tmp_path / "tools.json"
    catalog.write_text(json.dumps([{"name": "srv__ping", "description": "Ping a host.",
                                    "inputSchema": {}}]))
    monkeypatch.setenv("CLOUD_KEY", "sk-test-123")
    with ScriptedModel(lambda body: text(ANSWER)) as model:
        assert main(["examples", "--catalog", str(catalog), "--llm-url", model.url,
                     "--key-env", "CLOUD_KEY"]) == 0
        assert main(["examples", "--catalog", str(catalog), "--llm-url", model.url,
                     "--key-env", "NO_SUCH_VAR", "--again"]) == 2
    assert model.authorizations == ["Bearer sk-test-123"] * 2  # both styles
    assert "the environment has no NO_SUCH_VAR" in capsys.readouterr().err
    assert "sk-test-123" not in json.dumps(json.loads((tmp_path / "home" / "tool_examples.json")
                                                      .read_text()))


def test_lane_examples_says_when_the_model_is_unreachable(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LANE_HOME", str(tmp_path / "home"))
    catalog = tmp_path / "tools.json"
    catalog.write_text(json.dumps([{"name": "srv__ping", "description": "Ping a host.",
                                    "inputSchema": {}}]))
    assert main(["examples", "--catalog", str(catalog), "--llm-url", "http://127.0.0.1:9/v1",
                 "--model", "m"]) == 2
    assert "lane examples: llm service at http://127.0.0.1:9/v1 failed" in capsys.readouterr().err
    assert main(["examples", "--catalog", str(tmp_path / "absent.json")]) == 2
