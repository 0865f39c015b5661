"""The HTTP API client (producers.client), sync and async, against httpx.MockTransport: every
call is checked for what it sends (method, path, query, body, auth) and what it returns."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from producers.client import Readiness
from producers.publisher import BatchResult, Published
from tests.support.api_answers import MEMORY, RECALL
from tests.support.client_api import KEY, Api, error, run_both, scripted, sync_client

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
        lambda c: c.recall(
            "u42", "我不吃什么", k=3, session_id="chat-7", include_archived=True, reinforce=True
        ),
        "POST",
        "/v1/recall",
        {},
        {
            "user_id": "u42",
            "query": "我不吃什么",
            "k": 3,
            "session_id": "chat-7",
            "include_archived": True,
            "reinforce": True,
        },
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
            "reinforce": False,  # always said: read-only on any server
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

    reply = httpx.Response(200, text=answer) if isinstance(answer, str) else httpx.Response(200, json=answer)
    for result, used, sleeps in run_both(scripted(method, path, reply), lambda c: call(c)):
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
    api = scripted(
        "POST",
        "/v1/events/batch",
        httpx.Response(
            200,
            json={
                "published": [{"event_id": "e1", "seq": 1, "session_id": "s", "user_id": "u"}],
                "errors": [{"index": 1, "fields": [{"field": "role", "problem": "'robot' is not one of"}]}],
            },
        ),
    )

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
    api = scripted(
        "POST",
        "/v1/events",
        error(503, "unavailable", "broker down"),
        httpx.Response(202, json={"event_id": "x", "seq": 1, "session_id": "s", "user_id": "u"}),
    )

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
