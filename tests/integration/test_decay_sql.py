"""The SQL score recompute and the Python formula are one definition: they must agree."""

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from shared.lifecycle import maintenance
from shared.models import Memory, MemoryStatus, MemoryType
from shared.scoring import DecayPolicy, score
from workers.bootstrap import build_container

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def _memory(
    i: int, memory_type: MemoryType, days: float, accesses: int, status=MemoryStatus.ACTIVE
) -> Memory:
    at = NOW - timedelta(days=days)
    return Memory(
        id=f"00000000-0000-0000-0000-{i:012d}",
        tenant_id="default",
        user_id=f"u{i % 3}",
        type=memory_type,
        content=f"memory {i}",
        importance=(i % 11),
        status=status,
        created_at=at,
        updated_at=at,
        last_accessed_at=at,
        access_count=accesses,
        score=0.0,
        sources=[{"event_id": f"e{i}", "session_id": "s", "seq": 1, "at": at.isoformat()}],
        content_hash=f"h{i}",
    )


def test_sql_recompute_agrees_with_python_and_is_idempotent(clean_db, it_settings):
    c = build_container(it_settings)
    types = list(MemoryType)
    memories = [_memory(i, types[i % len(types)], days=i * 1.7, accesses=i % 5) for i in range(1, 121)]
    memories.append(_memory(999, MemoryType.FACT, 3, 0, status=MemoryStatus.PENDING))
    with c.uow() as uow:
        for m in memories:
            uow.memories.add(m)
        uow.commit()
    policy = DecayPolicy(base=1.5, unit_hours=24.0)
    stats = maintenance.recompute_scores(c.uow, NOW, policy, batch_size=25)
    # Every stored score starts at 0: the rows whose formula gives 0 (no importance, never used) stay.
    moved = sum(
        1
        for m in memories
        if m.status is not MemoryStatus.PENDING
        and score(m.importance, m.type, m.last_accessed_at, m.access_count, NOW, policy) != 0.0
    )
    assert moved == 118
    assert stats == {"changed": moved, "batches": 5}  # 121 rows in key ranges of 25
    with c.uow() as uow:
        rows = dict(uow.session.execute(text("SELECT id, score FROM memories")).all())
    for m in memories:
        if m.status is MemoryStatus.PENDING:
            assert rows[m.id] == 0.0, "pending drafts are not scored"
            continue
        expected = score(m.importance, m.type, m.last_accessed_at, m.access_count, NOW, policy)
        assert rows[m.id] == pytest.approx(expected, rel=1e-9, abs=1e-12), m.id
    # Running it again at the same time changes nothing.
    assert maintenance.recompute_scores(c.uow, NOW, policy, batch_size=25)["changed"] == 0
    # A year later, scores fall (unless reinforcement holds them up).
    later = maintenance.recompute_scores(c.uow, NOW + timedelta(days=365), policy, batch_size=1000)
    assert later["changed"] > 100
    c.close()


def test_a_later_run_writes_only_the_scores_that_moved_more_than_the_tolerance(clean_db, it_settings):
    c = build_container(it_settings)
    types = list(MemoryType)
    memories = [_memory(i, types[i % len(types)], days=i * 1.7, accesses=i % 5) for i in range(1, 121)]
    with c.uow() as uow:
        for m in memories:
            uow.memories.add(m)
        uow.commit()
    policy = DecayPolicy(base=1.5, unit_hours=24.0)
    maintenance.recompute_scores(c.uow, NOW, policy, batch_size=25)  # exact, as the first test checks
    later, tolerance = NOW + timedelta(hours=12), 0.01
    moved = {
        m.id
        for m in memories
        if abs(
            score(m.importance, m.type, m.last_accessed_at, m.access_count, later, policy)
            - score(m.importance, m.type, m.last_accessed_at, m.access_count, NOW, policy)
        )
        > tolerance
    }
    assert 0 < len(moved) < len(memories)  # half a day moves some scores past it, not all
    stats = maintenance.recompute_scores(c.uow, later, policy, batch_size=25, tolerance=tolerance)
    assert stats["changed"] == len(moved)
    with c.uow() as uow:
        rows = dict(uow.session.execute(text("SELECT id, score FROM memories")).all())
    for m in memories:
        truth = score(m.importance, m.type, m.last_accessed_at, m.access_count, later, policy)
        if m.id in moved:
            assert rows[m.id] == pytest.approx(truth, rel=1e-9, abs=1e-12), m.id
        else:  # left as it was, within the tolerance of the truth
            assert abs(rows[m.id] - truth) <= tolerance, m.id
    c.close()
