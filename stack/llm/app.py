"""The llm service's HTTP face: OpenAI-compatible chat completions, embeddings, models and health.

Every generation runs in its own worker thread (the engine's lock queues them), while the event
loop watches the client. When the client disconnects or times out, streaming or not, the job's
cancel flag is set and the engine stops at the next token, so the model is free for the next
request within about a second. Stock llama-cpp-python keeps generating for a gone non-streaming
client until the context is full; this is the reason the lane has its own server.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import asdict
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from stack.llm.engine import Cancelled, Engine, Generation, Job, PromptTooLong, TemplateFailure
from stack.llm.protocol import parse_chat_request, parse_embedding_request
from stack.wire import (
    HONOURED,
    SSE_DONE,
    WARM_ROUTE,
    ApiError,
    chunk_body,
    completion_body,
    error_body,
    new_completion_id,
    sse,
    usage,
)

log = logging.getLogger("lane.llm")
Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]

DISCONNECT_POLL_S = 0.1
T = TypeVar("T")


def create_app(engine: Engine, *, model_id: str, on_load_failure: Callable[[], None] | None = None) -> FastAPI:
    """The app loads the model in the background so that /health can say "loading" meanwhile."""
    app = FastAPI(title="fallback-lane llm", lifespan=_loading_in_background(engine, on_load_failure))

    @app.get("/health")
    async def health() -> JSONResponse:
        if engine.loaded:
            return JSONResponse({"status": "ok", "model": model_id})
        if engine.load_error:
            return JSONResponse({"status": "error", "error": engine.load_error}, status_code=503)
        return JSONResponse({"status": "loading", "model": model_id}, status_code=503)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {
                    "id": model_id,
                    "object": "model",
                    "owned_by": "fallback-lane",
                    "meta": {"n_ctx": engine.n_ctx, "max_tokens": engine.cap, "loaded": engine.loaded},
                }
            ],
        }

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(request: Request) -> JSONResponse | StreamingResponse:
        job = await _job_of(request, engine)
        if isinstance(job, JSONResponse):
            return job
        chat = job.request
        completion_id = new_completion_id()
        if chat.stream:
            stream = _stream(request, engine, job, completion_id, model_id)
            return StreamingResponse(stream, media_type="text/event-stream")
        return await _complete(request, engine, job, completion_id, model_id)

    _add_embedding_route(app, engine, model_id)
    _add_warm_routes(app, engine)
    return app


async def _job_of(request: Request, engine: Engine) -> "Job | JSONResponse":
    """The request's job, or the error to answer with: a bad body (4xx) or a model not loaded yet
    (503)."""
    try:
        chat = parse_chat_request(await request.body(), engine.cap)
    except ApiError as exc:
        return JSONResponse(exc.body, status_code=exc.status)
    if not engine.loaded:
        message = engine.load_error or "the model is still loading"
        return JSONResponse(error_body(message, "model_not_ready", "server_error"), status_code=503)
    return Job(chat)


def _add_embedding_route(app: FastAPI, engine: Engine, model_id: str) -> None:
    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> JSONResponse:
        """OpenAI's embeddings shape; the vector is the last token's hidden state (Engine.embed:
        what the lane's probes read), not a sentence-similarity embedding."""
        try:
            text = parse_embedding_request(await request.body())
        except ApiError as exc:
            return JSONResponse(exc.body, status_code=exc.status)
        if not engine.loaded:
            return JSONResponse(error_body(engine.load_error or "the model is still loading", "model_not_ready",
                                           "server_error"), status_code=503)
        cancel = threading.Event()
        try:
            vector, tokens = await _watched(request, cancel, lambda: engine.embed(text, cancel))
        except Cancelled:
            return JSONResponse(error_body("the client went away", "cancelled"), status_code=499)
        except Exception as exc:
            status, body = _failure(exc)
            return JSONResponse(body, status_code=status)
        return JSONResponse({"object": "list", "model": model_id,
                             "data": [{"object": "embedding", "index": 0, "embedding": vector}],
                             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


def _add_warm_routes(app: FastAPI, engine: Engine) -> None:
    @app.post("/v1" + WARM_ROUTE)
    async def warm(request: Request) -> JSONResponse:
        """Evaluate (or restore) and keep the stable prefix of these messages and tools; the shim
        calls it at start and reports healthy only after (engine.Engine.warm)."""
        job = await _job_of(request, engine)
        if isinstance(job, JSONResponse):
            return job
        try:
            warmed = await _watched(request, job.cancel, lambda: engine.warm(job))
        except Cancelled:
            return JSONResponse(error_body("the client went away", "cancelled"), status_code=499)
        except Exception as exc:
            status, body = _failure(exc)
            return JSONResponse(body, status_code=status)
        return JSONResponse(asdict(warmed))

    @app.get("/v1" + WARM_ROUTE)
    async def warmed() -> dict[str, Any]:
        return {"prefixes": [asdict(w) for w in engine.warmed], "honours": list(HONOURED)}


async def _watched(request: Request, cancel: threading.Event, work: Callable[[], T]) -> T:
    """`work` in a worker thread; the cancel flag is set when the client leaves."""
    done = asyncio.ensure_future(asyncio.to_thread(work))
    await _until_done(request, cancel, done)
    return done.result()


async def _until_done(request: Request, cancel: threading.Event, done: "asyncio.Future[Any]") -> None:
    """Wait for `done`, setting the job's cancel flag when the client leaves (or the server shuts
    down and cancels this handler): a small model never generates for nobody."""
    try:
        while not done.done():
            await asyncio.wait({done}, timeout=DISCONNECT_POLL_S)
            if not done.done() and not cancel.is_set() and await request.is_disconnected():
                cancel.set()
    finally:
        if not done.done():
            cancel.set()


def _loading_in_background(engine: Engine, on_load_failure: Callable[[], None] | None) -> Lifespan:
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        def load() -> None:
            try:
                engine.load()
            except Exception:  # engine.load logged it; the command decides whether to exit
                if on_load_failure is not None:
                    on_load_failure()

        threading.Thread(target=load, name="lane-llm-load", daemon=True).start()
        yield

    return lifespan


def _failure(exc: Exception) -> tuple[int, dict[str, Any]]:
    """The status and OpenAI error body of a generation that raised."""
    if isinstance(exc, PromptTooLong):
        return 400, error_body(str(exc), "context_length_exceeded")
    if isinstance(exc, TemplateFailure):
        return 400, error_body(str(exc), "bad_messages")
    return 500, error_body(str(exc), "generation_failed", "server_error")  # the server stays up


def _start(engine: Engine, job: Job, completion_id: str, emit: Callable[[str], None]) -> asyncio.Future[Generation]:
    """Run the job in a worker thread; the future resolves on the event loop. Logs one line."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Generation] = loop.create_future()

    def settle(result: Generation | None, error: BaseException | None) -> None:
        if done.cancelled():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def work() -> None:
        queued = time.monotonic()
        try:
            outcome = engine.generate(job, emit)
        except Cancelled as exc:
            log.info("%s cancelled while queued after %.2fs", completion_id, time.monotonic() - queued)
            loop.call_soon_threadsafe(settle, None, exc)
        except Exception as exc:  # reported to the client as an error body, never a traceback
            log.warning("%s failed: %s", completion_id, exc)
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            _log_outcome(completion_id, job, outcome)
            loop.call_soon_threadsafe(settle, outcome, None)

    threading.Thread(target=work, name=f"lane-llm-{completion_id[-6:]}", daemon=True).start()
    return done


def _log_outcome(completion_id: str, job: Job, outcome: Generation) -> None:
    rate = outcome.completion_tokens / outcome.gen_s if outcome.gen_s > 0 else 0.0
    log.info(
        "%s stream=%s prompt=%d cached=%d evaluated=%d completion=%d max_tokens=%d(requested %s) "
        "wait=%.2fs prompt_eval=%.2fs gen=%.2fs %.1f tok/s finish=%s cancelled=%s",
        completion_id, job.request.stream, outcome.prompt_tokens, outcome.cached_tokens,
        outcome.prompt_tokens - outcome.cached_tokens, outcome.completion_tokens,
        job.request.max_tokens, job.request.requested_max_tokens, outcome.wait_s, outcome.prompt_s,
        outcome.gen_s, rate, outcome.finish_reason, outcome.cancelled,
    )


async def _complete(
    request: Request, engine: Engine, job: Job, completion_id: str, model_id: str
) -> JSONResponse:
    done = _start(engine, job, completion_id, lambda _piece: None)
    await _until_done(request, job.cancel, done)
    try:
        outcome = done.result()
    except Cancelled:
        return JSONResponse(error_body("the client went away", "cancelled"), status_code=499)
    except Exception as exc:
        status, body = _failure(exc)
        return JSONResponse(body, status_code=status)
    return JSONResponse(
        completion_body(completion_id, model_id, outcome.text, outcome.finish_reason, _usage(outcome),
                        _logprobs(outcome))
    )


async def _stream(
    request: Request, engine: Engine, job: Job, completion_id: str, model_id: str
) -> AsyncIterator[str]:
    """SSE chunks: role, content deltas, the finish chunk, the usage chunk when asked, [DONE]."""
    loop = asyncio.get_running_loop()
    pieces: asyncio.Queue[str] = asyncio.Queue()

    def emit(piece: str) -> None:
        loop.call_soon_threadsafe(pieces.put_nowait, piece)

    done = _start(engine, job, completion_id, emit)
    getter: asyncio.Future[str] | None = None
    last_poll = time.monotonic()
    try:
        yield sse(chunk_body(completion_id, model_id, {"role": "assistant", "content": ""}))
        while True:
            if getter is None:
                getter = asyncio.ensure_future(pieces.get())
            waiting: set[asyncio.Future[Any]] = {getter, done}
            ready, _ = await asyncio.wait(waiting, timeout=DISCONNECT_POLL_S, return_when=asyncio.FIRST_COMPLETED)
            if getter in ready:
                yield sse(chunk_body(completion_id, model_id, {"content": getter.result()}))
                getter = None
            elif done in ready and pieces.empty():
                break
            if time.monotonic() - last_poll >= DISCONNECT_POLL_S:
                last_poll = time.monotonic()
                if await request.is_disconnected():
                    job.cancel.set()
                    return
        for line in _closing_chunks(done, job, completion_id, model_id):
            yield line
    finally:
        if getter is not None:
            getter.cancel()
        if not done.done():
            job.cancel.set()


def _closing_chunks(done: asyncio.Future[Generation], job: Job, completion_id: str, model_id: str) -> Iterator[str]:
    """The finish chunk, the usage chunk when asked and [DONE]; for a generation that raised, its
    error in-band instead, since the headers are already sent. Nothing for a cancelled one."""
    try:
        outcome = done.result()
    except Cancelled:
        return
    except Exception as exc:
        yield sse(_failure(exc)[1])
        yield SSE_DONE
        return
    # All of a generation's log-probabilities come with its finish chunk: the stop scanner may
    # hold text back, so pieces and tokens do not line up one to one.
    yield sse(chunk_body(completion_id, model_id, {}, outcome.finish_reason, logprobs=_logprobs(outcome)))
    if job.request.include_usage:
        yield sse(chunk_body(completion_id, model_id, None, usage_block=_usage(outcome)))
    yield SSE_DONE


def _logprobs(outcome: Generation) -> dict[str, Any] | None:
    return None if outcome.logprobs is None else {"content": list(outcome.logprobs)}


def _usage(outcome: Generation) -> dict[str, Any]:
    return usage(outcome.prompt_tokens, outcome.completion_tokens, outcome.cached_tokens)
