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
from datetime import UTC, datetime

from service.operations.ports import Dispatching, Stores
from shared.queues import TaskName
from shared.storage import DeadLetterView, FollowUp

__all__ = ["DeadLetterView", "NotReplayable", "UnknownDeadLetter", "list_dead_letters", "replay"]

log = logging.getLogger(__name__)


class UnknownDeadLetter(LookupError):
    """No dead letter with that id."""


class NotReplayable(ValueError):
    """A stored task that cannot be sent again (unknown task name or malformed arguments)."""


def list_dead_letters(container: Stores, *, include_replayed: bool = True) -> list[DeadLetterView]:
    """Every dead letter, oldest first (``include_replayed=False``: only those not yet replayed)."""
    with container.uow() as uow:
        return uow.dead_letters.listed(include_replayed)


def replay(container: Dispatching, ids: Sequence[int] | None = None) -> list[DeadLetterView]:
    """Re-send the named dead letters (``None``: every one not yet replayed); returns them marked.

    A named id is replayed even if it was replayed before (an operator asking twice gets two
    sends, which the idempotent handlers absorb). Raises :class:`UnknownDeadLetter` for an id that
    does not exist and :class:`NotReplayable` for a stored task that cannot be sent, before
    anything is sent.
    """
    with container.uow() as uow:
        if ids is None:
            letters = uow.dead_letters.listed(include_replayed=False)
        else:
            found = uow.dead_letters.by_ids(ids)
            missing = [i for i in ids if i not in found]
            if missing:
                raise UnknownDeadLetter(f"no dead letter {missing[0]}")
            letters = [found[i] for i in dict.fromkeys(ids)]
    for letter in letters:
        _check_replayable(letter)

    replayed: list[DeadLetterView] = []
    for letter in letters:
        # One send and one mark per row: a failure midway leaves the rest unmarked, to be retried.
        container.dispatch([FollowUp(letter.task_name, tuple(letter.args))])
        at = datetime.now(UTC)
        with container.uow() as uow:
            uow.dead_letters.mark_replayed(letter.id, at)
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
