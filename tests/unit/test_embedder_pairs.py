"""The training pairs for the tool-search embedder: each request is paired with the tool the
dataset says answers it, written as the lane's embedder reads tools, and never twice."""

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "embedder" / "pairs.py"
_spec = importlib.util.spec_from_file_location("embedder_pairs", SCRIPT)
pairs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pairs)


def _write_metatool(folder: Path) -> None:
    folder.mkdir()
    (folder / "all_clean_data.csv").write_text(
        "Query,Tool\n"
        "What's the weather in Oslo?,WeatherTool\n"
        "What's the weather in Oslo?,WeatherTool\n"
        "\"Convert 5 USD, please\",ExchangeTool\n"
        "A request for a tool nobody described,GhostTool\n", encoding="utf-8")
    (folder / "plugin_des.json").write_text(json.dumps({"WeatherTool": "Forecasts by city."}))
    (folder / "big_tool_des.json").write_text(json.dumps({"ExchangeTool": "Converts currencies."}))


def _write_bfcl(folder: Path) -> None:
    folder.mkdir()
    functions = [{"name": "orders.cancel", "description": "Cancels an order.",
                  "parameters": {"type": "dict", "properties": {"order_id": {"type": "string"}}}},
                 {"name": "orders.track", "description": "Tracks an order."}]
    question = {"id": "live_multiple_0", "question": [[{"role": "user", "content": "cancel order 7"}]],
                "function": functions}
    answer = {"id": "live_multiple_0", "ground_truth": [{"orders.cancel": {"order_id": ["7"]}}]}
    for name in pairs.BFCL_SETS:
        body = json.dumps(question) + "\n" if name == "live_multiple" else ""
        (folder / f"BFCL_v4_{name}.json").write_text(body, encoding="utf-8")
        (folder / f"answer_BFCL_v4_{name}.json").write_text(
            json.dumps(answer) + "\n" if body else "", encoding="utf-8")


def test_pairs_take_the_expected_tool_and_drop_repeats(tmp_path, capsys):
    _write_metatool(tmp_path / "metatool")
    _write_bfcl(tmp_path / "bfcl")
    assert pairs.main(["--metatool", str(tmp_path / "metatool"), "--bfcl", str(tmp_path / "bfcl")]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    by_query = {row["query"]: row for row in rows}
    assert len(rows) == 3  # the repeated request once, the undescribed tool left out
    assert by_query["What's the weather in Oslo?"]["tool"] == "weather tool: Forecasts by city."
    assert by_query["Convert 5 USD, please"]["tool"] == "exchange tool: Converts currencies."
    assert by_query["cancel order 7"] == {"query": "cancel order 7", "tool": "orders cancel: Cancels an order.",
                                          "others": ["orders track: Tracks an order."],
                                          "source": "bfcl_live_multiple"}
    assert by_query["Convert 5 USD, please"]["others"] == []
