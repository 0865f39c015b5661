"""The records kept beside the rows: history entries, LLM calls, dead letters and the meta keys
(``workers/db/records.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol


@dataclass(frozen=True)
class HistoryEntry:
    """One thing that happened to a memory, and why. History rows are never deleted."""

    memory_id: str
    tenant_id: str
    user_id: str
    # created | reinforced | superseded | supersedes | merged | merged_into | importance_halved | invalidated
    action: str
    reason: str
    judge: str  # rules | llm | pipeline
    at: datetime  # the event time that caused it
    related_id: str | None = None
    event_id: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


class HistoryRepository(Protocol):
    def add(self, entry: HistoryEntry) -> None: ...

    def for_memories(self, tenant_id: str, user_id: str, memory_ids: Sequence[str]) -> list[HistoryEntry]:
        """Entries of these memories, oldest first, scoped to one user."""


class LlmCallRepository(Protocol):
    def add(self, usage: Any, event_id: str | None) -> None: ...


@dataclass(frozen=True)
class DeadLetter:
    task_name: str
    task_id: str | None
    event_id: str | None
    args: list[Any]
    reason: str
    deliveries: int


class DeadLetterRepository(Protocol):
    def add(self, letter: DeadLetter) -> None: ...

    def for_events(self, event_ids: Sequence[str]) -> dict[str, str]:
        """event id -> reason, for dead letters that name an event."""


# The meta key naming the model every stored vector comes from: set by the first embedding and by
# a rebuild of the index, compared by whatever embeds (``shared.ports.EmbeddingModelMismatch``).
EMBEDDING_MODEL_KEY = "embedding_model"


class MetaRepository(Protocol):
    def get(self, key: str) -> str | None: ...

    def set(self, key: str, value: str) -> None: ...
