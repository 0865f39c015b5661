"""The HTTP API client (producers.client), sync and async, against httpx.MockTransport.

Every call is checked for what it sends (method, path, query, body, auth) and what it returns;
errors are mapped to CuememAPIError naming the fields; 429/503 and connection failures are
retried (Retry-After honoured, waits recorded through the injected ``sleep``), other 4xx never.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from producers.client import (
    AsyncCuememClient,
    CuememAPIError,
    CuememClient,
    CuememConnectionError,
    Readiness,
)
from producers.publisher import BatchResult, Published

BASE = "http://cuemem.test"
KEY = "ck_test_key"

RECALL = {
    "stage": "deterministic",
    "items": [
        {
            "id": "m1",
            "content": "我不吃香菜",
            "type": "preference",
            "status": "active",
            "score": 4.0,
            "importance": 9.0,
            "created_at": "2026-11-01T09:00:00+00:00",
            "sources": [],
            "explanation": {"paths": ["cue"], "matched_cues": ["k:香菜"]},
        }
    ],
    "trace": {"stage": "deterministic", "notes": []},
    "prompt": "[长期记忆 - 用户偏好]\n- 我不吃香菜 (2026-11-01)",
}
MEMORY = {"id": "m1", "content": "我不吃香菜", "type": "preference", "status": "active", "tags": ["food"]}


@dataclass
class Api:
    """A scripted API: answers queued per (method, path), or one default; records every request."""

    answers: dict[tuple[str, str], list[httpx.Response | Exception]] = field(default_factory=dict)
    default: Callable[[httpx.Request], httpx.Response] | None = None
    requests: list[httpx.Request] = field(default_factory=list)

    def queue(self, method: str, path: str, *answers: httpx.Response | Exception) -> None:
        self.answers.setdefault((method, path), []).extend(answers)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        queued = self.answers.get((request.method, request.url.path))
        if queued:
            answer = queued.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer
        if self.default is not None:
            return self.default(request)
        return httpx.Response(404, json={"error": {"code": "not_found", "message": "no route", "fields": []}})

    def body(self, i: int = -1) -> Any:
        return json.loads(self.requests[i].content)


def sync_client(api: Api, **kwargs: Any) -> tuple[CuememClient, list[float]]:
    sleeps: list[float] = []
    client = CuememClient(BASE, KEY, transport=httpx.MockTransport(api), sleep=sleeps.append, **kwargs)
    return client, sleeps


def async_client(api: Api, **kwargs: Any) -> tuple[AsyncCuememClient, list[float]]:
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    client = AsyncCuememClient(BASE, KEY, transport=httpx.MockTransport(api), sleep=sleep, **kwargs)
    return client, sleeps


def run_both(api_factory: Callable[[], Api], call: Callable[[Any], Any], **kwargs: Any) -> list[Any]:
    """Run ``call(client)`` with the sync and the async client; returns both (result, api, sleeps)."""
    out = []
    api = api_factory()
    client, sleeps = sync_client(api, **kwargs)
    with client:
        out.append((call(client), api, sleeps))
    api = api_factory()
    aclient, asleeps = async_client(api, **kwargs)

    async def go() -> Any:
        async with aclient:
            return await call(aclient)

    out.append((asyncio.run(go()), api, asleeps))
    return out


def capture(call: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``call``, returning its exception instead of raising (awaited inside for the async client)."""

    def wrapped(client: Any) -> Any:
        try:
            result = call(client)
        except Exception as exc:
            return exc
        if not asyncio.iscoroutine(result):
            return result
        coroutine = result

        async def catch() -> Any:
            try:
                return await coroutine
            except Exception as exc:
                return exc

        return catch()

    return wrapped


def error(status: int, code: str, message: str, fields: list[dict[str, str]] | None = None, **headers: str):
    return httpx.Response(
        status,
        json={"error": {"code": code, "message": message, "fields": fields or []}},
        headers=headers,
    )


# --- every call: what it sends and what it returns ---------------------------------------------

