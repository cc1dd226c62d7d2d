"""One request of any wire format, served one way: the session it continues, its turn, and the
reply in the client's shape.

The three APIs (OpenAI chat completions, Anthropic Messages, OpenAI Responses) differ only in how
a request is read (each is translated into a ChatRequest) and how its reply is written (a
ReplyFormat). Which session a request continues, how its turn runs, how a client that leaves
cancels it, what an upstream failure answers and what the metrics count are the same for all, here.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from ..agent.llm_client import LlmError
from ..agent.records import continued_session
from ..store import Store, new_session_id
from ..toolsearch.surface import Profile
from .chat_request import ChatRequest, last_user_message
from .metrics import Api, Metrics
from .turns import AfterTurn, ClientGone, ReplyFormat, TurnRunner, upstream_error

STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def session_for(store: Store, given_id: str | None,
                chat: ChatRequest) -> tuple[str, list[dict[str, Any]]]:
    """(session id, the request's messages the turn adds to it). With tools the client's messages
    are the conversation (a stateless client continues the session its tool results answer);
    without, a named session holds the history and only the new user message is added."""
    if chat.proxy is not None:
        return continued_session(store, given_id, chat.messages)
    if given_id is not None:
        return given_id, [last_user_message(chat.messages)]
    return new_session_id(), chat.messages


async def serve_turn(request: Request, api: Api, chat: ChatRequest, reply: ReplyFormat, *,
                     given_id: str | None, profile: Profile, after: AfterTurn | None = None) -> Response:
    """Runs the turn and answers in `reply`'s format, streamed when the request asked for it;
    the session's id is echoed in X-Session-Id. `after` (TurnRunner.start) records what a format
    keeps of the turn."""
    session_id, new_messages = session_for(request.app.state.store, given_id, chat)
    headers = {"X-Session-Id": session_id}
    turns: TurnRunner = request.app.state.turns
    task = turns.start(session_id, new_messages, chat, profile, after)
    metrics: Metrics = request.app.state.metrics
    metrics.watch(task, api, "agent" if chat.proxy is None else "proxy")
    if chat.stream:
        return StreamingResponse(turns.stream(task, request, reply), media_type="text/event-stream",
                                 headers={**headers, **STREAM_HEADERS})
    try:
        result = await turns.wait(task, request)
    except ClientGone:
        return Response(status_code=499)
    except LlmError as exc:
        error = upstream_error(exc)
        error.headers = headers
        raise error from exc
    return JSONResponse(reply.body(result), headers=headers)
