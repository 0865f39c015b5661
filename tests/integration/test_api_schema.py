"""The API's request schema is strict and its OpenAPI document says what the server does: no
coercion on recall (as on the event routes), the ids' pattern and length are the validator's, every
answer a route can give is listed, HEAD works on the probes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from shared.settings import Settings
from tests.support.api import ApiEnv, api_settings, build_env, fields_of

A = "tenant-a"


@pytest.fixture
def env(it_settings: Settings) -> Iterator[ApiEnv]:
    env = build_env(api_settings(it_settings))
    yield env
    env.client.app.state.close()  # type: ignore[attr-defined]
    env.container.close()


@pytest.mark.parametrize("route", ["/v1/recall", "/v1/recall/prompt"])
def test_recall_coerces_nothing_and_names_the_field(env: ApiEnv, route: str) -> None:
    base = {"user_id": "u1", "query": "tea"}
    for field, value in [
        ("k", "5"),
        ("k", 5.0),
        ("k", True),
        ("include_archived", "yes"),
        ("include_archived", 1),
        ("include_history", "true"),
        ("reinforce", 0),
        ("budget_tokens", "100"),
        ("user_id", 5),
        ("session_id", 7),
    ]:
        r = env.client.post(route, json={**base, field: value}, headers=env.auth(A))
        assert r.status_code == 422 and fields_of(r) == {field}, (field, value, r.text)
    ok = {**base, "k": 5, "include_archived": True, "include_history": False, "budget_tokens": 100}
    assert env.client.post(route, json=ok, headers=env.auth(A)).status_code == 200


def test_head_on_the_probes_answers_as_get_does(env: ApiEnv) -> None:
    for path in ("/v1/health", "/v1/ready"):
        head, get = env.client.head(path), env.client.get(path)
        assert (head.status_code, get.status_code) == (200, 200), path
        assert head.content == b""


def _operation(spec: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    operation: dict[str, Any] = spec["paths"][path][method]
    return operation


def _string(schema: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in schema.get("anyOf", [schema]) if s.get("type") == "string")


# Ids the validator takes and ids it refuses, side by side: separators, a leading mark, a line
# break, a NUL, non-ASCII letters, the length limit (128 by default) and one past it.
CANDIDATES = [
    "u1", "u10", "ac:me", "slack:U123", "a.b@c-d_e", "9", "a" * 128,
    "a" * 129, "-a", ".a", "a b", "a\n", "a\x00", "é", "a#b", "a?b", "a%b", "a/b", "a*", "",
]  # fmt: skip


def test_the_documented_id_pattern_and_length_are_what_the_server_accepts(env: ApiEnv) -> None:
    spec = env.client.get("/openapi.json").json()
    memories = _operation(spec, "get", "/v1/users/{user_id}/memories")
    path_id = _string(next(p for p in memories["parameters"] if p["name"] == "user_id")["schema"])
    body_id = _string(spec["components"]["schemas"]["RecallIn"]["properties"]["user_id"])
    session = _string(spec["components"]["schemas"]["RecallIn"]["properties"]["session_id"])
    assert path_id["pattern"] == body_id["pattern"] == session["pattern"]
    longest = path_id["maxLength"]
    assert longest == body_id["maxLength"] == env.container.settings.max_id_chars

    def documented(value: str) -> bool:
        return 1 <= len(value) <= longest and re.fullmatch(path_id["pattern"], value) is not None

    for value in CANDIDATES:
        body = {"user_id": value, "query": "tea"}
        recall = env.client.post("/v1/recall", json=body, headers=env.auth(A))
        assert (recall.status_code == 200) is documented(value), (value, recall.text)
        if recall.status_code != 200:
            assert recall.status_code == 422 and fields_of(recall) == {"user_id"}
        if value:  # an empty path segment is another route
            listed = env.client.get(f"/v1/users/{quote(value, safe='')}/memories", headers=env.auth(A))
            assert (listed.status_code == 200) is documented(value), (value, listed.text)


def test_every_answer_a_route_gives_is_in_the_document(env: ApiEnv) -> None:
    spec = env.client.get("/openapi.json").json()
    error = {"$ref": "#/components/schemas/Error"}
    expected = {
        ("post", "/v1/events"): {"400", "401", "413", "415", "422", "429"},
        ("post", "/v1/events/batch"): {"400", "401", "413", "415", "422", "429"},
        ("post", "/v1/recall"): {"400", "401", "413", "415", "422", "429"},
        ("get", "/v1/users/{user_id}/memories/{memory_id}"): {"401", "404", "422"},
        ("patch", "/v1/users/{user_id}/memories/{memory_id}"): {"400", "401", "404", "415", "422", "429"},
        ("delete", "/v1/users/{user_id}"): {"401", "422", "429"},
        ("get", "/v1/export"): {"401", "422", "429"},
        ("post", "/v1/import"): {"401", "413", "422", "429"},
    }
    for (method, path), statuses in expected.items():
        responses = _operation(spec, method, path)["responses"]
        assert statuses <= set(responses), (method, path, sorted(responses))
        for status in statuses:
            assert responses[status]["content"]["application/json"]["schema"] == error, (path, status)
        if "429" in statuses:
            assert "Retry-After" in responses["429"]["headers"]
    assert "HTTPValidationError" not in str(spec)
    # What the document says is what the server answers: a 404, a 415 and a 429 of these routes.
    h = env.auth(A)
    assert env.client.get("/v1/users/u1/memories/m1", headers=h).status_code == 404
    assert env.client.post("/v1/recall", content=b"{}", headers=h).status_code == 415
