"""Recall through the HTTP API changes nothing unless the request asks: recalls of either form
leave every memory's access count, last access and score as they were; ``reinforce: true`` counts
the memories returned as used, for the key's tenant and the named user only.

Real Postgres and Redis; the tasks a recall sends are captured and run as the worker runs
``memory.reinforce`` (``shared.lifecycle.sweeps.reinforce_recalled`` on Postgres), so what a
recall would change is what the test reads back through the API.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from shared.lifecycle.sweeps import reinforce_recalled
from shared.queues import TaskName
from tests.support.api import AT, ApiEnv, api_settings, build_env, seed_memory

A, B = "tenant-a", "tenant-b"
NOW = AT + timedelta(hours=1)  # soon after the memories were made: a use raises the score
QUERY = "我不吃香菜"
LOOKS = [(A, "u1"), (A, "u10"), (B, "u1")]  # colliding user ids across and within tenants


@pytest.fixture
def env(it_settings):
    env = build_env(api_settings(it_settings), tenants=(A, B))
    yield env
    env.client.app.state.close()  # type: ignore[attr-defined]
    env.container.close()


def _state(env: ApiEnv, tenant: str, user: str) -> dict[str, tuple[Any, ...]]:
    """What a use changes, per memory of the user (any status), read through the API."""
    r = env.client.get(f"/v1/users/{user}/memories", params={"status": "all"}, headers=env.auth(tenant))
    assert r.status_code == 200, r.text
    return {m["id"]: (m["access_count"], m["last_accessed_at"], m["score"]) for m in r.json()["items"]}


def _everyone(env: ApiEnv) -> dict[tuple[str, str], dict[str, tuple[Any, ...]]]:
    return {(tenant, user): _state(env, tenant, user) for tenant, user in LOOKS}


def _run_sent(env: ApiEnv) -> list[tuple[str, str]]:
    """Run the reinforcements recall sent, as the worker does; whose they were."""
    tasks = [t for t in env.sent if t.task == TaskName.REINFORCE.value]
    env.sent.clear()
    for task in tasks:
        recall_id, tenant, user, ids, now = task.args
        with env.container.uow() as uow:
            at = datetime.fromisoformat(now)
            reinforce_recalled(uow, recall_id, tenant, user, ids, at, env.container.lifecycle.decay)
            uow.commit()
    return [(t.args[1], t.args[2]) for t in tasks]


def _recall(env: ApiEnv, tenant: str, path: str = "/v1/recall", **extra: Any) -> Any:
    body = {"user_id": "u1", "query": QUERY, "k": 3, "now": NOW.isoformat(), **extra}
    r = env.client.post(path, json=body, headers=env.auth(tenant))
    assert r.status_code == 200, r.text
    return r


def test_recall_changes_nothing_unless_the_request_asks_to_count_the_memories(env: ApiEnv) -> None:
    c = env.container
    mine = seed_memory(c, A, "u1", QUERY, n=0)
    seed_memory(c, A, "u1", "生产环境部署端口是8443", n=1)
    seed_memory(c, A, "u10", QUERY, n=0)
    seed_memory(c, B, "u1", QUERY, n=0)
    before = _everyone(env)

    # Read-only by default: items and prompt blocks, in both tenants, again and again.
    for tenant in (A, B):
        for path in ("/v1/recall", "/v1/recall/prompt"):
            for _ in range(2):
                _recall(env, tenant, path)
    plain = _recall(env, A).json()
    assert mine.id in [i["id"] for i in plain["items"]]
    assert "recall_id" not in plain["trace"]
    _recall(env, A, reinforce=False)
    assert _run_sent(env) == []
    assert _everyone(env) == before

    # Asked: the memories returned count as used, for that tenant's user only.
    counted = _recall(env, A, reinforce=True).json()
    assert counted["trace"]["recall_id"]
    assert _run_sent(env) == [(A, "u1")]
    returned = {i["id"] for i in counted["items"] if i["type"] not in ("working", "turn")}
    assert mine.id in returned
    after = _everyone(env)
    for memory_id, (uses, last, score) in after[(A, "u1")].items():
        old_uses, _, old_score = before[(A, "u1")][memory_id]
        if memory_id in returned:
            assert (uses, datetime.fromisoformat(last)) == (old_uses + 1, NOW)
            assert score > old_score
        else:
            assert (uses, last, score) == before[(A, "u1")][memory_id]
    assert after[(A, "u10")] == before[(A, "u10")] and after[(B, "u1")] == before[(B, "u1")]

    # The prompt form counts the same way when asked.
    _recall(env, A, "/v1/recall/prompt", reinforce=True)
    assert _run_sent(env) == [(A, "u1")]
    assert _state(env, A, "u1")[mine.id][0] == before[(A, "u1")][mine.id][0] + 2
    assert _state(env, B, "u1") == before[(B, "u1")]
