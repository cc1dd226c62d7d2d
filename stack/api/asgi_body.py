"""A request body read ahead of the app, handed on to it as if unread.

Two checks read the body before any route does (BodyLimit, to measure it; the trace page's gate, to
find the key in its login form). Whatever runs after them must still receive that body, once, and
then the server's own messages (a disconnect), or it waits forever for a body already taken.
"""

from __future__ import annotations

from starlette.types import Message, Receive


def replayed(body: bytes, receive: Receive) -> Receive:
    """`receive` as it was before `body` was read from it."""
    done = False

    async def replay() -> Message:
        nonlocal done
        if not done:
            done = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
