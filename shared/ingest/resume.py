"""The stalled sweep: events whose next message was lost, and published turns whose record
message was lost, driven on again."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from shared.ingest.common import next_step
from shared.ports import PublishLedger
from shared.queues import TaskName
from shared.storage import DeadLetter, FollowUp, UnitOfWork

log = logging.getLogger(__name__)

BACKLOG_GRACE = timedelta(minutes=30)
# An event at one stage for longer than this is stalled: the sweep's default, and what the
# inspector counts as stalled.
STALLED_AFTER_S = 300
MAX_REDRIVES = 5  # the settings' default (CUEMEM_MAX_REDRIVES)


def resume_stalled(
    uow: UnitOfWork,
    stuck_before: datetime,
    ledger: PublishLedger | None = None,
    limit: int = 500,
    max_redrives: int = MAX_REDRIVES,
) -> list[FollowUp]:
    """Re-drive events that sit at one stage since before ``stuck_before`` (their next message was
    lost), and re-send published turns the ledger still holds from before then (their record
    message was lost).

    Safe to run any time: each stage handler ignores a message for a stage already passed, and
    recording is idempotent by event id. While the pipeline queues hold a backlog nothing is
    re-sent: a queued message is late, not lost, and duplicates would only deepen the backlog.

    An event is sent on at most ``max_redrives`` times at one stage (counted in the ledger); the
    next time, or at once when its stage is not one the pipeline knows, it is parked: a dead letter
    names it and the reason, ``cuemem dead-letters replay`` sends it again, and until then the
    sweep leaves it alone (``EventRepository.stalled`` skips parked events). One poisoned event
    then costs a few failed messages, not one every minute for ever.
    """
    if ledger is not None:
        waiting = ledger.backlog()
        if waiting:
            # Queued messages are late, not lost: only what is stuck far longer than any queue
            # should hold it is re-sent, so steady load cannot postpone recovery for ever.
            stuck_before -= BACKLOG_GRACE
            log.info("stalled sweep: %d messages queued, re-sending only before %s", waiting, stuck_before)
    followups: list[FollowUp] = []
    if ledger is not None:
        cutoff_ms = int(stuck_before.timestamp() * 1000)
        followups.extend(FollowUp(TaskName.RECORD.value, (m,)) for m in ledger.overdue(cutoff_ms, limit))
    stalled = uow.events.stalled(stuck_before, limit)
    counts = ledger.count_redrives(stalled) if ledger is not None and stalled else [0] * len(stalled)
    parked: list[tuple[str, str]] = []
    for (ref, stage), count in zip(stalled, counts, strict=True):
        try:
            steps = next_step(ref, stage)
        except ValueError:
            _park(uow, ref, stage, f"stage {stage!r} is not a stage of the pipeline")
            parked.append((ref, stage))
            continue
        if count > max_redrives:
            task = steps[0].task if steps else TaskName.RESUME_STALLED.value
            _park(uow, ref, stage, f"re-driven {count - 1} times at stage {stage} without moving on", task)
            parked.append((ref, stage))
            continue
        followups.extend(steps)
    if parked and ledger is not None:
        ledger.forget_redrives(parked)  # a replay starts the count again
    if followups:
        log.info("re-driving %d stalled events or unrecorded turns", len(followups))
    return followups


def _park(
    uow: UnitOfWork, event_id: str, stage: str, why: str, task: str = TaskName.RESUME_STALLED.value
) -> None:
    """A dead letter for a stalled event the sweep gives up on, replayable as its next stage's task."""
    reason = f"parked by the stalled sweep: {why}"
    uow.dead_letters.add(DeadLetter(task, None, event_id, [event_id], reason, 0))
    log.error("stalled sweep parked event %s at stage %s: %s", event_id, stage, why)
