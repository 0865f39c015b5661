"""The ingest pipeline's service functions: one per stage, each one unit of work.

record → extract → embed → persist → index. Each handler is keyed by event id, re-reads the
event's stage and only acts when the event sits at the stage it handles. A redelivered message
whose work was already committed re-emits the next step (the crash may have fallen between
commit and enqueue) and changes nothing else; a message for a stage long passed does nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from shared.cues import cues_for_memory, entities, lexicon_tags
from shared.events import (
    EventLimits,
    FieldError,
    InvalidEvent,
    TurnPublished,
    split_record_message,
    validate_turn,
)
from shared.ingest.conflicts import (
    NEAR_DUPLICATE,
    SIMILAR,
    Judge,
    Strategy,
    apply,
    compatible,
    cosine,
    order_key,
)
from shared.ingest.extraction import extract
from shared.models import (
    EventStage,
    Extraction,
    Memory,
    MemoryDraft,
    MemoryStatus,
    MemoryType,
    Source,
    is_redacted,
    memory_id,
    turn_point_id,
)
from shared.ports import (
    Embedder,
    EmbeddingModelMismatch,
    IndexPoint,
    PublishLedger,
    SeqCounter,
    VectorIndex,
)
from shared.queues import TaskName
from shared.recall.sparse import sparse_document
from shared.storage import FollowUp, HistoryEntry, Receipt, UnitOfWork

log = logging.getLogger(__name__)

EMBEDDING_MODEL_KEY = "embedding_model"
INDEX_BATCH = 256
BACKLOG_GRACE = timedelta(minutes=30)
CONFLICT_CANDIDATES = 50

_NEXT: dict[EventStage, TaskName] = {
    EventStage.RECORDED: TaskName.EXTRACT,
    EventStage.EXTRACTED: TaskName.EMBED,
    EventStage.EMBEDDED: TaskName.PERSIST,
    EventStage.PERSISTED: TaskName.INDEX,
    EventStage.INDEXED: TaskName.RESOLVE,
}


class EventVanished(LookupError):
    """A stage message names an event that is not in the log (never recorded, or a foreign id)."""


class SeqContended(RuntimeError):
    """A renumbered turn found every new seq it drew taken (transient: the next try draws anew)."""


RENUMBER_ATTEMPTS = 5


def next_step(event_id: str, stage: str) -> list[FollowUp]:
    task = _NEXT.get(EventStage(stage))
    return [FollowUp(task.value, (event_id,))] if task else []


def _load(uow: UnitOfWork, event_id: str) -> tuple[TurnPublished, EventStage]:
    stored = uow.events.get(event_id)
    if stored is None:
        raise EventVanished(f"event {event_id!r} is not in the event log")
    return stored.event, EventStage(stored.stage)


# --- record -----------------------------------------------------------------------------------


def record_event(
    uow: UnitOfWork, message: Mapping[str, Any], limits: EventLimits, counter: SeqCounter | None = None
) -> list[FollowUp]:
    """Validate and record one published turn exactly once (the inbox is keyed by event id).

    A seq the app chose is strict: a clash with another turn is rejected with the reason. A seq
    the producer's counter chose (``SEQ_ASSIGNED``) that clashes means the counter fell back
    (Redis lost its last increments in a crash); given ``counter``, the turn is renumbered past
    the conversation's last recorded seq instead of being lost (``_renumber``)."""
    message, seq_assigned = split_record_message(message)
    raw_id = message.get("event_id") if isinstance(message, Mapping) else None
    try:
        event = validate_turn(message, limits)
    except InvalidEvent as exc:
        if not isinstance(raw_id, str) or not raw_id or len(raw_id) > 512 or _storable(raw_id) != raw_id:
            # No usable key to hang a receipt on (Postgres cannot store a NUL or a lone surrogate,
            # and a cleaned id would not be the producer's): the caller dead-letters the message.
            raise
        # Every text of the receipt is cleaned: a NUL in a raw user id or an unknown field's name
        # made the insert itself fail, so the turn ended "failed" with a database error instead of
        # "rejected" with its reason (found by tests/e2e/test_bad_input_e2e.py).
        uow.receipts.add_if_absent(
            Receipt(
                event_id=raw_id,
                tenant_id=_storable(str(message.get("tenant_id") or "default")[:512]),
                user_id=_storable(str(message.get("user_id") or "")[:512]),
                outcome="rejected",
                reason=_storable(str(exc)),
                payload=_safe_payload(message),
            )
        )
        log.warning("event %s rejected: %s", raw_id, exc)
        return []

    receipts = uow.receipts.get_many([event.event_id])
    if event.event_id in receipts:
        seen = receipts[event.event_id]
        if (seen.tenant_id, seen.user_id) != (event.tenant_id, event.user_id):
            # Event ids are the producer's: another tenant or user already holds this one. Its
            # receipt and stage are not this turn's; refuse loudly (dead letter with the reason).
            raise InvalidEvent(
                [FieldError("event_id", "is already used by another user or tenant; choose another id")]
            )
        if seen.outcome != "accepted":
            return []
        stored = uow.events.get(event.event_id)
        return next_step(event.event_id, stored.stage) if stored else []

    if uow.events.insert_if_absent(event, EventStage.RECORDED.value):
        uow.receipts.add_if_absent(Receipt(event.event_id, event.tenant_id, event.user_id, "accepted"))
        log.info(
            "event %s recorded (%s/%s seq %d)", event.event_id, event.user_id, event.session_id, event.seq
        )
        return next_step(event.event_id, EventStage.RECORDED.value)

    slot = uow.events.at_seq(event.tenant_id, event.user_id, event.session_id, event.seq)
    if (
        seq_assigned
        and counter is not None
        and slot is not None
        and slot.event.event_id != event.event_id
        and uow.events.get(event.event_id) is None
    ):
        return _renumber(uow, event, slot.event.event_id, counter)
    if slot is not None and slot.event.content_hash == event.content_hash:
        uow.receipts.add_if_absent(
            Receipt(
                event.event_id,
                event.tenant_id,
                event.user_id,
                "duplicate",
                canonical_event_id=slot.event.event_id,
            )
        )
        log.info("event %s duplicates %s: nothing changes", event.event_id, slot.event.event_id)
        return []
    if slot is not None:
        reason = (
            f"seq {event.seq} of conversation {event.user_id}/{event.session_id} already holds different "
            f"content (event {slot.event.event_id}); a seq cannot be reused"
        )
    else:
        reason = "event_id is already used by another turn"
    uow.receipts.add_if_absent(
        Receipt(
            event.event_id,
            event.tenant_id,
            event.user_id,
            "rejected",
            reason=reason,
            payload=event.to_message(),
        )
    )
    log.warning("event %s rejected: %s", event.event_id, reason)
    return []


