"""A fake of the memories' index bookkeeping (``workers/db/memory_index.py``)."""

from __future__ import annotations

import copy
from collections.abc import Sequence

from shared.models import Memory, MemoryStatus
from tests.support.fake_state import FakeRepository, memories_of


class FakeMemoryIndexRepository(FakeRepository):
    """``indexed_version`` on the memory, ``indexed_score`` in the state."""

    def unindexed(self, tenant_id: str, user_id: str, limit: int, after_id: str = "") -> list[Memory]:
        found = [
            m
            for m in memories_of(self.s, tenant_id, user_id)
            if m.indexed_version < m.version and m.status is not MemoryStatus.PENDING and m.id > after_id
        ]
        return [copy.deepcopy(m) for m in sorted(found, key=lambda m: m.id)[:limit]]

    def mark_indexed(self, memory_ids_versions: Sequence[tuple[str, int]]) -> None:
        for memory_id, version in memory_ids_versions:
            m = self.s.memories[memory_id]
            if m.indexed_version < version:
                m.indexed_version = version
                self.s.indexed_scores[memory_id] = m.score

    def page_for_reindex(self, after_id: str, limit: int) -> list[Memory]:
        found = sorted(
            (m for m in self.s.memories.values() if m.id > after_id and m.status is not MemoryStatus.PENDING),
            key=lambda m: m.id,
        )
        return [copy.deepcopy(m) for m in found[:limit]]

    def reset_indexed(self) -> None:
        for m in self.s.memories.values():
            m.indexed_version = 0

    def index_states(self, tenant_id: str, user_id: str):
        from shared.storage import IndexState

        return [
            IndexState(
                m.id,
                m.version,
                m.indexed_version,
                m.status.value,
                m.score,
                m.embedding_model,
                m.embedding is not None,
            )
            for m in sorted(memories_of(self.s, tenant_id, user_id), key=lambda m: m.id)
        ]

    def stale_scores(self, after_id: str, limit: int, tolerance: float):
        from shared.storage import ScoreState

        found = [
            m
            for m in self.s.memories.values()
            if m.id > after_id
            and m.status is not MemoryStatus.PENDING
            and m.indexed_version == m.version > 0
            and m.embedding is not None
            and (m.id not in self.s.indexed_scores or abs(m.score - self.s.indexed_scores[m.id]) > tolerance)
        ]
        found.sort(key=lambda m: m.id)
        return [ScoreState(m.id, m.tenant_id, m.user_id, m.score) for m in found[:limit]]

    def mark_scores_indexed(self, scores: Sequence[tuple[str, float]]) -> None:
        for memory_id, value in scores:
            self.s.indexed_scores[memory_id] = value

    def users_page(self, after, limit) -> list[tuple[str, str]]:
        pairs = sorted({(m.tenant_id, m.user_id) for m in self.s.memories.values()})
        return [p for p in pairs if after is None or p > after][:limit]
