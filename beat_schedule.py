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

BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    "resume-stalled-events": {
        "task": "memory.resume_stalled",
        "schedule": 60.0,
        "options": {"expires": 55, "queue": "cuemem.maintenance"},
    },
    "consolidate-episodes": {
        "task": "memory.consolidate",
        "schedule": 6 * 3600.0,
        "options": {"expires": 5 * 3600, "queue": "cuemem.maintenance"},
    },
    "optimize-index": {
        "task": "memory.optimize_index",
        "schedule": 6 * 3600.0,
        "options": {"expires": 5 * 3600, "queue": "cuemem.index"},
    },
    "recompute-scores": {
        "task": "memory.decay",
        "schedule": 3600.0,
        "options": {"expires": 3000, "queue": "cuemem.maintenance"},
    },
    "expire-tasks": {
        "task": "memory.expire",
        "schedule": 3600.0,
        "options": {"expires": 3000, "queue": "cuemem.maintenance"},
    },
    "archive-stale-memories": {
        "task": "memory.archive",
        "schedule": 6 * 3600.0,
        "options": {"expires": 5 * 3600, "queue": "cuemem.maintenance"},
    },
    "reconcile-index": {
        "task": "memory.reconcile",
        "schedule": 6 * 3600.0,
        "options": {"expires": 5 * 3600, "queue": "cuemem.index"},
    },
}
