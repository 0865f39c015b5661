"""The memories' index bookkeeping in Postgres: which version and score of each memory the vector
index holds (``indexed_version``, ``indexed_score``), read by the push, reconciliation and reindex."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, or_, select, text, update

from shared.models import Memory, MemoryStatus
from shared.storage import IndexState, ScoreState
from workers.db.mapping import from_columns
from workers.db.memories import read_memories, user_memories
from workers.db.session import SessionRepository
from workers.db.tables import MemoryRow


class SqlMemoryIndexRepository(SessionRepository):
    """What the memory index should hold, and what it was last given."""

    def unindexed(self, tenant_id: str, user_id: str, limit: int, after_id: str = "") -> list[Memory]:
        query = user_memories(
            tenant_id,
            user_id,
            MemoryRow.id > after_id,
            MemoryRow.indexed_version < MemoryRow.version,
            MemoryRow.status != MemoryStatus.PENDING.value,
        )
        return read_memories(self.session, query.order_by(MemoryRow.id).limit(limit))

    def mark_indexed(self, memory_ids_versions: Sequence[tuple[str, int]]) -> None:
        for memory_id, version in memory_ids_versions:
            # The upserted payload carried the row's score: later score pushes start from it.
            self.session.execute(
                update(MemoryRow)
                .where(MemoryRow.id == memory_id, MemoryRow.indexed_version < version)
                .values(indexed_version=version, indexed_score=MemoryRow.score)
            )

    def page_for_reindex(self, after_id: str, limit: int) -> list[Memory]:
        query = select(MemoryRow).where(
            MemoryRow.id > after_id, MemoryRow.status != MemoryStatus.PENDING.value
        )
        return read_memories(self.session, query.order_by(MemoryRow.id).limit(limit))

    def reset_indexed(self) -> None:
        self.session.execute(
            update(MemoryRow).where(MemoryRow.indexed_version != 0).values(indexed_version=0)
        )

    def index_states(self, tenant_id: str, user_id: str) -> list[IndexState]:
        rows = self.session.execute(
            select(
                MemoryRow.id,
                MemoryRow.version,
                MemoryRow.indexed_version,
                MemoryRow.status,
                MemoryRow.score,
                MemoryRow.embedding_model,
                MemoryRow.embedding.is_not(None).label("has_embedding"),
            )
            .where(*MemoryRow.owned_by(tenant_id, user_id))
            .order_by(MemoryRow.id)
        )
        return [
            from_columns(IndexState, r, memory_id=r.id, has_embedding=bool(r.has_embedding)) for r in rows
        ]

    def stale_scores(self, after_id: str, limit: int, tolerance: float) -> list[ScoreState]:
        rows = self.session.execute(
            select(MemoryRow.id, MemoryRow.tenant_id, MemoryRow.user_id, MemoryRow.score)
            .where(
                MemoryRow.id > after_id,
                MemoryRow.status != MemoryStatus.PENDING.value,
                MemoryRow.indexed_version == MemoryRow.version,
                MemoryRow.version > 0,
                MemoryRow.embedding.is_not(None),
                or_(
                    MemoryRow.indexed_score.is_(None),
                    func.abs(MemoryRow.score - MemoryRow.indexed_score) > tolerance,
                ),
            )
            .order_by(MemoryRow.id)
            .limit(limit)
        )
        return [ScoreState(r.id, r.tenant_id, r.user_id, r.score) for r in rows]

    def mark_scores_indexed(self, scores: Sequence[tuple[str, float]]) -> None:
        if not scores:
            return
        self.session.execute(
            text("UPDATE memories SET indexed_score = :score WHERE id = :id"),
            [{"id": memory_id, "score": score} for memory_id, score in scores],
        )

    def users_page(self, after: tuple[str, str] | None, limit: int) -> list[tuple[str, str]]:
        return self._users_after(MemoryRow, after, limit)
