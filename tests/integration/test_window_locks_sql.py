"""The row locks between a context window being written and the turns it quotes, on real
Postgres: the window's reader blocks no stage update of the turns it reads (two ingest units of
one conversation deadlocked when it did), and a privacy delete of a quoted turn waits until the
window is committed (so that it then finds the window and blanks it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from shared.events import EventLimits, TurnPublished, validate_turn
from workers.bootstrap import Container

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def _turn(seq: int, content: str) -> TurnPublished:
    raw = {
        "event_id": f"w-{seq}",
        "user_id": "u1",
        "session_id": "s1",
        "seq": seq,
        "role": "user",
        "content": content,
        "at": (NOW + timedelta(minutes=seq)).isoformat(),
    }
    return validate_turn(raw, EventLimits())


@pytest.fixture
def c(c: Container) -> Container:
    """The SQL tests' container, holding three turns of one user."""
    with c.uow() as uow:
        for seq, content in ((1, "我住在杭州"), (2, "我在西湖边上班"), (3, "我每天骑车去")):
            assert uow.events.insert_if_absent(_turn(seq, content), "recorded")
        uow.commit()
    return c


def _no_waiting(uow) -> None:  # type: ignore[no-untyped-def]
    # A statement that would wait for a row lock fails at once instead (LockNotAvailable).
    uow.session.execute(text("SET LOCAL lock_timeout = '1ms'"))


def test_a_window_being_written_blocks_no_stage_update_of_the_turns_it_quotes(c) -> None:  # type: ignore[no-untyped-def]
    with c.uow() as writer:
        context = writer.events.context_before("default", "u1", "s1", 3, 2)
        assert [s.event.event_id for s in context] == ["w-1", "w-2"]
        with c.uow() as other:
            _no_waiting(other)
            other.events.set_stage("w-1", "extracted")  # would raise if it had to wait
            other.commit()
        writer.commit()
    with c.uow() as uow:
        assert uow.events.stages(["w-1"]) == {"w-1": "extracted"}


def test_a_privacy_delete_waits_for_a_window_that_quotes_the_turn(c) -> None:  # type: ignore[no-untyped-def]
    with c.uow() as writer:
        writer.events.context_before("default", "u1", "s1", 3, 2)  # w-3's window quotes w-1 and w-2
        with c.uow() as purge:
            _no_waiting(purge)
            with pytest.raises(OperationalError, match="lock"):
                purge.events.redact("default", "u1", ["w-2"])
            purge.rollback()
        writer.turn_index.set_vector("w-3", [0.0] * 16, "hash", ["w-1", "w-2"])
        writer.commit()
    # Once the window is committed the delete goes through, and finds the window that quotes it.
    with c.uow() as purge:
        _no_waiting(purge)
        assert purge.events.redact("default", "u1", ["w-2"]) == [("w-2", "s1")]
        assert purge.turn_index.unembed_windows("default", "u1", ["w-2"]) == ["w-3"]
        purge.commit()
