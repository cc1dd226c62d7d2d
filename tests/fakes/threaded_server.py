"""An ASGI app served by a real uvicorn on a loopback port, in a daemon thread: what the scripted
model and the in-test shim both need, so that requests, streams and disconnects are real HTTP."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn


class ThreadedServer:
    def __init__(self, app: Any, *, port: int = 0, lifespan: str = "on", name: str = "server"):
        self.app, self.port, self.lifespan, self.name = app, port, lifespan, name
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout_s: float = 15.0) -> None:
        # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets it recognises as TCP, and
        # without it keep-alive requests stall ~40 ms on delayed ACKs.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        # a server restarted on its port (an upstream that comes back) binds past TIME_WAIT
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="warning", lifespan=self.lifespan)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"{self.name} did not start")
            time.sleep(0.01)

    def stop(self, timeout_s: float = 15.0) -> None:
        assert self._server and self._thread
        self._server.should_exit = True
        self._thread.join(timeout=timeout_s)