def _renumber(uow: UnitOfWork, event: TurnPublished, holder: str, counter: SeqCounter) -> list[FollowUp]:
    """Record a turn whose counter-assigned seq another turn holds under a new seq, above every
    recorded seq of the conversation and above the counter, which moves past it (so the turns
    published next are not handed taken seqs either). The receipt says what happened.

    The turn was published after the holder was given the seq, but turns published right after
    it may be recorded before it and so come first in the timeline: after a Redis crash the order
    of the few turns around it is not guaranteed (docs/RELIABILITY.md, "Ordering")."""
    tenant, user, session = event.conversation
    floor = uow.events.max_seq(tenant, user, session)
    for _ in range(RENUMBER_ATTEMPTS):
        seq = counter.next_after(tenant, user, session, floor)
        moved = replace(event, seq=seq)
        if uow.events.insert_if_absent(moved, EventStage.RECORDED.value):
            reason = (
                f"renumbered from seq {event.seq} to {seq}: event {holder} already holds seq {event.seq} "
                "of this conversation, which the seq counter handed out again (it lost increments, as "
                "in a Redis crash)"
            )
            uow.receipts.add_if_absent(Receipt(event.event_id, tenant, user, "accepted", reason=reason))
            log.warning("event %s %s", event.event_id, reason)
            return next_step(event.event_id, EventStage.RECORDED.value)
        # Taken meanwhile (a turn handed that seq before the crash, recorded just now): go higher.
        floor = max(floor, seq)
    raise SeqContended(
        f"event {event.event_id}: {RENUMBER_ATTEMPTS} new seqs for {user}/{session} were all taken"
    )


def _safe_payload(message: Mapping[str, Any]) -> dict[str, Any]:
    """Keep a rejected message for the report, minus what Postgres cannot store (NUL, surrogates)."""
    out: dict[str, Any] = {}
    for key, value in list(message.items())[:20]:
        text = repr(value) if not isinstance(value, str) else value
        out[_storable(str(key)[:64])] = _storable(text[:2000])
    return out


def _storable(text: str) -> str:
    """``text`` as Postgres can store it: NUL written as ``\\0``, lone surrogates replaced."""
    return text.replace("\x00", "\\0").encode("utf-8", "replace").decode("utf-8")


