"""Domain values: memory types and statuses, drafts produced by extraction, stored memories."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from shared.public import public_fields

# Fixed namespace so that a memory's id follows from its tenant, user, event and position:
# redelivering an event recreates the same ids, and upserts by id make that harmless.
MEMORY_NAMESPACE = uuid.UUID("6f1c1c0e-5d0f-4a8e-9a4e-2b7c2f9d1c01")


class MemoryType(StrEnum):
    PREFERENCE = "preference"
    FACT = "fact"
    PROFILE = "profile"
    TASK = "task"
    EPISODIC = "episodic"
    SEMANTIC = "semantic"


class MemoryStatus(StrEnum):
    PENDING = "pending"  # extracted, not yet embedded and persisted
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    ARCHIVED = "archived"
    EXPIRED = "expired"
    # Soft-deleted on request (the API's DELETE): kept with its history for the audit, never
    # recalled and never listed unless asked for by name.
    FORGOTTEN = "forgotten"


# What recall returns unless asked otherwise; what `memories --all` adds.
RECALLABLE_STATUSES = frozenset({MemoryStatus.ACTIVE})
HISTORICAL_STATUSES = frozenset({MemoryStatus.SUPERSEDED, MemoryStatus.ARCHIVED, MemoryStatus.EXPIRED})


class EventStage(StrEnum):
    """How far the pipeline has taken one event. ``done`` means fully processed."""

    RECORDED = "recorded"
    EXTRACTED = "extracted"
    EMBEDDED = "embedded"
    PERSISTED = "persisted"
    INDEXED = "indexed"  # in the vector index; conflict resolution still to run
    DONE = "done"


STAGE_ORDER = {stage: i for i, stage in enumerate(EventStage)}


@dataclass(frozen=True)
class Source:
    event_id: str
    session_id: str
    seq: int
    at: str  # ISO 8601, kept as text so the value round-trips through JSON unchanged

    def to_dict(self) -> dict[str, Any]:
        return {"event_id": self.event_id, "session_id": self.session_id, "seq": self.seq, "at": self.at}


@dataclass(frozen=True)
class MemoryDraft:
    """One memory proposed by extraction from one event, before it is embedded and persisted."""

    type: MemoryType
    content: str
    importance: float
    tags: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    cues: tuple[str, ...] = ()
    slot: str | None = None  # the attribute it is about ("profile:home", "skill:language:java")
    negated: bool = False  # a negative statement ("我不吃香菜", "I don't use Java")
    change: bool = False  # states a change ("我现在改喝拿铁了", "I no longer drink coffee")
    time_refs: tuple[str, ...] = ()  # its time expressions resolved, ISO ("2026-12-01T15:00:00+08:00")
    due_at: datetime | None = None  # tasks: the earliest time named from the event on


@dataclass(frozen=True)
class Extraction:
    """What extraction found in one turn: its importance and the memories it yields."""

    importance: float
    drafts: tuple[MemoryDraft, ...]
    reasons: tuple[str, ...] = ()


@dataclass
class Memory:
    id: str
    tenant_id: str
    user_id: str
    type: MemoryType
    content: str
    importance: float
    status: MemoryStatus
    created_at: datetime
    updated_at: datetime
    last_accessed_at: datetime
    access_count: int = 0
    score: float = 0.0
    tags: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)
    cues: list[str] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)
    content_hash: str = ""
    embedding: list[float] | None = None
    embedding_model: str | None = None
    version: int = 1
    indexed_version: int = 0
    valid_from: datetime | None = None  # event time from which it holds; None means created_at
    valid_to: datetime | None = None
    superseded_by: str | None = None
    slot: str | None = None
    status_reason: str | None = None
    due_at: datetime | None = None
    # Event time, [from, to): the days its time expressions name ("前天…" told on 2026-08-12:
    # 08-10 .. 08-11). Not validity: valid_from stays the told time, which supersession orders by.
    # None when it names no time (the told time serves).
    happened_from: datetime | None = None
    happened_to: datetime | None = None

    def __post_init__(self) -> None:
        if self.valid_from is None:
            self.valid_from = self.created_at

    def to_public(self) -> dict[str, Any]:
        # Neither the vector nor the bookkeeping (cues, hash, versions) is shown.
        return public_fields(
            self,
            "id tenant_id user_id content type status importance access_count score tags entities "
            "sources created_at updated_at last_accessed_at valid_from valid_to superseded_by slot "
            "status_reason due_at happened_from happened_to embedding_model",
            importance=round(self.importance, 3),
            score=round(self.score, 4),
            tags=list(self.tags),
            entities=list(self.entities),
            sources=list(self.sources),
        )


def memory_id(tenant_id: str, user_id: str, event_id: str, index: int) -> str:
    return str(uuid.uuid5(MEMORY_NAMESPACE, f"{tenant_id}\x1f{user_id}\x1f{event_id}\x1f{index}"))


def memory_hash(memory_type: str, content: str) -> str:
    """The one definition of a memory's content hash, the key an exact repeat is found by
    (``MemoryRepository.active_with_hash``): the type and the content with its white space folded
    and its case lowered, so a repeat that differs only there has the same hash. Stored with every
    memory, so the form never changes: the sha256 of the type, a newline and that content, as a
    turn's hash is of its role and content (``shared.events.content_hash``)."""
    normalized = " ".join(content.split()).lower()
    return hashlib.sha256(f"{memory_type}\n{normalized}".encode()).hexdigest()


def imported_memory_id(tenant_id: str, user_id: str, file_id: str) -> str:
    """The id an import gives a memory of its file that this tenant's user does not hold already.
    Memory ids are one key space for every tenant (Postgres, the index's points), so an import
    never takes a file's id as it is: keeping it when free and refusing it when another tenant
    holds it told the importer which ids other tenants hold, and let it take ids another tenant's
    pipeline would mint later (all are ``memory_id`` of a tenant). This id follows from the tenant,
    the user and the file's id only: the same file imported again finds its memories in place."""
    return memory_id(tenant_id, user_id, f"import:{file_id}", 0)


def turn_point_id(tenant_id: str, user_id: str, event_id: str) -> str:
    """The id of a turn's point in the conversation-log index (stable, like memory ids)."""
    return str(uuid.uuid5(MEMORY_NAMESPACE, f"turn\x1f{tenant_id}\x1f{user_id}\x1f{event_id}"))


# A turn blanked by a privacy delete (workers/db/events.py) keeps this hash and this metadata.
REDACTED_HASH = "redacted"  # not a hash of anything: a replay of the original is refused, not merged
REDACTED_METADATA = {"redacted": True}


def is_redacted(event: Any) -> bool:
    """A turn blanked by a privacy delete: it is never embedded or indexed again."""
    return bool(getattr(event, "metadata", {}).get("redacted") is True and not getattr(event, "content", ""))
