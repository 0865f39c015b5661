"""Recall's row reads (``workers/db/mapping.py``: ``plain_rows`` and ``read_rows``) run as Core
statements on the session's connection, with Postgres arrays taken as psycopg gives them. What
they return must be what the ORM would have returned: every column, arrays as lists, the rows of
one tenant and user only, and the rows the same session holds unwritten."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, create_engine, select
from sqlalchemy.orm import Session

from shared.events import Role, TurnPublished
from shared.models import Memory, MemoryStatus
from tests.support.rows import memory_row
from workers.db.events import SqlEventRepository
from workers.db.mapping import memory_from_row, memory_values
from workers.db.memories import SqlMemoryRepository
from workers.db.tables import EventRow, MemoryRow

NOW = datetime(2026, 12, 6, 9, tzinfo=UTC)
OWNERS = [("t1", "u1"), ("t1", "u10"), ("t1:x", "u1"), ("t2", "u1")]
EVERY_STATUS = list(MemoryStatus)


# Every owner's memories cite the same event ids: a read of the memories citing them must
# still take only its own tenant's and user's.
CITED = [f"e{n}" for n in range(4)]


def _memory(i: int, tenant: str, user: str) -> Memory:
    row = memory_row(
        i, tenant, user, NOW + timedelta(minutes=i), cues=[f"k:c{i % 3}", "e:Alice"], cited=[CITED[i % 4]]
    )
    row.tags = [f"tag{i}", "shared"]
    row.entities = ["Alice", f"place{i}"]
    row.embedding = [0.25 * (i % 4), -0.5, 1.0]
    return row


def _orm_memories(session: Session, ids: list[str], with_embedding: bool) -> dict[str, Memory]:
    """The oracle: the same rows loaded as ORM entities."""
    rows = session.scalars(select(MemoryRow).where(MemoryRow.id.in_(ids))).all()
    return {r.id: memory_from_row(r, with_embedding=with_embedding) for r in rows}


@pytest.fixture
def engine(clean_db: str) -> Iterator[Engine]:
    engine = create_engine(clean_db)
    yield engine
    engine.dispose()


def test_plain_reads_return_what_the_orm_loads_for_one_tenant_and_user(engine: Engine) -> None:
    written: dict[tuple[str, str], list[Memory]] = {}
    with Session(engine) as session:
        memories = SqlMemoryRepository(session)
        for n, (tenant, user) in enumerate(OWNERS):
            written[(tenant, user)] = [_memory(10 * n + i, tenant, user) for i in range(4)]
            for m in written[(tenant, user)]:
                memories.add(m)
        session.commit()
    with Session(engine) as session:
        memories = SqlMemoryRepository(session)
        every_id = [m.id for ms in written.values() for m in ms]
        plain = _orm_memories(session, every_id, with_embedding=False)
        whole = _orm_memories(session, every_id, with_embedding=True)
        for (tenant, user), own in written.items():
            expected = sorted((plain[m.id] for m in own), key=lambda m: m.id)
            assert sorted(memories.get_many(tenant, user, every_id), key=lambda m: m.id) == expected
            cited = memories.by_sources(tenant, user, CITED, EVERY_STATUS)
            assert sorted(cited, key=lambda m: m.id) == expected
            by_cue = memories.by_cues(tenant, user, ["e:Alice"], [MemoryStatus.ACTIVE], 10)
            assert sorted(by_cue, key=lambda m: m.id) == expected
            # With the vector (a REAL[] read as it is): the memories citing one event.
            with_vector = memories.by_source(tenant, user, CITED[1], EVERY_STATUS)
            assert with_vector == [whole[m.id] for m in own if m.sources[0]["event_id"] == CITED[1]]
            assert [m.embedding for m in with_vector] == [[0.25, -0.5, 1.0]]


def test_a_read_sees_the_rows_its_session_holds_unwritten(engine: Engine) -> None:
    with Session(engine) as session:
        memory = _memory(1, "t1", "u1")
        session.add(MemoryRow(**memory_values(memory)))
        turn = TurnPublished("a:b-1", "t1", "u10", "s1", 1, Role.USER, "hello", NOW, {"k": "v"})
        columns = {**vars(turn), "role": turn.role.value, "metadata_": turn.metadata}
        del columns["metadata"]
        session.add(EventRow(**columns, stage="recorded", content_hash="0" * 64, window_ids=["a:b-0"]))
        found = SqlMemoryRepository(session).get_many("t1", "u1", [memory.id])
        assert [m.content for m in found] == [memory.content]
        assert [m.tags for m in found] == [memory.tags]
        stored = SqlEventRepository(session).of_user("t1", "u10", ["a:b-1"])
        assert [(s.event.content, s.event.metadata, s.window) for s in stored] == [
            ("hello", {"k": "v"}, ("a:b-0",))
        ]
        assert SqlEventRepository(session).of_user("t1", "u1", ["a:b-1"]) == []