# --- extract ----------------------------------------------------------------------------------


def extract_event(
    uow: UnitOfWork,
    event_id: str,
    threshold: float,
    now: datetime,
    extractor: Callable[[TurnPublished, float], Extraction] = extract,
    keep_turns: bool = False,
) -> list[FollowUp]:
    """Score the turn and write its memory drafts (pending). A turn with no memory is done here,
    unless ``keep_turns``: then it goes on to be embedded for the conversation-log index."""
    event, stage = _load(uow, event_id)
    if stage is not EventStage.RECORDED:
        return next_step(event_id, stage) if stage is EventStage.EXTRACTED else []
    extraction = honour_explicit(event, extractor(event, threshold), threshold)
    source = Source(event.event_id, event.session_id, event.seq, event.at.isoformat()).to_dict()
    for i, draft in enumerate(extraction.drafts):
        uow.memories.add(
            Memory(
                id=memory_id(event.tenant_id, event.user_id, event.event_id, i),
                tenant_id=event.tenant_id,
                user_id=event.user_id,
                type=draft.type,
                content=draft.content,
                importance=draft.importance,
                status=MemoryStatus.PENDING,
                created_at=event.at,
                updated_at=now,
                last_accessed_at=event.at,
                score=draft.importance,
                tags=list(draft.tags),
                entities=list(draft.entities),
                cues=list(draft.cues),
                sources=[source],
                content_hash=_memory_hash(draft.type.value, draft.content),
                version=0,
                slot=draft.slot,
                due_at=draft.due_at,
            )
        )
    done = not extraction.drafts and not keep_turns
    new_stage = EventStage.DONE if done else EventStage.EXTRACTED
    uow.events.set_stage(
        event_id, new_stage.value, importance=extraction.importance, reasons=extraction.reasons
    )
    log.info(
        "event %s extracted: importance %.1f, %d memories",
        event_id,
        extraction.importance,
        len(extraction.drafts),
    )
    return next_step(event_id, new_stage.value)


def honour_explicit(event: TurnPublished, extraction: Extraction, threshold: float) -> Extraction:
    """An explicit write (the agent tool `remember`, metadata {"remember": true, "kind": ...}) is kept
    whatever its score, as the kind it names."""
    if event.metadata.get("remember") is not True:
        return extraction
    kind = event.metadata.get("kind")
    memory_type = MemoryType(kind) if kind in {t.value for t in MemoryType} else None
    drafts = extraction.drafts or extract(event, 0.0).drafts
    if not drafts:  # nothing the rules recognise: keep the statement itself
        content = " ".join(event.content.split())[:300]
        drafts = (
            MemoryDraft(
                type=memory_type or MemoryType.FACT,
                content=content,
                importance=threshold,
                tags=lexicon_tags(content),
                entities=entities(content),
                cues=cues_for_memory(content, lexicon_tags(content), entities(content)),
            ),
        )
    kept = tuple(
        replace(d, importance=max(d.importance, threshold), type=memory_type or d.type) for d in drafts
    )
    return Extraction(max(extraction.importance, threshold), kept, (*extraction.reasons, "explicit"))


def _memory_hash(memory_type: str, content: str) -> str:
    from shared.events import content_hash

    return content_hash(memory_type, " ".join(content.split()).lower())


# --- embed ------------------------------------------------------------------------------------


def check_embedding_model(uow: UnitOfWork, embedder: Embedder) -> None:
    """Refuse to mix vectors of two models; the first embedding fixes the deployment's model."""
    stored = uow.meta.get(EMBEDDING_MODEL_KEY)
    if stored is None:
        uow.meta.set(EMBEDDING_MODEL_KEY, embedder.model_name)
    elif stored != embedder.model_name:
        raise EmbeddingModelMismatch(stored, embedder.model_name)


