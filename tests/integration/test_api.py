"""The HTTP API's contract: every endpoint, its error shape naming fields, API keys, and tenancy.

Real Postgres and Redis; the contract tests seed memories directly and use in-memory vector
indexes, and one end-to-end test runs the real workers with the embedded index owned by the
index worker (the API process never opens it).
"""

from __future__ import annotations

import json

import pytest
import redis

from infra import redis_layout
from service.operations.curation import revoke_key
from shared.models import MemoryStatus, MemoryType
from tests.support.api import INDEXES, api_settings, build_env, error_of, fields_of, seed_memory

A, B = "tenant-a", "tenant-b"


@pytest.fixture
def env(it_settings, request):
    # The fake index unless a test asks for more: the curation tests run on the embedded engine too.
    env = build_env(api_settings(it_settings), index=getattr(request, "param", "fake"))
    yield env
    env.client.app.state.close()  # type: ignore[attr-defined]
    env.container.close()


def _memories(env, tenant, user, **params):
    r = env.client.get(f"/v1/users/{user}/memories", params=params, headers=env.auth(tenant))
    assert r.status_code == 200, r.text
    return r.json()


# --- operations -------------------------------------------------------------------------------


def test_health_ready_openapi_docs_and_metrics(env):
    c = env.client
    assert c.get("/v1/health").json() == {"status": "ok"}
    ready = c.get("/v1/ready")
    assert ready.status_code == 200 and ready.json() == {"postgres": "ok", "redis": "ok", "index": "ok"}
    spec = c.get("/openapi.json").json()
    for path in (
        "/v1/events",
        "/v1/events/batch",
        "/v1/recall",
        "/v1/recall/prompt",
        "/v1/users/{user_id}/memories",
        "/v1/users/{user_id}/memories/{memory_id}",
        "/v1/users/{user_id}/memories/{memory_id}/invalidate",
        "/v1/users/{user_id}/memories/{memory_id}/restore",
        "/v1/users/{user_id}/memories/{memory_id}/history",
        "/v1/health",
        "/v1/ready",
    ):
        assert path in spec["paths"], path
    assert "HTTPBearer" in json.dumps(spec["components"]["securitySchemes"])
    assert c.get("/docs").status_code == 200

    seed_memory(env.container, A, "u1", "我不吃香菜")
    bad = {"user_id": "u1", "session_id": "s1", "role": "robot", "content": "x"}
    assert c.post("/v1/events", json=bad, headers=env.auth(A)).status_code == 422
    c.post(
        "/v1/recall", json={"user_id": "u1", "query": "我不吃香菜"}, headers=env.auth(A)
    ).raise_for_status()
    r = c.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert 'cuemem_memories{status="active"} 1.0' in text
    assert 'cuemem_http_requests_total{method="POST",route="/v1/recall",status="200"} 1.0' in text
    assert 'cuemem_api_events_invalid_total{endpoint="single"} 1.0' in text
    assert 'cuemem_recall_stage_seconds_count{stage="total"} 1.0' in text
    assert 'cuemem_queue_depth{queue="cuemem.ingest"}' in text
    assert "cuemem_scrape_ok 1.0" in text
    # Route templates, never raw paths: ids must not become label values.
    c.get("/v1/users/u1/memories/abc", headers=env.auth(A))
    assert "/v1/users/{user_id}/memories/{memory_id}" in c.get("/metrics").text
    assert "/v1/users/u1/" not in c.get("/metrics").text


# --- auth -------------------------------------------------------------------------------------


def test_keys_are_required_and_revocation_takes_effect(env):
    c, path = env.client, "/v1/users/u1/memories"
    r = c.get(path)
    assert r.status_code == 401 and error_of(r)["code"] == "unauthorized"
    assert r.headers["www-authenticate"] == "Bearer"
    for headers in (
        {"Authorization": "Bearer cm_00000000_" + "x" * 43},
        {"Authorization": "Bearer nonsense"},
        {"Authorization": f"Basic {env.keys[A]}"},
        {"X-API-Key": env.keys[A] + "x"},
        {"Authorization": "Bearer "},
    ):
        assert c.get(path, headers=headers).status_code == 401, headers
    assert c.get(path, headers={"X-API-Key": env.keys[A]}).status_code == 200
    assert c.get(path, headers=env.auth(A)).status_code == 200

    revoked = revoke_key(env.container, env.key_ids[A])
    assert revoked is not None and revoked.revoked_at is not None
    r = c.get(path, headers=env.auth(A))
    assert r.status_code == 401 and "revoked" in error_of(r)["message"]
    assert c.get(path, headers=env.auth(B)).status_code == 200  # the other tenant's key still works


