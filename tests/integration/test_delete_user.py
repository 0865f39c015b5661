"""Deleting a user everywhere, through the API and the CLI, on real Postgres, Redis, worker
processes and the embedded index at its owner (the API process cannot open it).

Three users in two tenants, one of them with the victim's user id in the other tenant. The oracle
is the test's own reading of each store (SQL per table, Redis keys, recall at the index), not the
report: the victim's data is gone from all of them, everyone else's is exactly as it was, and each
other user still recalls its own words (the positive control)."""

from __future__ import annotations

import json
from typing import Any

import redis
from fastapi.testclient import TestClient
from sqlalchemy import text

from infra import redis_layout
from service.http.app import create_app
from service.operations.curation import create_key
from shared.settings import Settings
from shared.storage import DeadLetter
from tests.support.api import publish_turns
from tests.support.services import run_cuemem, wait_processed
from workers.bootstrap import build_api_container

USER_TABLES = ["events", "event_receipts", "memories", "memory_history", "memory_cue_counts", "recall_claims"]
TURNS = {
    ("acme", "u1"): ["My passport number is P-7731, keep it safe", "我女儿叫小雨，今年五岁"],
    ("acme", "u10"): ["I moved to Lisbon last spring", "我每天早上跑步五公里"],
    ("globex", "u1"): ["Our release train ships every Thursday", "我对花生过敏"],
}


def _rows(c: Any) -> dict[tuple[str, str, str], int]:
    """Every (table, tenant, user) count, read with plain SQL."""
    out: dict[tuple[str, str, str], int] = {}
    with c.uow() as uow:
        for table in USER_TABLES:
            for tenant, user, n in uow.session.execute(
                text(f"SELECT tenant_id, user_id, count(*) FROM {table} GROUP BY 1, 2")
            ):
                out[(table, tenant, user)] = int(n)
        for table in ("dead_letters", "llm_calls"):
            out[(table, "*", "*")] = uow.session.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
    return out


def _redis_keys(url: str) -> set[str]:
    client = redis.Redis.from_url(url)
    try:
        found = {k.decode() for k in client.scan_iter(match=f"{redis_layout.PREFIX}:*")}
        ledger = {m.decode() for m in client.hkeys(redis_layout.UNRECORDED_MESSAGES)}
    finally:
        client.close()
    # Rate-limit counters are the tenant's budgets, not user data (delete-user spends one).
    return {k for k in found if "{" in k and not k.startswith("cuemem:ratelimit:")} | {
        f"ledger/{m}" for m in ledger
    }


