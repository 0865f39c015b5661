"""A turn's UTC offset survives the SQL event log (``events.at_offset_s``, migration 0018).

``events.at`` is a timestamptz: Postgres keeps the instant only. The offset the turn was sent with
is kept beside it and put back on ``at`` when the event is read, so the extract stage resolves
"下午三点" in the user's zone. A row from before 0018 (offset NULL) is read in UTC, as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from shared.events import EventLimits, TurnPublished, event_ref, validate_turn
from shared.settings import Settings
from workers.bootstrap import Container, build_container

SENT = {
    "cst": "2026-10-05T20:03:00+08:00",
    "est": "2026-10-05T21:30:00-05:00",
    "ist": "2026-10-05T08:15:00+05:30",
    "utc": "2026-10-05T12:03:00+00:00",
}


@pytest.fixture
def c(it_settings: Settings) -> Iterator[Container]:
    container = build_container(it_settings)
    yield container
    container.close()


def _turn(tenant: str, name: str) -> TurnPublished:
    raw = {"event_id": f"at-{name}", "tenant_id": tenant, "user_id": "u1", "session_id": "s1", "seq": 1,
           "role": "user", "content": "下周三下午三点要去医院复查", "at": SENT[name]}  # fmt: skip
    return validate_turn({**raw, "session_id": f"s-{name}"}, EventLimits())


def test_a_turns_offset_survives_the_event_log(c: Container) -> None:
    turns = [_turn(tenant, name) for tenant in ("ac", "ac:me") for name in SENT]
    with c.uow() as uow:
        for t in turns:
            assert uow.events.insert_if_absent(t, "recorded")
        uow.commit()
    with c.uow() as uow:
        for t in turns:
            stored = uow.events.get(t.ref)
            assert stored is not None
            assert stored.event.at.isoformat() == SENT[t.event_id.removeprefix("at-")]
            assert stored.event == t
        session = uow.session  # type: ignore[attr-defined]
        rows = session.execute(text("SELECT event_id, at_offset_s FROM events WHERE tenant_id = 'ac'"))
        offsets = {event_id: offset for event_id, offset in rows}
    assert offsets == {"at-cst": 8 * 3600, "at-est": -5 * 3600, "at-ist": 5 * 3600 + 1800, "at-utc": 0}


def test_a_turn_recorded_before_the_offset_was_kept_reads_in_utc(c: Container) -> None:
    turn = _turn("ac", "cst")
    with c.uow() as uow:
        assert uow.events.insert_if_absent(turn, "recorded")
        uow.session.execute(text("UPDATE events SET at_offset_s = NULL"))  # type: ignore[attr-defined]
        uow.commit()
    with c.uow() as uow:
        stored = uow.events.get(event_ref("ac", turn.event_id))
    assert stored is not None
    assert stored.event.at == turn.at  # the same instant ...
    assert stored.event.at.utcoffset() == timedelta(0)  # ... in UTC, as before the offset was kept
    assert stored.event.at == datetime(2026, 10, 5, 12, 3, tzinfo=UTC)
