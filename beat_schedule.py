"""Periodic tasks run by exactly one `celery beat` (tasks referred to by name, with expiry).

The pipeline sweep re-drives events left between stages (a crash between commit and enqueue).
Decay, archive and reconciliation join this table with the lifecycle work.
"""

from __future__ import annotations

from typing import Any

BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    "resume-stalled-events": {
        "task": "memory.resume_stalled",
        "schedule": 60.0,
        "options": {"expires": 55, "queue": "cuemem.maintenance"},
    },
}
