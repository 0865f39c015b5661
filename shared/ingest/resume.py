"""The stalled sweep: events whose next message was lost, and published turns whose record
message was lost, driven on again."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from shared.ingest.common import next_step
from shared.ports import PublishLedger
from shared.queues import TaskName
from shared.storage import FollowUp, UnitOfWork

log = logging.getLogger(__name__)

BACKLOG_GRACE = timedelta(minutes=30)
# An event at one stage for longer than this is stalled: the sweep's default, and what the
# inspector counts as stalled.
STALLED_AFTER_S = 300


def resume_stalled(
    uow: UnitOfWork, stuck_before: datetime, ledger: PublishLedger | None = None, limit: int = 500
) -> list[FollowUp]:
    """Re-drive events that sit at one stage since before ``stuck_before`` (their next message was
    lost), and re-send published turns the ledger still holds from before then (their record
    message was lost).

    Safe to run any time: each stage handler ignores a message for a stage already passed, and
    recording is idempotent by event id. While the pipeline queues hold a backlog nothing is
    re-sent: a queued message is late, not lost, and duplicates would only deepen the backlog.
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
    for ref, stage in uow.events.stalled(stuck_before, limit):
        followups.extend(next_step(ref, stage))
    if followups:
        log.info("re-driving %d stalled events or unrecorded turns", len(followups))
    return followups
