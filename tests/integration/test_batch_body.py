"""``POST /v1/events/batch`` parsed one turn at a time (service/http/batch_body.py), on real Redis:
the memory a batch costs is bounded by one turn, not by what its JSON becomes as objects; a turn
larger than one ``POST /v1/events`` may send is refused naming it, before it is parsed and with
nothing published; a batch answers per item as before, in two tenants."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

from producers.publisher import BATCH_SIZE
from shared.settings import Settings
from tests.support.api import ApiEnv, api_settings, build_env, error_of, fields_of

AC, AC_ME = "ac", "ac:me"
TURN = {"user_id": "u1", "session_id": "s1", "role": "user", "content": "hello"}
TURN_LIMIT = 64 * 1024  # CUEMEM_MAX_BODY_BYTES here: the most one turn of a batch may be


@pytest.fixture
def env(it_settings: Settings) -> Iterator[ApiEnv]:
    settings = api_settings(it_settings).model_copy(
        update={"max_body_bytes": TURN_LIMIT, "max_batch_body_bytes": 16 << 20}
    )
    env = build_env(settings, tenants=(AC, AC_ME))
    yield env
    env.client.app.state.close()  # type: ignore[attr-defined]
    env.container.close()


def _batch(env: ApiEnv, tenant: str, body: bytes) -> Any:
    headers = {**env.auth(tenant), "Content-Type": "application/json"}
    return env.client.post("/v1/events/batch", content=body, headers=headers)


def test_a_batch_costs_the_memory_of_one_message_of_turns_not_of_its_objects(env: ApiEnv) -> None:
    # Metadata of thousands of empty lists: 16 KB of JSON each, over 300 KB as Python objects (the
    # probe's 16 MB batch grew the process by 430 MB). Refused per turn for its size as JSON.
    metadata = {"m": [[[]] * 1900] * 2, "n": [0] * 2500}
    events = [{**TURN, "content": f"turn {i}", "metadata": metadata} for i in range(250)]
    body = json.dumps({"events": events}, separators=(",", ":")).encode()
    del events
    tracemalloc.start()
    one_turn = json.loads(json.dumps({**TURN, "metadata": metadata}))
    _, turn_peak = tracemalloc.get_traced_memory()  # what one turn is as objects (over 300 KB)
    del one_turn
    tracemalloc.reset_peak()
    try:
        r = _batch(env, AC, body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.status_code == 200, r.text[:300]
    assert len(r.json()["errors"]) == 250 and not r.json()["published"]
    # The body, its text and the request's copies, plus one message's turns (64) as objects at a
    # time. Parsed whole (json.loads), the same body peaked at about 19 times its size.
    assert peak < 4 * len(body) + BATCH_SIZE * turn_peak < 10 * len(body), (peak, len(body), turn_peak)


def test_a_turn_over_the_limit_is_refused_by_its_index_before_anything_is_published(env: ApiEnv) -> None:
    small = json.dumps(TURN)
    large = json.dumps({**TURN, "content": "x" * TURN_LIMIT})
    for big in (large, json.dumps({**TURN, "metadata": {"k": [[]] * TURN_LIMIT}})):
        body = ('{"events": [' + ", ".join([small, small, big, small]) + "]}").encode()
        assert len(body) < 16 << 20
        r = _batch(env, AC, body)
        assert r.status_code == 413 and fields_of(r) == {"events[2]"}, r.text[:300]
        assert error_of(r)["code"] == "too_large"
    # Nothing was published: the conversation's first seq is still free, in either tenant.
    r = _batch(env, AC, ('{"events": [' + small + "]}").encode())
    assert r.status_code == 200 and [p["seq"] for p in r.json()["published"]] == [1], r.text
    r = _batch(env, AC_ME, ('{"events": [' + small + ", " + small + "]}").encode())
    assert [p["seq"] for p in r.json()["published"]] == [1, 2], r.text


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        (b"", 422, "body"),
        (b"null", 422, "body"),
        (b"[]", 422, "body"),
        (b"{}", 422, "events"),
        (b'{"events": "x"}', 422, "events"),
        (b'{"events": [], "who": 1}', 422, "who"),
        (b'{"events": [], "tenant_id": "ac:me"}', 422, "tenant_id"),
        (('{"events": [' + ", ".join(["{}"] * 1001) + "]}").encode(), 422, "events"),
        (b'{"events": [{}', 400, "body"),
        (b'{"events": [{}] x', 400, "body"),
        (b'{"events" [{}]}', 400, "body"),
        (b'{"events": [{}],}', 400, "body"),
        (b'{"events": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}", 400, "body"),
        (b'{"events": ["caf\xe9"]}', 400, "body"),
    ],
)
def test_a_body_that_is_not_a_batch_is_answered_as_before(
    env: ApiEnv, body: bytes, status: int, field: str
) -> None:
    r = _batch(env, AC, body)
    assert (r.status_code, fields_of(r)) == (status, {field}), r.text[:300]


def test_the_items_of_a_batch_are_still_answered_each_in_its_tenant(env: ApiEnv) -> None:
    items = [TURN, {**TURN, "role": "robot"}, "x", {**TURN, "tenant_id": AC_ME}, {**TURN, "content": "bye"}]
    body = json.dumps({"events": items}, ensure_ascii=False).encode()
    r = _batch(env, AC, body)
    assert r.status_code == 200, r.text
    named = {e["index"]: [f["field"] for f in e["fields"]] for e in r.json()["errors"]}
    assert named == {1: ["role"], 2: ["event"], 3: ["tenant_id"]}
    assert [p["seq"] for p in r.json()["published"]] == [1, 2]
    # The other tenant's conversation of the same ids starts at 1: nothing of ac's reached it.
    r = _batch(env, AC_ME, json.dumps({"events": [TURN]}).encode())
    assert [p["seq"] for p in r.json()["published"]] == [1]