# (name, call, method, path, query, body or None, response json or text, expected result)
CALLS: list[tuple[str, Callable[[Any], Any], str, str, dict[str, str], Any, Any, Any]] = [
    (
        "publish",
        lambda c: c.publish(
            user_id="u42",
            session_id="chat-7",
            role="user",
            content="我不吃香菜",
            at=datetime(2026, 11, 1, 9, tzinfo=UTC),
            event_id="e1",
            metadata={"remember": True},
        ),
        "POST",
        "/v1/events",
        {},
        {
            "user_id": "u42",
            "session_id": "chat-7",
            "role": "user",
            "content": "我不吃香菜",
            "at": "2026-11-01T09:00:00+00:00",
            "event_id": "e1",
            "metadata": {"remember": True},
        },
        {"event_id": "e1", "seq": 3, "session_id": "chat-7", "user_id": "u42"},
        Published("e1", 3, "chat-7", "u42"),
    ),
    (
        "recall",
        lambda c: c.recall("u42", "我不吃什么", k=3, session_id="chat-7", include_archived=True),
        "POST",
        "/v1/recall",
        {},
        {"user_id": "u42", "query": "我不吃什么", "k": 3, "session_id": "chat-7", "include_archived": True},
        RECALL,
        RECALL,
    ),
    (
        "recall_prompt",
        lambda c: c.recall_prompt(
            "u42", "what do I like", now="2026-11-10T09:00:00+08:00", budget_tokens=200, include_history=True
        ),
        "POST",
        "/v1/recall/prompt",
        {},
        {
            "user_id": "u42",
            "query": "what do I like",
            "now": "2026-11-10T09:00:00+08:00",
            "budget_tokens": 200,
            "include_history": True,
        },
        "[Long-term memory - preferences]\n- 我不吃香菜 (2026-11-01)",
        "[Long-term memory - preferences]\n- 我不吃香菜 (2026-11-01)",
    ),
    (
        "memories",
        lambda c: c.memories("u42", status="archived", type="fact", limit=10, offset=20),
        "GET",
        "/v1/users/u42/memories",
        {"status": "archived", "type": "fact", "limit": "10", "offset": "20"},
        None,
        {"items": [MEMORY], "total": 21},
        {"items": [MEMORY], "total": 21},
    ),
    (
        "memory",
        lambda c: c.memory("u42", "m1"),
        "GET",
        "/v1/users/u42/memories/m1",
        {},
        None,
        MEMORY,
        MEMORY,
    ),
    (
        "edit",
        lambda c: c.edit("u42", "m1", content="我不吃香菜和葱", tags=["food"]),
        "PATCH",
        "/v1/users/u42/memories/m1",
        {},
        {"content": "我不吃香菜和葱", "tags": ["food"]},
        MEMORY,
        MEMORY,
    ),
    (
        "invalidate",
        lambda c: c.invalidate("u42", "m1", "no longer true"),
        "POST",
        "/v1/users/u42/memories/m1/invalidate",
        {},
        {"reason": "no longer true"},
        MEMORY | {"status": "superseded"},
        MEMORY | {"status": "superseded"},
    ),
    (
        "restore",
        lambda c: c.restore("u42", "m1"),
        "POST",
        "/v1/users/u42/memories/m1/restore",
        {},
        None,
        MEMORY,
        MEMORY,
    ),
    (
        "forget",
        lambda c: c.forget("u42", "m1"),
        "DELETE",
        "/v1/users/u42/memories/m1",
        {},
        None,
        {"deleted": ["m1"], "hard": False},
        {"deleted": ["m1"], "hard": False},
    ),
    (
        "forget hard",
        lambda c: c.forget("u42", "m1", hard=True),
        "DELETE",
        "/v1/users/u42/memories/m1",
        {"hard": "true"},
        None,
        {"deleted": ["m1", "m9"], "hard": True},
        {"deleted": ["m1", "m9"], "hard": True},
    ),
    (
        "history",
        lambda c: c.history("u42", "m1"),
        "GET",
        "/v1/users/u42/memories/m1/history",
        {},
        None,
        {"memories": [MEMORY], "history": []},
        {"memories": [MEMORY], "history": []},
    ),
    ("health", lambda c: c.health(), "GET", "/v1/health", {}, None, {"status": "ok"}, {"status": "ok"}),
    (
        "ready",
        lambda c: c.ready(),
        "GET",
        "/v1/ready",
        {},
        None,
        {"status": "ready"},
        Readiness(True, 200, {"status": "ready"}),
    ),
]


@pytest.mark.parametrize("case", CALLS, ids=[c[0] for c in CALLS])
def test_every_call_sends_the_contract_and_parses_the_answer(case: tuple[Any, ...]) -> None:
    _name, call, method, path, query, body, answer, expected = case

    def api() -> Api:
        reply = (
            httpx.Response(200, text=answer) if isinstance(answer, str) else httpx.Response(200, json=answer)
        )
        a = Api()
        a.queue(method, path, reply)
        return a

    for result, used, sleeps in run_both(api, lambda c: call(c)):
        assert result == expected
        [request] = used.requests
        assert (request.method, request.url.path) == (method, path)
        assert dict(request.url.params) == query
        assert request.headers["Authorization"] == f"Bearer {KEY}"
        if body is None:
            assert request.content in (b"", b"null") or method == "POST"
        else:
            assert json.loads(request.content) == body
        assert sleeps == []


