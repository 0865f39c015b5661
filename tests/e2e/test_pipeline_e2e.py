"""End to end on real parts: producer → Redis broker → Celery worker processes → Postgres + Qdrant.

Workers are separate OS processes started with the same code path as production; nothing runs
eagerly. The embedded Qdrant engine is owned by the index worker; the test opens it only after
the workers stopped.
"""

from __future__ import annotations

import json
import threading
from collections import Counter, defaultdict
from datetime import UTC, datetime

import pytest
import redis

from producers.publisher import Publisher
from shared.events import InvalidEvent
from shared.models import MemoryStatus
from shared.queues import ROUTES, TaskName
from shared.storage import EMBEDDING_MODEL_KEY
from tests.support.queues import assert_queues_drain, beat_sweep, broker_sender
from tests.support.services import memory_snapshot, table_counts, wait_processed, wait_until
from tests.support.workload import BASE, make_turns, publish_conversation
from workers.bootstrap import build_container
from workers.index.edge import EdgeVectorIndex


def publish_threaded(pub: Publisher, turns: dict[str, list[dict]], threads: int = 4) -> list:
    """Each thread publishes whole users, so a conversation's publish order is known."""
    users = sorted(turns)
    results: list = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def run(mine: list[str]) -> None:
        try:
            for user in mine:
                for t in turns[user]:
                    p = pub.publish_turn(t)
                    with lock:
                        results.append(p)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(users[i::threads],)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors, errors
    return results


def index_ids_after_stop(settings, users) -> dict[str, set[str]]:
    index = EdgeVectorIndex(settings.resolved_data_dir / "qdrant")
    try:
        return {u: index.ids(settings.tenant_id, u) for u in users}
    finally:
        index.close()


def test_thousand_turns_exactly_once_in_seq_order_and_republish_changes_nothing(it_settings, start_workers):
    turns = make_turns(users=20, per_user=50)
    c = build_container(it_settings)
    workers = start_workers()
    with Publisher.from_settings(it_settings) as pub:
        published = publish_threaded(pub, turns)
    assert len(published) == 1000
    assert len({p.event_id for p in published}) == 1000

    state = wait_processed(c, [p.event_id for p in published], workers)
    assert state.counts == Counter({"done": 1000})
    assert_queues_drain(it_settings.broker_url, 60)  # index syncs after resolve
    counts = table_counts(c)
    assert counts["events"] == 1000 and counts["event_receipts"] == 1000 and counts["dead_letters"] == 0

    with c.uow() as uow:
        for user, user_turns in turns.items():
            by_session: dict[str, list[dict]] = defaultdict(list)
            for t in user_turns:
                by_session[t["session_id"]].append(t)
            for session, expected in by_session.items():
                timeline = uow.events.timeline("default", user, session)
                assert [e.event.seq for e in timeline] == list(range(1, len(expected) + 1))
                assert [e.event.content for e in timeline] == [t["content"] for t in expected]
                assert all(e.stage == "done" for e in timeline)
        memories = {u: uow.memories.for_user("default", u, [MemoryStatus.ACTIVE]) for u in turns}
        stored_rows = {u: uow.memories.for_user("default", u, None) for u in turns}
    assert all(m.status is not MemoryStatus.PENDING for rows in stored_rows.values() for m in rows)
    assert sum(len(m) for m in memories.values()) > 100  # most topics are memorable
    for user_memories in memories.values():
        for m in user_memories:
            ids_ = [s["event_id"] for s in m.sources]
            assert len(ids_) == len(set(ids_)), "an event counted twice"
        hashes = [(m.type, m.content_hash) for m in user_memories]
        assert len(hashes) == len(set(hashes)), "an exact repeat became a second memory"
    before = memory_snapshot(c)

    # Re-publishing every event (same ids) changes nothing.
    with Publisher.from_settings(it_settings) as pub:
        again = publish_threaded(pub, turns)
    wait_processed(c, [p.event_id for p in again], workers)
    assert_queues_drain(it_settings.broker_url, 60)
    assert table_counts(c) == counts
    assert memory_snapshot(c) == before

    for w in workers:
        w.stop()
    stored = index_ids_after_stop(it_settings, list(turns))
    for user, rows in stored_rows.items():
        # Superseded memories stay in the index too (with their status), so `--all` can find them.
        assert stored[user] == {m.id for m in rows}, f"Postgres and Qdrant disagree for {user}"
    c.close()


