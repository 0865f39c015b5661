"""The memories' port: the rows the pipeline, recall and curation add, read and save
(``workers/db/memories.py``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Protocol

from shared.models import Memory, MemoryStatus, MemoryType


class MemoryRepository(Protocol):
    """Memory rows: what the pipeline, recall and curation add, read and save."""

    def lock_user(self, tenant_id: str, user_id: str) -> None:
        """Serialise writers of one user's memories until the transaction ends."""

    def add(self, memory: Memory) -> None:
        """Insert; a memory with the same id already present is left as it is (redelivery)."""

    def get(self, tenant_id: str, user_id: str, memory_id: str) -> Memory | None: ...

    def get_many(self, tenant_id: str, user_id: str, ids: Sequence[str]) -> list[Memory]:
        """Memories by id, scoped to one user; the embedding is not loaded (None)."""

    def save(self, memory: Memory) -> None:
        """Write back a memory read from this repository."""

    def from_event(self, tenant_id: str, user_id: str, event_id: str) -> list[Memory]:
        """The user's memories drafted from this turn of theirs, in draft order (event ids are
        unique per tenant only)."""

    def active_with_hash(
        self, tenant_id: str, user_id: str, content_hash: str, exclude_id: str
    ) -> Memory | None: ...

    def delete(self, memory_id: str) -> None:
        """Remove a pending draft (never a persisted memory)."""

    def by_cues(
        self, tenant_id: str, user_id: str, cues: Sequence[str], statuses: Iterable[MemoryStatus], limit: int
    ) -> list[Memory]:
        """Memories holding any of the cues, scoped to one user."""

    def by_source(
        self, tenant_id: str, user_id: str, event_id: str, statuses: Iterable[MemoryStatus]
    ) -> list[Memory]:
        """Memories citing this event among their sources, scoped to one user."""

    def by_sources(
        self, tenant_id: str, user_id: str, event_ids: Sequence[str], statuses: Iterable[MemoryStatus]
    ) -> list[Memory]:
        """Memories citing any of these events, scoped to one user (vectors not loaded)."""

    def cue_counts(
        self, tenant_id: str, user_id: str, cues: Sequence[str], statuses: Iterable[MemoryStatus]
    ) -> tuple[int, dict[str, int]]:
        """How many memories the user has in those statuses, and how many of them hold each cue.
        Pending drafts (extracted, not yet persisted) are never counted: recall never reads them,
        and counting them would lock the user's counts for the whole of an ingest unit."""

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
        """Memories whose validity began in [start, end), newest first; their embeddings are
        loaded only when asked (None otherwise)."""

    def happened_in(
        self,
        tenant_id: str,
        user_id: str,
        start: datetime,
        end: datetime,
        statuses: Iterable[MemoryStatus],
        limit: int,
        with_embedding: bool = False,
    ) -> list[Memory]:
        """Memories whose event time (``happened_from`` .. ``happened_to``) overlaps [start, end),
        latest first (then by id); embeddings as in :meth:`in_window`."""

    def for_user(
        self, tenant_id: str, user_id: str, statuses: Iterable[MemoryStatus] | None
    ) -> list[Memory]: ...

    def candidates(
        self,
        tenant_id: str,
        user_id: str,
        slot: str | None,
        cues: Sequence[str],
        exclude: Sequence[str],
        limit: int,
    ) -> list[Memory]:
        """Active memories of one user that share the slot or any cue: conflict candidates."""

    def recent_of_type(
        self, tenant_id: str, user_id: str, memory_type: MemoryType, since: datetime, limit: int
    ) -> list[Memory]:
        """Active memories of one type whose validity began after ``since``, oldest first."""

    def users_with_recent(
        self, memory_type: MemoryType, since: datetime, limit: int
    ) -> list[tuple[str, str]]:
        """(tenant, user) pairs with active memories of that type since then, in a stable order."""