# --- events -----------------------------------------------------------------------------------


def test_publish_one_event(env, it_settings):
    c = env.client
    turn = {"user_id": "u1", "session_id": "s1", "role": "user", "content": "我不吃香菜"}
    r = c.post("/v1/events", json=turn, headers=env.auth(A))
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["seq"] == 1 and body["user_id"] == "u1" and body["session_id"] == "s1" and body["event_id"]
    again = c.post("/v1/events", json={**turn, "event_id": "e-2", "metadata": {"k": 1}}, headers=env.auth(A))
    assert again.status_code == 202 and again.json() == {
        "event_id": "e-2",
        "seq": 2,
        "session_id": "s1",
        "user_id": "u1",
    }
    # The turn is in the key's tenant, not the default one: read-your-writes working memory.
    client = redis.Redis.from_url(it_settings.redis_url)
    try:
        assert client.zcard(redis_layout.working_memory_key(A, "u1", "s1")) == 2
        assert client.zcard(redis_layout.working_memory_key("default", "u1", "s1")) == 0
        assert client.zcard(redis_layout.working_memory_key(B, "u1", "s1")) == 0
    finally:
        client.close()
    recalled = c.post(
        "/v1/recall", json={"user_id": "u1", "query": "香菜", "session_id": "s1"}, headers=env.auth(A)
    )
    assert any(i["content"] == "我不吃香菜" for i in recalled.json()["items"])
    other = c.post(
        "/v1/recall", json={"user_id": "u1", "query": "香菜", "session_id": "s1"}, headers=env.auth(B)
    )
    assert other.json()["items"] == []


def test_publish_errors_name_each_field(env):
    c, h = env.client, env.auth(A)
    r = c.post(
        "/v1/events", json={"user_id": "", "session_id": "s 1", "role": "robot", "content": " "}, headers=h
    )
    assert r.status_code == 422 and error_of(r)["code"] == "invalid_input"
    assert fields_of(r) == {"user_id", "session_id", "role", "content"}
    problems = {f["field"]: f["problem"] for f in error_of(r)["fields"]}
    assert "robot" in problems["role"] and "user, assistant, system, tool" in problems["role"]

    r = c.post("/v1/events", json={"session_id": "s1", "role": "user", "content": "x"}, headers=h)
    assert r.status_code == 422 and fields_of(r) == {"user_id"}
    r = c.post(
        "/v1/events",
        json={
            "user_id": "u1",
            "session_id": "s1",
            "role": "user",
            "content": "x",
            "at": "yesterday",
            "seq": 0,
        },
        headers=h,
    )
    assert r.status_code == 422 and fields_of(r) == {"at", "seq"}
    r = c.post(
        "/v1/events",
        json={"user_id": "u1", "session_id": "s1", "role": "user", "content": "x", "tenant_id": B},
        headers=h,
    )
    assert r.status_code == 422 and fields_of(r) == {"tenant_id"}
    assert "API key" in error_of(r)["fields"][0]["problem"]
    r = c.post(
        "/v1/events",
        json={"user_id": "u1", "session_id": "s1", "role": "user", "content": "x", "who": 1},
        headers=h,
    )
    assert r.status_code == 422 and fields_of(r) == {"who"}
    r = c.post("/v1/events", content=b"{not json", headers={**h, "Content-Type": "application/json"})
    assert r.status_code == 400 and error_of(r)["code"] == "malformed_json"
    r = c.post(
        "/v1/events",
        json={"user_id": "u1", "session_id": "s1", "role": "user", "content": "a\u0000b"},
        headers=h,
    )
    assert r.status_code == 422 and fields_of(r) == {"content"}
    # Strict as the batch is: "5", true and 5.0 are not seqs; none above 2^53 - 1 (Lua's doubles).
    turn = {"user_id": "u1", "session_id": "s1", "role": "user", "content": "x"}
    for seq in ("5", True, 5.0, 2**53, 9007199254740993):
        r = c.post("/v1/events", json={**turn, "seq": seq}, headers=h)
        assert r.status_code == 422 and fields_of(r) == {"seq"}, (seq, r.text)
    r = c.post("/v1/events/batch", json={"events": [{**turn, "seq": 2**53}]}, headers=h)
    assert r.status_code == 200 and r.json()["errors"][0]["fields"][0]["field"] == "seq", r.text