def test_out_of_order_delivery_gives_a_seq_ordered_timeline(it_settings, start_workers):
    c = build_container(it_settings)
    contents = [f"第{i}步：部署端口改成 {8000 + i}" for i in range(1, 11)]
    with Publisher.from_settings(it_settings) as pub:
        reversed_turns = [(seq, contents[seq - 1]) for seq in reversed(range(1, 11))]
        ids = publish_conversation(pub, "ooo", "s", reversed_turns, numbered=True)
        # A replayed log moves the counter forward: the next turn takes seq 11.
        nxt = pub.publish(user_id="ooo", session_id="s", role="user", content="然后上线")
    assert nxt.seq == 11
    workers = start_workers()
    wait_processed(c, [*ids, nxt.event_id], workers)
    with c.uow() as uow:
        timeline = uow.events.timeline("default", "ooo", "s")
    assert [e.event.seq for e in timeline] == list(range(1, 12))
    assert [e.event.content for e in timeline][:10] == contents
    c.close()


def test_conflicting_seq_is_rejected_and_reported(it_settings, start_workers):
    c = build_container(it_settings)
    with Publisher.from_settings(it_settings) as pub:
        first = pub.publish(
            user_id="u", session_id="s", role="user", content="我住杭州", seq=1, event_id="first"
        )
        same = pub.publish(
            user_id="u", session_id="s", role="user", content="我住杭州", seq=1, event_id="same"
        )
        clash = pub.publish(
            user_id="u", session_id="s", role="user", content="我住上海", seq=1, event_id="clash"
        )
    workers = start_workers()
    state = wait_processed(c, [first.event_id, same.event_id, clash.event_id], workers)
    # Workers run concurrently: either of the two identical turns may be recorded first.
    assert sorted([state.states["first"], state.states["same"]]) == ["done", "duplicate"]
    winner = "first" if state.states["first"] == "done" else "same"
    assert state.states["clash"] == "rejected"
    assert (
        f"seq 1 of conversation u/s already holds different content (event {winner})"
        in state.reasons["clash"]
    )
    with c.uow() as uow:
        assert [e.event.content for e in uow.events.timeline("default", "u", "s")] == ["我住杭州"]
    c.close()


def test_malformed_events_are_rejected_with_reasons_and_valid_ones_land(it_settings, start_workers):
    c = build_container(it_settings)
    with Publisher.from_settings(it_settings) as pub:
        with pytest.raises(InvalidEvent, match="content: must not be empty"):
            pub.publish(user_id="u", session_id="s", role="user", content="   ")
        with pytest.raises(InvalidEvent, match="role: 'robot' is not one of"):
            pub.publish(user_id="u", session_id="s", role="robot", content="hi")
        batch = pub.publish_batch(
            [
                {"user_id": "u", "session_id": "s", "role": "user", "content": "我不吃香菜"},
                {"user_id": "", "session_id": "s", "role": "user", "content": "x"},
                {
                    "user_id": "u",
                    "session_id": "s",
                    "role": "user",
                    "content": "I live in Berlin",
                    "at": "nope",
                },
                {"user_id": "u", "session_id": "s", "role": "user", "content": "型号 X200，故障码 E42"},
            ]
        )
    assert [i for i, _ in batch.errors] == [1, 2]
    assert "user_id: must not be empty" in str(batch.errors[0][1])
    assert "at: 'nope' is not an ISO 8601 timestamp" in str(batch.errors[1][1])

    # Messages that bypass the producer (another client, a corrupted queue) are checked again.
    sender = broker_sender(it_settings.broker_url)
    bad = [
        {
            "event_id": "raw-bad-1",
            "user_id": "u",
            "session_id": "s",
            "seq": 9,
            "role": "user",
            "content": "\x00",
        },
        {
            "event_id": "raw-bad-2",
            "user_id": "u/../x",
            "session_id": "s",
            "seq": 9,
            "role": "user",
            "content": "x",
        },
        {
            "event_id": "raw-bad-3",
            "user_id": "u",
            "session_id": "s",
            "seq": -1,
            "role": "user",
            "content": "x",
            "metadata": {"a": "b"},
        },
    ]
    for m in bad:
        sender.send_task(TaskName.RECORD.value, args=[m], queue=ROUTES[TaskName.RECORD].value)
    sender.send_task(
        TaskName.RECORD.value, args=[{"user_id": "no id at all"}], queue=ROUTES[TaskName.RECORD].value
    )
    sender.send_task(TaskName.EXTRACT.value, args=["no-such-event"], queue=ROUTES[TaskName.EXTRACT].value)

    workers = start_workers()
    ids = [p.event_id for p in batch.published]
    state = wait_processed(c, [*ids, "raw-bad-1", "raw-bad-2", "raw-bad-3"], workers)
    assert [state.states[i] for i in ids] == ["done", "done"]
    assert (
        state.states["raw-bad-1"] == "rejected"
        and "content: contains a NUL character" in state.reasons["raw-bad-1"]
    )
    assert "user_id: 'u/../x' has characters outside" in state.reasons["raw-bad-2"]
    assert "seq: must be between 1 and 2^53 - 1" in state.reasons["raw-bad-3"]

    def dead_letters() -> list[tuple[str, str]]:
        from sqlalchemy import text

        with c.uow() as uow:
            return [
                tuple(r)
                for r in uow.session.execute(text("SELECT task_name, reason FROM dead_letters ORDER BY id"))
            ]

    assert wait_until(lambda: len(dead_letters()) == 2, 30), dead_letters()
    letters = dict(dead_letters())
    assert "user_id: must not be empty" not in letters["memory.record"]  # its own reason, not a generic one
    assert (
        "InvalidEvent" in letters["memory.record"]
        and "event_id" not in letters["memory.record"].split(":")[0]
    )
    assert "EventVanished" in letters["memory.extract"] and "no-such-event" in letters["memory.extract"]
    for w in workers:
        assert w.process.poll() is None, "a bad message crashed a worker"
    c.close()