def embed_event(
    uow: UnitOfWork, embedder: Embedder, event_id: str, keep_turns: bool = False
) -> list[FollowUp]:
    """Embed the event's drafts and, with ``keep_turns``, the turn itself (one model call; a draft
    that is the whole turn shares its vector). A turn without drafts skips ``persist``."""
    event, stage = _load(uow, event_id)
    if stage is not EventStage.EXTRACTED:
        # A redelivery re-sends the step after this one: persist, or index for a turn without
        # drafts (it skips persist).
        return next_step(event_id, stage) if stage in (EventStage.EMBEDDED, EventStage.PERSISTED) else []
    check_embedding_model(uow, embedder)
    drafts = [m for m in uow.memories.from_event(event_id) if m.status is MemoryStatus.PENDING]
    texts = [m.content for m in drafts]
    turn_text = " ".join(event.content.split())
    keep_turns = keep_turns and not is_redacted(event)  # blanked by a privacy delete meanwhile
    if keep_turns and turn_text not in texts:
        texts.append(turn_text)
    vectors = embedder.embed_passages(texts) if texts else []
    by_text = dict(zip(texts, vectors, strict=True))
    for memory in drafts:
        memory.embedding = by_text[memory.content]
        memory.embedding_model = embedder.model_name
        uow.memories.save(memory)
    if keep_turns:
        uow.events.set_turn_vector(event_id, by_text[turn_text], embedder.model_name)
    new_stage = EventStage.EMBEDDED if drafts else EventStage.PERSISTED
    uow.events.set_stage(event_id, new_stage.value)
    return next_step(event_id, new_stage.value)


# --- persist ----------------------------------------------------------------------------------


def persist_event(uow: UnitOfWork, event_id: str, now: datetime) -> list[FollowUp]:
    """Turn the event's drafts into memories; an exact repeat reinforces the memory it repeats."""
    event, stage = _load(uow, event_id)
    if stage is not EventStage.EMBEDDED:
        return next_step(event_id, stage) if stage is EventStage.PERSISTED else []
    uow.memories.lock_user(event.tenant_id, event.user_id)
    for draft in uow.memories.from_event(event_id):
        if draft.status is not MemoryStatus.PENDING:
            continue
        existing = uow.memories.active_with_hash(
            event.tenant_id, event.user_id, draft.content_hash, draft.id
        ) or _near_duplicate(uow, draft)
        if existing is not None:
            if reinforce(existing, draft.sources, now):
                uow.history.add(
                    HistoryEntry(
                        existing.id, existing.tenant_id, existing.user_id, "reinforced",
                        f"repeated (exactly or nearly) in event {event_id}", "pipeline",
                        event.at, None, event_id,
                    )
                )  # fmt: skip
            uow.memories.save(existing)
            uow.memories.delete(draft.id)
            log.info("event %s repeats memory %s: reinforced", event_id, existing.id)
            continue
        draft.status = MemoryStatus.ACTIVE
        draft.updated_at = now
        draft.version += 1
        uow.memories.save(draft)
        uow.history.add(
            HistoryEntry(
                draft.id, draft.tenant_id, draft.user_id, "created",
                f"extracted from event {event_id} (importance {draft.importance:g})", "pipeline",
                event.at, None, event_id,
            )
        )  # fmt: skip
    uow.events.set_stage(event_id, EventStage.PERSISTED.value)
    return next_step(event_id, EventStage.PERSISTED.value)


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
    memory.sources = sorted([*memory.sources, *added], key=lambda s: (s["at"], s["session_id"], s["seq"]))
    memory.access_count += 1
    memory.last_accessed_at = max(memory.last_accessed_at, now)
    memory.updated_at = now
    memory.version += 1
    return True


# --- index ------------------------------------------------------------------------------------


def index_payload(memory: Memory) -> dict[str, Any]:
    return {
        "status": memory.status.value,
        "type": memory.type.value,
        "importance": memory.importance,
        "score": memory.score,
        "created_at": memory.created_at.isoformat(),
        "version": memory.version,
    }


def memory_point(memory: Memory) -> IndexPoint:
    """A memory's point in the memory index (the pipeline, reindex and reconciliation)."""
    return IndexPoint(
        memory.id,
        memory.tenant_id,
        memory.user_id,
        memory.embedding or [],
        index_payload(memory),
        sparse=sparse_document(memory.content),
    )


def sync_index(
    uow: UnitOfWork, index: VectorIndex, embedder_model: str, dim: int, tenant_id: str, user_id: str
) -> int:
    """Push every memory of one user whose index copy is stale; returns how many were written."""
    written = 0
    index.ensure(dim, embedder_model)
    while True:
        batch = uow.memories.unindexed(tenant_id, user_id, INDEX_BATCH)
        if not batch:
            return written
        points = [memory_point(m) for m in batch if m.embedding is not None]
        foreign = [m.id for m in batch if m.embedding_model not in (None, embedder_model)]
        if foreign:
            raise EmbeddingModelMismatch(str(batch[0].embedding_model), embedder_model)
        index.upsert(points)
        uow.memories.mark_indexed([(m.id, m.version) for m in batch])
        written += len(points)


