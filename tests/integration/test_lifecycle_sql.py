"""The lifecycle on real parts: the SQL sweeps agree with the Python definition (the in-memory
fake implements it row by row), drift between Postgres and the embedded Qdrant engine is repaired,
`cuemem restore` / `cuemem maintain` work end to end, and exactly one beat holds the lock."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
from celery import Celery
from sqlalchemy import text
from typer.testing import CliRunner

from cli.common import CliError
from cli.main import app as cli_app
from shared.indexing.collections import MEMORIES
from shared.indexing.reconcile import reconcile_indexes
from shared.indexing.sync import push_unindexed
from shared.lifecycle import sweeps as lifecycle
from shared.lifecycle.maintenance import recompute_scores
from shared.lifecycle.sweeps import LifecyclePolicy
from shared.models import Memory, MemoryStatus, MemoryType
from shared.ports import IndexPoint
from shared.scoring import DecayPolicy, score
from shared.settings import Settings
from tests.support.fakes import FakeStore
from tests.support.services import hash_cli_env, wait_until
from workers.bootstrap import Container, build_container
from workers.redis.beat_lock import BeatLock, BeatLockHeld, LockedScheduler

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
POLICY = LifecyclePolicy(decay=DecayPolicy(base=1.5))
TYPES = list(MemoryType)


def _memory(
    i: int, *, days: float, accesses: int = 0, due_in_days: float | None = None, user: str = ""
) -> Memory:
    at = NOW - timedelta(days=days)
    memory_type = TYPES[i % len(TYPES)]
    return Memory(
        id=f"00000000-0000-4000-8000-{i:012d}",
        tenant_id="default",
        user_id=user or f"u{i % 3}",
        type=memory_type,
        content=f"memory {i} about port {8000 + i}",
        importance=float(i % 11),
        status=MemoryStatus.ACTIVE,
        created_at=at,
        updated_at=at,
        last_accessed_at=at,
        access_count=accesses,
        score=score(float(i % 11), memory_type, at, accesses, at),
        sources=[{"event_id": f"e{i}", "session_id": "s", "seq": i, "at": at.isoformat()}],
        content_hash=f"h{i}",
        embedding=[float((i * k) % 7 + 1) for k in range(1, 17)],
        embedding_model="hash-v1-16",
        due_at=None if due_in_days is None else NOW + timedelta(days=due_in_days),
    )


def _population() -> list[Memory]:
    out = []
    for i in range(1, 151):
        due = None
        if TYPES[i % len(TYPES)] is MemoryType.TASK and i % 4 == 0:
            due = (i % 9) - 4.0  # some due in the past, some ahead
        out.append(_memory(i, days=(i * 3.1) % 400, accesses=i % 4, due_in_days=due))
    return out


def _load(uow_factory, memories: list[Memory]) -> None:
    with uow_factory() as uow:
        for m in memories:
            uow.memories.add(m)
        uow.commit()


def _index_all(container: Container, users: set[str]) -> None:
    for user in sorted(users):
        with container.uow() as uow:
            push_unindexed(uow, MEMORIES, container.index(), container.embedder, "default", user)
            uow.commit()


def _sql_rows(container: Container) -> dict[str, tuple[str, int, float, datetime]]:
    with container.uow() as uow:
        rows = uow.session.execute(  # type: ignore[attr-defined]
            text("SELECT id, status, access_count, score, last_accessed_at FROM memories")
        ).all()
    return {r.id: (r.status, r.access_count, r.score, r.last_accessed_at) for r in rows}


def test_sql_sweeps_agree_with_the_python_definition_and_are_idempotent(c, clean_db):
    memories = _population()
    fake = FakeStore()
    _load(c.uow, memories)
    _load(fake.uow, memories)
    later = NOW + timedelta(days=45)
    for uow_factory in (c.uow, fake.uow):
        recompute_scores(uow_factory, later, POLICY.decay)
        ttl, _ = lifecycle.expire_tasks(uow_factory, later, POLICY, batch_size=7)
        archive, _ = lifecycle.archive_stale(uow_factory, later, POLICY, batch_size=7)
        assert ttl["expired"] > 0 and archive["archived"] > 0
    sql = _sql_rows(c)
    for m in fake.state.memories.values():
        status, _, row_score, _ = sql[m.id]
        assert status == m.status.value, m.id
        assert row_score == pytest.approx(m.score, rel=1e-9, abs=1e-12), m.id
    with c.uow() as uow:
        actions = uow.session.execute(  # type: ignore[attr-defined]
            text("SELECT action, count(*) FROM memory_history GROUP BY action")
        ).all()
    expected = {
        "expired": sum(m.status is MemoryStatus.EXPIRED for m in fake.state.memories.values()),
        "archived": sum(m.status is MemoryStatus.ARCHIVED for m in fake.state.memories.values()),
    }
    assert dict(actions) == expected
    # The same time again: no sweep moves anything.
    assert lifecycle.expire_tasks(c.uow, later, POLICY)[0]["expired"] == 0
    assert lifecycle.archive_stale(c.uow, later, POLICY)[0]["archived"] == 0


def test_sql_reinforcement_counts_once_per_recall_and_matches_the_formula(c, clean_db):
    m = _memory(5, days=60, accesses=2, user="ra")
    _load(c.uow, [m])
    at = NOW + timedelta(hours=1)
    for _ in range(2):
        with c.uow() as uow:
            lifecycle.reinforce_recalled(
                uow, "recall-x", "default", "ra", [m.id, "unknown"], at, POLICY.decay
            )
            uow.commit()
    status, count, row_score, last = _sql_rows(c)[m.id]
    assert (status, count, last) == ("active", 3, at)
    assert row_score == pytest.approx(score(m.importance, m.type, at, 3, at, POLICY.decay), rel=1e-9)
    assert row_score > score(m.importance, m.type, m.last_accessed_at, 2, at, POLICY.decay)
    with c.uow() as uow:
        assert uow.lifecycle.prune_recall_claims(at + timedelta(seconds=1)) == 1
        uow.commit()


def test_drift_repair_on_the_embedded_engine_after_deleting_points_by_hand(c, clean_db):
    memories = [_memory(i, days=i, user="rd" if i % 2 else "re") for i in range(1, 41)]
    _load(c.uow, memories)
    _index_all(c, {"rd", "re"})
    index = c.index()
    dim = c.embedder.dim
    clean = reconcile_indexes(c.uow, {MEMORIES: index}, c.embedder)
    assert {k: clean[k] for k in MEMORIES.report_keys} == dict.fromkeys(MEMORIES.report_keys, 0)

    rd = sorted(index.ids("default", "rd"))
    index.delete("default", "rd", rd[:5])  # deleted by hand
    stray = "00000000-0000-4000-8000-999999999999"
    index.upsert([IndexPoint(stray, "default", "re", [1.0] * dim, {"status": "active", "version": 1})])
    index.set_payload("default", "re", {memories[1].id: {"status": "archived"}})
    with c.uow() as uow:  # scores move in Postgres
        uow.session.execute(text("UPDATE memories SET score = score + 1 WHERE user_id = 'rd'"))  # type: ignore[attr-defined]
        uow.commit()
    stats = reconcile_indexes(c.uow, {MEMORIES: index}, c.embedder)
    assert (stats["missing"], stats["extra"], stats["stale"]) == (5, 1, 1)
    assert stats["rescored"] == 20 - 5  # the re-upserted five carried their new score already
    again = reconcile_indexes(c.uow, {MEMORIES: index}, c.embedder)
    assert all(again[k] == 0 for k in MEMORIES.report_keys)
    rows = {m.id: m for m in memories}
    with c.uow() as uow:
        states = {s.memory_id: s for u in ("rd", "re") for s in uow.memory_index.index_states("default", u)}
    for user in ("rd", "re"):
        points = index.payloads("default", user)
        assert set(points) == {m.id for m in rows.values() if m.user_id == user}
        for pid, payload in points.items():
            s = states[pid]
            assert (payload["version"], payload["status"]) == (s.version, s.status)
            assert payload["score"] == pytest.approx(s.score, abs=1e-6)
            assert s.indexed_version == s.version


def test_score_push_reaches_the_payloads_in_batches(c, clean_db):
    memories = [_memory(i, days=1, user="rp") for i in range(1, 31) if i % 11]
    _load(c.uow, memories)
    _index_all(c, {"rp"})
    assert lifecycle.push_scores(c.uow, c.index(), 0.01)["pushed"] == 0  # indexing recorded the score
    recompute_scores(c.uow, NOW + timedelta(days=20), POLICY.decay)
    stats = lifecycle.push_scores(c.uow, c.index(), 0.01, batch_size=10)
    assert stats["pushed"] == len(memories) and stats["batches"] == 3
    assert lifecycle.push_scores(c.uow, c.index(), 0.01)["pushed"] == 0
    sql = _sql_rows(c)
    for pid, payload in c.index().payloads("default", "rp").items():
        assert payload["score"] == pytest.approx(sql[pid][2], abs=1e-9)


# --- the CLI: maintain and restore ------------------------------------------------------------


def test_cli_maintain_then_restore_round_trip(c, sql_settings, clean_db):
    memories = [_memory(i, days=2, user="rc") for i in range(1, 13)]
    task = _memory(99, days=2, due_in_days=-1, user="rc")  # 99 % 6: a task, due yesterday
    assert task.type is MemoryType.TASK
    _load(c.uow, [*memories, task])
    _index_all(c, {"rc"})
    c.close()  # the CLI opens the embedded index itself
    runner = CliRunner()
    env = hash_cli_env(sql_settings)
    later = (NOW + timedelta(days=365)).isoformat()

    first = runner.invoke(cli_app, ["maintain", "--now", later], env=env)
    assert first.exit_code == 0, (first.output, first.exception)
    summary = json.loads(first.output)
    assert summary["archive"]["archived"] > 0 and summary["ttl"]["expired"] >= 1, summary
    assert summary["reconcile"]["missing"] == 0 and summary["reconcile"]["stale"] == 0, summary
    second = json.loads(runner.invoke(cli_app, ["maintain", "--now", later], env=env).output)
    assert second["decay"]["changed"] == 0 and second["archive"]["archived"] == 0
    assert second["ttl"]["expired"] == 0 and second["scores"]["pushed"] == 0
    assert all(second["reconcile"][k] == 0 for k in MEMORIES.report_keys), second

    c2 = build_container(sql_settings)
    with c2.uow() as uow:
        archived = [
            m for m in uow.memories.for_user("default", "rc", None) if m.status is MemoryStatus.ARCHIVED
        ]
        assert uow.memories.get("default", "rc", task.id).status is MemoryStatus.EXPIRED  # type: ignore[union-attr]
    c2.close()
    target = archived[0]

    def restore(*args: str):
        return runner.invoke(cli_app, ["restore", *args, "--now", later], env=env)

    unknown = restore("no-such-id", "--user", "rc")
    assert isinstance(unknown.exception, CliError) and "no memory 'no-such-id' for user 'rc'" in str(
        unknown.exception
    )
    wrong_user = restore(target.id, "--user", "someone-else")
    assert isinstance(wrong_user.exception, CliError) and "someone-else" in str(wrong_user.exception)
    done = restore(target.id, "--user", "rc", "--tenant", "default")
    assert done.exit_code == 0, (done.output, done.exception)
    assert json.loads(done.output) == {"restored": target.id, "status": "active", "indexed": True}

    c3 = build_container(sql_settings)
    with c3.uow() as uow:
        back = uow.memories.get("default", "rc", target.id)
        history = [h.action for h in uow.history.for_memories("default", "rc", [target.id])]
    assert back is not None and back.status is MemoryStatus.ACTIVE and back.indexed_version == back.version
    assert history == ["archived", "restored"]
    assert c3.index().payloads("default", "rc")[target.id]["status"] == "active"
    c3.close()
    again = restore(target.id, "--user", "rc")
    assert isinstance(again.exception, CliError) and "is active; only archived" in str(again.exception)
    # The API's rule: an expired memory comes back too, its end of validity cleared.
    expired = restore(task.id, "--user", "rc")
    assert expired.exit_code == 0, (expired.output, expired.exception)
    assert json.loads(expired.output) == {"restored": task.id, "status": "active", "indexed": True}
    c4 = build_container(sql_settings)
    with c4.uow() as uow:
        revived = uow.memories.get("default", "rc", task.id)
    assert revived is not None and revived.status is MemoryStatus.ACTIVE and revived.valid_to is None
    c4.close()


# --- exactly one beat -------------------------------------------------------------------------


def test_two_beat_lock_holders_only_one_wins(redis_url):
    client = redis.Redis.from_url(redis_url)
    first, second = BeatLock(client, ttl_s=5), BeatLock(client, ttl_s=5)
    assert first.acquire()
    assert not second.acquire() and second.holder() == first.token
    assert first.renew() and not second.renew()  # only the holder extends it
    assert not second.release() and client.get(first.key) is not None  # nor frees it
    assert first.release()
    assert second.acquire() and not first.renew()  # the old holder learns it lost the lock
    second.release()
    client.close()


BEAT_TEST_QUEUE = "beat-lock-test"


def _beat_app(redis_url: str) -> Celery:
    # One entry due at every tick, sent to a queue of its own nothing consumes: what a tick sent
    # can be counted there.
    app = Celery("beat-lock-test", broker=redis_url, set_as_current=False)
    app.conf.update(
        cuemem_beat_lock={"url": redis_url, "ttl_s": 5},
        beat_schedule={
            "always-due": {
                "task": "beat-lock-test.noop",
                "schedule": timedelta(milliseconds=1),
                "options": {"queue": BEAT_TEST_QUEUE},
            }
        },
    )
    return app


def test_a_second_scheduler_refuses_to_start_and_a_lost_lock_stops_the_first(redis_url, tmp_path: Path):
    app = _beat_app(redis_url)
    first = LockedScheduler(app=app, schedule_filename=str(tmp_path / "one"))
    with pytest.raises(BeatLockHeld, match="exactly one beat"):
        LockedScheduler(app=app, schedule_filename=str(tmp_path / "two"))
    client = redis.Redis.from_url(redis_url)
    # The control: a tick holding the lock renews it and sends the due entry.
    assert wait_until(lambda: first.tick() >= 0 and client.llen(BEAT_TEST_QUEUE) > 0, 30, interval=0.01)
    first.close()  # releases: the next beat may start
    client.delete(BEAT_TEST_QUEUE)
    third = LockedScheduler(app=app, schedule_filename=str(tmp_path / "three"))
    client.set("cuemem:beat:lock", "someone-else")  # the TTL ran out and another beat took over
    with pytest.raises(SystemExit):
        third.tick()
    assert client.llen(BEAT_TEST_QUEUE) == 0, "the beat sent its due task after it lost the lock"
    third.close()
    assert client.get("cuemem:beat:lock") == b"someone-else"  # it never frees another's lock
    client.delete("cuemem:beat:lock")
    client.close()


def test_a_second_celery_beat_process_refuses_to_start(it_settings: Settings, tmp_path: Path):
    """Two real `celery beat` processes on one broker: the second exits, naming the holder."""
    import subprocess
    import sys
    import time

    from workers.runtime.embedded import settings_env

    # The lock lapses only if the first beat misses three renewals in a row (one each TTL / 3):
    # a TTL long enough that a loaded machine stalling it while the second beat starts up does not
    # hand the lock over; the renewal watched below comes within TTL / 3.
    env = settings_env(it_settings.model_copy(update={"beat_lock_ttl_s": 30}))

    celery_beat = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "beat", "-l", "INFO"]

    def beat(name: str) -> list[str]:
        return [*celery_beat, "-s", str(tmp_path / f"{name}-schedule")]

    client = redis.Redis.from_url(str(it_settings.redis_url))
    log = (tmp_path / "first.log").open("wb")
    first = subprocess.Popen(beat("first"), env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while client.get("cuemem:beat:lock") is None and time.monotonic() < deadline:
            assert first.poll() is None, (tmp_path / "first.log").read_text()
            time.sleep(0.2)
        holder = client.get("cuemem:beat:lock")
        assert holder is not None and str(first.pid).encode() in holder
        second = subprocess.run(beat("second"), env=env, capture_output=True, timeout=120)
        assert second.returncode != 0
        assert b"another beat holds the lock" in second.stdout + second.stderr
        assert first.poll() is None and client.get("cuemem:beat:lock") == holder
        # The running beat renews its lock: the TTL, falling since it was set, goes up again while
        # the holder stays the same. Watched, not timed (the wait is only a hang guard).
        lowest = [client.pttl("cuemem:beat:lock")]

        def renewed() -> bool:
            ttl = client.pttl("cuemem:beat:lock")
            assert client.get("cuemem:beat:lock") == holder, "the beat lost its lock instead of renewing it"
            if ttl > lowest[0]:
                return True
            lowest[0] = ttl
            return False

        assert wait_until(renewed, 120, interval=0.05), "the running beat never renewed its lock"
    finally:
        first.terminate()
        first.wait(30)
        log.close()
    assert client.get("cuemem:beat:lock") is None  # released on a clean stop
    client.close()


def test_recall_reinforces_through_a_real_worker_without_waiting(sql_settings: Settings, start_workers):
    """recall_for asked to reinforce answers at once; the memory.reinforce task a worker runs
    counts the use."""
    from producers.publisher import Publisher
    from service.operations.recall import recall_for
    from tests.support.services import wait_processed, wait_until

    c = build_container(sql_settings)
    with Publisher.from_settings(sql_settings) as pub:
        event = pub.publish(
            user_id="rr", session_id="s1", role="user", content="我不吃香菜", at=NOW.isoformat()
        )
    workers = start_workers(sql_settings)
    wait_processed(c, [event.event_id], workers)
    out = recall_for(c, "rr", "我不吃香菜", k=3, now=NOW + timedelta(days=2), reinforce=True)
    [item] = [i for i in out["items"] if i["content"] == "我不吃香菜"]
    assert out["trace"]["recall_id"]

    def counted() -> bool:
        with c.uow() as uow:
            m = uow.memories.get("default", "rr", item["id"])
        return m is not None and m.access_count == 1 and m.last_accessed_at == NOW + timedelta(days=2)

    assert wait_until(counted, timeout=60)
    c.close()
