"""The memory index's port: which version and score of each memory the vector index holds
(``workers/db/memory_index.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from shared.models import Memory


class MemoryIndexRepository(Protocol):
    """The memories' index bookkeeping: which version (``indexed_version``) and score
    (``indexed_score``) of each memory the vector index holds."""

    def unindexed(self, tenant_id: str, user_id: str, limit: int, after_id: str = "") -> list[Memory]:
        """One user's persisted memories whose index copy is older than the row, in id order after
        ``after_id``."""

    def mark_indexed(self, memory_ids_versions: Sequence[tuple[str, int]]) -> None: ...

    def page_for_reindex(self, after_id: str, limit: int) -> list[Memory]:
        """The next page of non-pending memories of every user, in id order (keyset paging)."""

    def reset_indexed(self) -> None:
        """Mark every memory as absent from the index (before a rebuild)."""

    def index_states(self, tenant_id: str, user_id: str) -> list[IndexState]:
        """One user's memories as the index should reflect them (no vectors loaded)."""

    def stale_scores(self, after_id: str, limit: int, tolerance: float) -> list[ScoreState]:
        """Indexed memories (index copy current) whose payload score drifted from the row's score
        by more than ``tolerance``, by id after ``after_id``."""

    def mark_scores_indexed(self, scores: Sequence[tuple[str, float]]) -> None:
        """The index payloads now hold these scores."""

    def users_page(self, after: tuple[str, str] | None, limit: int) -> list[tuple[str, str]]:
        """(tenant, user) pairs that have memories, in order, after ``after`` (keyset paging)."""


@dataclass(frozen=True)
class ScoreState:
    memory_id: str
    tenant_id: str
    user_id: str
    score: float


@dataclass(frozen=True)
class IndexState:
    """What the vector index should know of one memory: the reconciliation's view of a row."""

    memory_id: str
    version: int
    indexed_version: int
    status: str
    score: float
    embedding_model: str | None
    has_embedding: bool
