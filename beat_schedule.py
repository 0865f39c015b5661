"""Periodic tasks run by exactly one `celery beat` (tasks referred to by name, with expiry).

The pipeline sweep re-drives events left between stages (a crash between commit and enqueue).
The hourly recompute keeps half-life scores current in Postgres (shared/scoring.py) and then has
the index owner push the scores that moved; the lifecycle sweeps (shared/lifecycle/sweeps.py) expire
tasks, archive long-unused memories and repair drift between Postgres and the index. Every entry
expires before its next run, so a backlog never runs one sweep twice in a row. Exactly one beat
runs: it holds a Redis lock (workers/redis/beat_lock.py).
"""

from __future__ import annotations

from typing import Any

from shared.queues import ROUTES, TaskName

HOUR_S = 3600.0


def _every(task: TaskName, seconds: float, expires: float) -> dict[str, Any]:
    """A beat entry for ``task``, sent by name to the queue its route names (``shared.queues``),
    dropped if still queued ``expires`` seconds later."""
    return {
        "task": task.value,
        "schedule": seconds,
        "options": {"expires": expires, "queue": ROUTES[task].value},
    }


BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    "resume-stalled-events": _every(TaskName.RESUME_STALLED, 60.0, 55),
    "consolidate-episodes": _every(TaskName.CONSOLIDATE, 6 * HOUR_S, 5 * 3600),
    "optimize-index": _every(TaskName.OPTIMIZE_INDEX, 6 * HOUR_S, 5 * 3600),
    "recompute-scores": _every(TaskName.DECAY, HOUR_S, 3000),
    "expire-tasks": _every(TaskName.EXPIRE, HOUR_S, 3000),
    "archive-stale-memories": _every(TaskName.ARCHIVE, 6 * HOUR_S, 5 * 3600),
    "reconcile-index": _every(TaskName.RECONCILE, 6 * HOUR_S, 5 * 3600),
    # A privacy delete inside the rewrite window left the Redis files marked (workers/redis/rewrite.py).
    "privacy-rewrite": _every(TaskName.PRIVACY_REWRITE, 60.0, 55),
}
