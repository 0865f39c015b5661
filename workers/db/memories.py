"""The memories table as the pipeline, recall and curation read and write it (rows, lookups,
conflict candidates). Repositories receive a session and never commit (the unit of work does)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import delete, func, or_, select, true, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import defer

from shared.models import Memory, MemoryStatus, MemoryType
from workers.db.mapping import memory_from_row, memory_values
from workers.db.session import SessionRepository
from workers.db.tables import (
    MemoryRow,
)


class SqlMemoryRepository(SessionRepository):
    """Memory rows: add, read, save, and the lookups recall and conflict resolution make."""

    def lock_user(self, tenant_id: str, user_id: str) -> None:
        # Two workers persisting the same repeat for one user at once would both find no active
        # copy and both create one; a transaction-scoped advisory lock per user prevents that.
        self.session.execute(
            select(func.pg_advisory_xact_lock(func.hashtextextended(tenant_id + "\x1f" + user_id, 0)))
        )

    def add(self, memory: Memory) -> None:
        stmt = (
            insert(MemoryRow)
            .values(**memory_values(memory))
            .on_conflict_do_nothing(index_elements=[MemoryRow.id])
        )
        self.session.execute(stmt)

    def get(self, tenant_id: str, user_id: str, memory_id: str) -> Memory | None:
        row = self.session.scalars(
            select(MemoryRow).where(
                MemoryRow.id == memory_id, MemoryRow.tenant_id == tenant_id, MemoryRow.user_id == user_id
            )
        ).first()
        return memory_from_row(row) if row else None

    def get_many(self, tenant_id: str, user_id: str, ids: Sequence[str]) -> list[Memory]:
        """Without the embedding (recall re-reads index hits here and never needs the vector)."""
        if not ids:
            return []
        rows = self.session.scalars(
            select(MemoryRow)
            .where(
                MemoryRow.id.in_(list(ids)), MemoryRow.tenant_id == tenant_id, MemoryRow.user_id == user_id
            )
            .options(defer(MemoryRow.embedding))
        )
        return [memory_from_row(r, with_embedding=False) for r in rows]

    def save(self, memory: Memory) -> None:
        values = memory_values(memory)
        values.pop("id")
        self.session.execute(
            update(MemoryRow)
            .where(
                MemoryRow.id == memory.id,
                MemoryRow.tenant_id == memory.tenant_id,
                MemoryRow.user_id == memory.user_id,
            )
            .values(**values)
        )

    def from_event(self, event_id: str) -> list[Memory]:
        rows = self.session.scalars(
            select(MemoryRow).where(MemoryRow.origin_event_id == event_id).order_by(MemoryRow.id)
        )
        memories = [memory_from_row(r) for r in rows]
        return memories

    def active_with_hash(
        self, tenant_id: str, user_id: str, content_hash: str, exclude_id: str
    ) -> Memory | None:
        row = self.session.scalars(
            select(MemoryRow)
            .where(
                MemoryRow.tenant_id == tenant_id,
                MemoryRow.user_id == user_id,
                MemoryRow.content_hash == content_hash,
                MemoryRow.status == MemoryStatus.ACTIVE.value,
                MemoryRow.id != exclude_id,
            )
            .order_by(MemoryRow.created_at, MemoryRow.id)
            # Two workers persisting the same repeat at once must not both create it: lock the row.
            .with_for_update()
        ).first()
        return memory_from_row(row) if row else None

    def delete(self, memory_id: str) -> None:
        self.session.execute(
            delete(MemoryRow).where(MemoryRow.id == memory_id, MemoryRow.status == MemoryStatus.PENDING.value)
        )

    def by_cues(
        self, tenant_id: str, user_id: str, cues: Sequence[str], statuses: Iterable[MemoryStatus], limit: int
    ) -> list[Memory]:
        if not cues:
            return []
        rows = self.session.scalars(
            select(MemoryRow)
            .where(
                MemoryRow.tenant_id == tenant_id,
                MemoryRow.user_id == user_id,
                MemoryRow.status.in_([s.value for s in statuses]),
                MemoryRow.cues.overlap(list(cues)),
            )
            .order_by(MemoryRow.score.desc(), MemoryRow.id)
            .limit(limit)
            .options(defer(MemoryRow.embedding))
        )
        return [memory_from_row(r, with_embedding=False) for r in rows]

    def for_user(self, tenant_id: str, user_id: str, statuses: Iterable[MemoryStatus] | None) -> list[Memory]:
        stmt = select(MemoryRow).where(MemoryRow.tenant_id == tenant_id, MemoryRow.user_id == user_id)
        if statuses is not None:
            stmt = stmt.where(MemoryRow.status.in_([s.value for s in statuses]))
        rows = self.session.scalars(stmt.order_by(MemoryRow.created_at, MemoryRow.id))
        return [memory_from_row(r) for r in rows]

    def by_source(
        self, tenant_id: str, user_id: str, event_id: str, statuses: Iterable[MemoryStatus]
    ) -> list[Memory]:
        rows = self.session.scalars(
            select(MemoryRow)
            .where(
                MemoryRow.tenant_id == tenant_id,
                MemoryRow.user_id == user_id,
                MemoryRow.status.in_([s.value for s in statuses]),
                MemoryRow.sources.contains([{"event_id": event_id}]),
            )
            .order_by(MemoryRow.valid_from, MemoryRow.id)
        )
        return [memory_from_row(r) for r in rows]

    def by_sources(
        self, tenant_id: str, user_id: str, event_ids: Sequence[str], statuses: Iterable[MemoryStatus]
    ) -> list[Memory]:
        if not event_ids:
            return []
        rows = self.session.scalars(
            select(MemoryRow)
            .options(defer(MemoryRow.embedding))
            .where(
                MemoryRow.tenant_id == tenant_id,
                MemoryRow.user_id == user_id,
                MemoryRow.status.in_([s.value for s in statuses]),
                or_(*(MemoryRow.sources.contains([{"event_id": e}]) for e in event_ids)),
            )
            .order_by(MemoryRow.valid_from, MemoryRow.id)
        )
        return [memory_from_row(r, with_embedding=False) for r in rows]

    def cue_counts(
        self, tenant_id: str, user_id: str, cues: Sequence[str], statuses: Iterable[MemoryStatus]
    ) -> tuple[int, dict[str, int]]:
        status_values = [s.value for s in statuses]
        scope = (
            MemoryRow.tenant_id == tenant_id,
            MemoryRow.user_id == user_id,
            MemoryRow.status.in_(status_values),
        )
        total = self.session.execute(select(func.count()).select_from(MemoryRow).where(*scope)).scalar_one()
        if not cues:
            return int(total), {}
        unnested = func.unnest(MemoryRow.cues).table_valued("cue").render_derived(name="u").lateral()
        rows = self.session.execute(
            select(unnested.c.cue, func.count())
            .select_from(MemoryRow)
            .join(unnested, true())
            .where(*scope, MemoryRow.cues.overlap(list(cues)), unnested.c.cue.in_(list(cues)))
            .group_by(unnested.c.cue)
        ).all()
        return int(total), {str(r[0]): int(r[1]) for r in rows}

    def in_window(
        self,
        tenant_id: str,
        user_id: str,
        start: datetime,
        end: datetime,
        statuses: Iterable[MemoryStatus],
        limit: int,
        with_embedding: bool = False,
    ) -> list[Memory]:
        query = (
            select(MemoryRow)
            .where(
                MemoryRow.tenant_id == tenant_id,
                MemoryRow.user_id == user_id,
                MemoryRow.status.in_([s.value for s in statuses]),
                MemoryRow.valid_from >= start,
                MemoryRow.valid_from < end,
            )
            .order_by(MemoryRow.valid_from.desc(), MemoryRow.id)
            .limit(limit)
        )
        if not with_embedding:
            query = query.options(defer(MemoryRow.embedding))
        rows = self.session.scalars(query)
        return [memory_from_row(r, with_embedding=with_embedding) for r in rows]

    def candidates(
        self,
        tenant_id: str,
        user_id: str,
        slot: str | None,
        cues: Sequence[str],
        exclude: Sequence[str],
        limit: int,
    ) -> list[Memory]:
        match = [MemoryRow.cues.overlap(list(cues))] if cues else []
        if slot:
            match.append(MemoryRow.slot == slot)
        if not match:
            return []
        rows = self.session.scalars(
            select(MemoryRow)
            .where(
                MemoryRow.tenant_id == tenant_id,
                MemoryRow.user_id == user_id,
                MemoryRow.status == MemoryStatus.ACTIVE.value,
                MemoryRow.id.not_in(list(exclude)) if exclude else true(),
                or_(*match),
            )
            .order_by(MemoryRow.valid_from.desc(), MemoryRow.id)
            .limit(limit)
        )
        return [memory_from_row(r) for r in rows]

    def recent_of_type(
        self, tenant_id: str, user_id: str, memory_type: MemoryType, since: datetime, limit: int
    ) -> list[Memory]:
        rows = self.session.scalars(
            select(MemoryRow)
            .where(
                MemoryRow.tenant_id == tenant_id,
                MemoryRow.user_id == user_id,
                MemoryRow.type == memory_type.value,
                MemoryRow.status == MemoryStatus.ACTIVE.value,
                MemoryRow.valid_from >= since,
            )
            .order_by(MemoryRow.valid_from, MemoryRow.id)
            .limit(limit)
        )
        return [memory_from_row(r) for r in rows]

    def users_with_recent(
        self, memory_type: MemoryType, since: datetime, limit: int
    ) -> list[tuple[str, str]]:
        rows = self.session.execute(
            select(MemoryRow.tenant_id, MemoryRow.user_id)
            .where(
                MemoryRow.type == memory_type.value,
                MemoryRow.status == MemoryStatus.ACTIVE.value,
                MemoryRow.valid_from >= since,
            )
            .group_by(MemoryRow.tenant_id, MemoryRow.user_id)
            .order_by(MemoryRow.tenant_id, MemoryRow.user_id)
            .limit(limit)
        )
        return [(r.tenant_id, r.user_id) for r in rows]
