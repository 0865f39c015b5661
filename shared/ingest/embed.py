"""The embed stage: the event's drafts (and, when the conversation log is indexed, the turn's
context window, ``shared/indexing/turn_windows.py``) embedded in one model call."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from shared.events import Role, TurnPublished
from shared.indexing.turn_windows import alone_text, window_text
from shared.ingest.common import load_event, next_step
from shared.ingest.plans import as_said
from shared.ingest.slot_meaning import gives_a_value, prototypes, slot_by_meaning
from shared.language.links import own_text
from shared.models import EventStage, Memory, MemoryStatus, MemoryType, is_redacted
from shared.ports import Embedder
from shared.storage import EMBEDDING_MODEL_KEY, FollowUp, UnitOfWork, check_embedding_model


def claim_embedding_model(uow: UnitOfWork, embedder: Embedder) -> None:
    """Refuse to mix vectors of two models (``shared.storage.check_embedding_model``); the first
    embedding fixes the deployment's model."""
    if check_embedding_model(uow.meta, embedder.model_name) is None:
        uow.meta.set(EMBEDDING_MODEL_KEY, embedder.model_name)


def embed_event(
    uow: UnitOfWork,
    embedder: Embedder,
    ref: str,
    keep_turns: bool = False,
    window: int = 1,
    alone: bool = False,
) -> list[FollowUp]:
    """Embed the event's drafts and, with ``keep_turns``, the turn's context window of ``window``
    turns, and with ``alone`` the turn by itself (one model call; a draft with the window's text
    shares its vector). A turn without drafts skips ``persist``."""
    event, stage = load_event(uow, ref)
    if stage is not EventStage.EXTRACTED:
        # A redelivery re-sends the step after this one: persist, or index for a turn without
        # drafts (it skips persist).
        return next_step(ref, stage) if stage in (EventStage.EMBEDDED, EventStage.PERSISTED) else []
    stages = embed_events(uow, embedder, [event], keep_turns, window, alone)
    return next_step(ref, stages[event.ref].value)


def embed_events(
    uow: UnitOfWork,
    embedder: Embedder,
    events: Sequence[TurnPublished],
    keep_turns: bool = False,
    window: int = 1,
    alone: bool = False,
) -> dict[str, EventStage]:
    """Embed the drafts and context windows of ``events`` (all at the extracted stage, in seq
    order within each conversation), with ``alone`` each turn by itself too, in one model call,
    and move each on: to embedded, or past persist to persisted when it made no draft. Returns
    each event's new stage, by pipeline key.

    One call for a whole batch is what lets ingest run at the model's speed: the model's cost per
    text falls with the batch, and the fixed cost of a call is paid once."""
    if not events:
        return {}
    claim_embedding_model(uow, embedder)
    texts: dict[str, None] = {}  # ordered and unique: a text repeated in the batch is embedded once
    # What each draft's slot by meaning is read from (its clauses about the user), by memory id.
    said: dict[str, str] = {}
    plans: list[tuple[TurnPublished, list[Memory], str | None, list[str], str | None]] = []
    for event in events:
        drafts = [
            m
            for m in uow.memories.from_event(event.tenant_id, event.user_id, event.event_id)
            if m.status is MemoryStatus.PENDING
        ]
        turn_text: str | None = None
        alone_turn: str | None = None
        context: list[str] = []
        if keep_turns and not is_redacted(event):  # blanked by a privacy delete meanwhile
            turn_text, context = turn_window(uow, event, window)
            alone_turn = alone_text(event.content) if alone else None
        said.update({m.id: meaning_text(m.content) for m in drafts if _wants_meaning(event, m)})
        turn_texts = [t for t in (turn_text, alone_turn) if t is not None]
        meant = [said[m.id] for m in drafts if said.get(m.id)]
        for text in [m.content for m in drafts] + turn_texts + meant:
            texts.setdefault(text)
        plans.append((event, drafts, turn_text, context, alone_turn))
    ordered = list(texts)
    vectors = dict(zip(ordered, embedder.embed_passages(ordered), strict=True)) if ordered else {}
    stages: dict[str, EventStage] = {}
    for event, drafts, turn_text, context, alone_turn in plans:
        for memory in drafts:
            memory.embedding = vectors[memory.content]
            memory.embedding_model = embedder.model_name
            if own_clauses := said.get(memory.id):
                memory.slot = meaning_slot(own_clauses, vectors[own_clauses], embedder, event.at)
            uow.memories.save(memory)
        if turn_text is not None:
            own = vectors[alone_turn] if alone_turn is not None else None
            uow.turn_index.set_vector(event.ref, vectors[turn_text], embedder.model_name, context, own)
        stages[event.ref] = EventStage.EMBEDDED if drafts else EventStage.PERSISTED
        uow.events.set_stage(event.ref, stages[event.ref].value)
    return stages