def test_publish_batch_reports_published_and_invalid_events_by_position() -> None:
    def api() -> Api:
        a = Api()
        a.queue(
            "POST",
            "/v1/events/batch",
            httpx.Response(
                200,
                json={
                    "published": [{"event_id": "e1", "seq": 1, "session_id": "s", "user_id": "u"}],
                    "errors": [
                        {"index": 1, "fields": [{"field": "role", "problem": "'robot' is not one of"}]}
                    ],
                },
            ),
        )
        return a

    events = [
        {"user_id": "u", "session_id": "s", "role": "user", "content": "a"},
        {"user_id": "u", "session_id": "s", "role": "robot", "content": "b"},
    ]
    for result, used, _ in run_both(api, lambda c: c.publish_batch(events)):
        assert isinstance(result, BatchResult)
        assert result.published == [Published("e1", 1, "s", "u")]
        [(index, invalid)] = result.errors
        assert index == 1 and str(invalid) == "role: 'robot' is not one of"
        sent = used.body()["events"]
        assert [e["content"] for e in sent] == ["a", "b"]
        # Every event carries an id chosen here, so a retried batch is recorded once.
        assert all(isinstance(e["event_id"], str) and len(e["event_id"]) == 32 for e in sent)


def test_publish_without_event_id_keeps_one_id_across_retries() -> None:
    def api() -> Api:
        a = Api()
        a.queue(
            "POST",
            "/v1/events",
            error(503, "unavailable", "broker down"),
            httpx.Response(202, json={"event_id": "x", "seq": 1, "session_id": "s", "user_id": "u"}),
        )
        return a

    for _, used, _ in run_both(
        api, lambda c: c.publish(user_id="u", session_id="s", role="user", content="hi")
    ):
        first, second = (json.loads(r.content) for r in used.requests)
        assert first["event_id"] == second["event_id"] and len(first["event_id"]) == 32
        assert "at" not in first and "seq" not in first  # unset optional fields are not sent


def test_ids_are_quoted_into_paths() -> None:
    api = Api(default=lambda r: httpx.Response(200, json=MEMORY))
    client, _ = sync_client(api)
    client.memory("user/1", "m 1?")
    assert api.requests[0].url.raw_path == b"/v1/users/user%2F1/memories/m%201%3F"


# --- errors -----------------------------------------------------------------------------------


def test_api_errors_carry_status_code_message_and_name_the_fields() -> None:
    fields = [
        {"field": "role", "problem": "'robot' is not one of user, assistant, system, tool"},
        {"field": "content", "problem": "must not be empty"},
    ]

    def api() -> Api:
        a = Api()
        a.queue("POST", "/v1/events", error(422, "invalid_event", "the event is invalid", fields))
        return a

    for raised, used, sleeps in run_both(
        api, capture(lambda c: c.publish(user_id="u", session_id="s", role="robot", content=""))
    ):
        assert isinstance(raised, CuememAPIError)
        assert (raised.status, raised.code, raised.message) == (422, "invalid_event", "the event is invalid")
        assert raised.fields == fields
        assert str(raised) == (
            "HTTP 422 invalid_event: the event is invalid (role: 'robot' is not one of user, assistant, "
            "system, tool; content: must not be empty)"
        )
        assert len(used.requests) == 1 and sleeps == []  # a 4xx is never retried


@pytest.mark.parametrize(
    ("status", "code"),
    [(400, "bad_request"), (401, "unauthorized"), (403, "forbidden"), (404, "not_found"), (409, "conflict")],
)
def test_no_retry_on_4xx(status: int, code: str) -> None:
    api = Api()
    api.queue("GET", "/v1/users/u/memories/m1", error(status, code, "no"), httpx.Response(200, json=MEMORY))
    client, sleeps = sync_client(api)
    with pytest.raises(CuememAPIError) as info:
        client.memory("u", "m1")
    assert (info.value.status, info.value.code, info.value.fields) == (status, code, [])
    assert len(api.requests) == 1 and sleeps == []


def test_error_bodies_that_are_not_the_contract_still_map() -> None:
    api = Api()
    api.queue("GET", "/v1/health", httpx.Response(502, text="<html>Bad gateway</html>"))
    client, _ = sync_client(api)
    with pytest.raises(CuememAPIError) as info:
        client.health()
    assert (info.value.status, info.value.code, info.value.message) == (
        502,
        "http_502",
        "<html>Bad gateway</html>",
    )
    assert str(info.value) == "HTTP 502 http_502: <html>Bad gateway</html>"


# --- retries ----------------------------------------------------------------------------------


