"""Event ids are unique per tenant (issue 18), on real Postgres, Redis and worker processes: two
tenants publishing one event id each get their own turn recorded, timelined and recalled, and an
id reused inside a tenant for other words is refused with the reason, not dropped."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from service.http.app import create_app
from service.operations.curation import create_key
from shared.events import event_ref
from shared.settings import Settings
from tests.support.services import wait_processed
from workers.bootstrap import build_api_container

TURN = {"event_id": "order-1001", "user_id": "u1", "session_id": "s1", "seq": 1, "role": "user"}
WORDS = {"acme": "我不吃香菜", "beta": "生产环境部署端口是8443"}


def _publish(client: TestClient, key: str, content: str, **extra: Any) -> None:
    r = client.post("/v1/events", json={**TURN, "content": content, **extra}, headers=_auth(key))
    assert r.status_code == 202, r.text


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_two_tenants_with_one_event_id_both_recorded_and_a_reuse_refused_with_its_reason(
    it_settings: Settings, start_workers: Any
) -> None:
    settings = it_settings.model_copy(update={"embedder": "hash"})
    container = build_api_container(settings)
    keys = {t: create_key(container, t, "test")["key"] for t in WORDS}
    client = TestClient(create_app(container), raise_server_exceptions=False)
    try:
        workers = start_workers(settings)
        _publish(client, keys["beta"], WORDS["beta"])  # beta first, as in the report
        _publish(client, keys["acme"], WORDS["acme"])
        refs = [event_ref(t, "order-1001") for t in WORDS]
        state = wait_processed(container, refs, workers)
        assert set(state.states.values()) == {"done"}, state.reasons

        for tenant, words in WORDS.items():
            r = client.get("/v1/users/u1/timeline", headers=_auth(keys[tenant]))
            assert r.status_code == 200, r.text
            turns = r.json()["turns"]
            assert [(t["event_id"], t["content"]) for t in turns] == [("order-1001", words)]
            r = client.post(
                "/v1/recall",
                json={"user_id": "u1", "query": words, "k": 10, "reinforce": False},
                headers=_auth(keys[tenant]),
            )
            assert r.status_code == 200, r.text
            found = [i["content"] for i in r.json()["items"]]
            other = next(w for t, w in WORDS.items() if t != tenant)
            assert words in found and other not in found

        # acme reuses its id for another turn: refused at once with the reason, naming event_id
        # (its first turn is recorded; service/operations/event_ids.py), nothing published.
        r = client.post(
            "/v1/events",
            json={**TURN, "content": "我住在杭州", "seq": 2},
            headers=_auth(keys["acme"]),
        )
        assert r.status_code == 409, r.text
        problem = r.json()["error"]["fields"][0]
        assert problem["field"] == "event_id" and "cannot be reused" in problem["problem"], problem
        r = client.get("/v1/users/u1/timeline", headers=_auth(keys["acme"]))
        assert [t["content"] for t in r.json()["turns"]] == [WORDS["acme"]]
    finally:
        client.close()
        container.close()
