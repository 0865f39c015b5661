"""An event id reused for another turn is refused when it is published (service/operations/event_ids.py),
on real Postgres and Redis: 409 naming ``event_id`` on ``POST /v1/events``, that item's error in a
batch, nothing published (no seq taken, nothing in the working memory). Scoped to the tenant: the
same id in tenant ``ac:me`` beside ``ac`` is another turn. The same turn again is still a quiet 202."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from shared.events import record_message, validate_turn
from shared.ingest.record import record_event
from shared.settings import Settings
from tests.support.api import ApiEnv, api_settings, build_env, error_of, fields_of

AC, AC_ME = "ac", "ac:me"
FIRST = {"event_id": "order-1001", "user_id": "u1", "session_id": "s1", "role": "user"}
FIRST["content"] = "我不吃香菜"


@pytest.fixture
def env(it_settings: Settings) -> Iterator[ApiEnv]:
    env = build_env(api_settings(it_settings), tenants=(AC, AC_ME))
    # ac's turn order-1001 is recorded, as the recorder leaves it (seq 7: the seq counter in Redis
    # is untouched, so the next turn published to the conversation gets 1 unless one was taken).
    event = validate_turn({**FIRST, "seq": 7, "tenant_id": AC}, env.container.limits)
    with env.container.uow() as uow:
        record_event(uow, record_message(event, seq_assigned=False), env.container.limits)
        uow.commit()
    yield env
    env.client.app.state.close()  # type: ignore[attr-defined]
    env.container.close()


def _publish(env: ApiEnv, tenant: str, **turn: Any) -> Any:
    return env.client.post("/v1/events", json={**FIRST, **turn}, headers=env.auth(tenant))


def test_a_reused_event_id_gets_409_naming_it_and_nothing_is_published(env: ApiEnv) -> None:
    r = _publish(env, AC, content="我住在杭州")
    assert r.status_code == 409 and fields_of(r) == {"event_id"}, r.text
    assert error_of(r)["code"] == "conflict"
    assert "cannot be reused" in error_of(r)["fields"][0]["problem"]
    r = _publish(env, AC, user_id="u2")  # another user of the tenant
    assert r.status_code == 409 and "another user" in error_of(r)["fields"][0]["problem"], r.text
    r = _publish(env, AC, session_id="s2")  # the same words in another conversation
    assert r.status_code == 409 and fields_of(r) == {"event_id"}, r.text
    # Nothing of them was published: the conversation's first seq is still free, and the
    # working memory holds none of their words.
    r = _publish(env, AC, event_id="order-1002", content="我喜欢绿茶")
    assert r.status_code == 202 and r.json()["seq"] == 1, r.text
    recalled = env.client.post(
        "/v1/recall", json={"user_id": "u1", "query": "杭州", "k": 10}, headers=env.auth(AC)
    ).json()
    assert all("杭州" not in item["content"] for item in recalled["items"]), recalled["items"]
    # The same turn again is a re-publish, not a reuse.
    assert _publish(env, AC).status_code == 202


def test_another_tenants_same_event_id_is_not_a_conflict(env: ApiEnv) -> None:
    r = _publish(env, AC_ME, content="生产环境部署端口是8443")
    assert r.status_code == 202, r.text
    r = _publish(env, AC_ME, event_id="order-1001", user_id="u2", content="我住在杭州")
    assert r.status_code == 202, r.text


def test_a_reused_event_id_in_a_batch_is_that_items_error(env: ApiEnv) -> None:
    events = [
        {**FIRST, "event_id": "order-2001", "content": "a"},
        {**FIRST, "content": "我住在杭州"},
        {**FIRST},  # the recorded turn again: published as a re-publish
        {**FIRST, "event_id": "order-2002", "content": "b"},
    ]
    r = env.client.post("/v1/events/batch", json={"events": events}, headers=env.auth(AC))
    assert r.status_code == 200, r.text
    errors = [(e["index"], [f["field"] for f in e["fields"]]) for e in r.json()["errors"]]
    assert errors == [(1, ["event_id"])]
    assert [p["event_id"] for p in r.json()["published"]] == ["order-2001", "order-1001", "order-2002"]
    r = env.client.post("/v1/events/batch", json={"events": events[1:2]}, headers=env.auth(AC_ME))
    assert r.status_code == 200 and not r.json()["errors"], r.text
