"""The records kept beside the rows: history entries, LLM calls, dead letters and the meta keys
(``workers/db/records.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from shared.events import event_ref, split_ref
from shared.ports import EmbeddingModelMismatch
from shared.public import public_fields


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


@dataclass(frozen=True)
class DeadLetterView:
    """A stored dead letter as the operator sees it: its row id, when it was parked and replayed."""

    id: int
    task_name: str
    task_id: str | None
    event_id: str | None
    reason: str
    deliveries: int
    created_at: datetime
    replayed_at: datetime | None
    args: list[Any]

    def to_public(self) -> dict[str, Any]:
        return public_fields(
            self, "id task_name task_id event_id reason deliveries created_at replayed_at args"
        )

    @property
    def ref(self) -> str | None:
        """The pipeline key of the event the letter's message names (tenant and event id): a
        record message holds the turn, a stage message the key itself."""
        first = self.args[0] if self.args else None
        if isinstance(first, dict) and isinstance(first.get("event_id"), str):
            return event_ref(str(first.get("tenant_id") or "default"), first["event_id"])
        if isinstance(first, str) and split_ref(first)[0] is not None:
            return first
        return event_ref("default", self.event_id) if self.event_id else None


class DeadLetterRepository(Protocol):
    def add(self, letter: DeadLetter) -> None: ...

    def for_events(self, event_ids: Sequence[str]) -> dict[str, str]:
        """event id -> reason, for dead letters that name an event."""

    def listed(self, include_replayed: bool = True) -> list[DeadLetterView]:
        """Every dead letter, oldest first (``include_replayed=False``: those not yet replayed)."""

    def by_ids(self, ids: Sequence[int]) -> dict[int, DeadLetterView]:
        """The letters with these ids that exist."""

    def mark_replayed(self, letter_id: int, at: datetime) -> None: ...


# The meta key naming the model every stored vector comes from: set by the first embedding and by
# a rebuild of the index, compared by whatever embeds or searches (``check_embedding_model``).
EMBEDDING_MODEL_KEY = "embedding_model"


class MetaRepository(Protocol):
    def get(self, key: str) -> str | None: ...

    def set(self, key: str, value: str) -> None: ...


def check_embedding_model(meta: MetaRepository, model_name: str) -> str | None:
    """The one rule of the deployment's embedding model, for whoever embeds or searches: vectors
    of two models never mix. Raises :class:`shared.ports.EmbeddingModelMismatch` when the stored
    model is another than ``model_name``; returns the stored one, None when nothing is embedded yet
    (no mismatch: the first embedding claims the model, ``shared.ingest.embed``)."""
    stored = meta.get(EMBEDDING_MODEL_KEY)
    if stored is not None and stored != model_name:
        raise EmbeddingModelMismatch(stored, model_name)
    return stored
