"""CuememClient and AsyncCuememClient against the real HTTP API app (service.http.app.create_app).

The app runs in-process on the test services (real Postgres and Redis, in-memory vector indexes,
as tests/integration/test_api.py builds it): the sync client through the app's TestClient, the
async one through httpx.ASGITransport. What the client types say is what the app answers.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import httpx
import pytest

from producers.agent_tools import MemoryTools
from producers.backends import ApiBackend
from producers.client import AsyncCuememClient, CuememAPIError, CuememClient
from producers.publisher import Published
from shared.events import Role, TurnPublished
from shared.models import MemoryType
from tests.support.api import ApiEnv, AppTransport, api_settings, running_api, seed_memory

A, B = "tenant-a", "tenant-b"


@pytest.fixture
def env(it_settings) -> Iterator[ApiEnv]:
    with running_api(api_settings(it_settings)) as env:
        yield env


def client_for(env: ApiEnv, tenant: str = A, key: str | None = None) -> CuememClient:
    return CuememClient(
        "http://testserver",
        key or env.keys[tenant],
        transport=AppTransport(env.client),
        max_attempts=1,
    )


def test_sync_client_against_the_real_app(env: ApiEnv) -> None:
    cm = client_for(env)
    assert cm.health() == {"status": "ok"}
    ready = cm.ready()
    assert ready.ready and ready.detail == {"postgres": "ok", "redis": "ok", "index": "ok"}

    # publish: recallable at once (working memory), in the key's tenant only
    published = cm.publish(user_id="u1", session_id="s1", role="user", content="我不吃香菜")
    assert isinstance(published, Published) and published.seq == 1 and len(published.event_id) == 32
    batch = cm.publish_batch(
        [
            {"user_id": "u1", "session_id": "s1", "role": "user", "content": "hello"},
            {"user_id": "u1", "session_id": "s1", "role": "robot", "content": "x"},
        ]
    )
    assert [p.seq for p in batch.published] == [2]
    [(index, invalid)] = batch.errors
    assert index == 1 and [e.field for e in invalid.errors] == ["role"]
    found = cm.recall("u1", "香菜", session_id="s1")
    assert any(i["content"] == "我不吃香菜" for i in found["items"])
    assert client_for(env, B).recall("u1", "香菜", session_id="s1")["items"] == []

    # memories: list, get, edit, invalidate, restore, forget, history, hard delete
    m1 = seed_memory(env.container, A, "u1", "我不吃香菜", n=0)
    m2 = seed_memory(env.container, A, "u1", "生产环境部署端口是8443", kind=MemoryType.FACT, n=1)
    page = cm.memories("u1")
    assert page["total"] == 2 and {m["id"] for m in page["items"]} == {m1.id, m2.id}
    assert cm.memories("u1", type="fact")["items"][0]["id"] == m2.id
    assert cm.memory("u1", m1.id)["content"] == "我不吃香菜"
    out = cm.recall("u1", "部署端口", k=3)
    assert out["items"][0]["id"] == m2.id and out["items"][0]["explanation"]["paths"]
    assert "8443" in cm.recall_prompt("u1", "部署端口")

    edited = cm.edit("u1", m2.id, content="生产环境部署端口是9443")
    assert edited["content"] == "生产环境部署端口是9443"
    assert cm.invalidate("u1", m2.id, "moved to another host")["status"] == "superseded"
    assert cm.restore("u1", m2.id)["status"] == "active"
    assert cm.forget("u1", m1.id) == {"deleted": [m1.id], "hard": False}
    assert cm.memory("u1", m1.id)["status"] == "forgotten"
    actions = [h["action"] for h in cm.history("u1", m2.id)["history"]]
    assert {"edited", "invalidated", "restored"} <= set(actions)
    assert cm.forget("u1", m2.id, hard=True) == {"deleted": [m2.id], "hard": True}
    with pytest.raises(CuememAPIError) as gone:
        cm.memory("u1", m2.id)
    assert gone.value.status == 404


def test_errors_from_the_real_app_name_the_fields(env: ApiEnv) -> None:
    cm = client_for(env)
    with pytest.raises(CuememAPIError) as info:
        cm.recall("u1", "x", k=0, now="yesterday")
    assert info.value.status == 422 and info.value.code == "invalid_input"
    assert {f["field"] for f in info.value.fields} == {"k", "now"}
    assert "k: " in str(info.value) and "now: " in str(info.value)
    with pytest.raises(CuememAPIError) as info:
        cm.publish(user_id="u1", session_id="s 1", role="robot", content="x")
    assert {f["field"] for f in info.value.fields} == {"session_id", "role"}
    with pytest.raises(CuememAPIError) as info:
        client_for(env, key="ck_not_a_key").memories("u1")
    assert info.value.status == 401
    # Another tenant's memory is simply not found.
    theirs = seed_memory(env.container, B, "u1", "我不吃香菜", n=0)
    with pytest.raises(CuememAPIError) as info:
        cm.forget("u1", theirs.id)
    assert info.value.status == 404


def test_agent_tools_over_the_real_api(env: ApiEnv) -> None:
    tools = MemoryTools.over(ApiBackend(client_for(env)), "u1", "chat-1")
    remembered = json.loads(tools.handle("remember", {"content": "我对花生过敏", "kind": "profile"}))
    assert remembered["seq"] == 1
    found = json.loads(tools.handle("search_memory", {"query": "我对什么过敏"}))
    assert any("花生" in i["content"] for i in found["items"])  # read-your-writes through the API


def test_recall_gives_the_users_zone_and_agent_tools_date_their_block_in_it(env: ApiEnv) -> None:
    # The same memory, told near midnight: by u1 at 01:30 in Beijing (17:30 UTC the day before),
    # by u10 at 22:30 in New York (03:30 UTC the day after). u-none has no turn: UTC.
    told = {
        "u1": datetime(2026, 10, 5, 17, 30, tzinfo=UTC),
        "u10": datetime(2026, 10, 6, 3, 30, tzinfo=UTC),
        "u-none": datetime(2026, 10, 6, 3, 30, tzinfo=UTC),
    }
    zones = {"u1": timezone(timedelta(hours=8)), "u10": timezone(timedelta(hours=-5))}
    with env.container.uow() as uow:
        for user, zone in zones.items():
            turn = TurnPublished(
                f"ev-{user}", A, user, "s1", 1, Role.USER, "早上好", told[user].astimezone(zone), {}
            )
            assert uow.events.insert_if_absent(turn, "done")
        uow.commit()
    for n, (user, at) in enumerate(told.items()):
        seed_memory(env.container, A, user, "我不吃香菜", n=n, at=at)

    cm = client_for(env)
    expected = {
        "u1": ("2026-10-06", 8 * 3600),
        "u10": ("2026-10-05", -5 * 3600),
        "u-none": ("2026-10-06", None),
    }
    for user, (day, offset) in expected.items():
        out = cm.recall(user, "香菜")
        assert out["user_offset_s"] == offset, user
        assert [i["created_at"] for i in out["items"]] == [told[user].isoformat()], user  # UTC
        assert out["prompt"] == f"[长期记忆 - 用户偏好]\n- 我不吃香菜 ({day})", user
        # The agent tools build their block from the items the API gives, in the same zone.
        tools = MemoryTools.over(ApiBackend(cm), user, "chat-1")
        block = json.loads(tools.handle("search_memory", {"query": "香菜", "format": "prompt"}))
        assert block == {"prompt": out["prompt"]}, user


def test_async_client_against_the_real_app(env: ApiEnv) -> None:
    m1 = seed_memory(env.container, A, "u1", "我不吃香菜", n=0)
    app = env.client.app

    async def go() -> None:
        async with AsyncCuememClient(
            "http://testserver", env.keys[A], transport=httpx.ASGITransport(app=app), max_attempts=1
        ) as cm:
            assert await cm.health() == {"status": "ok"}
            out = await cm.recall("u1", "我不吃香菜", k=3)
            assert out["items"][0]["id"] == m1.id
            assert (await cm.memories("u1"))["total"] == 1
            assert await cm.forget("u1", m1.id) == {"deleted": [m1.id], "hard": False}
            with pytest.raises(CuememAPIError) as info:
                await cm.recall("u1", " ")
            assert [f["field"] for f in info.value.fields] == ["query"]

    asyncio.run(go())