def test_429_is_retried_after_the_servers_retry_after() -> None:
    def api() -> Api:
        a = Api()
        a.queue(
            "POST",
            "/v1/recall",
            error(429, "rate_limited", "slow down", **{"Retry-After": "2"}),
            error(429, "rate_limited", "slow down", **{"Retry-After": "0.5"}),
            httpx.Response(200, json=RECALL),
        )
        return a

    for result, used, sleeps in run_both(api, lambda c: c.recall("u", "q")):
        assert result == RECALL
        assert len(used.requests) == 3
        assert sleeps == [2.0, 0.5]


def test_retry_after_as_an_http_date() -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=5), usegmt=True)
    api = Api()
    api.queue("GET", "/v1/health", error(429, "rate_limited", "later", **{"Retry-After": when}))
    api.queue("GET", "/v1/health", httpx.Response(200, json={"status": "ok"}))
    client, sleeps = sync_client(api)
    assert client.health() == {"status": "ok"}
    [slept] = sleeps
    assert 3.0 <= slept <= 5.0


def test_503_is_retried_with_backoff_then_raised_when_attempts_run_out() -> None:
    def api() -> Api:
        return Api(default=lambda r: error(503, "unavailable", "not ready"))

    for raised, used, sleeps in run_both(
        api, capture(lambda c: c.memories("u")), max_attempts=3, backoff_s=0.1
    ):
        assert isinstance(raised, CuememAPIError) and (raised.status, raised.code) == (503, "unavailable")
        assert len(used.requests) == 3
        assert len(sleeps) == 2 and all(0 < s <= 30 for s in sleeps)


def test_503_then_success() -> None:
    api = Api()
    api.queue("GET", "/v1/users/u/memories", error(503, "unavailable", "x"), error(503, "unavailable", "x"))
    api.default = lambda r: httpx.Response(200, json={"items": [], "total": 0})
    client, sleeps = sync_client(api)
    assert client.memories("u") == {"items": [], "total": 0}
    assert len(api.requests) == 3 and len(sleeps) == 2


def test_a_retry_after_longer_than_the_cap_is_not_waited_for() -> None:
    api = Api(default=lambda r: error(429, "rate_limited", "come back in an hour", **{"Retry-After": "3600"}))
    client, sleeps = sync_client(api)
    with pytest.raises(CuememAPIError) as info:
        client.health()
    assert info.value.status == 429 and info.value.retry_after == 3600.0
    assert len(api.requests) == 1 and sleeps == []


def test_connection_errors_are_retried_then_raised_as_connection_errors() -> None:
    def api() -> Api:
        a = Api()
        a.queue(
            "GET", "/v1/health", httpx.ConnectError("refused"), httpx.Response(200, json={"status": "ok"})
        )
        return a

    for result, used, sleeps in run_both(api, lambda c: c.health()):
        assert result == {"status": "ok"} and len(used.requests) == 2 and len(sleeps) == 1

    down = Api(default=lambda r: (_ for _ in ()).throw(httpx.ConnectError("refused")))
    client, sleeps = sync_client(down, max_attempts=2)
    with pytest.raises(
        CuememConnectionError, match=r"GET http://cuemem.test/v1/health: ConnectError: refused"
    ):
        client.health()
    assert len(down.requests) == 2


def test_ready_answers_503_as_not_ready_without_retrying() -> None:
    def api() -> Api:
        a = Api()
        a.queue("GET", "/v1/ready", httpx.Response(503, json={"status": "starting", "checks": {"db": False}}))
        return a

    for result, used, sleeps in run_both(api, lambda c: c.ready()):
        assert result == Readiness(False, 503, {"status": "starting", "checks": {"db": False}})
        assert len(used.requests) == 1 and sleeps == []


# --- configuration ----------------------------------------------------------------------------


def test_url_and_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUEMEM_API_URL", "http://env.test:8000/v1/")
    monkeypatch.setenv("CUEMEM_API_KEY", "ck_env")
    api = Api(default=lambda r: httpx.Response(200, json={"status": "ok"}))
    client = CuememClient(transport=httpx.MockTransport(api))
    client.health()
    [request] = api.requests
    assert str(request.url) == "http://env.test:8000/v1/health"
    assert request.headers["Authorization"] == "Bearer ck_env"
    # An explicit key wins; no key at all sends no Authorization (auth off on localhost).
    monkeypatch.delenv("CUEMEM_API_KEY")
    CuememClient(transport=httpx.MockTransport(api)).health()
    assert "Authorization" not in api.requests[-1].headers


def test_a_missing_url_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUEMEM_API_URL", raising=False)
    with pytest.raises(ValueError, match="base_url: not given and CUEMEM_API_URL is not set"):
        CuememClient()
