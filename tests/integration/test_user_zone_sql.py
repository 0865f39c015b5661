"""The user's zone (issue 31): the UTC offset of the user's latest turn of role ``user``, the
zone the CLI and the inspector show that user's times in. SQL and the fake answer alike; two
users whose ids could collide (u1, u10) each get their own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from shared.events import Role, TurnPublished
from shared.settings import Settings
from shared.storage import UnitOfWork
from shared.zones import local_time, zone_name
from tests.support.fakes import FakeStore
from workers.bootstrap import build_container

CST = timezone(timedelta(hours=8))
EST = timezone(timedelta(hours=-5))
TOKYO = timezone(timedelta(hours=9))
MONDAY = datetime(2026, 10, 5, 20, 3, tzinfo=CST)


def _turn(n: int, user: str, role: Role, at: datetime) -> TurnPublished:
    return TurnPublished(f"{user}-e{n}", "default", user, "s1", n, role, f"turn {n}", at, {})


def _load(uow: UnitOfWork) -> None:
    turns = [
        _turn(1, "u1", Role.USER, MONDAY - timedelta(days=1)),  # older, another zone
        _turn(2, "u1", Role.USER, MONDAY.astimezone(TOKYO) - timedelta(days=2)),
        _turn(3, "u1", Role.USER, MONDAY),  # the latest of the user's own turns
        _turn(4, "u1", Role.ASSISTANT, (MONDAY + timedelta(minutes=1)).astimezone(UTC)),
        _turn(1, "u10", Role.USER, MONDAY.astimezone(EST)),
    ]
    for t in turns:
        uow.events.insert_if_absent(t, "done")
    uow.commit()


def _check(uow: UnitOfWork) -> None:
    assert uow.events.user_offset("default", "u1") == 8 * 3600  # not the assistant's later UTC
    assert uow.events.user_offset("default", "u10") == -5 * 3600
    assert uow.events.user_offset("default", "u2") is None
    assert uow.events.user_offset("other", "u1") is None


def test_the_users_zone_in_sql(it_settings: Settings) -> None:
    container = build_container(it_settings)
    try:
        with container.uow() as uow:
            _load(uow)
        with container.uow() as uow:
            _check(uow)
    finally:
        container.close()


@pytest.mark.parametrize("store", [FakeStore])
def test_the_users_zone_in_the_fake(store: type[FakeStore]) -> None:
    fake = store()
    with fake.uow() as uow:
        _load(uow)
    with fake.uow() as uow:
        _check(uow)


def test_a_time_as_the_user_reads_it() -> None:
    due = datetime(2026, 10, 14, 7, 0, tzinfo=UTC)  # 15:00 in Beijing, as stored
    assert local_time(due, 8 * 3600) == "2026-10-14 15:00"
    assert local_time("2026-10-14T07:00:00+00:00", -5 * 3600) == "2026-10-14 02:00"
    assert local_time(due, None) == "2026-10-14 07:00"
    assert local_time(None, 3600) == "—"
    assert [zone_name(s) for s in (8 * 3600, -5 * 3600 - 1800, 0, None)] == [
        "UTC+08:00",
        "UTC-05:30",
        "UTC",
        "UTC",
    ]
