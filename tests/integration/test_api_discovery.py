"""The endpoints clients probe for the model and its context window (api/discovery.py), in the
shapes of llama.cpp, LM Studio and Ollama: the window reported is the one the lane works in, the
smaller of LANE_CONTEXT_TOKENS and the llm service's n_ctx."""

import pytest

from stack import __version__
from tests.fakes.scripted_model import text
from tests.integration.test_api_chat import running_lane

KEY = "lane-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.mark.parametrize(("n_ctx", "window"), [(2048, 2048), (None, 16384)], ids=["llm-smaller", "llm-silent"])
def test_every_probe_reports_the_lanes_window(tmp_path, n_ctx, window):
    # read by the shim on its first look at /v1/models (its probe of the upstream, at start)
    with running_lane(tmp_path, [text("unused")], api_key=KEY, n_ctx=n_ctx) as lane:
        props = lane.client.get("/props", headers=AUTH).json()
        assert props == lane.client.get("/v1/props", headers=AUTH).json()
        lmstudio = lane.client.get("/api/v1/models", headers=AUTH).json()
        show = lane.client.post("/api/show", headers=AUTH, json={"model": "fallback-lane"}).json()
        tags = lane.client.get("/api/tags", headers=AUTH).json()

    assert props["default_generation_settings"]["n_ctx"] == props["n_ctx"] == window
    assert props["model_path"] == "scripted-model" and props["model_alias"] == "fallback-lane"
    assert props["build_info"] == f"fallback-lane {__version__}"
    assert [(m["id"], m["max_context_length"]) for m in lmstudio["data"]] == [("fallback-lane", window)]
    architecture = show["model_info"]["general.architecture"]
    assert show["model_info"][f"{architecture}.context_length"] == window
    assert [m["name"] for m in tags["models"]] == ["fallback-lane"]


def test_version_and_the_key(tmp_path):
    with running_lane(tmp_path, [], api_key=KEY) as lane:
        assert lane.client.get("/version", headers=AUTH).json()["version"] == __version__
        assert lane.client.get("/api/version", headers=AUTH).json()["version"] == __version__
        assert lane.client.get("/props").status_code == 401
