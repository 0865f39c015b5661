"""The HTTP API's reads and privacy deletes beyond the pipeline's repositories
(``workers/db/curation.py``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from shared.models import Memory, MemoryStatus, MemoryType


class CurationRepository(Protocol):
    """What the HTTP API needs beyond the pipeline's repositories: paged listing, privacy
    deletes, and the counts the metrics endpoint reads on each scrape."""

    def page(
        self,
        tenant_id: str,
        user_id: str,
        statuses: Iterable[MemoryStatus],
        memory_type: MemoryType | None,
        limit: int,
        offset: int,
    ) -> tuple[list[Memory], int]:
        """One page of a user's memories (newest first, vectors not loaded) and the total."""

    def users(self, tenant_id: str, limit: int, offset: int) -> tuple[list[tuple[str, int, int]], int]:
        """One page of the tenant's users that have memories, by user id: (user id, memories of
        any status, active memories), and the number of such users."""

    def derived_from(self, tenant_id: str, user_id: str, memory_ids: Sequence[str]) -> set[str]:
        """Ids of the user's memories made from any of these (merged or consolidated from them)."""

    def purge(self, tenant_id: str, user_id: str, memory_ids: Sequence[str]) -> list[str]:
        """Delete these memories and their history rows for good; returns the ids deleted."""

    def status_counts(self) -> dict[str, int]: ...

    def stage_counts(self) -> dict[str, int]: ...

    def llm_totals(self) -> list[tuple[str, bool, int, int, int]]:
        """(operation, ok, calls, prompt tokens, completion tokens) over every recorded LLM call."""