def index_event(
    uow: UnitOfWork,
    index: VectorIndex,
    embedder: Embedder,
    event_id: str,
    now: datetime,
    turn_index: VectorIndex | None = None,
) -> list[FollowUp]:
    """Push the user's changed memories to the index and, given ``turn_index``, the user's turns
    not yet in the conversation-log index. An event that made no memory is done here."""
    event, stage = _load(uow, event_id)
    if stage is not EventStage.PERSISTED:
        return next_step(event_id, stage) if stage is EventStage.INDEXED else []
    written = sync_index(uow, index, embedder.model_name, embedder.dim, event.tenant_id, event.user_id)
    if turn_index is not None:
        written += sync_turn_index(
            uow, turn_index, embedder.model_name, embedder.dim, event.tenant_id, event.user_id
        )
    made_memories = bool(uow.memories.from_event(event_id))
    new_stage = EventStage.INDEXED if made_memories else EventStage.DONE
    uow.events.set_stage(event_id, new_stage.value)
    log.info("event %s indexed (%d points)", event_id, written)
    return next_step(event_id, new_stage.value)


def turn_payload(event: TurnPublished) -> dict[str, Any]:
    return {
        "status": "active",
        "event_id": event.event_id,
        "session_id": event.session_id,
        "seq": event.seq,
        "role": event.role.value,
        "at": event.at.isoformat(),
    }


def turn_point(event: TurnPublished, vector: list[float]) -> IndexPoint:
    """A turn's point in the conversation-log index (the pipeline, reindex and reconciliation)."""
    return IndexPoint(
        turn_point_id(event.tenant_id, event.user_id, event.event_id),
        event.tenant_id,
        event.user_id,
        vector,
        turn_payload(event),
        sparse=sparse_document(event.content),
    )


def sync_turn_index(
    uow: UnitOfWork,
    turn_index: VectorIndex,
    embedder_model: str,
    dim: int,
    tenant_id: str | None,
    user_id: str | None,
) -> int:
    """Push turns with a vector not yet in the conversation-log index (one user's, or everyone's
    when both are None, as reindex does); returns how many were written."""
    written = 0
    turn_index.ensure(dim, embedder_model)
    after = ""
    while True:
        batch = uow.events.turns_to_index(tenant_id, user_id, INDEX_BATCH, after)
        if not batch:
            return written
        foreign = [t.event_id for t, _, model in batch if model != embedder_model]
        if foreign:
            raise EmbeddingModelMismatch(str(batch[0][2]), embedder_model)
        turn_index.upsert([turn_point(t, vector) for t, vector, _ in batch])
        uow.events.mark_turns_indexed([t.event_id for t, _, _ in batch])
        written += len(batch)
        after = batch[-1][0].event_id


def sync_user_index(
    uow: UnitOfWork, index: VectorIndex, embedder: Embedder, tenant_id: str, user_id: str
) -> int:
    """Push one user's changed memories (statuses, merges) to the index."""
    return sync_index(uow, index, embedder.model_name, embedder.dim, tenant_id, user_id)


# --- resolve ----------------------------------------------------------------------------------


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
    event, stage = _load(uow, event_id)
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


# --- sweep ------------------------------------------------------------------------------------


def resume_stalled(
    uow: UnitOfWork, stuck_before: datetime, ledger: PublishLedger | None = None, limit: int = 500
) -> list[FollowUp]:
    """Re-drive events that sit at one stage since before ``stuck_before`` (their next message was
    lost), and re-send published turns the ledger still holds from before then (their record
    message was lost).

    Safe to run any time: each stage handler ignores a message for a stage already passed, and
    recording is idempotent by event id. While the pipeline queues hold a backlog nothing is
    re-sent: a queued message is late, not lost, and duplicates would only deepen the backlog.
    """
    if ledger is not None:
        waiting = ledger.backlog()
        if waiting:
            # Queued messages are late, not lost: only what is stuck far longer than any queue
            # should hold it is re-sent, so steady load cannot postpone recovery for ever.
            stuck_before -= BACKLOG_GRACE
            log.info("stalled sweep: %d messages queued, re-sending only before %s", waiting, stuck_before)
    followups: list[FollowUp] = []
    if ledger is not None:
        cutoff_ms = int(stuck_before.timestamp() * 1000)
        followups.extend(FollowUp(TaskName.RECORD.value, (m,)) for m in ledger.overdue(cutoff_ms, limit))
    for event_id, stage in uow.events.stalled(stuck_before, limit):
        followups.extend(next_step(event_id, stage))
    if followups:
        log.info("re-driving %d stalled events or unrecorded turns", len(followups))
    return followups