def test_a_record_message_the_broker_lost_is_sent_again_by_the_sweep(it_settings, start_workers):
    """Kombu's Redis transport pops a message before noting it unacked: a worker killed in between
    loses it. The publish ledger keeps the turn until its record committed; the sweep re-sends it."""
    c = build_container(it_settings)
    with Publisher.from_settings(it_settings) as pub:
        kept = pub.publish(user_id="u", session_id="s", role="user", content="生产环境部署端口是8443")
        lost = pub.publish(user_id="u", session_id="s", role="user", content="我不吃香菜，点餐时记得提醒")
    client = redis.Redis.from_url(it_settings.broker_url)
    queue = ROUTES[TaskName.RECORD].value
    assert client.llen(queue) == 2
    client.lpop(queue)  # kombu consumes from the right: the left end is the newest, `lost`
    client.close()
    workers = start_workers()
    state = wait_processed(c, [kept.event_id], workers, timeout=60)
    assert state.states[kept.event_id] == "done"
    with c.uow() as uow:
        assert uow.events.get(lost.event_id) is None
    assert c.ledger is not None and c.ledger.pending() == 1
    beat_sweep(it_settings, older_than_s=0)()
    state = wait_processed(c, [kept.event_id, lost.event_id], workers, timeout=60)
    assert state.counts == Counter({"done": 2})
    assert c.ledger.pending() == 0
    c.close()


def test_sigkilled_worker_loses_nothing_and_duplicates_nothing(redelivery_settings, start_workers):
    it_settings = redelivery_settings
    turns = make_turns(users=6, per_user=50)
    c = build_container(it_settings)
    with Publisher.from_settings(it_settings) as pub:
        published = publish_threaded(pub, turns, threads=2)
    ids = [p.event_id for p in published]
    workers = start_workers(it_settings)

    def done_count() -> int:
        with c.uow() as uow:
            return sum(1 for s in uow.events.stages(ids).values() if s == "done")

    assert wait_until(lambda: done_count() >= 40, 120), "pipeline made no progress"
    for w in workers:
        w.kill()  # SIGKILL the whole worker process group mid-run
    assert done_count() < len(ids), "the run finished before the kill; the test proved nothing"

    workers = start_workers(it_settings)
    # As beat would: the sweep re-drives what a killed worker lost in kombu's Redis transport
    # (a message popped but not yet noted as unacked). Older than the visibility timeout, so
    # messages Redis will hand out again are left to it.
    sweep = beat_sweep(it_settings, older_than_s=it_settings.visibility_timeout_s + 5)
    state = wait_processed(c, ids, workers, timeout=300, sweep=sweep)
    assert state.counts == Counter({"done": len(ids)}), dict(state.reasons)
    assert wait_until(lambda: c.ledger is not None and c.ledger.pending() == 0, 30), "turns left unsettled"
    counts = table_counts(c)
    assert counts["events"] == len(ids) and counts["event_receipts"] == len(ids)
    with c.uow() as uow:
        all_memories = [m for u in turns for m in uow.memories.for_user("default", u, None)]
    assert all(m.status is not MemoryStatus.PENDING for m in all_memories), (
        "a half-written (pending) memory remained"
    )
    for m in all_memories:
        ids_ = [s["event_id"] for s in m.sources]
        assert len(ids_) == len(set(ids_)), "an event was applied twice"
    active = [m for m in all_memories if m.status is MemoryStatus.ACTIVE]
    hashes = [(m.user_id, m.content_hash) for m in active]
    assert len(hashes) == len(set(hashes)), "an exact repeat became a second memory"
    assert_queues_drain(it_settings.broker_url, 60)
    for w in workers:
        w.stop()
    stored = index_ids_after_stop(it_settings, list(turns))
    for user in turns:
        assert stored[user] == {m.id for m in all_memories if m.user_id == user}
    c.close()


