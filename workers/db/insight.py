"""The inspector overview's counts, aggregated in Postgres, and the turns' trace contexts
(``shared/insight.py``).

Every count is scoped to one tenant (and one user when given); a session is received, never
committed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, Date, cast, func, literal, select, tuple_, update

from shared.events import split_ref
from shared.insight import IMPORTANCE_BINS, IMPORTANCE_MAX, EventStats, MemoryStats
from workers.db.session import SessionRepository
from workers.db.tables import EventRow, MemoryRow


def _scope(
    table: type[EventRow] | type[MemoryRow], tenant_id: str, user_id: str | None
) -> list[ColumnElement[bool]]:
    terms = [table.tenant_id == tenant_id]
    if user_id is not None:
        terms.append(table.user_id == user_id)
    return terms


class SqlInsight(SessionRepository):
    def memory_stats(self, tenant_id: str, user_id: str | None, since: datetime) -> MemoryStats:
        scope = _scope(MemoryRow, tenant_id, user_id)
        by: dict[str, dict[str, int]] = defaultdict(dict)
        for memory_type, status, n in self.session.execute(
            select(MemoryRow.type, MemoryRow.status, func.count())
            .where(*scope)
            .group_by(MemoryRow.type, MemoryRow.status)
        ):
            by[memory_type][status] = int(n)
        day = cast(func.timezone("UTC", MemoryRow.created_at), Date)
        per_day = [
            (d, int(n))
            for d, n in self.session.execute(
                select(day, func.count())
                .where(*scope, MemoryRow.created_at >= since)
                .group_by(day)
                .order_by(day)
            )
        ]
        # width_bucket puts IMPORTANCE_MAX itself in bin BINS + 1: it is folded into the last bin.
        bucket = func.least(
            func.width_bucket(MemoryRow.importance, literal(0.0), literal(IMPORTANCE_MAX), IMPORTANCE_BINS),
            IMPORTANCE_BINS,
        )
        bins = [0] * IMPORTANCE_BINS
        for b, n in self.session.execute(select(bucket, func.count()).where(*scope).group_by(bucket)):
            bins[min(max(int(b), 1), IMPORTANCE_BINS) - 1] += int(n)
        return MemoryStats(dict(by), per_day, bins)

    def event_stats(self, tenant_id: str, user_id: str | None, stalled_before: datetime) -> EventStats:
        scope = _scope(EventRow, tenant_id, user_id)
        rows = self.session.execute(
            select(EventRow.stage, func.count()).where(*scope).group_by(EventRow.stage)
        )
        stalled = self.session.execute(
            select(func.count()).where(*scope, EventRow.stage != "done", EventRow.stage_at < stalled_before)
        ).scalar_one()
        return EventStats({stage: int(n) for stage, n in rows}, int(stalled))

    def event_tenants(self, event_ids: Sequence[str]) -> dict[str, str]:
        if not event_ids:
            return {}
        rows = self.session.execute(
            select(EventRow.event_id, EventRow.tenant_id).where(EventRow.event_id.in_(list(set(event_ids))))
        )
        found: dict[str, set[str]] = {}
        for e, t in rows:
            found.setdefault(e, set()).add(t)
        # An id two tenants hold names neither (event ids are unique per tenant only).
        return {e: next(iter(ts)) for e, ts in found.items() if len(ts) == 1}


class SqlTraceContexts(SessionRepository):
    def note(self, refs: Sequence[str], traceparent: str) -> None:
        if refs:
            keys = [(t or "default", e) for t, e in map(split_ref, refs)]
            self.session.execute(
                update(EventRow)
                .where(
                    tuple_(EventRow.tenant_id, EventRow.event_id).in_(keys), EventRow.trace_context.is_(None)
                )
                .values(trace_context=traceparent)
            )

    def of_events(self, tenant_id: str, user_id: str, event_ids: Sequence[str]) -> list[str]:
        if not event_ids:
            return []
        rows = self.session.scalars(
            select(EventRow.trace_context).where(
                *EventRow.owned_by(tenant_id, user_id),
                EventRow.event_id.in_(list(set(event_ids))),
                EventRow.trace_context.is_not(None),
            )
        )
        return [r for r in rows if r]
