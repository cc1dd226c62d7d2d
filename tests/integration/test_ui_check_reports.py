"""`lane check` keeps its report beside the store it judged, and the shim's trace page shows it:
a real check run against a shim in front of the competent scripted model."""

import json

import httpx

from tests.integration.test_check_six_steps import competent_decision, competent_turn, lane_with


def test_check_saves_its_report_beside_the_store_and_the_page_shows_it(tmp_path):
    with lane_with(tmp_path, competent_turn, competent_decision) as lane:
        first = lane.check()
        second = lane.check("--arms", "ab")
        page = httpx.get(f"{lane.url}/ui", timeout=20).text

    saved = sorted((lane.db.parent / "checks").glob("*.json"))
    assert [json.loads(path.read_text()) for path in saved] == [first.report, second.report]
    # Newest first: both arms of the second run, then the first run's arm.
    sessions = [second.report["arms"]["a"]["session_id"], second.report["arms"]["b"]["session_id"],
                first.report["session_id"]]
    positions = [page.index(f"<a href='/ui/sessions/{session}'>") for session in sessions]
    assert positions == sorted(positions)
    assert page.count("<span class=pass>6/6 passed</span>") == 3
    assert page.count("<td class=pass>pass</td>") == 18
