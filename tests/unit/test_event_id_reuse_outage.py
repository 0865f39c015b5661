"""The publish-time reuse check (``service/operations/event_ids.py``) when Postgres cannot be read:
an outage of the unit of work lets the turns through (the recorder refuses a reuse anyway); any
other error is a bug and is raised, never hidden as a warning."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from service.operations.event_ids import reused


class Down(Exception):
    """The unit of work's own outage type (as ``SqlUnitOfWork.outages`` names SQLAlchemy's)."""


class FailingUnit:
    outages: tuple[type[BaseException], ...] = (Down,)

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __enter__(self) -> Any:
        raise self.error

    def __exit__(self, *exc: object) -> None:
        return None


def container_failing_with(error: BaseException) -> Any:
    return SimpleNamespace(uow=lambda: FailingUnit(error), limits=None, clock=None)


TURNS = [(0, {"event_id": "order-1001", "user_id": "u1", "session_id": "s1", "content": "hi"})]


def test_an_outage_lets_the_turns_through() -> None:
    assert reused(container_failing_with(Down("connection refused")), "ac", TURNS) == {}
    assert reused(container_failing_with(ConnectionRefusedError()), "ac", TURNS) == {}  # OSError


def test_any_other_error_is_raised() -> None:
    with pytest.raises(KeyError):
        reused(container_failing_with(KeyError("a bug")), "ac", TURNS)
