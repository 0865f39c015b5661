"""Dead letters: list what the pipeline gave up on, and replay it through the broker.

A replay re-sends the stored task, by name, with its stored arguments, under a *new* task id:
the delivery counter (``workers.failures.count_delivery``) is kept per task id, so re-using the
old id would find it over the cap and park the message again at once. Replaying is safe to
repeat because every handler is idempotent by event id (``memory.record`` inserts with ``ON
CONFLICT DO NOTHING``, stage handlers act only on the stage the event is at); a message that
fails again is dead-lettered again, as a new row with its new reason.

The row is marked ``replayed_at`` only after the send succeeded: a crash in between leaves it
unmarked, and replaying it once more is harmless. Marked rows no longer count as the event's
failure in ``shared.ingest.progress`` (``for_events`` skips them), so ``cuemem ingest --wait`` and the
tests see the event's real outcome after a replay.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from shared.events import event_ref, split_ref
from shared.public import public_fields
from shared.queues import TaskName
from shared.storage import FollowUp
from workers.bootstrap import Container
from workers.db.tables import DeadLetterRow

log = logging.getLogger(__name__)


class UnknownDeadLetter(LookupError):
    """No dead letter with that id."""


class NotReplayable(ValueError):
    """A stored task that cannot be sent again (unknown task name or malformed arguments)."""


@dataclass(frozen=True)
class DeadLetterView:
    id: int
    task_name: str
    task_id: str | None
    event_id: str | None
    reason: str
    deliveries: int
    created_at: datetime
    replayed_at: datetime | None
    args: list[Any]

    def to_public(self) -> dict[str, Any]:
        return public_fields(
            self, "id task_name task_id event_id reason deliveries created_at replayed_at args"
        )

    @property
    def ref(self) -> str | None:
        """The pipeline key of the event the letter's message names (tenant and event id): a
        record message holds the turn, a stage message the key itself."""
        first = self.args[0] if self.args else None
        if isinstance(first, dict) and isinstance(first.get("event_id"), str):
            return event_ref(str(first.get("tenant_id") or "default"), first["event_id"])
        if isinstance(first, str) and split_ref(first)[0] is not None:
            return first
        return event_ref("default", self.event_id) if self.event_id else None


def _session(uow: Any) -> Session:
    # Dead letters live only in Postgres (the SQL unit of work); there is no port for them beyond
    # what the pipeline writes, so this operator tool reads the table directly.
    session = getattr(uow, "session", None)
    if not isinstance(session, Session):
        raise TypeError("dead letters need the SQL unit of work")
    return session


def _view(row: DeadLetterRow) -> DeadLetterView:
    return DeadLetterView(
        id=row.id,
        task_name=row.task_name,
        task_id=row.task_id,
        event_id=row.event_id,
        reason=row.reason,
        deliveries=row.deliveries,
        created_at=row.created_at,
        replayed_at=row.replayed_at,
        args=list(row.args) if isinstance(row.args, list) else [row.args],
    )


def list_dead_letters(container: Container, *, include_replayed: bool = True) -> list[DeadLetterView]:
    """Every dead letter, oldest first (``include_replayed=False``: only those not yet replayed)."""
    with container.uow() as uow:
        query = select(DeadLetterRow).order_by(DeadLetterRow.id)
        if not include_replayed:
            query = query.where(DeadLetterRow.replayed_at.is_(None))
        return [_view(row) for row in _session(uow).scalars(query)]


def replay(container: Container, ids: Sequence[int] | None = None) -> list[DeadLetterView]:
    """Re-send the named dead letters (``None``: every one not yet replayed); returns them marked.

    A named id is replayed even if it was replayed before (an operator asking twice gets two
    sends, which the idempotent handlers absorb). Raises :class:`UnknownDeadLetter` for an id that
    does not exist and :class:`NotReplayable` for a stored task that cannot be sent, before
    anything is sent.
    """
    with container.uow() as uow:
        session = _session(uow)
        if ids is None:
            rows = list(
                session.scalars(
                    select(DeadLetterRow)
                    .where(DeadLetterRow.replayed_at.is_(None))
                    .order_by(DeadLetterRow.id)
                )
            )
        else:
            found = {r.id: r for r in session.scalars(select(DeadLetterRow).where(DeadLetterRow.id.in_(ids)))}
            missing = [i for i in ids if i not in found]
            if missing:
                raise UnknownDeadLetter(f"no dead letter {missing[0]}")
            rows = [found[i] for i in dict.fromkeys(ids)]
        letters = [_view(r) for r in rows]
    for letter in letters:
        _check_replayable(letter)

    replayed: list[DeadLetterView] = []
    for letter in letters:
        # One send and one mark per row: a failure midway leaves the rest unmarked, to be retried.
        container.dispatch([FollowUp(letter.task_name, tuple(letter.args))])
        at = datetime.now(UTC)
        with container.uow() as uow:
            mark = update(DeadLetterRow).where(DeadLetterRow.id == letter.id).values(replayed_at=at)
            _session(uow).execute(mark)
            uow.commit()
        log.info(
            "replayed dead letter %d: %s (event %s), first parked for: %s",
            letter.id, letter.task_name, letter.event_id, letter.reason[:200],
        )  # fmt: skip
        replayed.append(DeadLetterView(**{**letter.__dict__, "replayed_at": at}))
    return replayed


def _check_replayable(letter: DeadLetterView) -> None:
    try:
        TaskName(letter.task_name)
    except ValueError:
        raise NotReplayable(f"dead letter {letter.id}: {letter.task_name!r} is not a cuemem task") from None
    if not letter.args:
        raise NotReplayable(f"dead letter {letter.id}: no stored arguments to send")
