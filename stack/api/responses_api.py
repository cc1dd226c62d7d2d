"""OpenAI's Responses API on the lane: `POST /v1/responses`.

A request is translated (responses_api_request.py) into the one turn every API runs, served by
api/serve.py, and written back as a Responses object or stream (responses_api_reply.py): with
function tools the client's tools are served in proxy mode, without them the lane answers as
the agent endpoint. Errors keep OpenAI's shape.

Conversation state: a response's id is kept in the store (table `responses`) with its session and
the client's conversation as it stood after it; `previous_response_id` continues that session
with that conversation, so a client sends only its new input (a user message, or the outputs of
the calls it was given). `store: false` keeps no such id (a later request cannot name it), while
the turn itself is recorded like every other: the store holds what ran, whatever the client asks.
X-Session-Id works as for chat completions; naming a session other than the previous response's
is a 400.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..agent.turn import TurnResult
from ..config import Settings
from ..store import Store
from ..wire import ApiError, bad_request, load_object
from .chat_request import profile_from, session_id_from
from .responses_api_reply import ResponsesFormat, as_chat_message, new_response_id
from .responses_api_request import ResponsesRequest, parse_responses_request
from .serve import serve_turn
from .turns import AfterTurn

responses_routes = APIRouter()


@responses_routes.post("/v1/responses")
async def responses(request: Request) -> Response:
    settings: Settings = request.app.state.settings
    store: Store = request.app.state.store
    with request.app.state.metrics.refusals("responses"):
        given_id = session_id_from(request.headers)
        profile = profile_from(request.headers)
        data = load_object(await request.body())
        session_id, earlier = _previous(store, data.get("previous_response_id"), given_id)
        parsed = parse_responses_request(data, earlier, max_tokens_cap=settings.max_tokens,
                                         max_tools=settings.proxy_max_tools)
    reply = ResponsesFormat(new_response_id(), parsed.echo)
    return await serve_turn(request, "responses", parsed.chat, reply, given_id=session_id, profile=profile,
                            after=_remember(store, reply.id, parsed))


def _previous(store: Store, previous_id: Any, given_id: str | None) -> tuple[str | None, list[dict[str, Any]]]:
    """(the session the request continues, the conversation it continues from)."""
    if previous_id is None:
        return given_id, []
    if not isinstance(previous_id, str):
        raise bad_request("previous_response_id must be a string", "invalid_type")
    found = store.response(previous_id)
    if found is None:
        raise ApiError(400, f"Previous response with id {previous_id!r} not found (a response created with "
                       "store: false is not kept).", code="previous_response_not_found")
    session_id, conversation = found
    if given_id is not None and given_id != session_id:
        raise bad_request(f"X-Session-Id {given_id!r} is not the session of previous_response_id "
                          f"{previous_id!r}; send one of them", "invalid_session_id")
    return session_id, conversation


def _remember(store: Store, response_id: str, parsed: ResponsesRequest) -> AfterTurn | None:
    """Keeps the response's id for a later previous_response_id, unless the request said store: false."""
    if not parsed.store:
        return None

    def remember(result: TurnResult) -> None:
        store.add_response(response_id, result.session_id, [*parsed.conversation, as_chat_message(result)])

    return remember