def test_publish_batch(env):
    c, h = env.client, env.auth(A)
    ok = {"user_id": "u1", "session_id": "s1", "role": "user", "content": "hello"}
    r = c.post(
        "/v1/events/batch",
        json={
            "events": [
                ok,
                {**ok, "role": "robot"},
                "not an object",
                {**ok, "tenant_id": B},
                {**ok, "content": "bye"},
            ]
        },
        headers=h,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert [p["seq"] for p in body["published"]] == [1, 2]
    assert [(e["index"], [f["field"] for f in e["fields"]]) for e in body["errors"]] == [
        (1, ["role"]),
        (2, ["event"]),
        (3, ["tenant_id"]),
    ]
    r = c.post("/v1/events/batch", json={"events": [ok] * 1001}, headers=h)
    assert r.status_code == 422 and fields_of(r) == {"events"}
    r = c.post("/v1/events/batch", json={"turns": []}, headers=h)
    assert r.status_code == 422 and fields_of(r) == {"events", "turns"}


# --- recall -----------------------------------------------------------------------------------


def test_recall_json_and_prompt(env):
    c, h = env.client, env.auth(A)
    seed_memory(env.container, A, "u1", "我不吃香菜", n=0)
    seed_memory(env.container, A, "u1", "生产环境部署端口是8443", n=1)
    r = c.post("/v1/recall", json={"user_id": "u1", "query": "我不吃香菜", "k": 3}, headers=h)
    assert r.status_code == 200, r.text
    out = r.json()
    assert set(out) >= {"stage", "items", "trace", "prompt"}
    assert out["items"][0]["content"] == "我不吃香菜" and out["items"][0]["explanation"]["paths"]
    assert out["prompt"].startswith("[长期记忆 - 用户偏好]")

    r = c.post("/v1/recall/prompt", json={"user_id": "u1", "query": "部署端口"}, headers=h)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    assert "8443" in r.text

    for body, field in (
        ({"user_id": "u1", "query": " "}, "query"),
        ({"user_id": "u1", "query": "x", "k": 0}, "k"),
        ({"user_id": "u1", "query": "x", "k": 1000}, "k"),
        ({"user_id": "u1", "query": "x", "now": "yesterday"}, "now"),
        ({"user_id": "u1", "query": "x", "budget_tokens": 0}, "budget_tokens"),
        ({"user_id": "u 1", "query": "x"}, "user_id"),
        ({"user_id": "u1", "query": "x", "session_id": "a/b"}, "session_id"),
        ({"user_id": "u1", "query": "x\u0000"}, "query"),
        ({"user_id": "u1", "query": "x", "tenant_id": B}, "tenant_id"),
        ({"user_id": "u1"}, "query"),
        ({"user_id": "u1", "query": "x", "k": "many"}, "k"),
    ):
        r = c.post("/v1/recall", json=body, headers=h)
        assert r.status_code == 422, (body, r.text)
        assert field in fields_of(r), (body, r.text)


# --- memories ---------------------------------------------------------------------------------


def test_list_and_get_memories(env):
    c, h = env.client, env.auth(A)
    m1 = seed_memory(env.container, A, "u1", "我不吃香菜", n=0)
    m2 = seed_memory(env.container, A, "u1", "生产环境部署端口是8443", n=1, kind=MemoryType.FACT)
    seed_memory(env.container, A, "u1", "old news", n=2, status=MemoryStatus.ARCHIVED)
    page = _memories(env, A, "u1")
    assert page["total"] == 2 and [m["id"] for m in page["items"]] == [m2.id, m1.id]  # newest first
    assert set(page["items"][0]) >= {"id", "content", "type", "status", "score", "sources", "valid_from"}
    assert _memories(env, A, "u1", status="all")["total"] == 3
    assert _memories(env, A, "u1", status="archived,active", type="fact")["items"][0]["id"] == m2.id
    assert [m["id"] for m in _memories(env, A, "u1", limit=1, offset=1)["items"]] == [m1.id]
    bad_params = (
        ({"status": "gone"}, "status"),
        ({"type": "x"}, "type"),
        ({"limit": 0}, "limit"),
        ({"limit": 501}, "limit"),
        ({"offset": -1}, "offset"),
        ({"limit": "x"}, "limit"),
    )
    for params, field in bad_params:
        r = c.get("/v1/users/u1/memories", params=params, headers=h)
        assert r.status_code == 422 and fields_of(r) == {field}, (params, r.text)

    r = c.get(f"/v1/users/u1/memories/{m1.id}", headers=h)
    assert r.status_code == 200 and r.json()["content"] == "我不吃香菜"
    r = c.get(f"/v1/users/u2/memories/{m1.id}", headers=h)  # another user of the same tenant
    assert r.status_code == 404 and error_of(r)["code"] == "not_found" and fields_of(r) == {"memory_id"}
    r = c.get("/v1/users/u1/memories/00000000-0000-0000-0000-000000000000", headers=h)
    assert r.status_code == 404
    r = c.get("/v1/users/u1/memories/a%20b", headers=h)
    assert r.status_code == 422 and fields_of(r) == {"memory_id"}
    r = c.get("/v1/users/a%20b/memories", headers=h)
    assert r.status_code == 422 and fields_of(r) == {"user_id"}
    r = c.get(f"/v1/users/u1/memories/{m1.id}/history", headers=h)
    assert r.status_code == 200 and r.json()["history"][0]["action"] == "created"
    assert c.get("/v1/nowhere", headers=h).status_code == 404
    r = c.put(f"/v1/users/u1/memories/{m1.id}", headers=h)
    assert r.status_code == 405 and error_of(r)["code"] == "method_not_allowed"


@pytest.mark.parametrize("env", INDEXES, indirect=True)
def test_edit_reembeds_and_reindexes(env):
    c, h, container = env.client, env.auth(A), env.container
    m = seed_memory(container, A, "u1", "I drink coffee every morning", n=0)
    r = c.patch(
        f"/v1/users/u1/memories/{m.id}", json={"content": "I drink green tea every morning"}, headers=h
    )
    assert r.status_code == 200, r.text
    edited = r.json()
    assert edited["content"] == "I drink green tea every morning" and edited["status"] == "active"
    with container.uow() as uow:
        row = uow.memories.get(A, "u1", m.id)
    assert row is not None and row.version == 2 and row.indexed_version == 2
    fresh = container.embedder.embed_passages(["I drink green tea every morning"])[0]
    assert row.embedding == pytest.approx(fresh, abs=1e-6)  # stored as REAL
    assert "k:green" in row.cues and "k:coffee" not in row.cues
    assert container.index().payloads(A, "u1")[m.id]["version"] == 2
    hist = c.get(f"/v1/users/u1/memories/{m.id}/history", headers=h).json()["history"]
    assert hist[-1]["action"] == "edited" and hist[-1]["judge"] == "api" and "content" in hist[-1]["reason"]
    found = c.post("/v1/recall", json={"user_id": "u1", "query": "green tea", "reinforce": False}, headers=h)
    assert found.json()["items"][0]["id"] == m.id

    r = c.patch(
        f"/v1/users/u1/memories/{m.id}", json={"type": "fact", "tags": ["Drinks", "morning"]}, headers=h
    )
    assert r.status_code == 200 and r.json()["type"] == "fact" and r.json()["tags"] == ["drinks", "morning"]
    for body, field in (
        ({}, "body"),
        ({"content": " "}, "content"),
        ({"type": "opinion"}, "type"),
        ({"tags": ["ok", ""]}, "tags[1]"),
        ({"tags": "notalist"}, "tags"),
        ({"status": "active"}, "status"),
    ):
        r = c.patch(f"/v1/users/u1/memories/{m.id}", json=body, headers=h)
        assert r.status_code == 422 and field in fields_of(r), (body, r.text)
    assert c.patch("/v1/users/u1/memories/nope", json={"content": "x"}, headers=h).status_code == 404


@pytest.mark.parametrize("env", INDEXES, indirect=True)
def test_invalidate_restore_and_soft_delete(env):
    c, h = env.client, env.auth(A)
    m = seed_memory(env.container, A, "u1", "我住在柏林", n=0)
    url = f"/v1/users/u1/memories/{m.id}"
    r = c.post(url + "/invalidate", json={"reason": "moved to Munich"}, headers=h)
    assert r.status_code == 200 and r.json()["status"] == "superseded"
    assert "moved to Munich" in r.json()["status_reason"] and r.json()["valid_to"]
    assert env.container.index().payloads(A, "u1")[m.id]["status"] == "superseded"
    recall = c.post(
        "/v1/recall", json={"user_id": "u1", "query": "我住在柏林", "reinforce": False}, headers=h
    )
    assert all(i["id"] != m.id for i in recall.json()["items"])
    assert c.post(url + "/invalidate", json={"reason": "again"}, headers=h).status_code == 409
    r = c.post(url + "/invalidate", json={"reason": ""}, headers=h)
    assert r.status_code == 422 and fields_of(r) == {"reason"}
    r = c.post(url + "/invalidate", json={}, headers=h)
    assert r.status_code == 422 and fields_of(r) == {"reason"}

    r = c.post(url + "/restore", headers=h)
    assert r.status_code == 200 and r.json()["status"] == "active" and r.json()["valid_to"] is None
    r = c.post(url + "/restore", headers=h)
    assert r.status_code == 409 and error_of(r)["code"] == "conflict"

    r = c.delete(url, headers=h)
    assert r.status_code == 200 and r.json() == {"deleted": [m.id], "hard": False}
    assert c.delete(url, headers=h).json() == {"deleted": [m.id], "hard": False}  # idempotent
    assert _memories(env, A, "u1")["total"] == 0
    assert _memories(env, A, "u1", status="all")["items"][0]["status"] == "forgotten"
    assert _memories(env, A, "u1", status="forgotten")["total"] == 1
    for flags in ({}, {"include_archived": True}, {"include_history": True}):
        recall = c.post("/v1/recall", json={"user_id": "u1", "query": "我住在柏林", **flags}, headers=h)
        assert all(i["id"] != m.id for i in recall.json()["items"]), flags
    actions = [e["action"] for e in c.get(url + "/history", headers=h).json()["history"]]
    assert actions == ["created", "invalidated", "restored", "forgotten"]
    r = c.post(url + "/restore", headers=h)
    assert r.status_code == 200 and r.json()["status"] == "active"

    archived = seed_memory(env.container, A, "u1", "old hobby: chess", n=1, status=MemoryStatus.ARCHIVED)
    r = c.post(f"/v1/users/u1/memories/{archived.id}/restore", headers=h)
    assert r.status_code == 200 and r.json()["status"] == "active"
    assert r.json()["status_reason"] == "restored from the archive"  # the lifecycle's restore


@pytest.mark.parametrize("env", INDEXES, indirect=True)
def test_hard_delete_removes_derived_memories_and_vectors(env):
    c, h, container = env.client, env.auth(A), env.container
    x = seed_memory(container, A, "u1", "my card number is 4111-1111", n=0, kind=MemoryType.FACT)
    y = seed_memory(container, A, "u1", "my card expires in May", n=1)
    merged = seed_memory(container, A, "u1", "card 4111-1111 expires in May", n=2, derived_from=[x.id, y.id])
    consolidated = seed_memory(container, A, "u1", "talks about cards a lot", n=3, derived_from=[merged.id])
    keep = seed_memory(container, A, "u1", "I like cats", n=4)
    r = c.delete(f"/v1/users/u1/memories/{x.id}", params={"hard": "true"}, headers=h)
    assert r.status_code == 200, r.text
    assert r.json() == {"deleted": sorted([x.id, merged.id, consolidated.id]), "hard": True}
    assert set(container.index().ids(A, "u1")) == {y.id, keep.id}
    with container.uow() as uow:
        left = {m.id for m in uow.memories.for_user(A, "u1", None)}
        audit = uow.history.for_memories(A, "u1", [x.id, merged.id, consolidated.id])
    assert left == {y.id, keep.id}
    assert sorted(e.action for e in audit) == ["purged"] * 3
    assert all("4111" not in json.dumps([e.reason, e.details]) for e in audit)
    assert c.get(f"/v1/users/u1/memories/{x.id}", headers=h).status_code == 404
    assert c.get(f"/v1/users/u1/memories/{x.id}/history", headers=h).status_code == 404
    assert c.delete(f"/v1/users/u1/memories/{x.id}?hard=true", headers=h).status_code == 404
    r = c.delete(f"/v1/users/u1/memories/{y.id}", params={"hard": "maybe"}, headers=h)
    assert r.status_code == 422 and fields_of(r) == {"hard"}


# --- tenancy ----------------------------------------------------------------------------------

INJECTIONS = [
    "u1' OR '1'='1",
    "u1%00",
    "u1%20",
    "..%2Fu1",
    "*",
    "u1;DROP TABLE memories",
    "%u1",
    "u1%0A",
]


@pytest.mark.parametrize("env", INDEXES, indirect=True)
def test_a_key_never_reaches_another_tenants_users(env):
    c, container = env.client, env.container
    secret = seed_memory(container, A, "u1", "我的银行卡密码是123456", n=0)
    other = seed_memory(container, A, "alice", "alice lives in Berlin", n=1)
    hb = env.auth(B)
    before = {m.id: (m.version, m.status) for m in (secret, other)}

    # Same user ids, guessed memory ids: every read and write is scoped to B and finds nothing.
    for user, memory in (("u1", secret.id), ("alice", other.id), ("u2", secret.id)):
        assert _memories(env, B, user, status="all") == {"items": [], "total": 0, "user_offset_s": None}
        base = f"/v1/users/{user}/memories/{memory}"
        for method, url, kw in (
            ("GET", base, {}),
            ("GET", base + "/history", {}),
            ("PATCH", base, {"json": {"content": "pwned"}}),
            ("POST", base + "/invalidate", {"json": {"reason": "pwned"}}),
            ("POST", base + "/restore", {}),
            ("DELETE", base, {}),
            ("DELETE", base + "?hard=true", {}),
        ):
            r = c.request(method, url, headers=hb, **kw)
            assert r.status_code == 404 and error_of(r)["code"] == "not_found", (method, url, r.text)
        r = c.post(
            "/v1/recall",
            json={"user_id": user, "query": "银行卡密码 Berlin", "include_history": True},
            headers=hb,
        )
        assert r.status_code == 200 and r.json()["items"] == [], r.text

    # Look-alike and injection user ids: refused as input or scoped to nothing.
    for user in ["U1", "u1 ", "u1.", "u1:x", "u1@a", *INJECTIONS]:
        r = c.get(f"/v1/users/{user}/memories", params={"status": "all"}, headers=hb)
        assert r.status_code in (404, 422) or r.json() == {"items": [], "total": 0, "user_offset_s": None}, (
            user,
            r.text,
        )
        r = c.get(f"/v1/users/{user}/memories/{secret.id}", headers=hb)
        assert r.status_code in (404, 422), (user, r.text)
        r = c.post("/v1/recall", json={"user_id": user, "query": "密码"}, headers=hb)
        assert r.status_code == 422 or r.json()["items"] == [], (user, r.text)
    # A body cannot name a tenant, and a path cannot smuggle one.
    for body in ({"user_id": "u1", "query": "密码", "tenant_id": A},):
        r = c.post("/v1/recall", json=body, headers=hb)
        assert r.status_code == 422 and fields_of(r) == {"tenant_id"}
    r = c.get(f"/v1/users/{A}:u1/memories", params={"status": "all"}, headers=hb)
    assert r.json()["total"] == 0

    # Tenant A still sees everything exactly as it was.
    with container.uow() as uow:
        after = {
            m.id: (m.version, m.status)
            for m in uow.memories.for_user(A, "u1", None) + uow.memories.for_user(A, "alice", None)
        }
    assert after == before
    assert set(container.index().ids(A, "u1")) == {secret.id}
    r = c.post(
        "/v1/recall", json={"user_id": "u1", "query": "银行卡密码", "reinforce": False}, headers=env.auth(A)
    )
    assert r.json()["items"][0]["id"] == secret.id


def test_without_auth_only_requests_naming_this_machine_are_served(env):
    from fastapi.testclient import TestClient

    from service.http.app import create_app

    app = create_app(env.container, auth=False)
    try:
        client = TestClient(app, base_url="http://127.0.0.1:8080")
        for host in ("127.0.0.1:8080", "localhost:8080", "[::1]:8080", "LOCALHOST"):
            r = client.get("/v1/users", headers={"Host": host})
            assert r.status_code == 200, (host, r.text)
        # A page on a rebinding domain reaches 127.0.0.1 with its own name in the Host header.
        for host in ("evil.example", "evil.example:8080", "127.0.0.1.nip.io", "[::2]:8080"):
            r = client.get("/v1/users", headers={"Host": host})
            assert r.status_code == 400, (host, r.text)
    finally:
        app.state.close()
    # With keys, any Host is served (a proxy's name): the key is what is checked.
    r = env.client.get("/v1/users", headers={**env.auth(A), "Host": "api.example"})
    assert r.status_code == 200
