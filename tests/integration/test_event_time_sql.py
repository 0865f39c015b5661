"""Event time on Postgres: the SQL overlap reads (``happened_in``) find what the in-memory fakes
find, and are ranges of the partial indexes of migration 0008."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from sqlalchemy import text

from shared.events import Role, TurnPublished
from shared.language.timeexpr import MAX_SPAN, Span
from shared.models import RECALLABLE_STATUSES, Memory, MemoryStatus, MemoryType
from shared.settings import Settings
from tests.support.fakes import FakeStore
from tests.support.rows import memory_row
from workers.bootstrap import build_container

TOLD = datetime(2026, 8, 12, 10, tzinfo=UTC)
START, END = datetime(2026, 8, 10, tzinfo=UTC), datetime(2026, 8, 11, tzinfo=UTC)  # "8月10号"


def _d(month: int, day: int, year: int = 2026) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


SPANS: dict[str, Span | None] = {  # by item number: in the range or not
    "1": (START, END),  # that very day
    "2": (_d(8, 3), START),  # the week before: ends where the range starts
    "3": (END, _d(8, 12)),  # the day after: starts where the range ends
    "4": (_d(1, 1), _d(1, 1, 2027)),  # the whole year ("今年")
    "5": None,  # no time named
    "6": (START - MAX_SPAN + timedelta(days=1), START + timedelta(hours=1)),  # the longest span kept
}
INSIDE = {"1", "4", "6"}


def _memory(n: str, span: Span | None, status: MemoryStatus = MemoryStatus.ACTIVE) -> Memory:
    """Memory ``n``, told at TOLD, of an event that happened in ``span`` (None: no time named)."""
    told = memory_row(int(n), "default", "u", TOLD, status=status)
    return replace(
        told,
        type=MemoryType.EPISODIC,
        happened_from=span[0] if span else None,
        happened_to=span[1] if span else None,
    )


def _load(uow) -> None:
    for n, span in SPANS.items():
        uow.memories.add(_memory(n, span))
        turn = TurnPublished(f"e{n}", "default", "u", "s", int(n), Role.USER, f"turn {n}", TOLD, {})
        uow.events.insert_if_absent(turn, "recorded")
        uow.events.set_stage(turn.event_id, "extracted", importance=1.0, happened=span)
    uow.memories.add(_memory("7", (START, END), MemoryStatus.SUPERSEDED))  # not a status asked for
    uow.commit()


def _found(uow) -> tuple[list[str], list[str]]:
    memories = uow.memories.happened_in("default", "u", START, END, RECALLABLE_STATUSES, 200)
    events = uow.events.happened_in("default", "u", START, END, 200)
    return [m.content.split()[-1] for m in memories], [e.event.event_id[1:] for e in events]


def test_sql_overlap_reads_agree_with_the_fakes_and_use_the_event_time_indexes(
    sql_settings: Settings,
) -> None:
    fake = FakeStore()
    with fake.uow() as uow:
        _load(uow)
        expected = _found(uow)
    assert sorted(expected[0]) == sorted(INSIDE) == sorted(expected[1])
    container = build_container(sql_settings)
    try:
        with container.uow() as uow:
            _load(uow)
            assert _found(uow) == expected  # the same items, in the same order (latest first)
            with container.uow() as sql:
                stored = sql.events.get("e1")
                assert stored is not None and stored.happened == (START, END)
            session = uow.session  # type: ignore[attr-defined]
            session.execute(text("SET LOCAL enable_seqscan = off"))
            for table in ("events", "memories"):
                plan = session.execute(
                    text(
                        f"EXPLAIN SELECT * FROM {table} WHERE tenant_id = 'default' AND user_id = 'u'"
                        " AND happened_from >= :low AND happened_from < :end AND happened_to > :start"
                        " ORDER BY happened_from DESC LIMIT 200"
                    ),
                    {"low": START - MAX_SPAN, "end": END, "start": START},
                ).all()
                assert f"ix_{table}_user_happened" in "\n".join(r[0] for r in plan)
    finally:
        container.close()
