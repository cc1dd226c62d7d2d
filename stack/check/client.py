"""The check's HTTP side: one chat turn at a time through the shim, as any client would send it.

A turn that times out or fails is an outcome to report, not an exception; only a lane that cannot
be reached at all (refused connection, rejected key) stops the check.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx

PROFILE_OF_ARM = {"a": "full", "b": "search"}


class LaneUnreachable(RuntimeError):
    """The shim cannot be used at all; the message says why in one line."""


@dataclass(frozen=True)
class TurnReply:
    wall_s: float
    # None when the turn produced no answer (timeout, HTTP error): `error` then says why.
    prompt_tokens: int | None = None
    cached_tokens: int = 0
    model_calls: int | None = None
    content: str = ""
    error: str | None = None
    timed_out: bool = False


class ShimClient:
    def __init__(self, url: str, *, key: str | None, timeout_s: float):
        self.root = url.rstrip("/").removesuffix("/v1")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.Client(base_url=self.root, headers=headers, timeout=timeout_s)
        self.timeout_s = timeout_s

    def close(self) -> None:
        self._http.close()

    def check_health(self) -> None:
        """Raise LaneUnreachable unless the shim answers /health with its store and llm up."""
        try:
            response = self._http.get("/health", timeout=min(self.timeout_s, 15.0))
        except httpx.HTTPError as exc:
            raise LaneUnreachable(f"shim not reachable at {self.root}: {_why(exc)}") from exc
        if response.status_code == 200:
            return
        if response.status_code in (401, 403):
            raise LaneUnreachable(_refused_key(self.root, response.status_code))
        raise LaneUnreachable(f"shim at {self.root} is not healthy (HTTP {response.status_code}:"
                              f" {_body(response)})")

    def turn(self, session_id: str, prompt: str, *, arm: str,
             max_tokens: int | None = None) -> TurnReply:
        body: dict[str, Any] = {"model": "fallback-lane",
                                "messages": [{"role": "user", "content": prompt}]}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        headers = {"X-Session-Id": session_id, "X-Lane-Tools": PROFILE_OF_ARM[arm]}
        started = time.monotonic()
        try:
            response = self._http.post("/v1/chat/completions", json=body, headers=headers)
        except httpx.TimeoutException:
            return TurnReply(time.monotonic() - started, error=f"timed out after {self.timeout_s:g}s",
                             timed_out=True)
        except httpx.HTTPError as exc:
            raise LaneUnreachable(f"shim not reachable at {self.root}: {_why(exc)}") from exc
        wall = time.monotonic() - started
        if response.status_code in (401, 403):
            raise LaneUnreachable(_refused_key(self.root, response.status_code))
        if response.status_code != 200:
            return TurnReply(wall, error=f"HTTP {response.status_code}: {_body(response)}",
                             timed_out=response.status_code == 504)
        return _reply(wall, response)


def _reply(wall: float, response: httpx.Response) -> TurnReply:
    try:
        data = response.json()
        content = data["choices"][0]["message"].get("content") or ""
    except (ValueError, LookupError, TypeError, AttributeError):
        return TurnReply(wall, error=f"not an OpenAI chat completion: {response.text[:120]!r}")
    usage = data.get("usage") or {}
    lane = usage.get("lane") or {}
    details = usage.get("prompt_tokens_details") or {}
    return TurnReply(wall, prompt_tokens=_int(usage.get("prompt_tokens")),
                     cached_tokens=_int(details.get("cached_tokens")) or 0,
                     model_calls=_int(lane.get("model_calls")), content=content)


def _refused_key(root: str, status: int) -> str:
    return f"shim at {root} refused the API key (HTTP {status}); pass --key or set LANE_API_KEY"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _body(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:200]
        return str(response.json())[:200]
    except ValueError:
        return response.text[:200] or response.reason_phrase


def _why(exc: httpx.HTTPError) -> str:
    return str(exc) or type(exc).__name__