def _wants_meaning(event: TurnPublished, memory: Memory) -> bool:
    """A profile fact or fact of the user's own turn that the slot words left without a slot."""
    return (
        memory.slot is None
        and event.role is Role.USER
        and memory.type in (MemoryType.PROFILE, MemoryType.FACT)
        and "question" not in memory.tags
    )


def meaning_text(content: str) -> str:
    """What of a statement its slot by meaning is read from: the clauses about the user
    (``shared.language.links.own_text``, a partner counting as the user), "" when none is. In
    "我老婆是小学老师，我们有一个女儿" the teacher is the wife: read whole, its meaning gave the
    user's job."""
    return own_text(content, partner_is_self=True)


def meaning_slot(text: str, vector: list[float], embedder: Embedder, at: datetime) -> str | None:
    """The slot the meaning of ``text`` (a statement's :func:`meaning_text`, embedded as
    ``vector``) gives it (``shared.ingest.slot_meaning``), as a plan's slot when the clauses that
    give the value speak of the future (``shared.ingest.plans``); None when its words give no value
    (:func:`gives_a_value`) or when no slot stands out."""
    if not gives_a_value(text):
        return None
    slot = slot_by_meaning(vector, prototypes(embedder))
    if slot is None:
        return None
    return as_said(text, slot, at, gives_a_value)


def turn_window(uow: UnitOfWork, event: TurnPublished, window: int) -> tuple[str, list[str]]:
    """The text of the turn's context window of ``window`` turns and the ids of its context turns.
    The turns before it in its session are recorded already: a conversation is recorded in seq
    order."""
    context = (
        uow.events.context_before(event.tenant_id, event.user_id, event.session_id, event.seq, window - 1)
        if window > 1
        else []
    )
    return window_text(event.content, [c.event.content for c in context]), [c.event.event_id for c in context]


def embed_windows(
    uow: UnitOfWork,
    embedder: Embedder,
    tenant_id: str,
    user_id: str,
    event_ids: list[str],
    window: int,
    alone: bool = False,
) -> int:
    """Embed the context windows of these turns of the user again (after a privacy delete blanked
    a turn they held: their new windows leave it out; after an import of another model's
    vectors), with ``alone`` each turn by itself too; their points follow with the next index
    push. Returns how many turns were embedded."""
    turns = [s.event for s in uow.events.of_user(tenant_id, user_id, event_ids) if not is_redacted(s.event)]
    windows = [turn_window(uow, turn, window) for turn in turns]
    alone_texts = [alone_text(t.content) for t in turns] if alone else []
    texts = list(dict.fromkeys([text for text, _ in windows] + alone_texts))
    vectors = dict(zip(texts, embedder.embed_passages(texts), strict=True)) if texts else {}
    for turn, (text, context) in zip(turns, windows, strict=True):
        own = vectors[alone_text(turn.content)] if alone else None
        uow.turn_index.set_vector(turn.ref, vectors[text], embedder.model_name, context, own)
    return len(turns)