def _recall(client: TestClient, key: str, user: str, query: str) -> list[str]:
    r = client.post(
        "/v1/recall",
        json={"user_id": user, "query": query, "k": 10, "reinforce": False},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert r.status_code == 200, r.text
    return [i["content"] for i in r.json()["items"]]


def test_a_user_deleted_everywhere_leaves_everyone_else_untouched(
    it_settings: Settings, start_workers: Any
) -> None:
    settings = it_settings.model_copy(update={"embedder": "hash"})
    container = build_api_container(settings)
    api_keys = {t: create_key(container, t, "test")["key"] for t in ("acme", "globex")}
    client = TestClient(create_app(container), raise_server_exceptions=False)
    try:
        workers = start_workers(settings)
        published: list[str] = []
        for (tenant, user), turns in TURNS.items():
            published += publish_turns(client, api_keys[tenant], user, turns)
        wait_processed(container, published, workers)
        victim_event = next(e for e in published if _owner(container, e) == ("acme", "u1"))
        other_event = next(e for e in published if _owner(container, e) == ("acme", "u10"))
        # What the stores hold beyond the pipeline's rows: dead letters naming each user's event,
        # and turns of both users still unrecorded in the publish ledger.
        victim_turn = {"event_id": "x1", "tenant_id": "acme", "user_id": "u1", "content": "victim's words"}
        other_turn = {"event_id": "x2", "tenant_id": "acme", "user_id": "u10", "content": "other words"}
        letters = [  # (task, args, what stays of it)
            ("memory.extract", [victim_event], None),
            ("memory.extract", [other_event], [other_event]),
            ("memory.record_batch", [[victim_turn, other_turn]], [[other_turn]]),
            ("memory.sync_index", ["acme", "u10"], ["acme", "u10"]),
            ("memory.sync_index", ["acme", "u1"], None),
            ("memory.sync_index", ["globex", "u1"], ["globex", "u1"]),
        ]
        with container.uow() as uow:
            for task, args, _ in letters:
                event_id = args[0] if isinstance(args[0], str) else None
                uow.dead_letters.add(DeadLetter(task, None, event_id, args, "test", 1))
            uow.commit()
        client_redis = redis.Redis.from_url(settings.redis_url or "")
        for tenant, user, event_id in (("acme", "u1", "late-1"), ("acme", "u10", "late-2")):
            member = redis_layout.ledger_member(tenant, event_id)
            message = {"event_id": event_id, "tenant_id": tenant, "user_id": user, "content": "late turn"}
            client_redis.zadd(redis_layout.UNRECORDED, {member: 1})
            client_redis.hset(redis_layout.UNRECORDED_MESSAGES, member, json.dumps(message))
        client_redis.close()

        assert any("P-7731" in t for t in _recall(client, api_keys["acme"], "u1", "passport number"))
        rows_before = _rows(container)
        redis_before = _redis_keys(settings.redis_url or "")
        victim_tag = "{acme:u1}"
        assert any(victim_tag in k for k in redis_before) and "ledger/acme\x1flate-1" in redis_before

        r = client.delete("/v1/users/u1", headers={"Authorization": f"Bearer {api_keys['acme']}"})
        assert r.status_code == 200, r.text
        report = r.json()
        assert report["verified"] is True and report["unverified"] == []
        stores = report["stores"]
        assert stores["postgres.events"]["deleted"] == 2 and stores["postgres.events"]["left"] == 0
        # Touched: the three letters holding the victim's data; everyone else's four stay, three
        # of them acme's: the report counts within the caller's tenant (globex's letter is not
        # shown to acme).
        assert stores["postgres.dead_letters"] == {
            "deleted": 3,
            "left": 0,
            "others_before": 3,
            "others_after": 3,
            "compared": True,
        }
        assert stores["redis.ledger"]["deleted"] == 1 and stores["redis.ledger"]["others_after"] == 1
        assert stores["index.memories"]["deleted"] >= 1 and stores["index.turns"]["deleted"] == 2
        assert all(s["left"] == 0 and s["others_before"] == s["others_after"] for s in stores.values())

        # The test's own reading: the victim's rows are gone, everyone else's are as they were.
        rows_after = _rows(container)
        expected = {
            k: n for k, n in rows_before.items() if k[1:] != ("acme", "u1") and k[0] not in {"dead_letters"}
        }
        assert {k: n for k, n in rows_after.items() if k[0] != "dead_letters"} == expected
        assert rows_after[("dead_letters", "*", "*")] == rows_before[("dead_letters", "*", "*")] - 2
        with container.uow() as uow:
            kept = uow.session.execute(text("SELECT task_name, args FROM dead_letters ORDER BY id")).all()
        assert [(t, a) for t, a in kept] == [(t, a) for t, _, a in letters if a is not None]
        redis_after = _redis_keys(settings.redis_url or "")
        assert redis_after == {
            k for k in redis_before if victim_tag not in k and k != "ledger/acme\x1flate-1"
        }
        # The index at its owner: the victim recalls nothing; the others recall their own words.
        assert _recall(client, api_keys["acme"], "u1", "passport number") == []
        assert any("Lisbon" in t for t in _recall(client, api_keys["acme"], "u10", "where did I move"))
        assert any("Thursday" in t for t in _recall(client, api_keys["globex"], "u1", "release train"))

        # The CLI, on the same services: another user of acme, and the victim again (nothing left).
        done = run_cuemem(settings, "delete-user", "--user", "u10", "--tenant", "acme", "--yes")
        assert done.returncode == 0, done.stderr
        cli_report = json.loads(done.stdout)
        assert cli_report["verified"] is True and cli_report["stores"]["postgres.memories"]["deleted"] >= 1
        again = run_cuemem(settings, "delete-user", "--user", "u1", "--tenant", "acme", "--yes")
        assert again.returncode == 0 and json.loads(again.stdout)["deleted"] == 0, again.stderr
        refused = run_cuemem(settings, "delete-user", "--user", "u1", "--tenant", "acme")
        assert refused.returncode != 0 and "--yes" in refused.stderr
        assert any("Thursday" in t for t in _recall(client, api_keys["globex"], "u1", "release train"))
    finally:
        container.close()


def leaking(container: Any, sql: str) -> Any:
    """The container with an erasure that also runs ``sql`` (an injected bug that reaches rows
    not the user's), for the tests that the delete then rolls back."""
    import dataclasses

    from workers.db.erasure import SqlUserData

    class Leaky(SqlUserData):
        def erase(self, tenant_id: str, user_id: str) -> dict[str, int]:
            self.session.execute(text(sql))
            return super().erase(tenant_id, user_id)

    class LeakyUnit:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __enter__(self) -> Any:
            uow = self.inner.__enter__()
            uow.erasure = Leaky(uow.session)
            return uow

        def __exit__(self, *exc: object) -> None:
            self.inner.__exit__(*exc)

    return dataclasses.replace(container, uow=lambda: LeakyUnit(container.uow()))


def _owner(container: Any, event_id: str) -> tuple[str, str]:
    with container.uow() as uow:
        stored = uow.events.get(event_id)
    assert stored is not None
    return stored.event.tenant_id, stored.event.user_id


def test_an_erasure_that_touches_another_users_rows_is_rolled_back(
    clean_db: str, it_settings: Settings
) -> None:
    """The verification can fail: a Postgres part whose deletes reach another user's rows (here an
    injected bug) raises ErasureFailed, and nothing of the transaction is committed."""
    from datetime import UTC, datetime

    import pytest

    from service.operations.erasure import erase_user
    from shared.erasure import ErasureFailed
    from tests.support.rows import memory_row
    from workers.bootstrap import build_container

    c = build_container(it_settings)
    now = datetime(2026, 12, 1, tzinfo=UTC)
    with c.uow() as uow:
        for i, user in enumerate(["u1", "u1", "u2"]):
            uow.memories.add(memory_row(i, "acme", user, now, cues=["k:x"]))
        uow.commit()
    leaky = leaking(c, "DELETE FROM memories WHERE user_id = 'u2'")
    with pytest.raises(
        ErasureFailed, match=r"postgres\.memories: 0 of the user's left, everyone else's 1 -> 0"
    ):
        erase_user(leaky, "acme", "u1")
    with c.uow() as uow:
        assert uow.session.execute(
            text("SELECT user_id, count(*) FROM memories GROUP BY 1 ORDER BY 1")
        ).all() == [
            ("u1", 2),
            ("u2", 1),
        ]
    assert erase_user(c, "acme", "u1").verified  # the real one, on the same rows
    c.close()


def test_the_report_counts_only_the_callers_tenant_and_a_delete_reaching_another_is_rolled_back(
    clean_db: str, it_settings: Settings
) -> None:
    """A tenant's key holder reads the report: its counts of everyone else stay inside that tenant
    (tenant B saw the whole deployment's volume), while every other tenant's rows are still
    compared, unreported: a delete reaching another tenant's rows (an injected bug) rolls back."""
    from datetime import UTC, datetime

    import pytest

    from service.operations.erasure import erase_user
    from shared.erasure import ErasureFailed
    from tests.support.rows import memory_row
    from workers.bootstrap import build_container

    c = build_container(it_settings)
    now = datetime(2026, 12, 1, tzinfo=UTC)
    owners = [("acme", "u1")] * 2 + [("acme", "u10")] + [("globex", "u1")] * 3 + [("acme:u1", "x")] * 4
    with c.uow() as uow:
        for i, (tenant, user) in enumerate(owners):
            uow.memories.add(memory_row(i, tenant, user, now, cues=["k:x"]))
        for args in (["acme", "u1"], ["acme", "u10"], ["globex", "u1"], ["globex", "u2"], ["acme:u1", "x"]):
            uow.dead_letters.add(DeadLetter("memory.sync_index", None, None, args, "test", 1))
        uow.commit()

    leaky = leaking(c, "DELETE FROM memories WHERE tenant_id = 'globex'")
    with pytest.raises(ErasureFailed, match=r"memories: other users' items 8 -> 5"):
        erase_user(leaky, "acme", "u1")

    report = erase_user(c, "acme", "u1").to_public()
    stores = report["stores"]
    assert report["verified"] is True
    assert stores["postgres.memories"] == {
        "deleted": 2, "left": 0, "others_before": 1, "others_after": 1, "compared": True,
    }  # fmt: skip
    assert stores["postgres.dead_letters"]["deleted"] == 1
    assert stores["postgres.dead_letters"]["others_before"] == 1  # acme's u10, no other tenant's
    # Nothing of globex or acme:u1 shows anywhere in the report.
    with c.uow() as uow:
        for table in USER_TABLES:  # every other part of the report: acme's other users, read with SQL
            n = uow.session.execute(
                text(f"SELECT count(*) FROM {table} WHERE tenant_id = 'acme' AND user_id <> 'u1'")
            ).scalar_one()
            assert stores[f"postgres.{table}"]["others_after"] == n, table
    assert {k: s["others_after"] for k, s in stores.items() if k.split(".")[0] != "postgres"} == {
        "redis.seq_counters": 0, "redis.working_memory": 0, "redis.sessions": 0, "redis.ledger": 0,
        "index.memories": 0, "index.turns": 0,
    }  # fmt: skip
    with c.uow() as uow:
        left = uow.session.execute(
            text("SELECT tenant_id, count(*) FROM memories GROUP BY 1 ORDER BY 1")
        ).all()
    assert left == [("acme", 1), ("acme:u1", 4), ("globex", 3)]
    c.close()
