"""The resolve stage: the event's new memories judged against the user's active ones."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime

from shared.events import TurnPublished
from shared.ingest.common import CONFLICT_CANDIDATES, load_event
from shared.ingest.conflicts import SIMILAR, Judge, Strategy, apply, order_key, same_attribute
from shared.models import EventStage, MemoryStatus, MemoryType
from shared.ports import Embedder
from shared.queues import TaskName
from shared.storage import FollowUp, UnitOfWork
from shared.vectors import cosine

log = logging.getLogger(__name__)


def resolve_event(
    uow: UnitOfWork,
    ref: str,
    judge: Judge,
    embedder: Embedder,
    now: datetime,
    strategies: Mapping[MemoryType, Strategy] | None = None,
) -> list[FollowUp]:
    """Judge the event's new memories against the user's active ones and apply the verdicts.

    Runs off the ingest path, on its own queue, under a per-user lock so that two events of one
    user never resolve against each other's half-applied state.
    """
    event, stage = load_event(uow, ref)
    if stage is not EventStage.INDEXED:
        return []
    touched = judge_new_memories(uow, event, judge, embedder, now, strategies)
    uow.events.set_stage(ref, EventStage.DONE.value)
    return [FollowUp(TaskName.SYNC_INDEX.value, (event.tenant_id, event.user_id))] if touched else []


def judge_new_memories(
    uow: UnitOfWork,
    event: TurnPublished,
    judge: Judge,
    embedder: Embedder,
    now: datetime,
    strategies: Mapping[MemoryType, Strategy] | None = None,
) -> bool:
    """Judge the memories made from ``event`` against the user's active ones and apply the
    verdicts, under the user's lock; whether any memory changed. The resolve stage calls it, and
    the fused stages call it right after persist when the judge is the rules (no LLM), so that the
    index is written once, after the verdicts (``shared/ingest/advance.py``)."""
    event_id = event.event_id
    uow.memories.lock_user(event.tenant_id, event.user_id)
    touched = False
    for fresh in uow.memories.from_event(event.tenant_id, event.user_id, event_id):
        candidates = uow.memories.candidates(
            event.tenant_id, event.user_id, fresh.slot, fresh.cues, [fresh.id], CONFLICT_CANDIDATES
        )
        # Read once, then kept current from each verdict's changes (under the user's lock nothing
        # else writes them): re-reading both memories and the history for every candidate cost
        # three statements per candidate, up to 150 per memory.
        known = {m.id: m for m in [fresh, *candidates]}
        judged = {
            (e.memory_id, e.related_id)
            for e in uow.history.for_memories(event.tenant_id, event.user_id, list(known))
        }
        for candidate in candidates:
            current, latest = known[fresh.id], known[candidate.id]
            if current.status is not MemoryStatus.ACTIVE:
                break
            if latest.status is not MemoryStatus.ACTIVE:
                continue
            related = latest.slot == current.slot or same_attribute(latest.slot, current.slot)
            if not related and cosine(latest.embedding, current.embedding) < SIMILAR:
                continue
            older, newer = sorted([latest, current], key=order_key)
            if (older.id, newer.id) in judged:
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
                known[memory.id] = memory
            for entry in outcome.history:
                uow.history.add(entry)
                judged.add((entry.memory_id, entry.related_id))
            touched = True
            log.info(
                "event %s: %s %s vs %s (%s)", event_id, verdict.relation, older.id, newer.id, verdict.reason
            )
    return touched
