"""Who may read the trace page: the API's key, presented by a browser as `?key=` (then an HttpOnly
cookie) or by a script as the bearer header; without it, a login form and nothing else."""

import pytest
from fastapi.testclient import TestClient

from stack.api.app import create_app
from stack.api.ui_auth import TOKEN_COOKIE
from stack.config import Settings
from stack.tools.registry import Registry

KEY = "ui-secret-key"


def shim(tmp_path, api_key):
    return TestClient(create_app(Settings(home=tmp_path, api_key=api_key), registry=Registry()),
                      base_url="http://127.0.0.1", follow_redirects=False)


@pytest.fixture
def client(tmp_path):
    with shim(tmp_path, KEY) as client:
        yield client


def test_without_the_key_a_browser_gets_the_login_form_only(client):
    for path in ("/ui", "/ui/sessions/anything", "/ui/sessions/anything?key=wrong"):
        response = client.get(path)
        assert response.status_code == 401
        assert response.headers["content-type"].startswith("text/html")
        assert "<input type=password name=key" in response.text
        assert "set-cookie" not in response.headers
    assert "not this lane's key" in client.get("/ui?key=wrong").text
    assert client.cookies.get(TOKEN_COOKIE) is None


def test_key_in_the_url_sets_a_cookie_and_is_dropped_from_the_address(client):
    response = client.get(f"/ui/sessions/demo-1?key={KEY}&view=all")
    assert response.status_code == 303
    assert response.headers["location"] == "/ui/sessions/demo-1?view=all"
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "Path=/ui" in cookie and "SameSite=lax" in cookie
    assert KEY not in cookie, "the cookie holds a derived token, not the key"

    assert client.get("/ui").status_code == 200
    assert client.get("/ui/sessions/demo-1").status_code == 404  # let in; no such session
    # The cookie opens the trace page, not the API.
    assert client.get("/v1/sessions/demo-1").status_code == 401
    assert client.get("/v1/models").status_code == 401


def test_the_login_form_posts_the_key_and_gets_the_cookie(client):
    assert client.post("/ui", data={"key": "wrong"}).status_code == 401
    response = client.post("/ui/sessions/demo-1", data={"key": KEY})
    assert response.status_code == 303
    assert response.headers["location"] == "/ui/sessions/demo-1"
    assert client.get("/ui").status_code == 200


def test_a_forged_cookie_is_refused(client):
    client.cookies.set(TOKEN_COOKIE, "0" * 64)
    assert client.get("/ui").status_code == 401


def test_the_bearer_header_works_on_the_page_as_on_the_api(client):
    response = client.get("/ui", headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 200
    assert "Recent sessions" in response.text


def test_a_lane_without_a_key_shows_the_page_to_anyone(tmp_path):
    with shim(tmp_path, None) as client:
        assert client.get("/ui").status_code == 200
