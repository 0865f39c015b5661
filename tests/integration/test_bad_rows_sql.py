"""Every sweep survives one bad row (issue 18): a turn stored at year 10000, a memory whose last use
is at infinity or whose type no code knows, an event at a stage the pipeline does not have, planted
in Postgres by SQL among good rows. Each sweep skips the bad row, records it (a log line with its
ids and, for a skipped unit, a dead letter an operator lists), finishes, and the good rows are
processed; the stalled sweep parks an event it re-drove too often."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from service.operations import inspection
from shared.events import EventLimits, TurnPublished, validate_turn
from shared.indexing.reconcile import reconcile_indexes
from shared.ingest.resume import resume_stalled
from shared.lifecycle import sweeps as lifecycle
from shared.lifecycle.maintenance import consolidate, recompute_scores
from shared.lifecycle.sweeps import LifecyclePolicy
from shared.models import Memory, MemoryStatus, MemoryType
from shared.queues import TaskName
from shared.scoring import DecayPolicy
from shared.settings import Settings
from tests.support.services import cuemem_in_process, hash_cli_env
from workers.bootstrap import Container
from workers.db.out_of_range import LATEST

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


@pytest.fixture
def sql_settings(sql_settings: Settings) -> Settings:
    return sql_settings.model_copy(update={"index_turns": True})  # and the turns' index


def _turn(user: str, seq: int) -> TurnPublished:
    return validate_turn(
        {
            "event_id": f"e-{user}-{seq}",
            "user_id": user,
            "session_id": "s1",
            "seq": seq,
            "role": "user",
            "content": f"turn {seq} of {user} about port {8000 + seq}",
            "at": (NOW + timedelta(minutes=seq)).isoformat(),
        },
        EventLimits(),
    )


def _record(c: Container, turns: list[TurnPublished], stage: str = "done") -> None:
    with c.uow() as uow:
        for t in turns:
            assert uow.events.insert_if_absent(t, stage)
            [vector] = c.embedder.embed_passages([t.content])
            uow.turn_index.set_vector(t.event_id, vector, c.embedder.model_name)
        uow.commit()


def _memory(i: int, user: str, *, days: float = 1.0) -> Memory:
    at = NOW - timedelta(days=days)
    return Memory(
        id=f"00000000-0000-4000-8000-{i:012d}",
        tenant_id="default",
        user_id=user,
        type=MemoryType.EPISODIC,
        content=f"went to the climbing gym, visit {i}",
        importance=3.0,
        status=MemoryStatus.ACTIVE,
        created_at=at,
        updated_at=at,
        last_accessed_at=at,
        access_count=0,
        score=100.0,  # far from its real score: a recompute must rewrite it
        sources=[{"event_id": f"e{i}", "session_id": "s", "seq": i, "at": at.isoformat()}],
        content_hash=f"h{i}",
        embedding=[float((i * k) % 7 + 1) for k in range(1, 17)],
        embedding_model="hash-v1-16",
        cues=["t:climbing"],
        tags=["climbing"],
    )


def _add(c: Container, memories: list[Memory]) -> None:
    with c.uow() as uow:
        for m in memories:
            uow.memories.add(m)
        uow.commit()


def _sql(c: Container, statement: str, **params) -> list:
    with c.uow() as uow:
        result = uow.session.execute(text(statement), params)  # type: ignore[attr-defined]
        rows = result.all() if result.returns_rows else []
        uow.commit()
    return rows


def _letters(c: Container) -> list[tuple[str, str | None, list, str]]:
    rows = _sql(c, "SELECT task_name, event_id, args, reason FROM dead_letters ORDER BY id")
    return [(r.task_name, r.event_id, r.args, r.reason) for r in rows]


def test_reconcile_repairs_every_other_user_past_a_bad_turn_and_a_bad_memory(c, clean_db):
    users = ["alice", "bob", "carol"]
    _record(c, [_turn(u, s) for u in users for s in (1, 2)])
    _add(c, [_memory(1, "alice"), _memory(2, "carol"), _memory(3, "dave")])
    # bob: a turn at year 10000 (what "9999-12-31T20:00:00-14:00" was stored as); carol: a memory
    # of a type no code knows.
    _sql(c, "UPDATE events SET at = '10000-01-01T09:59:00+00' WHERE event_id = 'e-bob-1'")
    _sql(c, "UPDATE memories SET type = 'bogus' WHERE user_id = 'carol'")

    report = reconcile_indexes(c.uow, c.indexes(), c.embedder)

    # Memories: alice and dave repaired, carol skipped; turns: all three users' six points (bob's
    # year-10000 turn read at Python's last instant).
    assert (report["users"], report["skipped"], report["missing"]) == (2, 1, 2)
    assert (report["turns_users"], report["turns_missing"]) == (3, 6) and "turns_skipped" not in report
    [(task, event_id, args, reason)] = _letters(c)
    assert (task, event_id, args) == (TaskName.RECONCILE.value, None, ["default", "carol", "memory"])
    assert "bogus" in reason
    # The next run finds no drift and skips carol again, recording her again.
    again = reconcile_indexes(c.uow, c.indexes(), c.embedder)
    assert (again["missing"], again["turns_missing"], again["skipped"]) == (0, 0, 1)


def test_the_timeline_shows_a_turn_of_year_10000_at_the_last_instant(c, sql_settings, clean_db):
    _record(c, [_turn("bob", 1), _turn("bob", 2)])
    _sql(c, "UPDATE events SET at = '10000-01-01T09:59:00+00' WHERE event_id = 'e-bob-2'")
    _sql(c, "UPDATE events SET at = '-infinity' WHERE event_id = 'e-bob-1'")
    shown = inspection.timeline(c, "default", "bob")
    assert [(t["event_id"], t["at"]) for t in shown["turns"]] == [
        ("e-bob-1", "0001-01-01T00:00:00+00:00"),
        ("e-bob-2", LATEST.isoformat()),
    ]
    out = cuemem_in_process(
        sql_settings, "timeline", "--user", "bob", "--session", "s1", "--json", **hash_cli_env(sql_settings)
    )
    assert out.returncode == 0, out.stderr
    assert [t["at"] for t in json.loads(out.stdout)] == ["0001-01-01T00:00:00+00:00", LATEST.isoformat()]


def test_decay_and_archive_go_past_a_memory_last_used_at_infinity(c, clean_db, caplog):
    _add(c, [_memory(1, "alice", days=400), _memory(2, "alice", days=400), _memory(3, "bob", days=400)])
    _sql(c, "UPDATE memories SET last_accessed_at = 'infinity' WHERE id LIKE '%000000000002'")
    policy = LifecyclePolicy(decay=DecayPolicy(base=1.5))

    stats = recompute_scores(c.uow, NOW, policy.decay)
    archived, touched = lifecycle.archive_stale(c.uow, NOW, policy)

    assert stats["changed"] == 2
    assert archived == {"archived": 2} and touched == [("default", "alice"), ("default", "bob")]
    rows = {r.id[-1]: (r.status, r.score) for r in _sql(c, "SELECT id, status, score FROM memories")}
    assert rows["2"] == ("active", 100.0)  # left alone
    assert rows["1"][0] == rows["3"][0] == "archived" and rows["1"][1] < 100.0
    assert "000000000002" in caplog.text  # named in the log


def test_consolidation_goes_past_a_user_with_a_bad_memory(c, clean_db):
    memories = [
        _memory(i, user, days=i % 5 + 0.5)
        for user, first in (("alice", 10), ("carol", 20))
        for i in range(first, first + 6)
    ]
    _add(c, memories)
    # Sources that are not objects: the grouping reads each one's event id.
    _sql(c, "UPDATE memories SET sources = '[42]'::jsonb WHERE id LIKE '%000000000021'")

    stats, touched = consolidate(c.uow, c.embedder, NOW)

    assert stats["skipped"] == 1 and stats["created"] >= 1
    assert touched == [("default", "alice")]
    [(task, _event, args, reason)] = _letters(c)
    assert (task, args) == (TaskName.CONSOLIDATE.value, ["default", "carol"]) and "TypeError" in reason


def test_the_stalled_sweep_parks_an_event_after_its_redrive_cap_and_then_leaves_it(c, clean_db):
    _record(c, [_turn("alice", 1), _turn("bob", 1), _turn("carol", 1)], stage="recorded")
    _sql(c, "UPDATE events SET stage = 'mangled' WHERE event_id = 'e-carol-1'")
    later = datetime.now(UTC) + timedelta(hours=1)

    def sweep() -> list[tuple[str, tuple]]:
        with c.uow() as uow:
            out = resume_stalled(uow, later, c.ledger, max_redrives=2)
            uow.commit()
        return [(f.task, f.args) for f in out]

    extract = TaskName.EXTRACT.value
    # The sweep sends and parks events by their pipeline key (tenant/event id).
    # carol's unknown stage is parked at once; alice and bob are sent on twice.
    assert sweep() == [(extract, ("default/e-alice-1",)), (extract, ("default/e-bob-1",))]
    assert sweep() == [(extract, ("default/e-alice-1",)), (extract, ("default/e-bob-1",))]
    _sql(c, "UPDATE events SET stage = 'extracted' WHERE event_id = 'e-alice-1'")  # alice moved on
    # bob's third time is over the cap: parked; alice counts anew at her new stage.
    assert sweep() == [(TaskName.EMBED.value, ("default/e-alice-1",))]
    assert sweep() == [(TaskName.EMBED.value, ("default/e-alice-1",))]
    letters = _letters(c)
    assert [(t, e, a) for t, e, a, _ in letters] == [
        (TaskName.RESUME_STALLED.value, "default/e-carol-1", ["default/e-carol-1"]),
        (extract, "default/e-bob-1", ["default/e-bob-1"]),
    ]
    assert "re-driven 2 times at stage recorded" in letters[1][3]
    # A replay (replayed_at set) gives bob back to the sweep with a fresh count.
    _sql(c, "UPDATE dead_letters SET replayed_at = now() WHERE event_id = 'default/e-bob-1'")
    assert (extract, ("default/e-bob-1",)) in sweep()
