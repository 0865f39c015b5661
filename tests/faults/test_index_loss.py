"""Fault: the embedded index deleted, then left stale, with and without the index worker running:
recall degrades with a note, and reconciliation or ``cuemem reindex`` restores it exactly.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import threading
import time
from typing import Any

import pytest
import redis

from producers.publisher import Publisher
from service.operations.recall import recall_for
from shared.indexing.reconcile import reconcile_indexes
from shared.indexing.reindex import rebuild_indexes
from shared.ports import IndexPoint
from shared.queues import ROUTES, IndexKind, TaskName
from shared.settings import Settings
from tests.support import faults
from tests.support.queues import assert_queues_drain
from tests.support.services import wait_processed, wait_until
from tests.support.workload import make_turns
from workers.bootstrap import build_container
from workers.runtime.processes import check_alive

DEGRADED_QUERY = "what do I like to drink"


def _notes(out: dict[str, Any]) -> list[str]:
    return [str(n) for n in out["trace"].get("notes", [])]


def test_deleted_or_stale_index_degrades_recall_and_is_restored_exactly(it_settings, start_workers):
    started = time.monotonic()
    turns = make_turns(users=3, per_user=30)
    users = sorted(turns)
    c = build_container(it_settings)
    workers = start_workers()
    with Publisher.from_settings(it_settings) as pub:
        published = [pub.publish_turn(t) for u in users for t in turns[u]]
    wait_processed(c, [p.event_id for p in published], workers)
    assert_queues_drain(it_settings.broker_url, 60)
    for w in workers:
        w.stop()
    figures = faults.check_exactly_once(c, it_settings, published, "index test ingest")
    faults.check_index_matches(c, it_settings, users, "before any damage")
    c.close()

    healthy = _recall(it_settings, users[0])
    assert not [n for n in _notes(healthy) if "unavailable" in n], _notes(healthy)
    assert any("vector" in i["explanation"]["paths"] for i in healthy["items"]), healthy["items"]

    # Deleted: both shard directories gone (their meta files beside them stay).
    data = it_settings.resolved_data_dir
    shutil.rmtree(data / "qdrant")
    shutil.rmtree(data / "qdrant-turns")
    degraded = _recall(it_settings, users[0])
    notes = _notes(degraded)
    assert any(n.startswith("vector search unavailable") and "cuemem reindex" in n for n in notes), notes
    assert any(n.startswith("conversation-log search unavailable") for n in notes), notes
    # What Postgres can answer still comes back: the cue path finds the port by its number.
    cue = _recall(it_settings, users[0], "生产环境部署端口是多少 1002")
    assert cue["items"], cue

    # Reconciliation rebuilds both indexes from Postgres, exactly.
    c = build_container(it_settings)
    dim = c.embedder.dim
    repaired = reconcile_indexes(c.uow, c.indexes(), c.embedder)
    expected_memories, expected_turns, _ = faults.postgres_index_state(c, it_settings, users)
    assert repaired["missing"] == sum(len(v) for v in expected_memories.values()), repaired
    assert repaired["turns_missing"] == sum(len(v) for v in expected_turns.values()), repaired
    again = reconcile_indexes(c.uow, c.indexes(), c.embedder)
    drift = {
        k: v for k, v in again.items() if k not in ("users", "points", "turns_users", "turns_points") and v
    }
    assert not drift, f"a second reconciliation still found drift: {again}"
    c.close()
    faults.check_index_matches(c, it_settings, users, "after reconciliation of a deleted index")

    # Stale: points lost and a point of no memory added behind Postgres's back.
    c = build_container(it_settings)
    victim = users[1]
    lost = sorted(expected_memories[victim])[:3]
    lost_turns = sorted(expected_turns[victim])[:4]
    c.index().delete(it_settings.tenant_id, victim, lost)
    c.index(IndexKind.TURNS).delete(it_settings.tenant_id, victim, lost_turns)  # type: ignore[union-attr]
    bogus = IndexPoint(
        id="00000000-0000-4000-8000-000000000001",
        tenant_id=it_settings.tenant_id,
        user_id=victim,
        vector=[0.1] * dim,
        payload={"status": "active", "type": "fact", "score": 1.0, "version": 1},
    )
    c.index().upsert([bogus])
    c.close()
    with pytest.raises(AssertionError):
        faults.check_index_matches(c, it_settings, users, "stale on purpose")
    # A lost ``memory.sync_index``: the point is there, with the id right and the status and version
    # of before. The check compares those too, not only the ids.
    c = build_container(it_settings)
    old = sorted(expected_memories[victim])[3]
    version = expected_memories[victim][old][1]
    c.index().set_payload(
        it_settings.tenant_id, victim, {old: {"status": "superseded", "version": version - 1}}
    )
    c.close()
    with pytest.raises(AssertionError, match=r"stale 1 .*superseded"):
        faults.check_index_matches(c, it_settings, users, "stale status on purpose")
    c = build_container(it_settings)
    repaired_stale = reconcile_indexes(c.uow, c.indexes(), c.embedder)
    stale_counts = {k: repaired_stale[k] for k in ("missing", "extra", "stale", "turns_missing")}
    assert stale_counts == {"missing": 3, "extra": 1, "stale": 1, "turns_missing": 4}, repaired_stale
    c.close()
    faults.check_index_matches(c, it_settings, users, "after reconciliation of a stale index")

    # `cuemem reindex` from a deleted index: the same ids again.
    shutil.rmtree(data / "qdrant")
    shutil.rmtree(data / "qdrant-turns")
    c = build_container(it_settings)
    rebuilt = rebuild_indexes(c.uow, c.indexes(), c.embedder)
    c.close()
    figures |= faults.check_index_matches(c, it_settings, users, "after reindex")
    restored = _recall(it_settings, users[0])
    assert not [n for n in _notes(restored) if "unavailable" in n], _notes(restored)
    assert [i["id"] for i in restored["items"]] == [i["id"] for i in healthy["items"]], (
        "recall after the rebuild differs from recall before the damage"
    )
    faults.report(
        "index_deleted_or_stale",
        published,
        started,
        reconcile_after_delete={k: repaired[k] for k in ("missing", "turns_missing")},
        reconcile_after_stale=stale_counts,
        reindex=rebuilt,
        degraded_notes=notes,
        **figures,
    )


def _edge_meta(settings: Settings) -> dict[str, dict[str, Any]]:
    """Both embedded indexes' meta files (read while the index worker runs: plain JSON files)."""
    out = {}
    for name in ("qdrant", "qdrant-turns"):
        path = settings.resolved_data_dir / f"{name}.meta.json"
        with contextlib.suppress(FileNotFoundError, ValueError):  # ValueError: mid-replace
            out[name] = json.loads(path.read_text())
    return out


