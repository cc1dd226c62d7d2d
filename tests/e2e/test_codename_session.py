"""The spine end to end: a two-turn session through the real shim with the real memory tool and
the lane's default configuration (tool search on): the model decides memory is needed, the lane
forces its call, written natively or as text, and a later session answers from what was kept."""

import json
import sqlite3

import httpx
import pytest

from stack.config import Settings
from tests.fakes.scripted_model import Reply, ScriptedModel, call, text
from tests.integration.shim_server import ShimServer

CODENAME = "BLUE-HERON-42"
SAVE = {"action": "add", "content": f"Project codename: {CODENAME}"}


def decide_memory_for_remember(body):
    """The decision: memory for a request to remember something, else "answer"."""
    request = body["messages"][-1]["content"].split("The user's message: ")[1].split("\n")[0]
    return text(json.dumps({"next": "memory" if request.startswith("Remember") else "answer"}))


def compose_facts(body):
    """The facts of a request that composes an answer (no tools offered), else None."""
    return None if body.get("tools") else body["messages"][1]["content"]


def first_reply(form: str) -> Reply:
    if form == "native":
        return call("memory", SAVE)
    payload = json.dumps({"name": "memory", "arguments": SAVE})
    if form == "tagged":
        return text(f"Saving it.\n<tool_call>\n{payload}\n</tool_call>")
    return text(payload)


@pytest.mark.parametrize("form, origin", [("native", "native"), ("tagged", "content"),
                                          ("bare_json", "content")])
def test_remember_then_recall_the_codename(tmp_path, form, origin):
    def answer_from_memory(body):
        system = " ".join(m["content"] for m in body["messages"] if m["role"] == "system")
        known = CODENAME if CODENAME in system else "I do not know"
        return text(f"Your codename is {known}.")

    replies = [first_reply(form), text(f"Saved: your project codename is {CODENAME}.")]

    def script(body):
        return replies.pop(0) if replies else answer_from_memory(body)

    with ScriptedModel(script, decision=decide_memory_for_remember) as model:
        settings = Settings(home=tmp_path, llm_url=model.url)
        with ShimServer(settings) as shim, httpx.Client(base_url=shim.url, timeout=20) as client:
            headers = {"X-Session-Id": "codename-run"}
            remember = client.post("/v1/chat/completions", headers=headers, json={"messages": [
                {"role": "user", "content": f"Remember: my project codename is {CODENAME}."}]})
            # Memory is a snapshot taken when a session starts: a new session sees the write.
            recall = client.post("/v1/chat/completions", headers={"X-Session-Id": "codename-later"},
                                 json={"messages": [{"role": "user", "content": "What is my project codename?"}]})

    assert remember.status_code == recall.status_code == 200
    assert remember.json()["usage"]["lane"]["tools_executed"] == ["memory"]
    assert remember.json()["choices"][0]["message"]["content"] == f"Saved: your project codename is {CODENAME}."
    assert recall.json()["choices"][0]["message"]["content"] == f"Your codename is {CODENAME}."
    assert recall.json()["usage"]["lane"]["tools_executed"] == []
    # tool search is on by default: the forced call saw the bridges beside the core tools
    forced, saved, answered = model.requests
    offered = {t["function"]["name"] for t in forced["tools"]}
    assert {"memory", "tool_search", "tool_call"} <= offered
    assert forced["tool_choice"] == {"type": "function", "function": {"name": "memory"}}
    assert compose_facts(saved) is not None and compose_facts(answered) is not None
    # the later session's decision and answer read the kept note, which is why no tool was needed
    assert f"Project codename: {CODENAME}" in model.decide_requests[1]["messages"][-1]["content"]
    # after the date and this computer (situation.py), the notes
    assert f"\n\nNotes the user asked you to keep:\n- Project codename: {CODENAME}" in compose_facts(answered)

    with sqlite3.connect(settings.db_path) as db:
        executions = db.execute(
            "SELECT tool_name, status, origin, via_bridge, tool_call_id FROM tool_executions"
            " WHERE session_id = 'codename-run'").fetchall()
        assert [row[:4] for row in executions] == [("memory", "ok", origin, 0)]
        tool_message = db.execute(
            "SELECT content FROM messages WHERE role = 'tool' AND tool_call_id = ?",
            (executions[0][4],)).fetchone()
        assert tool_message is not None and tool_message[0]
    assert CODENAME in (tmp_path / "memory.md").read_text()


def test_a_memory_write_leaves_the_next_requests_prefix_unchanged(tmp_path):
    """The system prompt and the tools block come first in the rendered prompt; a memory write in
    the middle of a session must change neither, or the llm re-reads the whole prompt. The lane's
    own questions (the decision, the composed answer) keep their fixed first message; the notes
    they show come after it and are the notes as they are now, this session's saves included."""
    replies = [call("memory", SAVE), text(f"Saved: {CODENAME}."),
               call("memory", {"action": "add", "content": "Likes tea"}), text("Saved: Likes tea.")]

    with ScriptedModel(lambda body: replies.pop(0), decision=decide_memory_for_remember) as model:
        settings = Settings(home=tmp_path, llm_url=model.url)
        (tmp_path / "memory.md").write_text("The user prefers short answers.\n")
        with ShimServer(settings) as shim, httpx.Client(base_url=shim.url, timeout=20) as client:
            for prompt in (f"Remember: my project codename is {CODENAME}.", "Remember also: I like tea."):
                reply = client.post("/v1/chat/completions", headers={"X-Session-Id": "prefix-run"},
                                    json={"messages": [{"role": "user", "content": prompt}]})
                assert reply.status_code == 200

    memory = (tmp_path / "memory.md").read_text()
    assert CODENAME in memory and "Likes tea" in memory
    first, first_answer, later, later_answer = model.requests
    assert later["messages"][0] == first["messages"][0]
    assert later["tools"] == first["tools"]
    assert later["messages"][: len(first["messages"])] == first["messages"]
    # the snapshot follows the prompt (and the tools block the template renders after it)
    assert first["messages"][1] == {"role": "system", "content": "What you remember (from the memory tool):\n"
                                    "- The user prefers short answers."}
    assert CODENAME not in json.dumps(later["messages"][:2])
    kept = "Notes the user asked you to keep:\n- The user prefers short answers."
    for decision in model.decide_requests:
        assert decision["messages"][0] == model.decide_requests[0]["messages"][0]
        assert decision["messages"][-1]["content"].startswith(kept)
    assert CODENAME in model.decide_requests[-1]["messages"][-1]["content"]  # saved in turn one
    for answer in (first_answer, later_answer):
        assert answer["messages"][0] == first_answer["messages"][0]
        assert f"\n\n{kept}" in compose_facts(answer)
    assert CODENAME in compose_facts(first_answer) and CODENAME in compose_facts(later_answer)
