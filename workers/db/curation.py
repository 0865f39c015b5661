"""SQL repositories behind the HTTP API: API keys, paged listing, privacy deletes, metric counts.

Like every repository they receive a session and never commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import delete, func, select, update

from shared.api_keys import ApiKey
from shared.models import Memory, MemoryStatus, MemoryType
from workers.db.mapping import column_values, from_columns
from workers.db.memories import in_statuses, read_memories
from workers.db.session import SessionRepository
from workers.db.tables import ApiKeyRow, EventRow, HistoryRow, LlmCallRow, MemoryRow

# History actions that mark a memory as made from another (its related_id): a privacy delete of
# the original removes these too, since their text carries the original's.
DERIVING_ACTIONS = ("merged", "consolidated")


def _key(row: ApiKeyRow) -> ApiKey:
    return from_columns(ApiKey, row)


class SqlApiKeyRepository(SessionRepository):
    def add(self, key: ApiKey, key_hash: str) -> None:
        self.session.add(ApiKeyRow(**column_values(key), key_hash=key_hash))

    def by_prefix(self, prefix: str) -> list[tuple[ApiKey, str]]:
        rows = self.session.scalars(select(ApiKeyRow).where(ApiKeyRow.prefix == prefix))
        return [(_key(r), r.key_hash) for r in rows]

    def list(self, tenant_id: str | None) -> list[ApiKey]:
        stmt = select(ApiKeyRow)
        if tenant_id is not None:
            stmt = stmt.where(ApiKeyRow.tenant_id == tenant_id)
        rows = self.session.scalars(stmt.order_by(ApiKeyRow.tenant_id, ApiKeyRow.created_at, ApiKeyRow.id))
        return [_key(r) for r in rows]

    def revoke(self, key_id: str, at: datetime) -> ApiKey | None:
        self.session.execute(
            update(ApiKeyRow)
            .where(ApiKeyRow.id == key_id, ApiKeyRow.revoked_at.is_(None))
            .values(revoked_at=at)
        )
        row = self.session.get(ApiKeyRow, key_id)
        return _key(row) if row else None


class SqlCurationRepository(SessionRepository):
    def page(
        self,
        tenant_id: str,
        user_id: str,
        statuses: Iterable[MemoryStatus],
        memory_type: MemoryType | None,
        limit: int,
        offset: int,
    ) -> tuple[list[Memory], int]:
        where = [*MemoryRow.owned_by(tenant_id, user_id), in_statuses(statuses)]
        if memory_type is not None:
            where.append(MemoryRow.type == memory_type.value)
        total = self.session.scalar(select(func.count()).select_from(MemoryRow).where(*where)) or 0
        query = select(MemoryRow).where(*where).order_by(MemoryRow.created_at.desc(), MemoryRow.id)
        return read_memories(self.session, query.limit(limit).offset(offset), with_embedding=False), int(
            total
        )

    def users(self, tenant_id: str, limit: int, offset: int) -> tuple[list[tuple[str, int, int]], int]:
        scoped = MemoryRow.tenant_id == tenant_id
        total = self.session.scalar(select(func.count(func.distinct(MemoryRow.user_id))).where(scoped)) or 0
        active = func.count().filter(MemoryRow.status == MemoryStatus.ACTIVE.value)
        rows = self.session.execute(
            select(MemoryRow.user_id, func.count(), active)
            .where(scoped)
            .group_by(MemoryRow.user_id)
            .order_by(MemoryRow.user_id)
            .limit(limit)
            .offset(offset)
        )
        return [(user, int(n), int(a)) for user, n, a in rows], int(total)

    def derived_from(self, tenant_id: str, user_id: str, memory_ids: Sequence[str]) -> set[str]:
        if not memory_ids:
            return set()
        rows = self.session.scalars(
            select(HistoryRow.memory_id)
            .where(
                *HistoryRow.owned_by(tenant_id, user_id),
                HistoryRow.action.in_(DERIVING_ACTIONS),
                HistoryRow.related_id.in_(list(memory_ids)),
            )
            .distinct()
        )
        return set(rows)

    def purge(self, tenant_id: str, user_id: str, memory_ids: Sequence[str]) -> list[str]:
        if not memory_ids:
            return []
        ids = list(memory_ids)
        deleted = self.session.scalars(
            delete(MemoryRow)
            .where(*MemoryRow.owned_by(tenant_id, user_id), MemoryRow.id.in_(ids))
            .returning(MemoryRow.id)
        ).all()
        # History rows may quote the text (edit details, reasons): they go with the memory.
        self.session.execute(
            delete(HistoryRow).where(*HistoryRow.owned_by(tenant_id, user_id), HistoryRow.memory_id.in_(ids))
        )
        return sorted(deleted)

    def status_counts(self) -> dict[str, int]:
        rows = self.session.execute(select(MemoryRow.status, func.count()).group_by(MemoryRow.status))
        return {status: int(n) for status, n in rows}

    def stage_counts(self) -> dict[str, int]:
        rows = self.session.execute(select(EventRow.stage, func.count()).group_by(EventRow.stage))
        return {stage: int(n) for stage, n in rows}

    def llm_totals(self) -> list[tuple[str, bool, int, int, int]]:
        rows = self.session.execute(
            select(
                LlmCallRow.operation,
                LlmCallRow.ok,
                func.count(),
                func.coalesce(func.sum(LlmCallRow.prompt_tokens), 0),
                func.coalesce(func.sum(LlmCallRow.completion_tokens), 0),
            ).group_by(LlmCallRow.operation, LlmCallRow.ok)
        )
        return [(op, bool(ok), int(n), int(p), int(c)) for op, ok, n, p, c in rows]
