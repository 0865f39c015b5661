"""What the inspector's overview reads beyond the pipeline's repositories: a tenant's (or one
user's) memories counted by type and status, by day and by importance, and its events by stage;
and the trace context each turn was recorded under, which a recall links to.

Counts only, aggregated in the database: the overview never loads a user's memories to count them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Protocol

# Importance is 0–10 (shared/scoring.py): ten bins of width 1, the last one closed ([9, 10]).
IMPORTANCE_BINS = 10
IMPORTANCE_MAX = 10.0


@dataclass(frozen=True)
class MemoryStats:
    by_type_status: Mapping[str, Mapping[str, int]]  # type -> status -> memories
    per_day: Sequence[tuple[date, int]]  # memories created per day (UTC), oldest first
    importance: Sequence[int]  # IMPORTANCE_BINS counts over [0, IMPORTANCE_MAX]

    def to_public(self) -> dict[str, Any]:
        statuses = sorted({s for by_status in self.by_type_status.values() for s in by_status})
        return {
            "by_type_status": {t: dict(sorted(v.items())) for t, v in sorted(self.by_type_status.items())},
            "by_status": {s: sum(v.get(s, 0) for v in self.by_type_status.values()) for s in statuses},
            "total": sum(n for v in self.by_type_status.values() for n in v.values()),
            "per_day": [{"day": d.isoformat(), "memories": n} for d, n in self.per_day],
            "importance": [
                {
                    "from": i * IMPORTANCE_MAX / IMPORTANCE_BINS,
                    "to": (i + 1) * IMPORTANCE_MAX / IMPORTANCE_BINS,
                    "memories": n,
                }
                for i, n in enumerate(self.importance)
            ],
        }


@dataclass(frozen=True)
class EventStats:
    by_stage: Mapping[str, int]
    stalled: int  # not done, and at their stage since before the stalled sweep's threshold

    def to_public(self) -> dict[str, Any]:
        return {
            "by_stage": dict(sorted(self.by_stage.items())),
            "total": sum(self.by_stage.values()),
            "stalled": self.stalled,
        }


class InsightRepository(Protocol):
    def memory_stats(self, tenant_id: str, user_id: str | None, since: datetime) -> MemoryStats:
        """Counts over the tenant's memories (one user's with ``user_id``), forgotten ones
        included; ``per_day`` from ``since`` on."""

    def event_stats(self, tenant_id: str, user_id: str | None, stalled_before: datetime) -> EventStats: ...

    def event_tenants(self, event_ids: Sequence[str]) -> dict[str, str]:
        """The tenant of each of these event ids that is stored in exactly one tenant."""


class TraceContextRepository(Protocol):
    """The trace context each turn was recorded under (``infra/tracing.py``), so that a recall
    can link to the traces of the turns it drew on. Used only when tracing is on."""

    def note(self, refs: Sequence[str], traceparent: str) -> None:
        """Store ``traceparent`` with the events these pipeline keys name where none is stored yet."""

    def of_events(self, tenant_id: str, user_id: str, event_ids: Sequence[str]) -> list[str]:
        """The stored traceparents of these events of the user (those that have one)."""
