"""A fake of the lifecycle's set-based statements (``workers/db/lifecycle.py``)."""

from __future__ import annotations

from datetime import datetime

from shared.models import Memory, MemoryStatus
from shared.storage import StatusChange
from tests.support.fake_state import FakeRepository, memories_of


class FakeLifecycleRepository(FakeRepository):
    """The same semantics as the SQL adapter, row by row."""

    def unscorable(self, limit: int) -> list[StatusChange]:
        return []  # a Python datetime is always finite

    def claim_recall(self, recall_id: str, tenant_id: str, user_id: str, at: datetime) -> bool:
        if recall_id in self.s.recall_claims:
            return False
        self.s.recall_claims[recall_id] = at
        return True

    def reinforce(self, tenant_id, user_id, ids, now, policy) -> int:
        from shared.scoring import score

        changed = 0
        for m in memories_of(self.s, tenant_id, user_id):
            if m.id in set(ids) and m.status is not MemoryStatus.PENDING:
                m.access_count += 1
                m.last_accessed_at = max(m.last_accessed_at, now)
                m.score = score(m.importance, m.type, m.last_accessed_at, m.access_count, now, policy)
                changed += 1
        return changed

    def prune_recall_claims(self, before: datetime) -> int:
        old = [r for r, at in self.s.recall_claims.items() if at < before]
        for recall_id in old:
            del self.s.recall_claims[recall_id]
        return len(old)

    def _move(self, candidates, status, reason_of, now, after_id, limit):
        from shared.storage import StatusChange

        page = sorted(
            (m for m in self.s.memories.values() if m.id > after_id and candidates(m)), key=lambda m: m.id
        )
        changes = []
        for m in page[:limit]:
            m.status, m.status_reason = status, reason_of(m)
            m.version += 1
            m.updated_at = now
            changes.append(StatusChange(m.id, m.tenant_id, m.user_id, m.status_reason))
        return changes, (changes[-1].memory_id if len(changes) == limit else None)

    def expire_tasks(self, now, stated_before, reasons, after_id, limit):
        def due(m: Memory) -> bool:
            if m.status is not MemoryStatus.ACTIVE or m.type.value != "task":
                return False
            return m.due_at <= now if m.due_at is not None else m.created_at <= stated_before

        return self._move(
            due, MemoryStatus.EXPIRED, lambda m: reasons[0] if m.due_at else reasons[1], now, after_id, limit
        )

    def archive_stale(self, since, threshold, policy, reason, now, after_id, limit):
        from shared.scoring import score

        def stale(m: Memory) -> bool:
            return (
                m.status is MemoryStatus.ACTIVE
                and m.last_accessed_at <= since
                and score(m.importance, m.type, m.last_accessed_at, m.access_count, since, policy) < threshold
            )

        return self._move(stale, MemoryStatus.ARCHIVED, lambda m: reason, now, after_id, limit)

    def recompute_scores(
        self, now, policy, after_id: str, limit: int, tolerance: float = 0.0
    ) -> tuple[int, str | None]:
        from shared.scoring import score

        page = sorted((m for m in self.s.memories.values() if m.id > after_id), key=lambda m: m.id)[:limit]
        if not page:
            return 0, None
        changed = 0
        for m in page:
            if m.status is MemoryStatus.PENDING:
                continue
            new = score(m.importance, m.type, m.last_accessed_at, m.access_count, now, policy)
            if abs(new - m.score) > max(tolerance, 1e-9):
                m.score = new
                changed += 1
        return changed, page[-1].id
