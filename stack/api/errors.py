"""Every failure the shim answers with, in OpenAI's error shape and never with a traceback.

Clients of an OpenAI-compatible endpoint parse `{"error": {"message", "type", "code"}}`; a
plain-text or HTML error, or a dropped connection, breaks them in confusing ways, so every path
(bad input, unknown route, upstream failure, our own bug) ends here.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..wire import ApiError

log = logging.getLogger("lane.api")


def error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(error.body, status_code=error.status, headers=error.headers)


INTERNAL = ApiError(500, "internal error in the shim; see its log", type="server_error",
                    code="internal_error")


class CatchAll:
    """Answers an unexpected exception with a 500 in the OpenAI shape and ends the request there.

    Starlette's own last-resort handler re-raises after answering, and the server then drops the
    connection, which some clients see as a reset instead of the 500."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            log.exception("unexpected error on %s %s", scope.get("method"), scope.get("path"))
            if started or scope["type"] != "http":
                raise
            await error_response(INTERNAL)(scope, receive, send)


_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


def install_handlers(app: FastAPI) -> None:
    """Route the framework's own errors (404, 405) and any unexpected exception into the shape."""

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        if exc.status_code == 404:
            message = f"no such endpoint: {request.method} {request.url.path}"
        elif exc.status_code == 405:
            message = f"method {request.method} is not allowed on {request.url.path}"
        else:
            message = str(exc.detail)
        return error_response(ApiError(exc.status_code, message, code=code,
                                       headers=getattr(exc, "headers", None)))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return error_response(INTERNAL)
