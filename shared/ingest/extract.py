"""The extract stage: the turn scored and its memory drafts written (pending)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from shared.events import Role, TurnPublished
from shared.ingest.common import load_event, next_step
from shared.ingest.extraction import extract
from shared.language.clauses import question_text
from shared.language.cues import entities, lexicon_tags, text_cues
from shared.language.timeexpr import happened
from shared.models import (
    EventStage,
    Extraction,
    Memory,
    MemoryDraft,
    MemoryStatus,
    MemoryType,
    Source,
    memory_hash,
    memory_id,
)
from shared.storage import FollowUp, UnitOfWork

log = logging.getLogger(__name__)

# An extractor scores one turn against the threshold, given the question the assistant put just
# before it (its question clauses, or None): ``shared.ingest.extraction.extract`` or the LLM path.
Extractor = Callable[[TurnPublished, float, str | None], Extraction]


def extract_event(
    uow: UnitOfWork,
    ref: str,
    threshold: float,
    now: datetime,
    extractor: Extractor = extract,
    keep_turns: bool = False,
) -> list[FollowUp]:
    """Score the turn and write its memory drafts (pending). A turn with no memory is done here,
    unless ``keep_turns``: then it goes on to be embedded for the conversation-log index."""
    event, stage = load_event(uow, ref)
    if stage is not EventStage.RECORDED:
        return next_step(ref, stage) if stage is EventStage.EXTRACTED else []
    asked = preceding_question(uow, event)
    extraction = honour_explicit(event, extractor(event, threshold, asked), threshold)
    # A source's time is in UTC whatever the turn's offset: sources are ordered by it as text
    # (persist, conflict order), and text orders instants only when they share one offset.
    told = event.at.astimezone(UTC).isoformat()
    source = Source(event.event_id, event.session_id, event.seq, told).to_dict()
    # Event time: "前天我把车送去保养了" told on 08-12 happened on 08-10. A memory keeps the times
    # its own words name; the one memory of a turn that made one stands for the whole turn (its
    # summary may have cut the expression off). A fragment of a split turn that names no time
    # has none: "我住杭州" does not happen on the "下周三" of the next fragment.
    turn_happened = happened(event.content, event.at)
    whole = turn_happened if len(extraction.drafts) == 1 else None
    for i, draft in enumerate(extraction.drafts):
        draft_happened = happened(draft.content, event.at) or whole
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
                content_hash=memory_hash(draft.type.value, draft.content),
                version=0,
                slot=draft.slot,
                due_at=draft.due_at,
                happened_from=draft_happened[0] if draft_happened else None,
                happened_to=draft_happened[1] if draft_happened else None,
            )
        )
    done = not extraction.drafts and not keep_turns
    new_stage = EventStage.DONE if done else EventStage.EXTRACTED
    uow.events.set_stage(
        ref,
        new_stage.value,
        importance=extraction.importance,
        reasons=extraction.reasons,
        happened=turn_happened,
    )
    log.info(
        "event %s extracted: importance %.1f, %d memories",
        ref,
        extraction.importance,
        len(extraction.drafts),
    )
    return next_step(ref, new_stage.value)


def preceding_question(uow: UnitOfWork, event: TurnPublished) -> str | None:
    """What the assistant asked just before this turn in its session (the question clauses of the
    turn at ``seq - 1``), or None when that turn is no assistant question or is not recorded.

    A producer publishes a session's turns in seq order, so the question is normally recorded
    before its answer is extracted; one recorded late only costs the answer its context."""
    if event.role is not Role.USER or event.seq <= 1:
        return None
    before = uow.events.at_seq(event.tenant_id, event.user_id, event.session_id, event.seq - 1)
    if before is None or before.event.role is not Role.ASSISTANT:
        return None
    return question_text(before.event.content) or None


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
                cues=text_cues(content),
            ),
        )
    kept = tuple(
        replace(d, importance=max(d.importance, threshold), type=memory_type or d.type) for d in drafts
    )
    return Extraction(max(extraction.importance, threshold), kept, (*extraction.reasons, "explicit"))
