"""The shim app served by a real uvicorn on a free loopback port, in a thread, for tests and the
overhead benchmark: requests go through real HTTP, so disconnects and streaming are real too."""

from __future__ import annotations

from typing import Any

from stack.api.app import create_app
from stack.config import Settings
from tests.fakes.threaded_server import ThreadedServer


class ShimServer:
    def __init__(self, settings: Settings, **app_options: Any):
        self.app = create_app(settings, **app_options)
        self._server = ThreadedServer(self.app, name="shim")

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "ShimServer":
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()
