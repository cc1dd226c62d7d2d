"""Anthropic's Messages API on the lane: `POST /v1/messages` and `POST /v1/messages/count_tokens`.

A request is translated (messages_api_request.py) into the one turn every API runs, served by
api/serve.py, and written back in Anthropic's shape (messages_api_reply.py): with `tools` the
client's tools are served in proxy mode, without them the lane answers as the agent endpoint.
Sessions work as for chat completions (X-Session-Id, or stateless with tool results continuing
the session that returned the calls). The key is read from `x-api-key` or a bearer header
(api/guards.py); `anthropic-version`, `anthropic-beta` and `?beta=true` are accepted and ignored.
"""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config import Settings
from ..token_estimate import estimate_tokens
from ..wire import load_object
from .chat_request import profile_from, session_id_from
from .messages_api_reply import MessagesFormat, error_body
from .messages_api_request import parse_messages_request
from .serve import serve_turn

MESSAGES_PATH = "/v1/messages"

messages_routes = APIRouter()


@messages_routes.post(MESSAGES_PATH)
async def messages(request: Request) -> Response:
    settings: Settings = request.app.state.settings
    with request.app.state.metrics.refusals("messages"):
        given_id = session_id_from(request.headers)
        profile = profile_from(request.headers)
        chat = parse_messages_request(load_object(await request.body()), max_tokens_cap=settings.max_tokens,
                                      max_tools=settings.proxy_max_tools)
    return await serve_turn(request, "messages", chat, MessagesFormat.new(), given_id=given_id, profile=profile)


@messages_routes.post(MESSAGES_PATH + "/count_tokens")
async def count_tokens(request: Request) -> dict[str, int]:
    """The lane's one token estimate (stack/token_estimate.py) over what the model would read:
    the messages and the tools, as the llm client counts a prompt its server did not measure."""
    settings: Settings = request.app.state.settings
    chat = parse_messages_request(load_object(await request.body()), max_tokens_cap=settings.max_tokens,
                                  max_tools=settings.proxy_max_tools)
    tools = chat.proxy.tools if chat.proxy is not None else []
    return {"input_tokens": estimate_tokens([chat.messages, tools])}


class AnthropicErrors:
    """Rewrites every error answer under /v1/messages into Anthropic's shape
    `{"type": "error", "error": {"type", "message"}}`, with the same status: the errors of the
    routes, of the framework (404, 405) and of the guards in front of them (401, 413) are all
    written in OpenAI's shape first, and the Anthropic SDK reads only its own. Installed outermost."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path != MESSAGES_PATH and not path.startswith(MESSAGES_PATH + "/"):
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        chunks: list[bytes] = []

        async def reshaping_send(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start" and message["status"] >= 400:
                start = message
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = _reshaped(b"".join(chunks), start["status"])
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, reshaping_send)


def _reshaped(body: bytes, status: int) -> bytes:
    """An OpenAI-shaped error body in Anthropic's shape; any other body as it is."""
    try:
        error = json.loads(body)["error"]
        message = error["message"]
    except (ValueError, KeyError, TypeError):
        return body
    return json.dumps(error_body(status, str(message)), ensure_ascii=False).encode()
