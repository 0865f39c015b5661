"""The resolve stage: the event's new memories judged against the user's active ones."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime

from shared.ingest.common import CONFLICT_CANDIDATES, load_event
from shared.ingest.conflicts import SIMILAR, Judge, Strategy, apply, cosine, order_key
from shared.models import EventStage, Memory, MemoryStatus, MemoryType
from shared.ports import Embedder
from shared.queues import TaskName
from shared.storage import FollowUp, UnitOfWork

log = logging.getLogger(__name__)


def resolve_event(
    uow: UnitOfWork,
    event_id: str,
    judge: Judge,
    embedder: Embedder,
    now: datetime,
    strategies: Mapping[MemoryType, Strategy] | None = None,
) -> list[FollowUp]:
    """Judge the event's new memories against the user's active ones and apply the verdicts.

    Runs off the ingest path, on its own queue, under a per-user lock so that two events of one
    user never resolve against each other's half-applied state.
    """
    event, stage = load_event(uow, event_id)
    if stage is not EventStage.INDEXED:
        return []
    uow.memories.lock_user(event.tenant_id, event.user_id)
    touched = False
    for fresh in uow.memories.from_event(event_id):
        candidates = uow.memories.candidates(
            event.tenant_id, event.user_id, fresh.slot, fresh.cues, [fresh.id], CONFLICT_CANDIDATES
        )
        for candidate in candidates:
            current = uow.memories.get(event.tenant_id, event.user_id, fresh.id)
            if current is None or current.status is not MemoryStatus.ACTIVE:
                break
            latest = uow.memories.get(event.tenant_id, event.user_id, candidate.id)
            if latest is None or latest.status is not MemoryStatus.ACTIVE:
                continue
            if latest.slot != current.slot and cosine(latest.embedding, current.embedding) < SIMILAR:
                continue
            older, newer = sorted([latest, current], key=order_key)
            if _already_judged(uow, older, newer):
                continue  # the pair was settled when the other statement resolved
            verdict = judge(older, newer)
            outcome = apply(older, newer, verdict, now, strategies)
            if not (outcome.changed or outcome.created):
                continue
            for memory in outcome.created:
                memory.embedding = embedder.embed_passages([memory.content])[0]
                memory.embedding_model = embedder.model_name
                uow.memories.add(memory)
            for memory in outcome.changed.values():
                uow.memories.save(memory)
            for entry in outcome.history:
                uow.history.add(entry)
            touched = True
            log.info(
                "event %s: %s %s vs %s (%s)", event_id, verdict.relation, older.id, newer.id, verdict.reason
            )
    uow.events.set_stage(event_id, EventStage.DONE.value)
    return [FollowUp(TaskName.SYNC_INDEX.value, (event.tenant_id, event.user_id))] if touched else []


def _already_judged(uow: UnitOfWork, older: Memory, newer: Memory) -> bool:
    entries = uow.history.for_memories(older.tenant_id, older.user_id, [older.id])
    return any(e.related_id == newer.id for e in entries)
