"""The API side of the memory inspector: ``GET /v1/users`` (the key's tenant's users with their
memory counts) and the static page, its script and style, served without a key."""

from __future__ import annotations

import pytest

from shared.models import MemoryStatus, MemoryType
from tests.support.api import api_settings, error_of, fields_of, running_api, seed_memory

A, B = "tenant-a", "tenant-b"


@pytest.fixture
def env(it_settings):
    with running_api(api_settings(it_settings)) as env:
        yield env


def test_users_lists_only_the_keys_tenant_with_counts_and_pages(env):
    c = env.container
    seed_memory(c, A, "u1", "我不吃香菜", n=0)
    seed_memory(c, A, "u1", "生产环境部署端口是8443", kind=MemoryType.FACT, status=MemoryStatus.ARCHIVED, n=1)
    seed_memory(c, A, "u2", "I prefer window seats", n=2)
    seed_memory(c, B, "u3", "B's secret", n=3)
    seed_memory(c, B, "u1", "B's u1", n=4)

    r = env.client.get("/v1/users", headers=env.auth(A))
    assert r.status_code == 200, r.text
    assert r.json() == {
        "items": [
            {"user_id": "u1", "memories": 2, "active": 1},
            {"user_id": "u2", "memories": 1, "active": 1},
        ],
        "total": 2,
    }
    other = env.client.get("/v1/users", headers=env.auth(B)).json()
    assert other == {
        "items": [
            {"user_id": "u1", "memories": 1, "active": 1},
            {"user_id": "u3", "memories": 1, "active": 1},
        ],
        "total": 2,
    }
    page = env.client.get("/v1/users", params={"limit": 1, "offset": 1}, headers=env.auth(A)).json()
    assert page == {"items": [{"user_id": "u2", "memories": 1, "active": 1}], "total": 2}
    assert env.client.get("/v1/users", params={"offset": 5}, headers=env.auth(A)).json() == {
        "items": [],
        "total": 2,
    }

    # A forgotten memory still counts (it is kept for the audit), but not as active.
    u2 = env.client.get("/v1/users/u2/memories", headers=env.auth(A)).json()["items"][0]
    env.client.delete(f"/v1/users/u2/memories/{u2['id']}", headers=env.auth(A)).raise_for_status()
    items = env.client.get("/v1/users", headers=env.auth(A)).json()["items"]
    assert items[1] == {"user_id": "u2", "memories": 1, "active": 0}


def test_users_needs_a_key_and_checks_paging(env):
    r = env.client.get("/v1/users")
    assert r.status_code == 401 and error_of(r)["code"] == "unauthorized"
    r = env.client.get("/v1/users", params={"limit": 0, "offset": -1}, headers=env.auth(A))
    assert r.status_code == 422 and fields_of(r) == {"limit", "offset"}
    r = env.client.get("/v1/users", params={"limit": 501}, headers=env.auth(A))
    assert r.status_code == 422 and fields_of(r) == {"limit"}
    assert env.client.get("/v1/users", headers=env.auth(A)).json() == {"items": [], "total": 0}
    spec = env.client.get("/openapi.json").json()
    assert "/v1/users" in spec["paths"]
    assert not any(path.startswith("/inspector") for path in spec["paths"])


def test_the_inspector_page_script_and_style_are_served_without_a_key(env):
    c = env.client
    r = c.get("/inspector", follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == "inspector/"
    page = c.get("/inspector/")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe-inline" not in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    assert '<script type="module" src="inspector.js">' in page.text
    script = c.get("/inspector/inspector.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    # The script never parses data as HTML (the browser test proves it with an injection string).
    code = "\n".join(line for line in script.text.splitlines() if not line.lstrip().startswith("//"))
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in code, sink
    style = c.get("/inspector/inspector.css")
    assert style.status_code == 200 and style.headers["content-type"].startswith("text/css")
    assert c.get("/inspector/nothing.js").status_code == 404
