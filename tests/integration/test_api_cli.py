"""`cuemem keys` and `cuemem serve`, as the real command; and the API end to end on real workers,
with the embedded index owned by the index worker (the API process only ever asks it)."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from service.http.serve import is_loopback
from service.operations.curation import create_key
from shared.queues import IndexKind
from shared.settings import Settings
from tests.support.services import run_cuemem, wait_processed
from workers.bootstrap import build_api_container


def test_keys_create_list_revoke(it_settings: Settings) -> None:
    made = run_cuemem(it_settings, "keys", "create", "--tenant", "acme", "--name", "backend")
    assert made.returncode == 0, made.stderr
    created = json.loads(made.stdout)
    assert set(created) == {"id", "tenant_id", "name", "key"} and created["tenant_id"] == "acme"
    assert created["key"].startswith("cm_")
    run_cuemem(it_settings, "keys", "create", "--tenant", "other", "--name", "x").check_returncode()

    listed = run_cuemem(it_settings, "keys", "list", "--tenant", "acme")
    assert listed.returncode == 0, listed.stderr
    keys = json.loads(listed.stdout)
    assert [k["id"] for k in keys] == [created["id"]] and keys[0]["revoked_at"] is None
    assert created["key"] not in listed.stdout and created["key"][3:11] == keys[0]["prefix"]
    everyone = json.loads(run_cuemem(it_settings, "keys", "list").stdout)
    assert {k["tenant_id"] for k in everyone} == {"acme", "other"}
    assert all("key" not in k and "key_hash" not in k for k in everyone)

    revoked = run_cuemem(it_settings, "keys", "revoke", created["id"])
    assert revoked.returncode == 0 and json.loads(revoked.stdout)["revoked_at"]
    assert json.loads(run_cuemem(it_settings, "keys", "list", "--tenant", "acme").stdout)[0]["revoked_at"]

    unknown = run_cuemem(it_settings, "keys", "revoke", "nope")
    assert unknown.returncode == 2 and "KEY_ID" in unknown.stderr
    bad = run_cuemem(it_settings, "keys", "create", "--tenant", "a b", "--name", "x")
    assert bad.returncode == 2 and "--tenant" in bad.stderr


def test_serve_refuses_no_auth_off_loopback(it_settings: Settings) -> None:
    for host in ("0.0.0.0", "192.168.1.10", "example.org", "::"):
        out = run_cuemem(it_settings, "serve", "--no-auth", "--host", host, timeout=60)
        assert out.returncode == 2, (host, out.stderr)
        assert "--no-auth" in out.stderr and "loopback" in out.stderr
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "local"))


def test_publish_recall_edit_and_purge_through_real_workers(
    it_settings: Settings, start_workers: Any
) -> None:
    from service.http.app import create_app
    from shared.models import turn_point_id

    settings = it_settings.model_copy(update={"embedder": "hash", "turn_window": 3})  # windows: see the purge
    container = build_api_container(settings)
    key = create_key(container, "acme", "e2e")["key"]
    client = TestClient(create_app(container), raise_server_exceptions=False)
    h = {"Authorization": f"Bearer {key}"}
    try:
        workers = start_workers(settings)
        turns = ["我不吃香菜，点餐时记得提醒", "生产环境部署端口是8443", "好的，谢谢"]
        r = client.post(
            "/v1/events/batch",
            json={
                "events": [{"user_id": "u1", "session_id": "s1", "role": "user", "content": t} for t in turns]
            },
            headers=h,
        )
        assert r.status_code == 200 and not r.json()["errors"], r.text
        r_ids = [p["event_id"] for p in r.json()["published"]]
        wait_processed(container, r_ids, workers)
        assert client.get("/v1/ready").json() == {"postgres": "ok", "redis": "ok", "index": "ok"}
        # Run times recorded by the worker processes reach the API's /metrics through Redis.
        metrics = client.get("/metrics").text
        counts = {
            line.split("{")[1].split("}")[0]: float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith("cuemem_task_duration_seconds_count{")
        }
        # The batch endpoint sends its turns as one memory.record_batch (extract, embed and persist
        # run inside it), and the index owner indexes them in one memory.index.
        assert (
            counts.get('task="memory.record_batch"', 0) >= 1 and counts.get('task="memory.index"', 0) >= 1
        ), counts
        assert 'cuemem_task_runs_total{state="SUCCESS",task="memory.record_batch"}' in metrics

        found = client.post(
            "/v1/recall", json={"user_id": "u1", "query": "部署端口是多少", "k": 3}, headers=h
        ).json()
        port = next(i for i in found["items"] if "8443" in i["content"])

        r = client.patch(
            f"/v1/users/u1/memories/{port['id']}", json={"content": "生产环境部署端口是9443"}, headers=h
        )
        assert r.status_code == 200 and r.json()["content"] == "生产环境部署端口是9443"

        def indexed() -> bool:
            with container.uow() as uow:
                m = uow.memories.get("acme", "u1", port["id"])
            return m is not None and m.indexed_version == m.version

        from tests.support.services import wait_until

        assert wait_until(indexed, 60), "the index worker never synced the edit"
        again = client.post(
            "/v1/recall", json={"user_id": "u1", "query": "9443", "reinforce": False}, headers=h
        )
        assert any(i["id"] == port["id"] and "9443" in i["content"] for i in again.json()["items"])

        r = client.delete(f"/v1/users/u1/memories/{port['id']}", params={"hard": "true"}, headers=h)
        assert r.status_code == 200 and port["id"] in r.json()["deleted"]
        gone = client.post(
            "/v1/recall", json={"user_id": "u1", "query": "9443", "reinforce": False}, headers=h
        ).json()
        assert all(i["id"] != port["id"] for i in gone["items"])
        # The words never come back: not as a raw turn of the conversation log, the time path or
        # the working memory (the source turn is blanked in the event log, its point deleted).
        source = port["sources"][0]["event_id"]
        for query in ("部署端口是多少", "8443", "生产环境"):
            again = client.post(
                "/v1/recall", json={"user_id": "u1", "query": query, "k": 10, "reinforce": False}, headers=h
            ).json()
            assert all("8443" not in i["content"] and "9443" not in i["content"] for i in again["items"]), (
                again
            )
        with container.uow() as uow:
            stored = uow.events.get(source)
        assert (
            stored is not None and stored.event.content == "" and stored.event.metadata == {"redacted": True}
        )
        # The last turn's context window held the blanked one: embedded again without it.
        last = r_ids[2]
        with container.uow() as uow:
            [row] = uow.turn_index.rows("acme", "u1", [last])
        assert row.vector is not None and row.context == (turns[0],), row
        # The point itself is gone from the embedded index (the index worker's memory.delete_points).
        from service.operations.waiting import broker_idle
        from workers.bootstrap import build_container

        assert wait_until(lambda: broker_idle(settings), 60)
        for w in workers:
            w.stop()
        local = build_container(settings)
        try:
            assert port["id"] not in local.index().ids("acme", "u1")
            turn_index = local.index(IndexKind.TURNS)
            assert turn_index is not None
            turn_ids = turn_index.ids("acme", "u1")
            assert turn_point_id("acme", "u1", source) not in turn_ids and len(turn_ids) == 2
            assert turn_point_id("acme", "u1", last) in turn_ids  # its new window, pushed
        finally:
            local.close()
    finally:
        client.app.state.close()  # type: ignore[attr-defined]
        container.close()
