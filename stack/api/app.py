"""The shim's FastAPI app: OpenAI chat completions, Anthropic Messages and OpenAI Responses, all
backed by one turn engine (api/serve.py), plus discovery, metrics, sessions and the trace page.

`create_app` wires the long-lived parts in the lifespan (store, tool registry with its MCP servers,
model client, agent) so that importing this module starts nothing. Tests inject a registry and a
model client; `lane shim` passes only settings. The OpenAI routes are one router (`routes`) that
reads the app's settings and parts from `app.state`; another module adds its pages with one
`include_router` line in `create_app`.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response

from ..agent.capabilities import Capabilities
from ..agent.llm_client import LlmClient, LlmError
from ..agent.loop import Agent
from ..agent.proxy import ProxyLane
from ..agent.warmup import WarmUp, openings
from ..config import Settings, private_home
from ..store import Store
from ..tools.mcp_tools import open_lane_registry
from ..tools.registry import Registry, describe_selection
from ..toolsearch.catalog import build_catalog, example_book, warm_up
from ..toolsearch.examples_writer import ExampleWriter
from ..wire import ApiError
from .chat_request import check_session_id, parse_chat_request, profile_from, session_id_from
from .discovery import discovery_routes
from .errors import CatchAll, install_handlers
from .guards import BearerAuth, BodyLimit, HostAndOrigin, JsonBodies
from .messages_api import AnthropicErrors, messages_routes
from .metrics import Metrics, metrics_routes
from .responses import ChatFormat, models_list
from .responses_api import responses_routes
from .serve import serve_turn
from .turns import TurnRunner
from .ui import ui_router

log = logging.getLogger("lane.api")

HEALTH_TIMEOUT_S = 5.0
# How long a health check waits for a probe of the upstream in flight (agent/capabilities.py) before
# it reports `capabilities: null`: a client polling /health is not held for a slow model's probes.
HEALTH_PROBE_WAIT_S = 1.0


def create_app(settings: Settings, *, registry: Registry | None = None,
               llm: LlmClient | None = None, keepalive_s: float = 10.0) -> FastAPI:
    """The shim. An injected registry or llm client is the caller's to close; what the app opens
    itself (store, registry from the configured MCP servers, llm client) it closes on shutdown."""
    app = FastAPI(title="fallback-lane shim", docs_url=None, redoc_url=None, openapi_url=None,
                  lifespan=_lifespan(settings, registry, llm, keepalive_s))
    app.state.settings = settings
    app.state.metrics = Metrics()
    _install_guards(app, settings)
    app.add_middleware(AnthropicErrors)  # outermost: it reshapes the guards' errors too
    app.include_router(routes)
    app.include_router(messages_routes)
    app.include_router(responses_routes)
    app.include_router(discovery_routes)
    app.include_router(metrics_routes)
    app.include_router(ui_router(settings))
    return app


def _install_guards(app: FastAPI, settings: Settings) -> None:
    """Error shapes, then the middleware; the last added runs first: Host and Origin, body limit
    (before the key: the trace page's gate reads its login form), key, JSON body, catch-all."""
    install_handlers(app)
    app.add_middleware(CatchAll)
    app.add_middleware(JsonBodies)
    if settings.api_key:
        app.add_middleware(BearerAuth, api_key=settings.api_key)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(HostAndOrigin, host=settings.host, allowed_hosts=settings.allowed_hosts,
                       allowed_origins=settings.allowed_origins)


Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


def _lifespan(settings: Settings, registry: Registry | None, llm: LlmClient | None,
              keepalive_s: float) -> Lifespan:
    """Opens the long-lived parts when the server starts (not on import) and closes, on
    shutdown, what it opened itself."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            private_home(settings)
            store = Store(settings.db_path)
            stack.callback(store.close)
            tools = registry
            if tools is None:
                tools = stack.enter_context(open_lane_registry(settings))
            client = llm
            if client is None:
                client = LlmClient(settings.llm_url, model=settings.model,
                                   timeout_s=settings.llm_timeout_s)
                stack.push_async_callback(client.aclose)
            warm = WarmUp(client, lambda: openings(settings, tools))
            await warm.probe()
            stack.push_async_callback(_stopped, asyncio.create_task(_probe_then_warm(client, warm)))
            writer = _example_writer(settings, tools, client)
            if writer is not None:  # idle work starts once the lane is warm and then idle, never before
                stack.push_async_callback(_stopped, asyncio.create_task(
                    _after(warm.ready, writer.idle_s, writer.run)))
            app.state.warm = warm
            app.state.store = store
            app.state.llm = client
            app.state.turns = TurnRunner(settings, store, Agent(settings, store, tools, client),
                                         keepalive_s, writer, ProxyLane(settings, store, client, tools))
            log.info("shim ready: store %s, llm %s, %s", settings.db_path, settings.llm_url,
                     await _index_tools(tools, settings))
            yield

    return lifespan


def _example_writer(settings: Settings, tools: Registry, llm: LlmClient) -> ExampleWriter | None:
    """Writes example requests for the deferred tools while the lane is idle (off with
    LANE_TOOL_EXAMPLES=false, and with tool search off: nothing would search them)."""
    if not settings.tool_examples or settings.tool_search == "off":
        return None
    return ExampleWriter(example_book(settings.examples_path), llm,
                         lambda: build_catalog(tools, settings)[1].docs())


async def _probe_then_warm(client: LlmClient, warm: WarmUp) -> None:
    """What the upstream honours is asked first (agent/capabilities.py), then the stable prefixes
    are warmed: the probes' prompts never push a warmed prefix out of the llm's context."""
    await client.probe_until_known()
    if not warm.ready.is_set():
        await warm.run()


async def _after(event: asyncio.Event, delay_s: float, work: Callable[[], Awaitable[None]]) -> None:
    """`work` once `event` is set and `delay_s` more have passed (the first user, told the lane is
    healthy, should not find the model busy with idle work)."""
    await event.wait()
    await asyncio.sleep(delay_s)
    await work()


async def _stopped(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.wait({task})


async def _index_tools(tools: Registry, settings: Settings) -> str:
    """Builds the deferred tools' search index now rather than on the first request."""
    try:
        log.info(describe_selection(tools, settings))
        return f"{await asyncio.to_thread(warm_up, tools, settings)} deferred tools"
    except Exception:  # a tool source that fails now is reported by each request
        log.exception("could not read the tools at start-up")
        return "deferred tools not indexed yet"


routes = APIRouter()


@routes.post("/v1/chat/completions")
async def chat_completions(request: Request) -> Response:
    settings: Settings = request.app.state.settings
    with request.app.state.metrics.refusals("chat"):
        given_id = session_id_from(request.headers)
        profile = profile_from(request.headers)
        # Beside the event loop: checking a client's tool schemas costs about a millisecond per
        # property (seconds for a large catalog), and /health and other clients must not wait for it.
        chat = await asyncio.to_thread(parse_chat_request, await request.body(),
                                       max_tokens_cap=settings.max_tokens, max_tools=settings.proxy_max_tools)
    return await serve_turn(request, "chat", chat, ChatFormat.new(), given_id=given_id, profile=profile)


@routes.get("/v1/models")
async def models() -> dict[str, Any]:
    return models_list()


@routes.get("/health")
async def health(request: Request) -> JSONResponse:
    llm: LlmClient = request.app.state.llm
    parts = {"store": _store_state(request.app.state.store), "llm": await _llm_state(llm)}
    warm: WarmUp = request.app.state.warm
    if all(state == "ok" for state in parts.values()) and not warm.ready.is_set():
        parts["warm"] = warm.state  # the stable prefix is still being evaluated (agent/warmup.py)
    healthy = all(state == "ok" for state in parts.values())
    capabilities = await _capabilities(llm) if parts["llm"] == "ok" else llm.known_capabilities
    return JSONResponse({"status": "ok" if healthy else "unavailable", **parts,
                         "capabilities": capabilities.report() if capabilities else None},
                        status_code=200 if healthy else 503)


@routes.get("/v1/sessions/{session_id}")
async def session(session_id: str, request: Request) -> dict[str, Any]:
    store: Store = request.app.state.store
    found = store.session(check_session_id(session_id))
    if found is None:
        raise ApiError(404, f"no session {session_id!r}", code="session_not_found")
    return {"session": found, "messages": store.messages(session_id),
            "executions": store.executions(session_id), "lane_calls": store.lane_calls(session_id),
            "returned_calls": store.returned_calls(session_id)}


def _store_state(store: Store) -> str:
    try:
        store.ping()
    except Exception as exc:  # any failure of the store means unhealthy, whatever its kind
        return f"error: {exc}"
    return "ok"


async def _capabilities(llm: LlmClient) -> Capabilities | None:
    """What the upstream honours, probed now if it was not yet (a probe that takes longer than
    HEALTH_PROBE_WAIT_S goes on, and a later check shows it)."""
    try:
        return await asyncio.wait_for(llm.capabilities(), HEALTH_PROBE_WAIT_S)
    except (asyncio.TimeoutError, LlmError):
        return None


async def _llm_state(llm: LlmClient) -> str:
    try:
        up = await asyncio.wait_for(llm.healthy(), HEALTH_TIMEOUT_S)
    except (asyncio.TimeoutError, LlmError, OSError):
        return "unreachable"
    return "ok" if up else "unreachable"
