"""The inspector's reads over the API, on real Postgres: a user's timeline, a memory's page
(history chain, score curve, source turns), the overview's counts and the pipeline's health with
dead letters and their replay; each scoped to the key's tenant."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta, timezone

import pytest

from shared.models import MemoryStatus, MemoryType
from shared.queues import TaskName
from shared.storage import DeadLetter, HistoryEntry
from tests.support.api import (
    AT,
    ApiEnv,
    api_settings,
    error_of,
    fields_of,
    running_api,
    seed_memory,
    seed_turn,
)

A, B = "tenant-a", "tenant-b"
USER = "u-time"


@pytest.fixture
def env(it_settings) -> Iterator[ApiEnv]:
    with running_api(api_settings(it_settings)) as env:
        yield env


def _turn(
    env: ApiEnv,
    tenant: str,
    user: str,
    n: int,
    content: str,
    *,
    session: str = "s1",
    role: str = "user",
    zone: timezone | None = None,
) -> str:
    at = (AT + timedelta(minutes=n)).astimezone(zone)
    return seed_turn(env.container, tenant, user, n, content, at=at, session=session, role=role)


def test_timeline_holds_the_users_turns_with_the_memories_made_from_them(env):
    said = _turn(env, A, USER, 0, "我不吃香菜")
    _turn(env, A, USER, 1, "好的，记住了", role="assistant")
    moved = _turn(env, A, USER, 2, "I moved to Hangzhou", session="s2")
    coriander = seed_memory(env.container, A, USER, "我不吃香菜", n=0)
    home = seed_memory(
        env.container,
        A,
        USER,
        "I moved to Hangzhou",
        kind=MemoryType.PROFILE,
        status=MemoryStatus.SUPERSEDED,
        n=2,
    )
    _turn(env, A, "u-other", 0, "someone else's turn")
    _turn(env, B, USER, 5, "tenant B's turn of a user with the same id")

    r = env.client.get(f"/v1/users/{USER}/timeline", headers=env.auth(A))
    assert r.status_code == 200, r.text
    body = r.json()
    assert [t["event_id"] for t in body["turns"]] == [said, f"ev-{A}-{USER}-1", moved]  # oldest first
    by_event = {t["event_id"]: t for t in body["turns"]}
    assert by_event[said]["memory_ids"] == [coriander.id]
    assert by_event[moved]["memory_ids"] == [home.id] and by_event[moved]["session_id"] == "s2"
    assert (
        by_event[f"ev-{A}-{USER}-1"]["memory_ids"] == []
        and by_event[f"ev-{A}-{USER}-1"]["role"] == "assistant"
    )
    memories = {m["id"]: m for m in body["memories"]}
    assert memories[home.id]["status"] == "superseded" and memories[home.id]["event_ids"] == [moved]
    assert body["truncated"] is False

    # A date range keeps only its turns; the latest `limit` when the range holds more.
    r = env.client.get(
        f"/v1/users/{USER}/timeline",
        params={
            "since": (AT + timedelta(minutes=1)).isoformat(),
            "until": (AT + timedelta(minutes=3)).isoformat(),
        },
        headers=env.auth(A),
    )
    assert [t["event_id"] for t in r.json()["turns"]] == [f"ev-{A}-{USER}-1", moved]
    r = env.client.get(f"/v1/users/{USER}/timeline", params={"limit": 2}, headers=env.auth(A))
    assert [t["event_id"] for t in r.json()["turns"]] == [f"ev-{A}-{USER}-1", moved] and r.json()["truncated"]

    # Tenant B sees only its own user of that id.
    r = env.client.get(f"/v1/users/{USER}/timeline", headers=env.auth(B))
    assert [t["content"] for t in r.json()["turns"]] == ["tenant B's turn of a user with the same id"]
    assert r.json()["memories"] == []

    # Bad input names the field.
    r = env.client.get(
        f"/v1/users/{USER}/timeline", params={"since": "2026-11-01T10:00:00"}, headers=env.auth(A)
    )
    assert r.status_code == 422 and "since" in fields_of(r)
    r = env.client.get(
        f"/v1/users/{USER}/timeline",
        params={"since": "2026-11-02T00:00:00Z", "until": "2026-11-01T00:00:00Z"},
        headers=env.auth(A),
    )
    assert r.status_code == 422 and "since" in fields_of(r)
    r = env.client.get(f"/v1/users/{USER}/timeline", params={"limit": 0}, headers=env.auth(A))
    assert r.status_code == 422 and "limit" in fields_of(r)
    assert env.client.get(f"/v1/users/{USER}/timeline").status_code == 401


def test_memory_page_draws_the_chain_the_score_and_the_source_turns(env):
    c = env.container
    said = _turn(env, A, USER, 0, "我喜欢喝美式")
    old = seed_memory(c, A, USER, "我喜欢喝美式", status=MemoryStatus.SUPERSEDED, n=0)
    new = seed_memory(c, A, USER, "我现在改喝拿铁了", n=1)
    repeat_at = AT + timedelta(days=2)
    with c.uow() as uow:
        uow.history.add(
            HistoryEntry(old.id, A, USER, "superseded", "changed", "rules", AT + timedelta(days=1), new.id)
        )
        uow.history.add(
            HistoryEntry(new.id, A, USER, "supersedes", "changed", "rules", AT + timedelta(days=1), old.id)
        )
        uow.history.add(
            HistoryEntry(new.id, A, USER, "reinforced", "repeated", "ev-r", repeat_at, None, "ev-r")
        )
        stored = uow.memories.get(A, USER, new.id)
        assert stored is not None
        stored.access_count, stored.last_accessed_at = 3, AT + timedelta(days=3)
        uow.memories.save(stored)
        uow.commit()

    r = env.client.get(f"/v1/users/{USER}/memories/{new.id}/page", params={"points": 50}, headers=env.auth(A))
    assert r.status_code == 200, r.text
    page = r.json()
    assert page["memory"]["id"] == new.id
    assert {m["id"] for m in page["chain"]["memories"]} == {old.id, new.id}
    assert {(h["memory_id"], h["action"], h["related_id"]) for h in page["chain"]["history"]} >= {
        (old.id, "superseded", new.id)
    }
    score = page["score"]
    # One repeat from the history, the two uses beyond it at the stored last access.
    assert [(x["source"], x["uses"]) for x in score["reinforcements"]] == [("repeat", 1), ("recall", 2)]
    assert score["reinforcements"][0]["at"] == repeat_at.isoformat()
    values = [p["score"] for p in score["points"]]
    assert len(values) >= 50 and score["points"][0]["at"] == new.created_at.isoformat()
    # Decay between reinforcements, a jump at each.
    at = [p["at"] for p in score["points"]]
    jump = at.index(repeat_at.isoformat())
    assert values[jump] > values[jump - 1] and values[jump - 1] < values[0]
    assert score["archive_threshold"] == c.lifecycle.archive_threshold
    assert page["source_turns"] == [] and page["missing_sources"] == [f"ev-{A}-{USER}-1"]

    r = env.client.get(f"/v1/users/{USER}/memories/{old.id}/page", headers=env.auth(A))
    assert [t["event_id"] for t in r.json()["source_turns"]] == [said]
    assert [t["content"] for t in r.json()["source_turns"]] == ["我喜欢喝美式"]

    # Another tenant's key, or another user, finds nothing; bad input names the field.
    assert env.client.get(f"/v1/users/{USER}/memories/{new.id}/page", headers=env.auth(B)).status_code == 404
    assert env.client.get(f"/v1/users/u-other/memories/{new.id}/page", headers=env.auth(A)).status_code == 404
    r = env.client.get(f"/v1/users/{USER}/memories/{new.id}/page", params={"points": 1}, headers=env.auth(A))
    assert r.status_code == 422 and "points" in fields_of(r)


def test_the_memory_list_and_page_give_the_users_zone_beside_utc_instants(env):
    beijing, new_york = timezone(timedelta(hours=8)), timezone(timedelta(hours=-5))
    _turn(env, A, "u1", 0, "下周三下午三点要去医院复查", zone=beijing)
    _turn(env, A, "u10", 0, "dentist on Friday at 9am", zone=new_york)
    _turn(env, A, "u10", 1, "noted", role="assistant", zone=beijing)  # not the user's clock
    _turn(env, B, "u1", 0, "tenant B's u1 writes from New York", zone=new_york)
    memories = {u: seed_memory(env.container, A, u, f"{u} 的记忆", n=0) for u in ("u1", "u10", "u-none")}

    zones = {}
    for user, memory in memories.items():
        listed = env.client.get(f"/v1/users/{user}/memories", headers=env.auth(A))
        page = env.client.get(f"/v1/users/{user}/memories/{memory.id}/page", headers=env.auth(A))
        assert listed.status_code == page.status_code == 200, (listed.text, page.text)
        assert listed.json()["user_offset_s"] == page.json()["user_offset_s"]
        zones[user] = listed.json()["user_offset_s"]
        # The instants themselves stay in UTC.
        assert listed.json()["items"][0]["created_at"] == AT.isoformat()
    assert zones == {"u1": 8 * 3600, "u10": -5 * 3600, "u-none": None}
    r = env.client.get("/v1/users/u1/memories", headers=env.auth(B))
    assert r.json()["user_offset_s"] == -5 * 3600 and r.json()["items"] == []


def test_overview_counts_one_tenant_or_one_user(env):
    c = env.container
    for n, (content, kind, status) in enumerate(
        [
            ("我不吃香菜", MemoryType.PREFERENCE, MemoryStatus.ACTIVE),
            ("I live in Hangzhou", MemoryType.PROFILE, MemoryStatus.ACTIVE),
            ("I lived in Shanghai", MemoryType.PROFILE, MemoryStatus.SUPERSEDED),
            ("port 8443", MemoryType.FACT, MemoryStatus.ARCHIVED),
        ]
    ):
        seed_memory(c, A, USER, content, kind=kind, status=status, n=n)
        _turn(env, A, USER, n, content)
    seed_memory(c, A, "u-other", "喜欢乌龙茶", n=9)
    seed_memory(c, B, "u-b", "tenant B", n=0)
    seed_memory(c, B, "u-b", "tenant B again", n=1)

    r = env.client.get("/v1/overview", params={"days": 3660}, headers=env.auth(A))
    assert r.status_code == 200, r.text
    o = r.json()
    assert o["memories"]["total"] == 5
    assert o["memories"]["by_type_status"]["profile"] == {"active": 1, "superseded": 1}
    assert o["memories"]["by_status"] == {"active": 3, "archived": 1, "superseded": 1}
    assert o["memories"]["per_day"] == [{"day": AT.date().isoformat(), "memories": 5}]
    # seed_memory's importance is 7: every memory in the bin [7, 8).
    assert [b["memories"] for b in o["memories"]["importance"]] == [0] * 7 + [5, 0, 0]
    assert o["events"] == {"by_stage": {"done": 4}, "total": 4, "stalled": 0}

    mine = env.client.get(
        "/v1/overview", params={"user_id": "u-other", "days": 3660}, headers=env.auth(A)
    ).json()
    assert mine["memories"]["total"] == 1 and mine["events"]["total"] == 0
    theirs = env.client.get("/v1/overview", params={"days": 3660}, headers=env.auth(B)).json()
    assert theirs["memories"]["total"] == 2
    # The default window (90 days before now) holds none of these 2026-11-01 memories only when
    # now is later than that: the per-day list is never longer than the window.
    assert (
        len(
            env.client.get("/v1/overview", params={"days": 1}, headers=env.auth(A)).json()["memories"][
                "per_day"
            ]
        )
        <= 2
    )
    r = env.client.get("/v1/overview", params={"user_id": "bad user"}, headers=env.auth(A))
    assert r.status_code == 422 and "user_id" in fields_of(r)
    r = env.client.get("/v1/overview", params={"days": 0}, headers=env.auth(A))
    assert r.status_code == 422 and "days" in fields_of(r)


def test_pipeline_shows_a_tenant_only_its_dead_letters_and_replays_them(env):
    c = env.container
    stuck = _turn(env, A, USER, 0, "a turn whose extraction failed")
    theirs = _turn(env, B, "u-b", 0, "tenant B's turn")
    with c.uow() as uow:
        uow.dead_letters.add(DeadLetter(TaskName.EXTRACT.value, "t1", stuck, [stuck], "boom A", 5))
        uow.dead_letters.add(DeadLetter(TaskName.EXTRACT.value, "t2", theirs, [theirs], "boom B", 5))
        # A turn that never got recorded: its tenant is in the message itself.
        turn = {"event_id": "lost-1", "tenant_id": A, "user_id": USER, "session_id": "s", "content": "x"}
        uow.dead_letters.add(DeadLetter(TaskName.RECORD.value, "t3", "lost-1", [turn], "bad turn", 1))
        # A sweep names no tenant: shown to no tenant's key.
        uow.dead_letters.add(DeadLetter(TaskName.RECONCILE.value, "t4", None, [], "sweep failed", 5))
        uow.commit()

    r = env.client.get("/v1/pipeline", headers=env.auth(A))
    assert r.status_code == 200, r.text
    p = r.json()
    letters = p["dead_letters"]
    assert [d["reason"] for d in letters["items"]] == ["bad turn", "boom A"]  # newest first
    assert letters["waiting"] == 2 and all("args" not in d for d in letters["items"])
    assert p["events"]["by_stage"] == {"done": 1}
    assert p["flower_url"] == c.settings.flower_url
    assert isinstance(p["queues"], dict)
    b_letters = env.client.get("/v1/pipeline", headers=env.auth(B)).json()["dead_letters"]["items"]
    assert [d["reason"] for d in b_letters] == ["boom B"]

    mine = next(d for d in letters["items"] if d["reason"] == "boom A")
    other = b_letters[0]
    # Another tenant's letter is not found, and nothing is sent.
    r = env.client.post(f"/v1/dead-letters/{other['id']}/replay", headers=env.auth(A))
    assert r.status_code == 404 and env.sent == []
    assert env.client.post("/v1/dead-letters/999999/replay", headers=env.auth(A)).status_code == 404
    r = env.client.post("/v1/dead-letters/not-a-number/replay", headers=env.auth(A))
    assert r.status_code == 422 and "letter_id" in fields_of(r), error_of(r)

    r = env.client.post(f"/v1/dead-letters/{mine['id']}/replay", headers=env.auth(A))
    assert r.status_code == 200, r.text
    assert r.json()["replayed_at"] is not None
    assert [(f.task, list(f.args)) for f in env.sent] == [(TaskName.EXTRACT.value, [stuck])]
    after = env.client.get("/v1/pipeline", headers=env.auth(A)).json()["dead_letters"]
    assert after["waiting"] == 1 and after["items"][-1]["replayed_at"] is not None
