"""What the inspector's pictures read: a user's timeline, a memory's page (history chain, score
curve, source turns), a tenant's overview and the pipeline's health with its dead letters.

Every read is scoped to the tenant of the request's key (and the user named in the path): the
timeline and the memory page read one user's rows; the overview counts one tenant's rows; dead
letters, which carry no tenant column, are shown to a tenant only when their task's arguments
name that tenant and no other (``shared.lifecycle.dead_letters.dead_letter_tenants``). Queue
depths are the broker's, deployment-wide totals without content (as ``/metrics`` shows them).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from service.operations import dead_letters
from service.operations.curation import queue_depths
from service.operations.ports import Dispatching, Stores
from shared.events import FieldError
from shared.ingest.resume import STALLED_AFTER_S
from shared.lifecycle import curation
from shared.lifecycle.dead_letters import dead_letter_tenants, event_ids_named
from shared.lifecycle.maintenance import history_chain
from shared.lifecycle.score_history import score_curve
from shared.models import MemoryStatus
from shared.storage import StoredEvent

TIMELINE_MAX = 2000
# The bounds of a range open on one side (Postgres holds both).
OPEN_START = datetime(1, 1, 2, tzinfo=UTC)
OPEN_END = datetime(9999, 12, 30, tzinfo=UTC)
LETTERS_SHOWN = 100


def _turn(stored: StoredEvent, memory_ids: list[str]) -> dict[str, Any]:
    e = stored.event
    return {
        "event_id": e.event_id,
        "session_id": e.session_id,
        "seq": e.seq,
        "role": e.role,
        "content": e.content,
        "at": e.at.isoformat(),
        "stage": stored.stage,
        "memory_ids": memory_ids,
    }


def timeline(
    container: Stores,
    tenant_id: str,
    user_id: str,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 500,
) -> dict[str, Any]:
    """The user's turns in ``[since, until)`` (the latest ``limit`` of them, oldest first; without
    a range, the latest ``limit``), each with the memories citing it, and those memories (every
    status: superseded, archived and forgotten ones are marked by theirs)."""
    if not 1 <= limit <= TIMELINE_MAX:
        raise ValueError(f"limit: must be between 1 and {TIMELINE_MAX}, got {limit}")
    if since is not None and until is not None and since >= until:
        raise curation.InvalidInput([FieldError("since", "must be before until")])
    with container.uow() as uow:
        if since is None and until is None:
            stored = uow.events.recent(tenant_id, user_id, limit + 1)
        else:
            start, end = since or OPEN_START, until or OPEN_END
            stored = uow.events.in_window(tenant_id, user_id, start, end, limit + 1)
        truncated = len(stored) > limit
        stored = sorted(stored[:limit], key=lambda s: (s.event.at, s.event.session_id, s.event.seq))
        ids = [s.event.event_id for s in stored]
        memories = uow.memories.by_sources(tenant_id, user_id, ids, statuses=list(MemoryStatus))
    cited: dict[str, list[str]] = {}
    for m in memories:
        for source in m.sources:
            cited.setdefault(source.get("event_id", ""), []).append(m.id)
    public = []
    for m in sorted(memories, key=lambda m: (m.created_at, m.id)):
        item = m.to_public()
        item["event_ids"] = [s.get("event_id") for s in m.sources]
        public.append(item)
    return {
        "user_id": user_id,
        "turns": [_turn(s, cited.get(s.event.event_id, [])) for s in stored],
        "memories": public,
        "truncated": truncated,
    }


def memory_page(
    container: Stores, tenant_id: str, user_id: str, memory_id: str, points: int = 120
) -> dict[str, Any]:
    """One memory with its history chain, its score from creation to now with its
    reinforcements, the turns it was made from, and the user's zone to show its times in
    (``user_offset_s``, as the memory list gives it)."""
    now = container.clock()
    with container.uow() as uow:
        chain = history_chain(uow, tenant_id, user_id, memory_id)
        memory = uow.memories.get(tenant_id, user_id, memory_id)
        if memory is None or not chain["found"]:
            raise curation.MemoryNotFound(memory_id, user_id)
        own_history = uow.history.for_memories(tenant_id, user_id, [memory.id])
        event_ids = [s["event_id"] for s in memory.sources if isinstance(s.get("event_id"), str)]
        sources = uow.events.of_user(tenant_id, user_id, event_ids)
        user_offset = uow.events.user_offset(tenant_id, user_id)
    curve = score_curve(memory, own_history, now, container.lifecycle.decay, points)
    curve["archive_threshold"] = container.lifecycle.archive_threshold
    by_id = {s.event.event_id: s for s in sources}
    turns = [_turn(by_id[e], [memory.id]) for e in event_ids if e in by_id]
    return {
        "memory": memory.to_public(),
        "chain": chain,
        "score": curve,
        "source_turns": turns,
        "missing_sources": [e for e in event_ids if e not in by_id],
        "user_offset_s": user_offset,
    }


def overview(container: Stores, tenant_id: str, user_id: str | None = None, days: int = 90) -> dict[str, Any]:
    """The tenant's (or one user's) memories counted by type and status, per day over the last
    ``days`` days and by importance, and its events by stage with the stalled ones."""
    if not 1 <= days <= 3660:
        raise ValueError(f"days: must be between 1 and 3660, got {days}")
    now = container.clock()
    with container.uow() as uow:
        memories = uow.insight.memory_stats(tenant_id, user_id, now - timedelta(days=days))
        events = uow.insight.event_stats(tenant_id, user_id, now - timedelta(seconds=STALLED_AFTER_S))
    return {
        "tenant_id": tenant_id,
        "user_id": user_id,
        "days": days,
        "memories": memories.to_public(),
        "events": events.to_public(),
    }


def _tenant_letters(container: Stores, tenant_id: str) -> list[dead_letters.DeadLetterView]:
    letters = dead_letters.list_dead_letters(container)
    wanted = [e for letter in letters for e in event_ids_named(letter.task_name, letter.args)]
    with container.uow() as uow:
        tenants = uow.insight.event_tenants(wanted)
    return [
        letter
        for letter in letters
        if dead_letter_tenants(letter.task_name, letter.args, tenants) == {tenant_id}
    ]


def pipeline(container: Stores, tenant_id: str) -> dict[str, Any]:
    """The pipeline as the tenant can see it: queue depths (deployment-wide), the tenant's
    events by stage and stalled, its dead letters (not yet replayed first, newest first) and
    where Flower is."""
    now = container.clock()
    with container.uow() as uow:
        events = uow.insight.event_stats(tenant_id, None, now - timedelta(seconds=STALLED_AFTER_S))
    letters = _tenant_letters(container, tenant_id)
    letters.sort(key=lambda x: (x.replayed_at is not None, -x.id))
    return {
        "queues": queue_depths(container.settings),
        "events": events.to_public(),
        "stalled_after_s": STALLED_AFTER_S,
        "dead_letters": {
            "total": len(letters),
            "waiting": sum(1 for x in letters if x.replayed_at is None),
            "items": [_letter(x) for x in letters[:LETTERS_SHOWN]],
        },
        "flower_url": container.settings.flower_url,
    }


def _letter(letter: dead_letters.DeadLetterView) -> dict[str, Any]:
    # The arguments stay out: a turn's full text is in them, and the timeline shows turns.
    out = letter.to_public()
    out.pop("args", None)
    return out


def replay_letter(container: Dispatching, tenant_id: str, letter_id: int) -> dict[str, Any]:
    """Replay one of the tenant's dead letters; another tenant's (or an unknown id) is not found."""
    if letter_id not in {x.id for x in _tenant_letters(container, tenant_id)}:
        raise dead_letters.UnknownDeadLetter(f"no dead letter {letter_id}")
    [replayed] = dead_letters.replay(container, [letter_id])
    return _letter(replayed)
