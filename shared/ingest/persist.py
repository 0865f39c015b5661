"""The persist stage: drafts become memories; an exact or near repeat reinforces the memory it
repeats instead."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from shared.ingest.common import CONFLICT_CANDIDATES, load_event, next_step
from shared.ingest.conflicts import NEAR_DUPLICATE, compatible, source_order
from shared.models import EventStage, Memory, MemoryStatus
from shared.storage import FollowUp, HistoryEntry, UnitOfWork
from shared.vectors import cosine

log = logging.getLogger(__name__)


def persist_event(uow: UnitOfWork, ref: str, now: datetime) -> list[FollowUp]:
    """Turn the event's drafts into memories; an exact repeat reinforces the memory it repeats."""
    event, stage = load_event(uow, ref)
    if stage is not EventStage.EMBEDDED:
        return next_step(ref, stage) if stage is EventStage.PERSISTED else []
    event_id = event.event_id
    uow.memories.lock_user(event.tenant_id, event.user_id)
    for draft in uow.memories.from_event(event.tenant_id, event.user_id, event_id):
        if draft.status is not MemoryStatus.PENDING:
            continue
        existing = uow.memories.active_with_hash(
            event.tenant_id, event.user_id, draft.content_hash, draft.id
        ) or _near_duplicate(uow, draft)
        if existing is not None:
            if reinforce(existing, draft.sources, now):
                reason = f"repeated (exactly or nearly) in event {event_id}"
                uow.history.add(_entry(existing, "reinforced", reason, event_id, event.at))
            uow.memories.save(existing)
            uow.memories.delete(draft.id)
            log.info("event %s repeats memory %s: reinforced", event_id, existing.id)
            continue
        draft.status = MemoryStatus.ACTIVE
        draft.updated_at = now
        draft.version += 1
        uow.memories.save(draft)
        reason = f"extracted from event {event_id} (importance {draft.importance:g})"
        uow.history.add(_entry(draft, "created", reason, event_id, event.at))
    uow.events.set_stage(ref, EventStage.PERSISTED.value)
    return next_step(ref, EventStage.PERSISTED.value)


def _entry(memory: Memory, action: str, reason: str, event_id: str, at: datetime) -> HistoryEntry:
    """A history entry the pipeline writes, dated at the event that caused it."""
    return HistoryEntry(
        memory.id, memory.tenant_id, memory.user_id, action, reason, "pipeline", at, None, event_id
    )


def _near_duplicate(uow: UnitOfWork, draft: Memory) -> Memory | None:
    """An active memory of the same user, of a compatible type, whose vector is all but the same."""
    for candidate in uow.memories.candidates(
        draft.tenant_id, draft.user_id, draft.slot, draft.cues, [draft.id], CONFLICT_CANDIDATES
    ):
        if (
            compatible(candidate.type, draft.type)
            and cosine(candidate.embedding, draft.embedding) >= NEAR_DUPLICATE
        ):
            return candidate
    return None


def reinforce(memory: Memory, sources: list[dict[str, Any]], now: datetime) -> bool:
    """Add the repeat's sources and count it once; False when the repeat was already counted."""
    known = {s["event_id"] for s in memory.sources}
    added = [s for s in sources if s["event_id"] not in known]
    if not added:
        return False  # the same event again: redelivery must not count twice
    memory.sources = sorted([*memory.sources, *added], key=source_order)
    memory.access_count += 1
    memory.last_accessed_at = max(memory.last_accessed_at, now)
    memory.updated_at = now
    memory.version += 1
    return True
