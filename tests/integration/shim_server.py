"""The shim app served by a real uvicorn on a free loopback port, in a thread, for tests and the
overhead benchmark: requests go through real HTTP, so disconnects and streaming are real too."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn

from stack.api.app import create_app
from stack.config import Settings


class ShimServer:
    def __init__(self, settings: Settings, **app_options: Any):
        self.app = create_app(settings, **app_options)
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "ShimServer":
        # proto=IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on sockets that say they are
        # TCP, and without it keep-alive requests stall ~40 ms on delayed ACKs.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("shim did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server and self._thread
        self._server.should_exit = True
        self._thread.join(timeout=15)
