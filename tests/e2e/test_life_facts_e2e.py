"""Facts over time as a careful person keeps them (issue 31), on the real pipeline, rules only.

Turns of two users, one writing Chinese at +08:00 and one English at -05:00, are published through
the producer with explicit times; real worker processes (Postgres, Redis, the embedded index)
process them, and the memories are read back from Postgres:

* a time of day and a relative day are resolved in the zone of the turn's own ``at`` (the
  offset survives the event log), and the instant is stored;
* a period ("十二月") is due at its end, in the turn's zone;
* an instruction to remember ("记住", "请记住", "Please remember this:") raises the importance of
  the statement it is attached to and is never a memory of its own;
* a habit or routine ("每天早上都喝", "every evening") is a kept preference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

import pytest

from shared.events import event_ref
from shared.models import Memory, MemoryStatus, MemoryType
from shared.settings import Settings
from tests.support.services import PublishProcessed, cuemem_in_process
from workers.bootstrap import Container

CST = timezone(timedelta(hours=8))
EST = timezone(timedelta(hours=-5))
TENANT = "default"


@dataclass(frozen=True)
class Turn:
    user_id: str
    content: str
    at: datetime


Ingest = Callable[[list[Turn]], Container]


@pytest.fixture
def ingest(publish_turns: PublishProcessed) -> Ingest:
    """Publish turns (each user in its own session) and wait until real workers processed them."""

    def run(turns: list[Turn]) -> Container:
        container, _ = publish_turns([(t.user_id, t.content, t.at) for t in turns])
        return container

    return run


def _memories(c: Container, user_id: str) -> list[Memory]:
    with c.uow() as uow:
        return uow.memories.for_user(TENANT, user_id, [MemoryStatus.ACTIVE])


def _one(memories: list[Memory], word: str) -> Memory:
    found = [m for m in memories if word in m.content]
    assert len(found) == 1, [(m.type.value, m.content) for m in memories]
    return found[0]


def test_times_are_resolved_in_the_zone_of_the_turn(ingest: Ingest, it_settings: Settings) -> None:
    zh, en = "tz-u1", "tz-u10"
    monday_evening = datetime(2026, 10, 5, 20, 3, tzinfo=CST)  # Monday 12:03 UTC
    # 21:30 on Monday in New York is already Tuesday 02:30 in UTC: the day must be New York's.
    en_monday_night = datetime(2026, 10, 5, 21, 30, tzinfo=EST)
    c = ingest(
        [
            Turn(zh, "下周三下午三点要去医院复查", monday_evening),
            Turn(zh, "周五早上九点开会", datetime(2026, 10, 5, 18, 0, tzinfo=CST)),
            Turn(zh, "我打算十二月去日本旅行", monday_evening + timedelta(minutes=5)),
            Turn(en, "I have a dentist appointment next Friday at 3pm", en_monday_night),
            Turn(en, "I need to call the bank tomorrow at 9am", en_monday_night + timedelta(minutes=1)),
        ]
    )
    zh_tasks = [m for m in _memories(c, zh) if m.type is MemoryType.TASK]
    en_tasks = [m for m in _memories(c, en) if m.type is MemoryType.TASK]

    hospital = _one(zh_tasks, "医院")
    assert hospital.due_at == datetime(2026, 10, 14, 15, 0, tzinfo=CST)
    assert hospital.due_at == datetime(2026, 10, 14, 7, 0, tzinfo=UTC)  # the instant, as stored
    assert _one(zh_tasks, "开会").due_at == datetime(2026, 10, 9, 9, 0, tzinfo=CST)
    # A period is due at its end: the trip is in December, until its last second in Beijing.
    assert _one(zh_tasks, "日本").due_at == datetime(2026, 12, 31, 23, 59, 59, tzinfo=CST)

    assert _one(en_tasks, "dentist").due_at == datetime(2026, 10, 16, 15, 0, tzinfo=EST)
    assert _one(en_tasks, "bank").due_at == datetime(2026, 10, 6, 9, 0, tzinfo=EST)

    # A source's time stays in UTC (sources are ordered by it as text), the turn keeps its offset.
    assert hospital.sources[0]["at"] == "2026-10-05T12:03:00+00:00"
    with c.uow() as uow:
        told = uow.events.get(event_ref(TENANT, hospital.sources[0]["event_id"]))
    assert told is not None and told.event.at.isoformat() == monday_evening.isoformat()

    # The CLI lists a task's due time in the user's zone: the offset of their latest turn.
    listed = cuemem_in_process(it_settings, "memories", "--user", zh)
    assert listed.returncode == 0, listed
    assert "下周三下午三点要去医院复查  (due 2026-10-14 15:00 UTC+08:00)" in listed.stdout, listed.stdout
    listed = cuemem_in_process(it_settings, "memories", "--user", en)
    assert "(due 2026-10-16 15:00 UTC-05:00)" in listed.stdout, listed.stdout
    # So does a memory's history (its validity and each change).
    shown = cuemem_in_process(it_settings, "history", hospital.id, "--user", zh)
    assert shown.returncode == 0, shown
    assert "(times in UTC+08:00, the user's zone)" in shown.stdout, shown.stdout
    assert f"from {monday_evening:%Y-%m-%d %H:%M}" in shown.stdout, shown.stdout


def test_an_instruction_to_remember_is_never_a_memory_of_its_own(ingest: Ingest) -> None:
    told, plain, en = "remember-u1", "remember-u10", "remember-u2"
    at = datetime(2026, 10, 5, 20, 0, tzinfo=CST)
    c = ingest(
        [
            Turn(told, "记住，我不吃香菜！", at),
            Turn(told, "我的新手机号是13800138000，请记住。", at + timedelta(minutes=1)),
            Turn(plain, "我不吃香菜！", at),
            Turn(en, "Please remember this: my passport expires in May 2027.", at.astimezone(EST)),
        ]
    )
    told_memories = _memories(c, told)
    assert not [m for m in told_memories if "记住" in m.content], [m.content for m in told_memories]
    cilantro = _one(told_memories, "香菜")
    assert cilantro.type is MemoryType.PREFERENCE and cilantro.content == "我不吃香菜"
    phone = _one(told_memories, "13800138000")
    assert phone.type is MemoryType.PROFILE
    assert len(told_memories) == 2

    # The instruction raised the importance of what it was attached to.
    [unasked] = _memories(c, plain)
    assert unasked.content == "我不吃香菜"
    assert cilantro.importance > unasked.importance

    [passport] = _memories(c, en)
    assert "passport" in passport.content and "remember" not in passport.content.lower()


def test_a_habit_is_a_kept_preference(ingest: Ingest) -> None:
    zh, en = "habit-u1", "habit-u10"
    c = ingest(
        [
            Turn(zh, "我每天早上都喝美式咖啡，不加糖", datetime(2026, 10, 5, 8, 0, tzinfo=CST)),
            Turn(en, "I walk the dog every evening around 7.", datetime(2026, 10, 5, 8, 0, tzinfo=EST)),
        ]
    )
    coffee = _one(_memories(c, zh), "美式")
    assert coffee.type is MemoryType.PREFERENCE and "不加糖" in coffee.content
    dog = _one(_memories(c, en), "dog")
    assert dog.type is MemoryType.PREFERENCE
