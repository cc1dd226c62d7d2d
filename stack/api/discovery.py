"""The endpoints clients probe to learn a local server's model and context window, in the shapes
of the servers they were written for: llama.cpp (`GET /props`, `/v1/props`), LM Studio
(`GET /api/v1/models`), Ollama (`GET /api/tags`, `POST /api/show`, `GET /api/version`) and
`GET /version`.

The context they report is the one the lane works in: the smaller of LANE_CONTEXT_TOKENS and the
llm service's `n_ctx` (as the agent and proxy mode budget with), so a client that sizes its
prompts from it fits the lane. The model is named `fallback-lane` as in /v1/models, with the
upstream model's name beside it where the shape has room.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request

from .. import __version__
from ..agent.history import context_of
from ..agent.llm_client import LlmClient, LlmError
from ..config import Settings
from .responses import MODEL_ID

BUILD_INFO = f"fallback-lane {__version__}"


@dataclass(frozen=True)
class ModelFacts:
    upstream: str  # the llm service's model, or "unknown" while it cannot say
    n_ctx: int


async def model_facts(request: Request) -> ModelFacts:
    settings: Settings = request.app.state.settings
    llm: LlmClient = request.app.state.llm
    try:
        upstream = await llm.model_name()
    except LlmError:
        upstream = settings.model or "unknown"
    return ModelFacts(upstream, context_of(settings.context_tokens, await llm.context_window()))


discovery_routes = APIRouter()


@discovery_routes.get("/props")
@discovery_routes.get("/v1/props")
async def props(request: Request) -> dict[str, Any]:
    """llama.cpp's server properties: what clients read is `default_generation_settings.n_ctx`
    (and `n_ctx` beside it, where newer servers put it), `model_path` and `build_info`."""
    facts = await model_facts(request)
    settings: Settings = request.app.state.settings
    return {"default_generation_settings": {"n_ctx": facts.n_ctx, "params": {"n_predict": settings.max_tokens}},
            "n_ctx": facts.n_ctx, "total_slots": 1, "model_path": facts.upstream, "model_alias": MODEL_ID,
            "build_info": BUILD_INFO, "modalities": {"vision": False, "audio": False}}


@discovery_routes.get("/api/v1/models")
async def lmstudio_models(request: Request) -> dict[str, Any]:
    """LM Studio's model list, whose `max_context_length` is the window."""
    facts = await model_facts(request)
    return {"object": "list", "data": [{
        "id": MODEL_ID, "object": "model", "type": "llm", "publisher": "fallback-lane", "arch": facts.upstream,
        "compatibility_type": "gguf", "state": "loaded", "max_context_length": facts.n_ctx}]}


@discovery_routes.get("/api/tags")
async def ollama_tags(request: Request) -> dict[str, Any]:
    facts = await model_facts(request)
    return {"models": [{"name": MODEL_ID, "model": MODEL_ID, "modified_at": "1970-01-01T00:00:00Z", "size": 0,
                        "digest": "", "details": _ollama_details(facts)}]}


@discovery_routes.post("/api/show")
async def ollama_show(request: Request) -> dict[str, Any]:
    """Ollama's model details; its clients read the window from `model_info`, under the key
    `<general.architecture>.context_length`."""
    facts = await model_facts(request)
    return {"details": _ollama_details(facts), "capabilities": ["completion", "tools"],
            "model_info": {"general.architecture": "lane", "general.name": facts.upstream,
                           "lane.context_length": facts.n_ctx}}


@discovery_routes.get("/version")
@discovery_routes.get("/api/version")
async def version() -> dict[str, str]:
    return {"version": __version__, "build_info": BUILD_INFO}


def _ollama_details(facts: ModelFacts) -> dict[str, Any]:
    return {"format": "gguf", "family": "lane", "families": ["lane"], "parameter_size": "",
            "quantization_level": "", "parent_model": facts.upstream}
