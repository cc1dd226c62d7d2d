"""Proxy mode: a request that carries `tools` is served as a tool-calling model.

The client owns its tools and runs them; the lane returns OpenAI `tool_calls` and the client sends
its `role: "tool"` results in the next request, with the whole conversation (stateless, as
OpenAI is). Inside one request the lane still pulls its levers, for the client's tools:
* under `tool_choice: auto` the request begins with the decision (proxy_decide.py): the next tool, then
  forced under its schema (a hidden one offered for that call), or "answer", then written with no
  tools offered;
* where the client allows parallel calls, a forced call is decoded as a list of calls, each under
  its tool's schema (parallel_calls.py): "the weather in A, B and C" is three calls;
* a reply in words that declines the request or tells the user how to do it (the model's own
  yes/no, decide.decline_probability) is not the answer while the decision, asked again with it
  in view, picks a client tool; a reply naming the lane's bridges is answered again without them
  (proxy_replies.py);
* calls written as text (every shape toolcalls.py salvages) become real tool_calls;
* arguments are validated against the client's schema and repaired where that cannot change
  their meaning (tools/validation.py; an optional one set to its declared default is left out); a
  call that still does not fit is told to the model and corrected here (proxy_calls.py): the
  client never sees a bad call;
* tool search over the client's tools (toolsearch/client_tools.py): tool_search/tool_describe are
  answered here, and a tool_call to a client tool is returned as a call to that tool;
* the repeat breaker, the generation cap, the iteration cap, and the answer check (a reply that
  claims or spells a call that was never made does not reach the client as it is).
No tool call is ever returned as text content: a call-shaped reply is returned as tool_calls or
corrected. The lane's own tools are neither offered nor run here unless Settings.proxy_lane_tools
(LANE_PROXY_LANE_TOOLS) says so; then its core tools join the client's (a client tool of the same
name wins), run inside the lane and are recorded in tool_executions like the agent's.

The store holds every model call: a reply the client got, or whose calls the lane ran, is an
assistant row (as the client got it); one the lane held back (a correction followed, or the lane
answered in its own words) is a lane call (purpose HELD) with why. It holds every bridge step and
rejected call (tool_executions, as in the agent loop), every call returned to the client
(returned_calls) and every result the client sent back (tool rows linked from returned_calls),
each written by records.py as the agent loop writes it.

This module is the request's loop; its parts live beside it: proxy_request.py (what a request asks
and gets), proxy_turn.py (one request's state, opened within the model's context),
client_history.py (the client's conversation, read), proxy_decide.py, proxy_calls.py and
proxy_replies.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..config import Settings
from ..store import Store
from ..tools.registry import Registry
from ..toolsearch.surface import Profile
from .client_history import as_rows, without_bridge
from .ledger import MODEL_CALL_BUDGET
from .llm_client import LlmClient, ModelReply
from .parallel_calls import several_calls
from .proxy_calls import calls_of, returned, take_calls
from .proxy_decide import first_step
from .proxy_replies import answer_or_correct
from .proxy_request import CallsReturned, ProxyRequest, ProxyResult
from .proxy_turn import ProxyTurn, no_answer, open_turn
from .records import finished
from .toolcalls import forced
from .turn import FORCED_CALL_MAX_TOKENS, TurnEnded, count

# Every reply the decision did not force (words, or an open reply with the tools): measured on BFCL
# even ids (multi-turn, 2 cores), a reply in words ran 2,695 tokens and an open reply after a bridge
# step past 4,000 until the 300 s timeout, three times over as the client retried.
REPLY_MAX_TOKENS = 1024
# A reply of several calls (parallel_calls.several_calls_schema) gets the room of an open reply: a
# forced call's 512 tokens cut a list of calls short (the complete ones are still read).
SEVERAL_CALLS_MAX_TOKENS = REPLY_MAX_TOKENS


class ProxyLane:
    def __init__(self, settings: Settings, store: Store, llm: LlmClient, registry: Registry | None = None):
        self.settings, self.store, self.llm, self.registry = settings, store, llm, registry

    async def run_turn(self, session_id: str, new_messages: list[dict[str, Any]],
                       request: ProxyRequest, profile: Profile = "search") -> ProxyResult:
        turn = await open_turn(self.settings, self.store, self.llm, self.registry, session_id, request, profile)
        rows = as_rows(new_messages, request.messages)  # one transaction, off the event loop
        await asyncio.to_thread(self.store.add_messages, session_id, rows, client_results=True)
        if turn.left_out:
            self.store.add_message(session_id, "system", f"The model was not shown the oldest {turn.left_out} "
                                   "messages of the client's conversation: with them it exceeds the context.",
                                   lane_note=True)
        try:
            await first_step(turn)
            for _ in range(self.settings.max_iterations):
                if turn.result.model_calls >= MODEL_CALL_BUDGET:  # every call is paid by a waiting user
                    raise TurnEnded(no_answer(turn), "stop")
                reply = await self._ask(turn)
                calls = calls_of(reply, turn.surface)
                if calls:
                    await take_calls(turn, reply, calls)
                else:
                    await answer_or_correct(turn, reply)
        except CallsReturned as done:
            return returned(turn, done.calls, done.message_id)
        except TurnEnded as end:
            return self._finish(turn, end)
        return self._finish(turn, TurnEnded(no_answer(turn), "iteration_limit"))

    def _tools(self, turn: ProxyTurn) -> list[dict[str, Any]]:
        """The tools block of this request's model calls: the client's (as tool search shows them)
        and the lane's own where configured."""
        return turn.surface.offered + [tool.openai_schema() for tool in turn.lane_tools.values()]

    async def _ask(self, turn: ProxyTurn) -> ModelReply:
        choice = turn.request.tool_choice
        pinned = turn.force or (choice.name if choice.mode == "function" else None)
        if choice.mode == "none" or turn.answer_next:
            tools: list[dict[str, Any]] = []
        elif pinned in turn.surface.catalog.tools:
            tools = [_saying(tool, turn.must_say if tool["function"]["name"] == turn.force else ())
                     for tool in turn.surface.forced_to(pinned)]  # each a call of a several-call reply too
        else:
            tools = self._tools(turn)
        in_tools = turn.force in {t["function"]["name"] for t in tools}
        if in_tools:
            tool_choice: dict[str, Any] | str | None = forced(turn.force)
        elif choice.mode == "function":
            tool_choice = forced(choice.name)
        else:
            tool_choice = "required" if choice.mode == "required" else None
        several = several_calls(tools, tool_choice, parallel=turn.request.parallel_tool_calls,
                                named=choice.mode == "function")
        max_tokens = min(turn.request.max_tokens, SEVERAL_CALLS_MAX_TOKENS if several else
                         FORCED_CALL_MAX_TOKENS if in_tools else REPLY_MAX_TOKENS)
        # An answer is asked with no tools, so without the note on finding hidden ones: seen with
        # Hermes on the 1.5B model, its transcript with that note drew "I'm sorry, but I can't assist
        # with that." after every result (replayed on `lane llm`: without the note, no refusal).
        opening = turn.opening if tools or not turn.surface.bridged else without_bridge(turn.opening)
        reply = await self.llm.chat(opening + turn.scratch, tools, max_tokens=max_tokens,
                                    temperature=turn.request.temperature,
                                    tool_choice=None if several else tool_choice, response_schema=several)
        turn.answering = turn.answer_next
        turn.force, turn.answer_next, turn.must_say = None, False, ()
        count(turn.result, reply)
        return reply

    def _finish(self, turn: ProxyTurn, end: TurnEnded) -> ProxyResult:
        finished(self.store, turn.result, end)
        return turn.result


def _saying(tool: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """`tool` as offered for one forced call whose grammar also requires the properties `names`
    and every optional property with a fixed set of values (`enum`) and no `default`: a mode the
    client's tool cannot do without, though its schema leaves it optional. Seen with Hermes on the
    1.5B model: `memory` (required: target only) was called without `action` at every step, and
    failed in Hermes each time ("Unknown action 'None'"). Where the schema gives a default,
    leaving it out is safe: of BFCL's 4,243 optional enum properties, 4,172 give one."""
    parameters = tool["function"].get("parameters") or {}
    properties = parameters.get("properties") or {}
    modes = [key for key, spec in properties.items()
             if isinstance(spec, dict) and "enum" in spec and "default" not in spec]
    required = list(dict.fromkeys([*(parameters.get("required") or []), *names, *modes]))
    if required == list(parameters.get("required") or []):
        return tool
    return {**tool, "function": {**tool["function"], "parameters": {**parameters, "required": required}}}
