"""Per-tenant rate limits on publish and recall (service/http/rate_limits.py), counted in the real
Redis: 429 in the API's error shape with Retry-After, one budget across serving processes, a batch
counted by its turns, and the client waiting out Retry-After and retrying.

Budgets here refill at 0.01 or 0.04 per second (windows of 50 s and more), so nothing depends on
how fast the test runs; the client test makes "time pass" by clearing the counters where it would sleep.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis

from producers.client import CuememClient
from shared.settings import Settings
from tests.support.api import ApiEnv, AppTransport, api_settings, build_env, error_of, running_api

A, B = "tenant-a", "tenant-b"


def limited(it_settings: Settings, **overrides: Any) -> Settings:
    return api_settings(it_settings).model_copy(
        update={
            "rate_limit_recall_per_s": 0.01,
            "rate_limit_recall_burst": 2,
            "rate_limit_publish_per_s": 0.01,
            "rate_limit_publish_burst": 5,
            **overrides,
        }
    )


@pytest.fixture
def env(it_settings: Settings) -> Iterator[ApiEnv]:
    with running_api(limited(it_settings)) as env:
        yield env


def recall(env: ApiEnv, tenant: str, client: Any = None) -> httpx.Response:
    return (client or env.client).post(
        "/v1/recall", json={"user_id": "u1", "query": "tea"}, headers=env.auth(tenant)
    )


def turn(n: int) -> dict[str, Any]:
    return {"user_id": "u1", "session_id": "s1", "role": "user", "content": f"turn {n}"}


def test_recalls_over_the_budget_get_429_with_retry_after_and_another_tenant_does_not(
    env: ApiEnv,
) -> None:
    assert [recall(env, A).status_code for _ in range(2)] == [200, 200]
    refused = recall(env, A)
    assert refused.status_code == 429
    assert error_of(refused)["code"] == "rate_limited"
    assert int(refused.headers["Retry-After"]) >= 1
    prompt = env.client.post("/v1/recall/prompt", json={"user_id": "u1", "query": "tea"}, headers=env.auth(A))
    assert prompt.status_code == 429
    # Tenant B has its own budget.
    assert recall(env, B).status_code == 200


def test_the_budget_is_shared_by_every_serving_process(env: ApiEnv, it_settings: Settings) -> None:
    # A second app on the same Redis stands for a second `cuemem serve --workers` process.
    other = build_env(limited(it_settings), tenants=())
    try:
        assert [recall(env, A).status_code for _ in range(2)] == [200, 200]
        assert recall(env, A, other.client).status_code == 429
    finally:
        other.client.app.state.close()  # type: ignore[attr-defined]
        other.container.close()


def test_a_batch_costs_one_unit_per_turn(env: ApiEnv) -> None:
    def batch(n: int, start: int = 0) -> httpx.Response:
        events = [turn(start + i) for i in range(n)]
        return env.client.post("/v1/events/batch", json={"events": events}, headers=env.auth(A))

    assert batch(3).status_code == 200
    refused = batch(3, start=3)  # 6 turns > the burst of 5, though only the second request
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert env.client.post("/v1/events", json=turn(9), headers=env.auth(A)).status_code == 202
    too_big = batch(6, start=10)  # more than the burst can ever take: waiting would not help
    assert too_big.status_code == 422
    assert {f["field"] for f in error_of(too_big)["fields"]} == {"events"}


def test_the_client_waits_out_retry_after_and_retries(it_settings: Settings) -> None:
    # 0.04 recalls a second: Retry-After 25 s, under the 30 s the client is willing to wait.
    with running_api(limited(it_settings, rate_limit_recall_per_s=0.04)) as env:
        client_retries_once(env, it_settings)


def client_retries_once(env: ApiEnv, it_settings: Settings) -> None:
    assert [recall(env, A).status_code for _ in range(2)] == [200, 200]
    sent: list[int] = []

    class Counting(AppTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            answer = super().handle_request(request)
            sent.append(answer.status_code)
            return answer

    waits: list[float] = []
    store = redis.Redis.from_url(str(it_settings.redis_url))

    def sleep(seconds: float) -> None:
        # Where the client would sleep, the budget refills: its counters are cleared.
        waits.append(seconds)
        for key in store.scan_iter("cuemem:ratelimit*"):
            store.delete(key)

    client = CuememClient(
        "http://testserver", env.keys[A], transport=Counting(env.client), sleep=sleep, max_attempts=3
    )
    with client:
        found = client.recall("u1", "tea")
    store.close()
    assert found["items"] == [] and sent == [429, 200]
    assert waits == [25]


def test_the_limits_can_be_turned_off(it_settings: Settings) -> None:
    with running_api(limited(it_settings, rate_limits=False)) as env:
        assert {recall(env, A).status_code for _ in range(4)} == {200}


def test_an_unreachable_redis_lets_requests_through(it_settings: Settings) -> None:
    # The limits guard against a noisy tenant; a recall must still answer while Redis is down.
    from service.http.rate_limits import RECALL, RateLimits

    down = limited(it_settings, redis_url="redis://127.0.0.1:1/0")
    limits = RateLimits(down)
    for _ in range(4):  # past the burst of 2, had it been counted
        limits.take(RECALL, A)


# The routes that cost more than a recall, each with its own budget. Tenants whose ids collide
# under a naive key join (`ac` and `ac:me`) must not share one.
AC, AC_ME = "ac", "ac:me"
COSTLY: dict[str, Any] = {
    "edit": lambda env, t: env.client.patch(
        "/v1/users/u1/memories/m1", json={"content": "green tea"}, headers=env.auth(t)
    ),
    "export": lambda env, t: env.client.get("/v1/export", params={"user_id": "u1"}, headers=env.auth(t)),
    "import": lambda env, t: env.client.post("/v1/import", content=b"", headers=env.auth(t)),
    "delete_user": lambda env, t: env.client.delete("/v1/users/u1", headers=env.auth(t)),
}


@pytest.mark.parametrize("kind", sorted(COSTLY))
def test_each_costly_route_answers_429_over_its_budget_and_another_tenant_is_unaffected(
    it_settings: Settings, kind: str
) -> None:
    settings = limited(it_settings, **{f"rate_limit_{kind}_per_s": 0.01, f"rate_limit_{kind}_burst": 1})
    env = build_env(settings, tenants=(AC, AC_ME))
    try:
        call = COSTLY[kind]
        first = call(env, AC)
        assert first.status_code not in (429, 500), first.text  # its answer (404, 422, 200): not ours
        refused = call(env, AC)
        assert refused.status_code == 429, refused.text
        assert error_of(refused)["code"] == "rate_limited"
        assert int(refused.headers["Retry-After"]) >= 1
        # The other tenant has its own budget, and the first tenant's other budgets are untouched.
        assert call(env, AC_ME).status_code not in (429, 500)
        assert recall(env, AC).status_code == 200
        others = [k for k in COSTLY if k != kind]
        assert {k: COSTLY[k](env, AC).status_code == 429 for k in others} == dict.fromkeys(others, False)
    finally:
        env.client.app.state.close()  # type: ignore[attr-defined]
        env.container.close()


# Invalidate, restore and forget (soft or hard) change a memory as an edit does (restore re-indexes,
# a hard delete rewrites the embedded Redis's files): they spend the same per-tenant edit budget.
CHANGES: dict[str, Any] = {
    "invalidate": lambda env, t: env.client.post(
        "/v1/users/u1/memories/m1/invalidate", json={"reason": "no longer"}, headers=env.auth(t)
    ),
    "restore": lambda env, t: env.client.post("/v1/users/u1/memories/m1/restore", headers=env.auth(t)),
    "forget": lambda env, t: env.client.delete("/v1/users/u1/memories/m1", headers=env.auth(t)),
    "purge": lambda env, t: env.client.delete(
        "/v1/users/u1/memories/m1", params={"hard": "true"}, headers=env.auth(t)
    ),
}


@pytest.mark.parametrize("kind", sorted(CHANGES))
def test_every_change_to_a_memory_spends_the_tenants_edit_budget(it_settings: Settings, kind: str) -> None:
    settings = limited(it_settings, rate_limit_edit_per_s=0.01, rate_limit_edit_burst=1)
    env = build_env(settings, tenants=(AC, AC_ME))
    try:
        call = CHANGES[kind]
        first = call(env, AC)
        assert first.status_code not in (429, 500), first.text  # its own answer (404): not ours
        refused = call(env, AC)
        assert refused.status_code == 429, refused.text
        assert error_of(refused)["code"] == "rate_limited"
        assert int(refused.headers["Retry-After"]) >= 1
        assert COSTLY["edit"](env, AC).status_code == 429  # one budget for every change
        assert call(env, AC_ME).status_code not in (429, 500)  # the other tenant's own
    finally:
        env.client.app.state.close()  # type: ignore[attr-defined]
        env.container.close()
