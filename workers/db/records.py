"""Append-only records (memory history, LLM calls, dead letters) and the meta key-value table."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert

from shared.storage import DeadLetter, DeadLetterView, HistoryEntry
from workers.db.mapping import column_values, from_columns
from workers.db.session import SessionRepository
from workers.db.tables import DeadLetterRow, HistoryRow, LlmCallRow, MetaRow


class SqlHistoryRepository(SessionRepository):
    def add(self, entry: HistoryEntry) -> None:
        self.session.add(HistoryRow(**column_values(entry)))

    def for_memories(self, tenant_id: str, user_id: str, memory_ids: Sequence[str]) -> list[HistoryEntry]:
        if not memory_ids:
            return []
        rows = self.session.scalars(
            select(HistoryRow)
            .where(HistoryRow.memory_id.in_(list(memory_ids)), *HistoryRow.owned_by(tenant_id, user_id))
            .order_by(HistoryRow.at, HistoryRow.id)
        )
        return [from_columns(HistoryEntry, r, details=dict(r.details or {})) for r in rows]


class SqlLlmCallRepository(SessionRepository):
    def add(self, usage: Any, event_id: str | None) -> None:
        self.session.add(
            LlmCallRow(
                operation=str(usage.operation),
                model=usage.model,
                prompt_tokens=int(usage.prompt_tokens or 0),
                completion_tokens=int(usage.completion_tokens or 0),
                ok=bool(usage.ok),
                error=usage.error,
                latency_ms=float(usage.latency_ms or 0.0),
                event_id=event_id,
            )
        )


class SqlDeadLetterRepository(SessionRepository):
    def add(self, letter: DeadLetter) -> None:
        self.session.add(DeadLetterRow(**column_values(letter)))

    def for_events(self, event_ids: Sequence[str]) -> dict[str, str]:
        if not event_ids:
            return {}
        rows = self.session.execute(
            select(DeadLetterRow.event_id, DeadLetterRow.reason).where(
                DeadLetterRow.event_id.in_(list(event_ids)), DeadLetterRow.replayed_at.is_(None)
            )
        )
        return {r.event_id: r.reason for r in rows}

    def listed(self, include_replayed: bool = True) -> list[DeadLetterView]:
        query = select(DeadLetterRow).order_by(DeadLetterRow.id)
        if not include_replayed:
            query = query.where(DeadLetterRow.replayed_at.is_(None))
        return [_letter(row) for row in self.session.scalars(query)]

    def by_ids(self, ids: Sequence[int]) -> dict[int, DeadLetterView]:
        rows = self.session.scalars(select(DeadLetterRow).where(DeadLetterRow.id.in_(list(ids))))
        return {row.id: _letter(row) for row in rows}

    def mark_replayed(self, letter_id: int, at: datetime) -> None:
        self.session.execute(
            update(DeadLetterRow).where(DeadLetterRow.id == letter_id).values(replayed_at=at)
        )


def _letter(row: DeadLetterRow) -> DeadLetterView:
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


class SqlMetaRepository(SessionRepository):
    def get(self, key: str) -> str | None:
        row = self.session.get(MetaRow, key)
        return row.value if row else None

    def set(self, key: str, value: str) -> None:
        stmt = insert(MetaRow).values(key=key, value=value)
        self.session.execute(stmt.on_conflict_do_update(index_elements=[MetaRow.key], set_={"value": value}))