def test_poison_message_is_dead_lettered_after_the_delivery_cap(it_settings, start_workers):
    """A message whose worker died on every delivery is parked, not retried forever."""
    c = build_container(it_settings)
    client = redis.Redis.from_url(it_settings.redis_url)
    task_id = "poison-task-1"
    # As if five earlier deliveries each killed their worker before finishing.
    client.set(f"cuemem:deliveries:{task_id}:0", it_settings.max_deliveries)
    sender = broker_sender(it_settings.broker_url)
    message = {
        "event_id": "poison-1",
        "user_id": "u",
        "session_id": "s",
        "seq": 1,
        "role": "user",
        "content": "我不吃香菜",
        "at": BASE.isoformat(),
    }
    sender.send_task(
        TaskName.RECORD.value, args=[message], queue=ROUTES[TaskName.RECORD].value, task_id=task_id
    )
    workers = start_workers()
    state = wait_processed(c, ["poison-1"], workers, timeout=60)
    assert state.states["poison-1"] == "failed"
    assert f"delivered {it_settings.max_deliveries + 1} times" in state.reasons["poison-1"]
    assert table_counts(c)["events"] == 0
    client.close()
    c.close()


def test_embedding_model_change_is_refused_with_reindex_hint(it_settings, start_workers):
    c = build_container(it_settings)
    with c.uow() as uow:
        uow.meta.set(EMBEDDING_MODEL_KEY, "some-older-model")
        uow.commit()
    with Publisher.from_settings(it_settings) as pub:
        p = pub.publish(user_id="u", session_id="s", role="user", content="生产环境部署端口是8443")
    workers = start_workers()
    state = wait_processed(c, [p.event_id], workers, timeout=60)
    assert state.states[p.event_id] == "failed"
    assert "cuemem reindex" in state.reasons[p.event_id]
    c.close()


def test_read_your_writes_before_any_worker_runs(it_settings):
    from shared.recall.cascade import recall
    from shared.recall.request import RecallRequest

    c = build_container(it_settings)
    with Publisher.from_settings(it_settings) as pub:
        pub.publish(user_id="rw", session_id="s1", role="user", content="生产环境部署端口是8443")
    with c.uow() as uow:
        result = recall(
            uow,
            RecallRequest("default", "rw", "部署端口是多少", now=datetime.now(UTC)),
            embedder=None,
            index=None,
            working_memory=c.working_memory,
        )
    assert result.stage == "ranked"
    assert [i.content for i in result.items] == ["生产环境部署端口是8443"]
    assert result.items[0].type == "working" and result.items[0].explanation["paths"] == ["working"]
    # No worker ran: nothing is in Postgres yet.
    assert table_counts(c)["events"] == 0
    c.close()


def test_recall_searches_through_the_index_worker_while_it_owns_the_index(e5_settings, start_workers):
    it_settings = e5_settings  # recall by meaning
    c = build_container(it_settings)
    with Publisher.from_settings(it_settings) as pub:
        ids = [
            pub.publish(user_id="v", session_id="s", role="user", content=text).event_id
            for text in ["I prefer oat milk lattes in the morning", "我的扫地机器人型号 X200，故障码 E42"]
        ]
    workers = start_workers(it_settings)
    wait_processed(c, ids, workers)
    from service.operations.recall import recall_for

    out = recall_for(c, "v", "what should I drink", k=2, now=datetime.now(UTC))
    assert out["trace"]["vector_backend"] == "qdrant-edge (via the index worker)"
    assert out["items"] and out["items"][0]["content"].startswith("I prefer oat milk"), json.dumps(
        out["items"], ensure_ascii=False
    )
    assert "vector" in out["items"][0]["explanation"]["paths"]
    json.dumps(out)  # the CLI contract is JSON
    c.close()