def _reconciliations(settings: Settings) -> list[dict[str, Any]]:
    """What each ``memory.reconcile`` the index worker ran repaired (its log line)."""
    import ast

    marker = "memory.reconcile: "
    log = (settings.resolved_data_dir / "logs" / "cuemem-index.log").read_text(errors="replace")
    return [
        ast.literal_eval(line[line.index(marker) + len(marker) :])
        for line in log.splitlines()
        if marker + "{" in line
    ]


def test_index_deleted_under_the_running_index_worker_degrades_recall_and_is_rebuilt_exactly(
    it_settings, start_workers
):
    started = time.monotonic()
    users, per_user = (12, 50) if faults.LONG else (4, 30)
    turns = make_turns(users=users, per_user=per_user)
    total = users * per_user
    names = sorted(turns)
    c = build_container(it_settings)
    workers = start_workers()
    _, owner = workers  # the pipeline worker and the index owner
    ingest = faults.Ingest(it_settings, turns, pace_s=0.05).start()
    assert wait_until(lambda: faults.done_count(c) >= total // 3, 240), (
        f"{faults.done_count(c)} of {total} done"
    )
    healthy = recall_for(c, names[0], DEGRADED_QUERY, k=5, reinforce=False)  # loads the query model too
    assert not [n for n in _notes(healthy) if "unavailable" in n], _notes(healthy)

    # Both shard directories deleted while the index worker holds them and ingest goes on. The
    # owner is paused meanwhile so that the recall's search is queued before it notices anything:
    # it takes searches first, so the search meets the loss, not the repair that follows it.
    data = it_settings.resolved_data_dir
    os.killpg(owner.process.pid, signal.SIGSTOP)
    try:
        shutil.rmtree(data / "qdrant")
        shutil.rmtree(data / "qdrant-turns")
        done_at_delete = faults.done_count(c)
        degraded: dict[str, Any] = {}
        asking = threading.Thread(
            target=lambda: degraded.update(recall_for(c, names[0], DEGRADED_QUERY, k=5, reinforce=False))
        )
        asking.start()
        queue = redis.Redis.from_url(it_settings.broker_url)
        try:
            assert wait_until(lambda: queue.llen(ROUTES[TaskName.SEARCH].value) > 0, 30), "no search was sent"
        finally:
            queue.close()
    finally:
        os.killpg(owner.process.pid, signal.SIGCONT)
    asking.join(60)
    assert not asking.is_alive(), "the recall did not come back"
    notes = _notes(degraded)
    assert any(n.startswith("vector search unavailable") and "vanished" in n for n in notes), notes
    assert done_at_delete < total, "every event was done before the deletion; the test proved nothing"

    # Ingest goes on: everything recorded and done, no dead letter, no worker restarted.
    published = ingest.join(timeout=300)
    ids = [p.event_id for p in published]
    wait_processed(c, ids, workers, timeout=600 if faults.LONG else 300)
    assert_queues_drain(it_settings.broker_url, 90)
    check_alive(workers)
    figures = faults.check_exactly_once(c, it_settings, published, "index deleted under the index worker")

    # The owner asked for a reconciliation when it noticed; once it ran, both indexes are whole
    # again and recall answers from them without a note.
    assert wait_until(lambda: not any("lost" in m for m in _edge_meta(it_settings).values()), 120), (
        f"the indexes still say they are incomplete: {_edge_meta(it_settings)}"
    )
    restored = recall_for(c, names[0], DEGRADED_QUERY, k=5, reinforce=False)
    assert not [n for n in _notes(restored) if "unavailable" in n], _notes(restored)
    assert any("vector" in i["explanation"]["paths"] for i in restored["items"]), restored["items"]
    for w in workers:
        w.stop()
    assert [w.process.returncode for w in workers] == [0, 0], "a worker did not stop cleanly"
    log = faults.log_counts(
        it_settings, lost="lost its files under this process", retries="Retry in", dead="dead-lettered"
    )
    assert log["dead"] == 0
    figures |= faults.check_index_matches(
        c, it_settings, names, "after the index worker rebuilt its deleted index"
    )
    repairs = _reconciliations(it_settings)
    assert repairs, "the index worker never reconciled"

    # `cuemem reindex` (workers stopped: it runs in place) rebuilds the same ids.
    c.close()
    c = build_container(it_settings)
    rebuilt = rebuild_indexes(c.uow, c.indexes(), c.embedder)
    c.close()
    faults.check_index_matches(c, it_settings, names, "after reindex")
    faults.report(
        "index_deleted_under_running_owner",
        published,
        started,
        done_at_delete=done_at_delete,
        degraded_notes=[n for n in notes if "unavailable" in n],
        losses_logged=log["lost"],
        retries=log["retries"],
        reconciliations=[
            {k: r[k] for k in ("missing", "extra", "stale", "turns_missing", "turns_extra") if k in r}
            for r in repairs
        ],
        reindex=rebuilt,
        **figures,
    )


def _recall(settings: Settings, user: str, query: str = DEGRADED_QUERY) -> dict[str, Any]:
    # A fresh container each time: it takes the index lock only for this call (no worker runs).
    c = build_container(settings)
    try:
        return recall_for(c, user, query, k=5, reinforce=False)
    finally:
        c.close()
